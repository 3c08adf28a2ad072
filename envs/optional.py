"""Importing an optional, version-pinned dependency of an environment adapter, with errors that say what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_pinned"]


def import_pinned(module: str, version: str, install: str, *, user: str) -> ModuleType:
    """Import ``module`` and check that its ``__version__`` is ``version``.

    Raises :class:`ImportError` naming ``install`` when it is missing or another version: ``user``
    (for example ``"the TextArena adapter"``) is who needs it, for the message.
    """
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{user} needs {module}: {install}") from exc
    found = getattr(imported, "__version__", "unknown")
    if found != version:
        raise ImportError(f"{user} is pinned to {module} {version}, found {found}: {install}")
    return imported
