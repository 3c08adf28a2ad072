"""Policies that play whole episodes: a language model behind an engine, or a scripted agent.

:func:`make_policy` turns the command-line choice (``agent=hf | llm | sglang | openai | oracle |
random``) and :class:`agents.config.LLMOptions` into a :class:`Policy`, whose :meth:`Policy.play`
runs one episode through :mod:`agents.episode` and returns its :class:`~agents.trajectory.Trajectory`:

* ``hf`` (alias ``llm``): the embedded transformers engine with prefix caching; token-level.
* ``sglang``: SGLang servers at ``base_url`` (token-level); the tokenizer comes from ``model``.
* ``openai``: any OpenAI-compatible endpoint; text-level (messages in, text out), evaluation only.
* ``oracle`` / ``random``: the scripted agents of :mod:`agents.base`, through the text-level loop.

Heavy imports (torch, transformers, HTTP clients) happen inside :func:`make_policy`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agents.config import LLMOptions, UsageError
from agents.engines.base import Engine, Generation, SamplingParams
from agents.engines.registry import (
    EngineKind,
    EngineSpec,
    UnknownEngineError,
    engine_kind,
    engine_names,
    local_device_and_dtype,
)
from agents.episode import EpisodeLimits, EpisodeSpec, Observer, Renderer, run_chat_episode, run_episode
from agents.trajectory import Trajectory
from envs.core import Message, TextEnv

__all__ = [
    "MODEL_KINDS",
    "SCRIPTED_KINDS",
    "Policy",
    "SamplingOptions",
    "engine_spec",
    "make_policy",
    "sampling_and_limits",
]

MODEL_KINDS = engine_names(aliases=True)  # hf, llm (= hf), sglang, openai: the engine table's rows
SCRIPTED_KINDS = ("oracle", "random")

ChatFactory = Callable[[TextEnv], Callable[[list[Message], SamplingParams], Awaitable[Generation]]]


@dataclass
class Policy:
    """Plays episodes: token-level (``engine`` + ``renderer``) or text-level (``chat_for``)."""

    name: str
    sampling: SamplingParams
    limits: EpisodeLimits
    engine: Engine | None = None
    renderer: Renderer | None = None
    chat_for: ChatFactory | None = None
    closer: Callable[[], Awaitable[None]] | None = None

    @property
    def token_level(self) -> bool:
        return self.engine is not None and self.renderer is not None

    async def play(self, env: TextEnv, spec: EpisodeSpec, observer: Observer | None = None) -> Trajectory:
        if self.token_level:
            assert self.engine is not None and self.renderer is not None
            return await run_episode(
                env, self.engine, self.renderer, spec, sampling=self.sampling, limits=self.limits, observer=observer
            )
        assert self.chat_for is not None
        return await run_chat_episode(
            env, self.chat_for(env), spec, sampling=self.sampling, limits=self.limits, observer=observer
        )

    async def close(self) -> None:
        if self.closer is not None:
            await self.closer()


class SamplingOptions(Protocol):
    """The options :func:`sampling_and_limits` reads: :class:`~agents.config.LLMOptions` (play, eval) and
    ``trainer.config.RolloutOptions`` (training) both have them."""

    temperature: float
    top_p: float
    max_new_tokens: int
    max_total_tokens: int
    max_turns: int | None


def sampling_and_limits(
    options: SamplingOptions,
    *,
    seed: int | None = None,
    temperature: float | None = None,
    step_timeout_s: float | None = EpisodeLimits.step_timeout_s,
) -> tuple[SamplingParams, EpisodeLimits]:
    """How every turn samples and where every episode stops, as ``options`` ask.

    ``options.max_new_tokens`` is both the sampling's length limit and the episode loop's per-turn limit (the
    loop also shortens a turn to what is left of ``max_total_tokens``). ``seed`` seeds the sampling
    (``SamplingParams.seed``; ``None``: unseeded); ``temperature`` replaces ``options.temperature`` when given;
    ``step_timeout_s`` bounds each environment call.
    """
    sampling = SamplingParams(
        max_new_tokens=options.max_new_tokens,
        temperature=options.temperature if temperature is None else temperature,
        top_p=options.top_p,
        seed=seed,
    )
    limits = EpisodeLimits(options.max_turns, options.max_new_tokens, options.max_total_tokens, step_timeout_s)
    return sampling, limits


def make_policy(
    kind: str,
    options: LLMOptions,
    *,
    tools: list[dict[str, Any]] | None = None,
    batch_size: int = 16,
    sampling_seed: int | None = None,
):
    """Build the policy ``kind`` (see the module docstring); ``tools`` are the environment's tool schemas;
    ``sampling_seed`` seeds every turn's sampling (``SamplingParams.seed``; ``None``: unseeded).

    A model's engine comes from the engine table (:mod:`agents.engines.registry`): token-level engines
    play through the token-level loop with a :class:`~agents.chat.ChatRenderer` of ``options.model``'s
    tokenizer, text-level ones (``chat(messages, sampling, tools)``) through the text-level loop.
    """
    sampling, limits = sampling_and_limits(options, seed=sampling_seed)
    if kind in SCRIPTED_KINDS:
        return Policy(kind, sampling, limits, chat_for=_scripted_chat(kind))
    try:
        row = engine_kind(kind)
    except UnknownEngineError:
        raise UsageError(f"unknown agent {kind!r}; choose one of {', '.join(MODEL_KINDS + SCRIPTED_KINDS)}") from None
    engine = row.build_engine(engine_spec(row, options, batch_size))
    name = f"{row.name}:{options.model}"
    if not row.token_level:
        return Policy(name, sampling, limits, chat_for=_text_chat(engine), closer=engine.close)
    from agents.chat import ChatRenderer
    from agents.models import load_tokenizer

    renderer = ChatRenderer(load_tokenizer(options.model), tools=tools)
    return Policy(name, sampling, limits, engine=engine, renderer=renderer, closer=engine.close)


def engine_spec(row: EngineKind, options: LLMOptions, batch_size: int) -> EngineSpec:
    """What ``options`` ask of the engine ``row``: a local model's device and dtype, or the servers' URLs."""
    if row.placement == "local":
        device, dtype = local_device_and_dtype(options.device, options.dtype)
        return EngineSpec(
            row.name,
            options.model,
            device=device,
            dtype=dtype,
            max_batch_size=batch_size,
            cuda_graphs=options.cuda_graphs,
        )
    urls = tuple(url.strip() for url in (options.base_url or "").split(",") if url.strip())
    if not urls:
        raise UsageError(f"agent={row.name} needs base_url=<the server URL; several separated by commas>")
    api_key = os.environ.get(options.api_key_env, "EMPTY")  # servers started without a key accept any
    return EngineSpec(row.name, options.model, urls=urls, api_key=api_key, max_batch_size=batch_size)


def _scripted_chat(kind: str) -> ChatFactory:
    from agents.base import make_agent

    agent = make_agent(kind)

    def chat_for(env: TextEnv):
        async def chat(messages: list[Message], sampling: SamplingParams) -> Generation:
            return Generation((), (), "stop", text=agent.act(env, messages[-1]["content"]))

        return chat

    return chat_for


def _text_chat(engine: Any) -> ChatFactory:
    def chat_for(env: TextEnv):
        async def chat(messages: list[Message], sampling: SamplingParams) -> Generation:
            return await engine.chat(messages, sampling, tools=env.tools)

        return chat

    return chat_for
