"""The engine table: one row per inference engine, read by every command that builds one.

``agents.play``, ``agents.eval`` (:func:`agents.policy.make_policy`) and ``trainer.run``
(``trainer.run_plan``, ``trainer.components``, ``trainer.config``) take their choices, checks and constructors from
:data:`ENGINE_KINDS`, so an engine is added by writing its module and one row here::

    EngineKind(
        name="vllm",
        summary="vLLM servers (token in, token out)",
        placement="servers",
        token_level=True,
        trainable=True,
        build="agents.engines.vllm:connect",   # EngineSpec -> Engine, imported on first use
    )

A row's ``build`` is called with an :class:`EngineSpec`, the options every command can give an engine
(each engine reads the fields it uses). ``placement`` says where it runs: ``local`` engines hold the
model in the process that builds them (the trainer builds one inside a Ray engine actor and gives its
environment actors clients of that actor); ``servers`` engines talk to servers over HTTP, so every
process builds its own client from the servers' ``urls``. ``start`` (optional, ``servers`` only) is
the driver's asynchronous form: it may launch the servers, and it checks that they answer.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agents.engines.base import Engine

__all__ = [
    "ENGINE_KINDS",
    "EngineKind",
    "EngineSpec",
    "UnknownEngineError",
    "engine_kind",
    "engine_names",
    "local_device_and_dtype",
]

Placement = Literal["local", "servers"]


class UnknownEngineError(ValueError):
    """A name that no row of :data:`ENGINE_KINDS` has; the message lists the choices."""


@dataclass(frozen=True)
class EngineSpec:
    """What a command asks of an engine ``kind``; calling the spec builds the engine (a picklable factory).

    ``model`` is a name :func:`agents.models.load_model` knows or a model directory for ``local``
    engines, and the model the servers serve for ``servers`` engines. ``urls`` are running servers;
    ``launch`` asks ``start`` to launch ``num_servers`` instead (``gpus_per_server`` GPUs each).
    """

    kind: str
    model: str
    device: str = "cpu"
    dtype: str = "float32"
    max_batch_size: int = 16
    max_context: int | None = None
    seed: int | None = None
    cuda_graphs: bool | None = None  # hf: replay the decode step from CUDA graphs; None: on for CUDA
    urls: tuple[str, ...] = ()
    api_key: str | None = None
    launch: bool = False
    num_servers: int = 1
    gpus_per_server: int = 0

    def __call__(self) -> Engine:
        """The engine, built in the calling process (servers are connected to, never launched here)."""
        return engine_kind(self.kind).build_engine(self)

    def connected_to(self, urls: list[str] | tuple[str, ...]) -> EngineSpec:
        """This spec for the servers at ``urls`` (what other processes build once the driver launched them)."""
        return replace(self, urls=tuple(urls), launch=False)


@dataclass(frozen=True)
class EngineKind:
    """One row of the engine table (module docstring).

    ``token_level``: ids in, ids and logprobs out (the episode loop and the gateway need it; otherwise
    the engine is text-level and has ``chat(messages, sampling, tools)``). ``trainable``: it loads new
    weights (its engines' ``weight_sync`` is not ``"none"``), so ``trainer.run`` can sample from it.
    ``build`` and ``start`` are ``"module:function"`` names, imported on first use so that the table
    costs no heavy import.
    """

    name: str
    summary: str
    placement: Placement
    token_level: bool
    trainable: bool
    build: str
    start: str | None = None
    aliases: tuple[str, ...] = ()

    def build_engine(self, spec: EngineSpec) -> Engine:
        return _load(self.build)(spec)

    async def start_engine(self, spec: EngineSpec) -> Engine:
        """The driver's engine: ``start`` when the row has one (it may launch servers), else ``build``."""
        if self.start is None:
            if spec.launch:
                raise ValueError(f"engine {self.name!r} cannot launch servers: give the urls of running ones")
            return self.build_engine(spec)
        return await _load(self.start)(spec)


ENGINE_KINDS: dict[str, EngineKind] = {
    kind.name: kind
    for kind in (
        EngineKind(
            name="hf",
            summary="the embedded transformers engine: continuous batching and prefix caching, CPU or CUDA",
            placement="local",
            token_level=True,
            trainable=True,
            build="agents.engines.hf:build_hf_engine",
            aliases=("llm",),
        ),
        EngineKind(
            name="sglang",
            summary="SGLang servers: token in, token out, sticky routing, weight sync from disk",
            placement="servers",
            token_level=True,
            trainable=True,
            build="agents.engines.sglang:connect_sglang",
            start="agents.engines.sglang:start_sglang",
        ),
        EngineKind(
            name="openai",
            summary="any OpenAI-compatible endpoint: messages in, text out; evaluation only",
            placement="servers",
            token_level=False,
            trainable=False,
            build="agents.engines.openai:connect_openai",
        ),
    )
}


def engine_names(
    *, token_level: bool | None = None, trainable: bool | None = None, aliases: bool = False
) -> tuple[str, ...]:
    """The names of the rows that match (``None``: either), in table order; ``aliases`` adds each row's aliases."""
    names: list[str] = []
    for kind in ENGINE_KINDS.values():
        if token_level is not None and kind.token_level != token_level:
            continue
        if trainable is not None and kind.trainable != trainable:
            continue
        names.append(kind.name)
        if aliases:
            names.extend(kind.aliases)
    return tuple(names)


def engine_kind(name: str) -> EngineKind:
    """The row named ``name`` (or one of its aliases); raises :class:`UnknownEngineError` listing the choices."""
    for kind in ENGINE_KINDS.values():
        if name == kind.name or name in kind.aliases:
            return kind
    raise UnknownEngineError(f"unknown engine {name!r}; choose one of {', '.join(engine_names(aliases=True))}")


def local_device_and_dtype(device: str, dtype: str) -> tuple[str, str]:
    """A ``local`` engine's device and dtype with ``auto`` resolved: CUDA when visible, else the CPU;
    float32 on the CPU (engine and learner logprobs then agree closely), bfloat16 on CUDA."""
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return device, dtype


def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
