"""Who may call the gateway: the binding rule and the API key.

* Key: the ``api_key`` argument, else the ``TURNGYM_API_KEY`` environment variable (the name
  ``envs.serve`` reads too); an empty value is no key.
* Rule: a server bound to anything but a loopback address (127.0.0.0/8, ::1, ``localhost``) needs a
  key, or it refuses to start. With a key (on any address) every request but ``GET /health`` must
  carry ``Authorization: Bearer <key>``; the comparison takes constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import os

__all__ = ["API_KEY_ENV", "check_binding", "client_api_key", "is_loopback", "key_matches", "resolve_api_key"]

API_KEY_ENV = "TURNGYM_API_KEY"
#: What clients send when no key is set: OpenAI's SDKs insist on one, the gateway then checks none.
PLACEHOLDER_KEY = "turngym"


def resolve_api_key(api_key: str | None = None) -> str | None:
    """``api_key`` if given, else ``$TURNGYM_API_KEY``; ``None`` when neither is a non-empty string."""
    key = os.environ.get(API_KEY_ENV, "") if api_key is None else api_key
    return key or None


def client_api_key() -> str:
    """The key a client of a gateway in this process sends: ``$TURNGYM_API_KEY``, else a placeholder."""
    return resolve_api_key() or PLACEHOLDER_KEY


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost``, 127.0.0.0/8 or ::1 (not ``0.0.0.0`` or ``""``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def check_binding(host: str, api_key: str | None, *, what: str = "the gateway") -> None:
    """Raise :class:`ValueError` (saying how to fix it) if ``host`` is not loopback and there is no key."""
    if not api_key and not is_loopback(host):
        raise ValueError(
            f"{what} would listen on {host!r}, reachable from other machines, without an API key: "
            f"set {API_KEY_ENV} (or pass api_key=...), or bind 127.0.0.1"
        )


def key_matches(authorization: str | None, api_key: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <api_key>``, compared in constant time."""
    scheme, _, token = (authorization or "").partition(" ")
    presented = token.strip() if scheme.lower() == "bearer" else ""
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), api_key.encode("utf-8", "surrogatepass"))
