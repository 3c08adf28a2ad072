"""Composing and typing the configs of every command (``agents.play``, ``agents.eval``, ``trainer.run``,
``trainer.sft``).

Each command has a yaml file under ``configs/`` whose schema is a dataclass registered in Hydra's
ConfigStore; :func:`compose_config` composes it with the command line and :func:`typed_config` turns the
result into that dataclass. On top of plain Hydra overrides:

* ``env=<id>`` selects ``configs/env/<id>.yaml``; where no such file exists but ``<id>`` is a
  registered environment (a plugin, or a Gymnasium id such as ``turngym/Sokoban-v0``), it selects
  the generic ``env/registered.yaml`` with ``env.id`` set, so every registered environment runs.
* ``env.<option>=<value>`` adds the option even when the yaml does not list it (it becomes
  ``++env.<option>=<value>``); whether the environment accepts it is checked by ``envs.make``.
* Every problem is a :class:`~agents.cli.UsageError` with a one-line message that names the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import fields
from importlib import resources
from typing import Any, TypeVar

from hydra import compose, initialize_config_module
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import envs
from agents.cli import UsageError

__all__ = [
    "align_env_turns",
    "check_choice",
    "compose_config",
    "env_options",
    "rewrite_overrides",
    "turn_cap_note",
    "typed_config",
]

GENERIC_ENV_CONFIG = "registered"
T = TypeVar("T")


def compose_config(
    name: str, schema: type, overrides: list[str], *, then: Callable[[list[str]], list[str]] | None = None
) -> DictConfig:
    """Compose ``configs/<name>.yaml`` (whose schema is the dataclass ``schema``) with ``overrides``.

    The overrides are rewritten first (:func:`rewrite_overrides`: the environment choice and its options);
    ``then`` rewrites them once more after that. Raises :class:`UsageError`.
    """
    rewritten = rewrite_overrides(overrides, schema)
    if then is not None:
        rewritten = then(rewritten)
    try:
        with initialize_config_module(config_module="configs", version_base="1.3"):
            return compose(name, overrides=rewritten)
    except OverrideParseException as exc:
        raise UsageError(
            f"cannot parse the override {exc.override!r}: {_one_line(exc)}; quote values with spaces"
        ) from exc
    except (HydraException, OmegaConfBaseException) as exc:
        raise UsageError(_one_line(exc) + "; see --help for the options") from exc


def typed_config(cfg: DictConfig, schema: type[T]) -> T:
    """``cfg`` as its schema's dataclass, with an environment chosen; raises :class:`UsageError`."""
    if OmegaConf.is_missing(cfg.env, "id"):
        raise UsageError("env.id is missing: choose an environment with env=<id>")
    try:
        config = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        raise UsageError(_one_line(exc)) from exc
    assert isinstance(config, schema)
    if not isinstance(config.env.get("id"), str) or not config.env["id"]:
        raise UsageError("env.id is missing: choose an environment with env=<id>")
    return config


def check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise :class:`UsageError` naming the choices (and a close match) when ``value`` is not one of them."""
    if value not in choices:
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"unknown {key} {value!r}{hint}; choose {key}={f' | {key}='.join(choices)}")


def align_env_turns(env: dict[str, Any], max_turns: int | None) -> None:
    """Give the environment config ``env`` the episode loop's turn limit, in place, where it has one of its own:
    what the environment tells the model (moves left, say) and what it generates (levels solvable within the
    limits) then match the episodes actually played. The smaller of the two limits wins."""
    if max_turns is not None and "max_turns" in env:
        current = env["max_turns"]
        env["max_turns"] = max_turns if current is None else min(int(current), max_turns)


def turn_cap_note(env: dict[str, Any], max_turns: int | None, option: str) -> str | None:
    """After :func:`align_env_turns`: one line saying that the environment's own turn limit, below the loop's
    (``option``, the setting that holds ``max_turns``), is what ends the episodes; ``None`` when it is not."""
    own = env.get("max_turns")
    if max_turns is None or own is None or int(own) >= max_turns:
        return None
    return (
        f"episodes end after at most {own} turn(s): env.max_turns={own} is below {option}={max_turns} "
        "(the smaller limit wins; raise env.max_turns to play more)"
    )


def env_options(config: Any) -> dict[str, Any]:
    """The keyword arguments for ``envs.make``: ``config.env`` without ``id``."""
    return {key: value for key, value in config.env.items() if key != "id"}


def rewrite_overrides(overrides: list[str], schema: type) -> list[str]:
    """Check the top-level keys of ``overrides`` against the dataclass ``schema``'s fields, resolve ``env=<id>``
    to a config file and make ``env.<option>=`` into ``++env.<option>=`` (module docstring)."""
    top_level_keys = tuple(f.name for f in fields(schema))
    rewritten: list[str] = []
    chose_env = False
    for override in overrides:
        key, eq, value = override.partition("=")
        if not eq:
            raise UsageError(f"cannot read {override!r}: overrides look like key=value, e.g. env=sokoban seed=3")
        bare_key = key.lstrip("+~")
        top = bare_key.split(".", 1)[0]
        if top not in top_level_keys:
            close = difflib.get_close_matches(top, top_level_keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown option {top!r}{hint}; options: {', '.join(top_level_keys)}, env.<option>")
        if key == "env":
            chose_env = True
            rewritten.extend(_select_env(value))
        elif key.startswith("env."):
            rewritten.append(f"++{override}")
        else:
            rewritten.append(override)
    if not chose_env:
        raise UsageError(f"choose an environment with env=<id>; registered: {', '.join(envs.ids())}")
    return rewritten


def _select_env(name: str) -> list[str]:
    if _has_env_config(name):
        return [f"env={name}"]
    try:
        env_id = envs.spec(name).id
    except envs.UnknownEnvironmentError as exc:
        raise UsageError(str(exc)) from exc
    if _has_env_config(env_id):
        return [f"env={env_id}"]
    return [f"env={GENERIC_ENV_CONFIG}", f"env.id={env_id}"]


def _has_env_config(name: str) -> bool:
    if not name or "/" in name or name.startswith("."):
        return False
    return (resources.files("configs") / "env" / f"{name}.yaml").is_file()


def _one_line(exc: BaseException) -> str:
    """The first line of an exception and of its cause (Hydra puts the useful part in the cause)."""
    lines = [str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__]
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        lines.append(str(cause).strip().splitlines()[0])
    full_key = getattr(exc, "full_key", None)
    if full_key:
        lines.append(f"key: {full_key}")
    return ": ".join(dict.fromkeys(lines))
