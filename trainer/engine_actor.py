"""The inference engine every environment actor shares, and how environment actors reach it.

Environment actors never hold a model. They hold an :class:`~agents.engines.base.Engine` built in
their own process by an *engine factory*: any picklable zero-argument callable that returns an
Engine. The engine table (:mod:`agents.engines.registry`) says which of two placements an engine has:

* ``local`` engines (``hf``): the engine lives in one Ray async actor, :class:`EngineHost`, started
  by :func:`launch_engine_actor`. Concurrent ``generate`` calls from every environment actor run
  concurrently in that actor's event loop, so the engine batches them and shares its prefix cache
  across episodes. :class:`EngineClient` implements the Engine protocol on top of the actor handle
  (``generate``, ``update_weights`` and ``stats`` are actor calls); :class:`EngineClientFactory`
  is the picklable factory environment actors receive.
* ``servers`` engines (SGLang): the client talks HTTP to the servers itself, so the factory is the
  :class:`~agents.engines.registry.EngineSpec` of the running servers, and each environment actor
  builds its own client; no engine actor is involved.

The engine actor's factory is an :class:`~agents.engines.registry.EngineSpec` too, for example
``EngineSpec("hf", "smollm2")``: the model is loaded in the engine actor's process.

:class:`EngineClient` declares ``weight_sync = "object_ref"``: ``update_weights`` takes the state dict
or a Ray object reference to one, which Ray resolves inside the engine actor (a learner rank's
``ray.put`` reaches the engine without a copy in the driver). Size the object store for it
(:func:`trainer.ray_cluster.init_ray`), or sync weights another way for large models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.engines.base import (
    DropsPrefixCache,
    Engine,
    EngineStats,
    ForgetsPrefixes,
    Generation,
    SamplingParams,
    WeightSync,
)

__all__ = [
    "EngineClient",
    "EngineClientFactory",
    "EngineFactory",
    "EngineHost",
    "error_from_actor_of",
    "launch_engine_actor",
]

#: A picklable zero-argument callable that builds an Engine in the process that calls it.
EngineFactory = Callable[[], Engine]


class EngineHost:
    """The plain class behind the engine actor: builds the engine once and forwards every call to it.

    Tests use it directly; :func:`launch_engine_actor` runs it as a Ray async actor.
    """

    def __init__(self, make_engine: EngineFactory) -> None:
        import uuid

        self.engine = make_engine()
        self.instance_id = uuid.uuid4().hex  # new each time Ray restarts the actor

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        return await self.engine.generate(input_ids, sampling, affinity_key)

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        await self.engine.update_weights(state_dict, policy_version)

    async def stats(self) -> EngineStats:
        return self.engine.stats()

    async def drop_prefix_cache(self, keep_layer_inputs: bool = False) -> None:
        if isinstance(self.engine, DropsPrefixCache):
            # only an engine that keeps layer inputs is asked to keep them (agents.engines.hf)
            await self.engine.drop_prefix_cache(**({"keep_layer_inputs": True} if keep_layer_inputs else {}))

    async def forget_prefix(self, token_ids: Sequence[int]) -> None:
        if isinstance(self.engine, ForgetsPrefixes):
            await self.engine.forget_prefix(token_ids)

    async def close(self) -> None:
        await self.engine.close()

    async def ping(self) -> str:
        return self.engine.name

    async def instance(self) -> str:
        return self.instance_id


class EngineClient:
    """The Engine protocol over a handle of an :class:`EngineHost` actor; picklable (it holds only the handle).

    ``stats()`` is synchronous, as the protocol says, and so blocks on an actor call: inside an event
    loop use ``await client.stats_async()`` (or run ``stats`` in a thread) instead.
    """

    weight_sync: WeightSync = "object_ref"

    def __init__(self, handle: Any, name: str = "engine-actor") -> None:
        self.handle = handle
        self.name = name

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        return await self.handle.generate.remote(list(input_ids), sampling, affinity_key)

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        """``state_dict``: the tensors, or a Ray object reference to them (resolved in the engine actor)."""
        await self.handle.update_weights.remote(state_dict, policy_version)

    def stats(self) -> EngineStats:
        import ray

        return ray.get(self.handle.stats.remote())

    async def stats_async(self) -> EngineStats:
        return await self.handle.stats.remote()

    async def instance_async(self) -> str:
        """The engine actor's instance id: it changes each time Ray restarts the actor."""
        return await self.handle.instance.remote()

    async def drop_prefix_cache(self, keep_layer_inputs: bool = False) -> None:
        """Empty the engine's prefix cache, if its engine has one that can be (else nothing happens); with
        ``keep_layer_inputs`` an engine that keeps layer inputs (the colocated one) keeps those."""
        await self.handle.drop_prefix_cache.remote(keep_layer_inputs)

    async def forget_prefix(self, token_ids: Sequence[int]) -> None:
        """Drop a finished episode's cached prefixes, if its engine can (else nothing happens)."""
        await self.handle.forget_prefix.remote(list(token_ids))

    def factory(self) -> EngineClientFactory:
        """What to give a :class:`~trainer.rollout.RolloutManager`: each environment actor builds a client from it."""
        return EngineClientFactory(self.handle, self.name)

    async def close(self) -> None:
        """Close the engine inside the actor (the actor itself stays until killed or its owner exits)."""
        await self.handle.close.remote()


