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
from typing import Any

from agents.config import LLMOptions, UsageError
from agents.engines.base import Engine, Generation, SamplingParams
from agents.episode import EpisodeLimits, EpisodeSpec, Observer, Renderer, run_chat_episode, run_episode
from agents.trajectory import Trajectory
from envs.core import Message, TextEnv

__all__ = ["MODEL_KINDS", "SCRIPTED_KINDS", "Policy", "make_policy", "sampling_and_limits"]

MODEL_KINDS = ("hf", "llm", "sglang", "openai")
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


def sampling_and_limits(options: LLMOptions, seed: int | None = None) -> tuple[SamplingParams, EpisodeLimits]:
    sampling = SamplingParams(
        max_new_tokens=options.max_new_tokens, temperature=options.temperature, top_p=options.top_p, seed=seed
    )
    limits = EpisodeLimits(
        max_turns=options.max_turns, max_new_tokens=options.max_new_tokens, max_total_tokens=options.max_total_tokens
    )
    return sampling, limits


def make_policy(kind: str, options: LLMOptions, *, tools: list[dict[str, Any]] | None = None, batch_size: int = 16):
    """Build the policy ``kind`` (see the module docstring); ``tools`` are the environment's tool schemas."""
    sampling, limits = sampling_and_limits(options)
    if kind in SCRIPTED_KINDS:
        return Policy(kind, sampling, limits, chat_for=_scripted_chat(kind))
    if kind in ("hf", "llm"):
        return _hf_policy(options, sampling, limits, tools, batch_size)
    if kind == "sglang":
        return _sglang_policy(options, sampling, limits, tools)
    if kind == "openai":
        return _openai_policy(options, sampling, limits, tools)
    raise UsageError(f"unknown agent {kind!r}; choose one of {', '.join(MODEL_KINDS + SCRIPTED_KINDS)}")


def _scripted_chat(kind: str) -> ChatFactory:
    from agents.base import make_agent

    agent = make_agent(kind)

    def chat_for(env: TextEnv):
        async def chat(messages: list[Message], sampling: SamplingParams) -> Generation:
            return Generation((), (), "stop", text=agent.act(env, messages[-1]["content"]))

        return chat

    return chat_for


def _device_and_dtype(options: LLMOptions) -> tuple[str, str]:
    import torch

    device = options.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = options.dtype
    if dtype == "auto":
        # float32 on CPU keeps engine and learner logprobs in close agreement; bf16 on GPUs.
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return device, dtype


def _hf_policy(options, sampling, limits, tools, batch_size) -> Policy:
    from agents.chat import ChatRenderer
    from agents.engines.hf import HfEngine
    from agents.models import load_model, load_tokenizer

    device, dtype = _device_and_dtype(options)
    tokenizer = load_tokenizer(options.model)
    model = load_model(options.model, dtype=dtype, device=device)
    engine = HfEngine(model, device=device, max_batch_size=batch_size)
    renderer = ChatRenderer(tokenizer, tools=tools)
    return Policy(f"hf:{options.model}", sampling, limits, engine=engine, renderer=renderer, closer=engine.close)


def _sglang_policy(options, sampling, limits, tools) -> Policy:
    if not options.base_url:
        raise UsageError("agent=sglang needs base_url=http://host:port (several separated by commas)")
    from agents.chat import ChatRenderer
    from agents.engines.sglang import SGLangEngine
    from agents.models import load_tokenizer

    engine = SGLangEngine(urls=[u.strip() for u in options.base_url.split(",") if u.strip()])
    renderer = ChatRenderer(load_tokenizer(options.model), tools=tools)
    return Policy(f"sglang:{options.model}", sampling, limits, engine=engine, renderer=renderer, closer=engine.close)


def _openai_policy(options, sampling, limits, tools) -> Policy:
    if not options.base_url:
        raise UsageError("agent=openai needs base_url=<OpenAI-compatible endpoint, e.g. http://localhost:8000/v1>")
    from agents.engines.openai import OpenAIEngine

    api_key = os.environ.get(options.api_key_env, "EMPTY")
    engine = OpenAIEngine(base_url=options.base_url, model=options.model, api_key=api_key)

    def chat_for(env: TextEnv):
        async def chat(messages: list[Message], sampling: SamplingParams) -> Generation:
            return await engine.chat(messages, sampling, tools=env.tools)

        return chat

    return Policy(f"openai:{options.model}", sampling, limits, chat_for=chat_for, closer=engine.close)
