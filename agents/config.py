"""Configuration of ``python -m agents.play`` and ``python -m agents.eval``: their typed schemas and checks.

The schemas :class:`PlayConfig` and :class:`EvalConfig` are registered in Hydra's ConfigStore as
``play_schema`` and ``eval_schema``, the first entries of ``play.yaml``'s and ``eval.yaml``'s defaults lists,
so every value is type-checked while composing. Composition itself (``env=<id>`` for any registered
environment, ``env.<option>=`` for any option) is shared with ``trainer.run`` (:mod:`agents.command_config`);
:func:`to_play_config` and :func:`to_eval_config` then check what types cannot. Every problem is a
:class:`UsageError` with a one-line message that names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from agents.base import AGENTS
from agents.cli import UsageError
from agents.command_config import align_env_turns, check_choice, compose_config, env_options, typed_config
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
    "check_choice",
    "compose_eval_config",
    "compose_play_config",
    "env_options",
    "to_eval_config",
    "to_play_config",
]


@dataclass
class LLMOptions:
    """How a language model is served and sampled, for every command that lets a model play.

    ``model``: ``smollm2`` (the embedded SmolLM2-135M-Instruct), ``tiny`` (a small random model, for
    tests), a Hugging Face model directory; for ``openai`` the model name the endpoint serves.
    ``base_url``: the server of ``openai`` (an OpenAI-compatible ``.../v1``) or ``sglang``
    (``http://host:port``; several separated by commas). ``api_key_env``: the environment variable
    holding the API key. ``device`` / ``dtype``: for the embedded ``hf`` engine (``auto`` picks CUDA
    and bf16 where available); ``cuda_graphs``: its decode step replayed from CUDA graphs (``None``: on CUDA).
    Sampling: ``temperature`` (0 = greedy), ``top_p``, ``max_new_tokens`` per turn, ``max_total_tokens``
    (context budget per episode), ``max_turns`` (``None``: the environment's own limit).
    """

    model: str = "smollm2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    device: str = "auto"
    dtype: str = "auto"
    cuda_graphs: bool | None = None
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
    if options.cuda_graphs and options.device == "cpu":
        raise UsageError("cuda_graphs=true needs a CUDA device: use device=cuda (auto on a GPU) or cuda_graphs=null")
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
    config = typed_config(cfg, EvalConfig)
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
    """Compose ``configs/play.yaml`` with command-line ``overrides`` (Hydra syntax); raises :class:`UsageError`."""
    return compose_config("play", PlayConfig, overrides)


def compose_eval_config(overrides: list[str]) -> DictConfig:
    """Compose ``configs/eval.yaml`` with command-line ``overrides`` (Hydra syntax); raises :class:`UsageError`."""
    return compose_config("eval", EvalConfig, overrides)


def to_play_config(cfg: DictConfig) -> PlayConfig:
    """The validated typed config; raises :class:`UsageError` on values out of range."""
    play = typed_config(cfg, PlayConfig)
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