def error_from_actor_of(error: Any, engine: Any) -> bool | None:
    """Whether ``error`` (a Ray actor error) comes from ``engine``'s actor: True or False when both ids are known,
    None when the error names no actor or ``engine`` is not a client of one (callers choose what unknown means)."""
    actor_id = getattr(getattr(engine, "handle", None), "_ray_actor_id", None)
    if actor_id is None or getattr(error, "actor_id", None) is None:
        return None
    return error.actor_id == actor_id.hex()


@dataclass(frozen=True)
class EngineClientFactory:
    """The picklable factory that environment actors call to get an :class:`EngineClient`."""

    handle: Any
    name: str = "engine-actor"

    def __call__(self) -> EngineClient:
        return EngineClient(self.handle, self.name)


def launch_engine_actor(
    make_engine: EngineFactory,
    *,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    max_concurrency: int = 1024,
    name: str = "engine-actor",
    ready_timeout_s: float = 600.0,
    max_restarts: int = 0,
) -> EngineClient:
    """Start an :class:`EngineHost` actor that builds its engine with ``make_engine``; wait until it is up.

    ``num_cpus`` also sets the actor's thread count for torch (Ray exports ``OMP_NUM_THREADS`` from
    it). ``max_concurrency`` bounds the requests the actor serves at once. ``max_restarts``: how many
    times Ray restarts the actor after it dies (the handle stays valid; calls in flight fail; the
    restarted engine is built again by ``make_engine``, so it has the factory's weights and policy
    version 0 until its owner syncs it). Starts Ray locally
    (:func:`trainer.ray_cluster.init_ray`) if it is not running. Raises what the engine's construction
    raised, or ``TimeoutError`` after ``ready_timeout_s``.
    """
    from trainer.ray_cluster import import_ray, init_ray

    ray = import_ray()
    init_ray()  # a no-op when Ray is running; else the local default, capped
    actor_class = ray.remote(EngineHost).options(
        num_cpus=num_cpus, num_gpus=num_gpus, max_concurrency=max_concurrency, max_restarts=max_restarts
    )
    handle = actor_class.remote(make_engine)
    try:
        engine_name = ray.get(handle.ping.remote(), timeout=ready_timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.kill(handle)
        raise TimeoutError(f"the engine actor did not start within {ready_timeout_s} s") from None
    return EngineClient(handle, name=f"{name}/{engine_name}")
