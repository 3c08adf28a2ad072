"""Configuration of ``python -m agents.play``: the typed schema and the composition of ``configs/play.yaml``.

The schema :class:`PlayConfig` is registered in Hydra's ConfigStore as ``play_schema`` and is the
first entry of ``play.yaml``'s defaults list, so every value is type-checked while composing.
:func:`compose_play_config` adds what plain Hydra overrides cannot express:

* ``env=<id>`` selects ``configs/env/<id>.yaml``; where no such file exists but ``<id>`` is a
  registered environment (a plugin, or a Gymnasium id such as ``turngym/Sokoban-v0``), it selects
  the generic ``env/registered.yaml`` with ``env.id`` set, so every registered environment plays.
* ``env.<option>=<value>`` adds the option even when the yaml does not list it (it becomes
  ``++env.<option>=<value>``); whether the environment accepts it is checked by ``envs.make``.
* Every problem is a :class:`UsageError` with a one-line message that names the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any, TypeVar

from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import envs
from agents.base import AGENTS
from agents.engines.registry import engine_names

#: Agents of ``python -m agents.play``: a person, the scripted agents, or a model behind an engine of the
#: engine table (``llm`` = the ``hf`` engine).
MODEL_AGENTS = engine_names(aliases=True)
PLAY_AGENTS = (*AGENTS, *MODEL_AGENTS)

__all__ = [
    "EvalConfig",
    "LLMOptions",
    "PlayConfig",
    "UsageError",
    "compose_config",
    "compose_play_config",
    "env_options",
    "rewrite_overrides",
    "to_eval_config",
    "to_play_config",
]

GENERIC_ENV_CONFIG = "registered"
T = TypeVar("T")


class UsageError(Exception):
    """A mistake on the command line or in a config; its message is one line that says how to fix it."""


@dataclass
class LLMOptions:
    """How a language model is served and sampled, for every command that lets a model play.

    ``model``: ``smollm2`` (the embedded SmolLM2-135M-Instruct), ``tiny`` (a small random model, for
    tests), a Hugging Face model directory; for ``openai`` the model name the endpoint serves.
    ``base_url``: the server of ``openai`` (an OpenAI-compatible ``.../v1``) or ``sglang``
    (``http://host:port``; several separated by commas). ``api_key_env``: the environment variable
    holding the API key. ``device`` / ``dtype``: for the embedded ``hf`` engine (``auto`` picks CUDA
    and bf16 where available). Sampling: ``temperature`` (0 = greedy), ``top_p``, ``max_new_tokens``
    per turn, ``max_total_tokens`` (context budget per episode), ``max_turns`` (``None``: the
    environment's own limit).
    """

    model: str = "smollm2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    device: str = "auto"
    dtype: str = "auto"
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    max_total_tokens: int = 4096
    max_turns: int | None = None


def check_llm_options(options: LLMOptions) -> None:
    """Raise :class:`UsageError` for sampling options out of range."""
    if options.temperature < 0:
        raise UsageError(f"temperature must be >= 0 (0 = greedy), got {options.temperature}")
    if not 0 < options.top_p <= 1:
        raise UsageError(f"top_p must be in (0, 1], got {options.top_p}")
    if options.max_new_tokens < 1:
        raise UsageError(f"max_new_tokens must be >= 1, got {options.max_new_tokens}")
    if options.max_total_tokens < 2:
        raise UsageError(f"max_total_tokens must be >= 2, got {options.max_total_tokens}")
    if options.max_turns is not None and options.max_turns < 1:
        raise UsageError(f"max_turns must be >= 1 (or null for the environment's limit), got {options.max_turns}")


@dataclass
class PlayConfig(LLMOptions):
    """Options of ``python -m agents.play`` (the comments in ``configs/play.yaml`` say the same for users).

    ``env``: ``id`` plus the environment's constructor options. ``agent``: ``human`` (read actions
    from stdin), ``oracle`` or ``random``. ``seed``: the first episode's seed, ``seed + k`` for the
    k-th next episode; ``None`` draws a fresh one per episode. ``episodes``: how many to play;
    ``None`` lets a person play until they quit and a scripted agent play one. ``delay``: seconds a
    scripted agent waits before each action. ``out``: the JSONL file episodes are appended to;
    ``None`` means ``runs/play/<env id>.jsonl``. ``color``: ANSI colours; ``None`` means only when
    stdout is a terminal and ``NO_COLOR`` is unset. With ``agent=llm`` (the embedded ``hf`` engine),
    ``agent=openai`` or ``agent=sglang``, a model plays; the :class:`LLMOptions` fields configure it.
    """

    env: dict[str, Any] = field(default_factory=dict)
    agent: str = "human"
    seed: int | None = None
    episodes: int | None = None
    delay: float = 0.5
    out: str | None = None
    color: bool | None = None


ConfigStore.instance().store(name="play_schema", node=PlayConfig)


@dataclass
class EvalConfig(LLMOptions):
    """Options of ``python -m agents.eval`` (``configs/eval.yaml`` says the same for users).

    ``agent``: ``hf`` (alias ``llm``), ``sglang``, ``openai``, ``oracle`` or ``random``.
    ``episodes`` are played with seeds ``seed, seed + 1, ...``, at most ``concurrency`` at a time.
    ``out``: the JSONL file of trajectories (overwritten); ``None`` means
    ``runs/eval/<env id>-<agent>-<time>.jsonl``. ``progress``: show a progress bar. ``sampling_seed``: every
    turn of every episode samples from its own seeded stream (:func:`agents.episode.turn_seed`), so two models
    are compared on the same random numbers; ``None``: unseeded. With ``concurrency=1`` the same model replays
    the same episodes exactly; batched, the logits depend slightly on the batch, which can flip a sample.
    """

    env: dict[str, Any] = field(default_factory=dict)
    agent: str = "hf"
    episodes: int = 32
    seed: int = 0
    sampling_seed: int | None = None
    concurrency: int = 16
    out: str | None = None
    progress: bool = True
    agent_entry: str | None = None  # env=agent: the agent function (module:function or file.py:function)
    agent_command: str | None = None  # env=agent: or an agent program
    agent_tasks: str | None = None  # env=agent: seed -> task (module:function), a .jsonl file, or null: the seed


ConfigStore.instance().store(name="eval_schema", node=EvalConfig)

EVAL_AGENTS = (*engine_names(aliases=True), "oracle", "random")


def to_eval_config(cfg: DictConfig) -> EvalConfig:
    """The validated typed config of ``python -m agents.eval``; raises :class:`UsageError`."""
    config = _typed_config(cfg, EvalConfig)
    check_choice("agent", config.agent, EVAL_AGENTS)
    check_llm_options(config)
    if config.episodes < 1:
        raise UsageError(f"episodes must be at least 1, got {config.episodes}")
    if config.concurrency < 1:
        raise UsageError(f"concurrency must be at least 1, got {config.concurrency}")
    if config.seed < 0:
        raise UsageError(f"seed must be >= 0, got {config.seed}")
    if config.sampling_seed is not None and config.sampling_seed < 0:
        raise UsageError(f"sampling_seed must be >= 0 or null, got {config.sampling_seed}")
    align_env_turns(config.env, config.max_turns)
    return config


def compose_play_config(overrides: list[str]) -> DictConfig:
    """Compose ``configs/play.yaml`` with command-line ``overrides`` (Hydra syntax), as described above."""
    return compose_config("play", PlayConfig, overrides)


def compose_config(
    name: str, schema: type, overrides: list[str], *, then: Callable[[list[str]], list[str]] | None = None
) -> DictConfig:
    """Compose ``configs/<name>.yaml`` (whose schema is the dataclass ``schema``) with ``overrides``.

    ``then`` rewrites the overrides once more after the checks and the environment choice.
    """
    rewritten = rewrite_overrides(overrides, tuple(f.name for f in fields(schema)))
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


def to_play_config(cfg: DictConfig) -> PlayConfig:
    """The validated typed config; raises :class:`UsageError` on values out of range."""
    play = _typed_config(cfg, PlayConfig)
    check_choice("agent", play.agent, PLAY_AGENTS)
    check_llm_options(play)
    if play.episodes is not None and play.episodes < 1:
        raise UsageError(f"episodes must be at least 1 (or null for no limit), got {play.episodes}")
    if play.delay < 0:
        raise UsageError(f"delay is in seconds and must be >= 0, got {play.delay}")
    if play.seed is not None and play.seed < 0:
        raise UsageError(f"seed must be >= 0 (or null for a fresh one per episode), got {play.seed}")
    align_env_turns(play.env, play.max_turns)
    return play


def _typed_config(cfg: DictConfig, schema: type[T]) -> T:
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


def env_options(config: Any) -> dict[str, Any]:
    """The keyword arguments for ``envs.make``: ``config.env`` without ``id``."""
    return {key: value for key, value in config.env.items() if key != "id"}


def rewrite_overrides(overrides: list[str], top_level_keys: tuple[str, ...] | None = None) -> list[str]:
    """Resolve ``env=<id>`` to a config file; make ``env.<option>=`` into ``++env.<option>=`` (module docstring)."""
    if top_level_keys is None:
        top_level_keys = tuple(f.name for f in fields(PlayConfig))
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
