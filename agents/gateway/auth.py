"""Who may call the gateway: the binding rule and the API key.

The rule and the key are :mod:`envs.access`'s (``envs.serve`` follows the same); here, what the gateway adds.

* Key: the ``api_key`` argument, else the ``TURNGYM_API_KEY`` environment variable (the name
  ``envs.serve`` reads too); an empty value is no key.
* Rule: a server bound to anything but a loopback address (127.0.0.0/8, ::1, ``localhost``) needs a
  key, or it refuses to start. With a key (on any address) every request but ``GET /health`` must
  carry ``Authorization: Bearer <key>``; the comparison takes constant time.
"""

from __future__ import annotations

from envs.access import API_KEY_ENV, check_binding, is_loopback, key_matches, resolve_api_key

__all__ = ["API_KEY_ENV", "check_binding", "client_api_key", "is_loopback", "key_matches", "resolve_api_key"]

#: What clients send when no key is set: OpenAI's SDKs insist on one, the gateway then checks none.
PLACEHOLDER_KEY = "turngym"


def client_api_key() -> str:
    """The key a client of a gateway in this process sends: ``$TURNGYM_API_KEY``, else a placeholder."""
    return resolve_api_key() or PLACEHOLDER_KEY
