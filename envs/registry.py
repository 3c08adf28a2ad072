"""Environment registry: built-ins plus every environment third-party packages declare.

* ``register(id, entry_point, **defaults)`` adds an environment. ``entry_point`` is a
  :class:`gymnasium.Env` subclass, a factory callable, or a ``"module:attr"`` string imported on
  first use. Every registered environment is also registered with Gymnasium under ``gym_id``
  (``turngym/<id>`` unless given), so ``gymnasium.make`` works once this module has registered it.
* ``make(id, **overrides)`` builds one; ``id`` may be the short id or the Gymnasium id. Keyword
  arguments the environment does not accept fail here, with close matches, before any heavy work.
* ``spec(id)``, ``list_specs()``, ``ids()``, ``unregister(*ids)``.

Plugins. An installed distribution declares, in its ``pyproject.toml``::

    [project.entry-points."turngym.envs"]
    my-env = "my_package.envs:MyEnv"          # a gymnasium.Env subclass, registered as "my-env"
    my-suite = "my_package.envs:register_all" # a function that calls envs.registry.register(...)

Discovery is lazy: the group is read the first time an id is not found among the registered ones,
or when everything is listed, in whichever process asks (Ray workers included), with no import by
the user. A plugin that fails to load is reported by name (a warning, and :func:`plugin_errors`) and
skipped; the rest keeps working.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import logging
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import gymnasium as gym

__all__ = [
    "ENTRY_POINT_GROUP",
    "EnvSpec",
    "UnknownEnvironmentError",
    "ids",
    "list_specs",
    "load_plugins",
    "make",
    "plugin_errors",
    "register",
    "spec",
    "unregister",
]

ENTRY_POINT_GROUP = "turngym.envs"
BUILTIN_SOURCE = "turngym"

logger = logging.getLogger(__name__)

EntryPoint = str | Callable[..., gym.Env]


class UnknownEnvironmentError(KeyError):
    """No environment is registered under the requested id."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment: how to build it and with which default keyword arguments."""

    id: str
    entry_point: EntryPoint
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    gym_id: str = ""
    description: str = ""
    source: str = BUILTIN_SOURCE  # "turngym" for built-ins, else the plugin's distribution name

    def load(self) -> Callable[..., gym.Env]:
        """The class or factory behind ``entry_point`` (imports it if it is a string)."""
        if not isinstance(self.entry_point, str):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        if not attr:
            raise ValueError(f"entry point {self.entry_point!r} of {self.id!r} must look like 'package.module:Name'")
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


_lock = threading.RLock()
_specs: dict[str, EnvSpec] = {}
_aliases: dict[str, str] = {}  # gym_id -> id
_plugins_loaded = False
_plugin_errors: dict[str, str] = {}
_current_source = BUILTIN_SOURCE


def register(
    id: str,
    entry_point: EntryPoint,
    *,
    gym_id: str | None = None,
    description: str = "",
    **defaults: Any,
) -> EnvSpec:
    """Register an environment under ``id`` with default constructor keyword arguments ``defaults``."""
    if not id or not isinstance(id, str):
        raise ValueError(f"an environment id must be a non-empty string, got {id!r}")
    gym_id = gym_id or f"turngym/{id}"
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=dict(defaults),
        gym_id=gym_id,
        description=description or _first_docstring_line(entry_point),
        source=_current_source,
    )
    with _lock:
        existing = _specs.get(id) or _specs.get(_aliases.get(gym_id, ""))
        if existing is not None:
            raise ValueError(
                f"environment id {id!r} (gym id {gym_id!r}) is already registered by {existing.source!r}; "
                "choose another id"
            )
        _specs[id] = env_spec
        _aliases[gym_id] = id
        if gym_id in gym.registry:
            del gym.registry[gym_id]
        gym.register(id=gym_id, entry_point=entry_point, kwargs=dict(defaults))
    return env_spec


def spec(id: str) -> EnvSpec:
    """The spec registered under ``id`` (short or Gymnasium id); loads plugins if it is not built in."""
    with _lock:
        found = _lookup(id)
        if found is None and not _plugins_loaded:
            load_plugins()
            found = _lookup(id)
        if found is None:
            raise UnknownEnvironmentError(_unknown_id_message(id))
        return found


