"""Who may call a turngym server (``python -m envs.serve``, the training gateway): the binding rule and the API key.

* Key: an explicit ``api_key``, else the ``TURNGYM_API_KEY`` environment variable; an empty value is no key.
* Rule: a server bound to anything but a loopback address (127.0.0.0/8, ::1, ``localhost``) needs a key, or it
  refuses to start. With a key (on any address) every request but the health check must carry
  ``Authorization: Bearer <key>``; the comparison takes constant time.

Here in ``envs`` so that both servers share it (``agents`` may import ``envs``, not the other way round).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import os
from typing import Any

__all__ = ["API_KEY_ENV", "check_binding", "is_loopback", "key_matches", "resolve_api_key", "strict_json"]

API_KEY_ENV = "TURNGYM_API_KEY"


def resolve_api_key(api_key: str | None = None) -> str | None:
    """``api_key`` if given, else ``$TURNGYM_API_KEY``; ``None`` when neither is a non-empty string."""
    key = os.environ.get(API_KEY_ENV, "") if api_key is None else api_key
    return key or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost``, 127.0.0.0/8 or ::1 (not ``0.0.0.0`` or ``""``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def check_binding(host: str, api_key: str | None, *, what: str = "the server") -> None:
    """Raise :class:`ValueError` (saying how to fix it) if ``host`` is not loopback and there is no key."""
    if not api_key and not is_loopback(host):
        raise ValueError(
            f"{what} would listen on {host!r}, reachable from other machines, without an API key: "
            f"set {API_KEY_ENV} (or pass api_key=...), or bind 127.0.0.1"
        )


def key_matches(authorization: str | bytes | None, api_key: str) -> bool:
    """Whether an ``Authorization`` header value (text, or an ASGI header's bytes) is ``Bearer <api_key>``,
    compared in constant time."""
    value = authorization or b""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    scheme, _, token = value.partition(b" ")
    presented = token.strip() if scheme.lower() == b"bearer" else b""
    return hmac.compare_digest(presented, api_key.encode("utf-8", "surrogatepass"))


def strict_json(body: str | bytes) -> Any:
    """``body`` parsed as strict JSON: ``NaN``, ``Infinity`` and numbers beyond a float's range raise
    :class:`ValueError`, as do malformed text and undecodable bytes; too deep a nesting raises
    :class:`RecursionError`."""
    return json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value