def make(id: str, **overrides: Any) -> gym.Env:
    """Build the environment ``id`` with its registered defaults updated by ``overrides``."""
    env_spec = spec(id)
    factory = env_spec.load()
    kwargs = {**env_spec.kwargs, **overrides}
    _check_kwargs(env_spec.id, factory, kwargs)
    env = factory(**kwargs)
    if not isinstance(env, gym.Env):
        raise TypeError(f"the entry point of {env_spec.id!r} returned {type(env).__name__}, not a gymnasium.Env")
    # What gymnasium.make would record: lets Gymnasium's tools (check_env, env.spec.make) rebuild it.
    env.unwrapped.spec = dataclasses.replace(gym.spec(env_spec.gym_id), kwargs=kwargs)
    return env


def list_specs() -> list[EnvSpec]:
    """Every registered environment, plugins included, sorted by id."""
    load_plugins()
    with _lock:
        return sorted(_specs.values(), key=lambda s: s.id)


def ids() -> list[str]:
    """The short ids of every registered environment."""
    return [s.id for s in list_specs()]


def plugin_errors() -> dict[str, str]:
    """Plugins that failed to load, as ``{"<distribution>:<entry point name>": "<error>"}``."""
    load_plugins()
    with _lock:
        return dict(_plugin_errors)


def load_plugins(*, reload: bool = False) -> None:
    """Read the ``turngym.envs`` entry-point group once per process (again with ``reload``)."""
    global _plugins_loaded, _current_source
    with _lock:
        if _plugins_loaded and not reload:
            return
        if reload:
            _unregister({s.id for s in _specs.values() if s.source != BUILTIN_SOURCE})
            _plugin_errors.clear()
        _plugins_loaded = True
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist.name if entry_point.dist is not None else "unknown distribution"
            key = f"{dist}:{entry_point.name}"
            before = set(_specs)
            _current_source = dist
            try:
                _load_one_plugin(entry_point)
            except Exception as exc:  # any failure of third-party code: report it, keep the rest working
                _unregister(set(_specs) - before)
                message = f"{type(exc).__name__}: {exc}"
                _plugin_errors[key] = message
                warnings.warn(
                    f"turngym: skipped environment plugin {entry_point.name!r} from {dist!r} "
                    f"({entry_point.value}): {message}",
                    RuntimeWarning,
                    stacklevel=2,
                )
            finally:
                _current_source = BUILTIN_SOURCE


def _load_one_plugin(entry_point: metadata.EntryPoint) -> None:
    target = entry_point.load()
    if inspect.isclass(target):
        if not issubclass(target, gym.Env):
            raise TypeError(f"{entry_point.value} is a class but not a gymnasium.Env subclass")
        register(entry_point.name, target)
    elif callable(target):
        target()
    else:
        raise TypeError(
            f"{entry_point.value} must be a gymnasium.Env subclass or a function that calls "
            "envs.registry.register(...)"
        )


def unregister(*env_ids: str) -> None:
    """Remove environments (by short id) from this process's registry and Gymnasium's; unknown ids raise."""
    with _lock:
        missing = [env_id for env_id in env_ids if env_id not in _specs]
        if missing:
            raise UnknownEnvironmentError(f"cannot unregister {missing}: not registered")
        _unregister(set(env_ids))


def _unregister(env_ids: set[str]) -> None:
    for env_id in env_ids:
        env_spec = _specs.pop(env_id)
        _aliases.pop(env_spec.gym_id, None)
        if env_spec.gym_id in gym.registry:
            del gym.registry[env_spec.gym_id]


def _lookup(id: str) -> EnvSpec | None:
    return _specs.get(id) or _specs.get(_aliases.get(id, ""))


def _unknown_id_message(id: str) -> str:
    known = sorted(_specs) + sorted(_aliases)
    close = difflib.get_close_matches(id, known, n=3, cutoff=0.6)
    close += [k for k in known if id.lower() in k.lower() and k not in close][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    failed = [k for k in _plugin_errors if k.endswith(f":{id}")]
    if failed:
        hint += f" The plugin {failed[0]!r} failed to load: {_plugin_errors[failed[0]]}"
    return f"unknown environment id {id!r}.{hint} Registered: {', '.join(sorted(_specs))}."


def _check_kwargs(env_id: str, factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Fail early, with close matches, on keyword arguments the environment does not accept."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins and some C callables have no signature: let the call decide
        return
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    accepted = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = [k for k in kwargs if k not in accepted]
    if not unknown:
        return
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, accepted, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise TypeError(
        f"environment {env_id!r} does not accept {', '.join(parts)}; its options are: {', '.join(accepted)}"
    )


def _first_docstring_line(entry_point: EntryPoint) -> str:
    if isinstance(entry_point, str):
        return ""
    doc = inspect.getdoc(entry_point) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
