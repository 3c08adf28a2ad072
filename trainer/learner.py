"""The learner: actor, optional critic and optional reference policy, each a group of FSDP2 ranks in Ray.

    learner = Learner(LearnerSpec(actor=WorkerSpec("actor", path, optimizer=...), critic=..., reference=...))
    batch.old_logprobs = await learner.actor.compute_logprobs(batch, temperature, micro_batch_size)
    stats = await learner.actor.update_policy(minibatch, aggregation, loss, micro_batch_size)
    await learner.sync_weights(engine, policy_version)     # the engine samples from the new policy

:class:`WorkerGroup` starts ``world_size`` :class:`trainer.learner_worker.ModelWorker` actors that form
one process group, splits every batch into equal contiguous row shards (short shards padded with rows
that contribute nothing, :func:`trainer.learner_worker.shard_rows`), runs the call on every rank and
puts the answers back together. Every call is a coroutine (Ray object references are awaitable), so
the training loop can overlap learner work with a rollout.

Weight sync: rank 0 gathers the full weights (``full_state_dict``, LoRA merged), and the engine's
declared ``weight_sync`` (:data:`agents.engines.base.WeightSync`) says how they travel: the ``hf``
engine actor's client takes the Ray object reference, so the tensors reach it through the object store
without a copy in the driver; SGLang servers load an exported Hugging Face directory from disk because
the learner and the servers may not share a process or a host; the colocated engine
(:mod:`trainer.colocated`) computes with the actor's own tensors, so nothing travels. Every engine drops its
prefix cache and tags later generations with the new version.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agents.engines.base import WEIGHT_SYNCS, DiskWeights, Engine
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch
from trainer.colocated import ColocatedEngineClient, ColocatedWorker, EngineOptions
from trainer.learner_specs import WorkerSpec, combine_stats
from trainer.learner_worker import ModelWorker, shard_rows

__all__ = ["Learner", "LearnerSpec", "WorkerGroup", "combine_stats"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WorkerGroup:
    """``world_size`` ranks of one role (contract: module docstring).

    ``wait=False`` returns once the ranks are asked to start: they load their model while the caller starts
    other parts, and :meth:`wait_ready` (or the first call, which Ray queues behind ``setup``) waits for them.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        world_size: int = 1,
        *,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        worker_class: type[ModelWorker] = ModelWorker,
        wait: bool = True,
    ) -> None:
        from trainer.ray_cluster import import_ray, init_ray

        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self._ray = import_ray()
        init_ray()
        self.spec, self.world_size = spec, world_size
        init_method = f"tcp://127.0.0.1:{_free_port()}"
        worker = self._ray.remote(worker_class).options(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=0)
        self.handles = [worker.remote(spec, rank, world_size, init_method) for rank in range(world_size)]
        self.setup_refs: list[Any] = [h.setup.remote() for h in self.handles]
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until every rank has set up (its model loaded); raises a rank's error if one failed."""
        self._ray.get(self.setup_refs)

    async def _all(self, method: str, *args: Any) -> list[Any]:
        return await asyncio.gather(*[getattr(h, method).remote(*args) for h in self.handles])

    async def _sharded(self, method: str, batch: TrainBatch, *args: Any) -> list[Any]:
        shards = shard_rows(batch, self.world_size)
        refs = [getattr(h, method).remote(shard, *args) for h, shard in zip(self.handles, shards, strict=True)]
        return list(await asyncio.gather(*refs))

    async def _per_row(self, method: str, batch: TrainBatch, *args: Any) -> torch.Tensor:
        """A ``[B, L]`` answer assembled from the ranks' ``[rows, L_shard]`` answers (padding rows dropped)."""
        return self._assemble(await self._sharded(method, batch, *args), batch)

    def _assemble(self, outputs: list[torch.Tensor], batch: TrainBatch) -> torch.Tensor:
        per_rank = -(-len(batch) // self.world_size)
        length = batch.input_ids.shape[1]
        rows = []
        for rank, output in enumerate(outputs):
            real = max(0, min(per_rank, len(batch) - rank * per_rank))
            rows.append(torch.nn.functional.pad(output[:real], (0, length - output.shape[1])))
        return torch.cat(rows)

    async def compute_logprobs(
        self, batch: TrainBatch, temperature: float, micro_batch_size: int, base: bool = False
    ) -> torch.Tensor:
        """Logprobs ``[B, L]``; ``base``: of the weights under the LoRA adapters (the adapters switched off)."""
        return await self._per_row("compute_logprobs", batch, temperature, micro_batch_size, base)

    async def compute_values(self, batch: TrainBatch, micro_batch_size: int) -> torch.Tensor:
        return await self._per_row("compute_values", batch, micro_batch_size)

    async def compute_logprobs_and_values(
        self, batch: TrainBatch, temperature: float, micro_batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logprobs and values ``[B, L]`` from one forward of an actor that carries the value head."""
        outputs = await self._sharded("compute_logprobs_and_values", batch, temperature, micro_batch_size)
        logprobs, values = zip(*outputs, strict=True)
        return self._assemble(list(logprobs), batch), self._assemble(list(values), batch)

    async def update_policy(
        self, batch: TrainBatch, agg: Aggregation, loss: PolicyLossSpec, micro_batch_size: int
    ) -> dict[str, float]:
        return combine_stats(await self._sharded("update_policy", batch, agg, loss, micro_batch_size))

    async def update_sft(self, batch: TrainBatch, agg: Aggregation, micro_batch_size: int) -> dict[str, float]:
        return combine_stats(await self._sharded("update_sft", batch, agg, micro_batch_size))

    async def update_value(
        self, batch: TrainBatch, agg: Aggregation, clip_range: float | None, micro_batch_size: int
    ) -> dict[str, float]:
        return combine_stats(await self._sharded("update_value", batch, agg, clip_range, micro_batch_size))

    def state_dict_refs(self) -> list[Any]:
        """Object references to every rank's ``full_state_dict`` (rank 0's holds the weights)."""
        return [h.full_state_dict.remote() for h in self.handles]

    async def full_state_dict(self) -> dict[str, torch.Tensor]:
        return (await asyncio.gather(*self.state_dict_refs()))[0]

    async def save_checkpoint(self, directory: str | Path) -> None:
        await self._all("save_checkpoint", str(directory))

    async def load_checkpoint(self, directory: str | Path) -> None:
        await self._all("load_checkpoint", str(directory))

    async def save_pretrained(self, directory: str | Path, source: str) -> None:
        await self._all("save_pretrained", str(directory), source)

    def close(self) -> None:
        for handle in self.handles:
            self._ray.kill(handle)
        self.handles = []


@dataclass(frozen=True)
class LearnerSpec:
    """The roles to start; ``critic`` and ``reference`` are optional. Resources are per rank."""

    actor: WorkerSpec
    critic: WorkerSpec | None = None
    reference: WorkerSpec | None = None
    world_size: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0


class Learner:
    """The started groups of a :class:`LearnerSpec`, and weight sync to an engine.

    ``colocated_engine``: the actor's one rank also hosts the engine (:mod:`trainer.colocated`), built on its
    weights once the rank is set up; :meth:`engine` is its client.
    """

    def __init__(self, spec: LearnerSpec, colocated_engine: EngineOptions | None = None, *, wait: bool = True) -> None:
        def group(worker: WorkerSpec | None, worker_class: type[ModelWorker] = ModelWorker) -> WorkerGroup | None:
            if worker is None:
                return None
            return WorkerGroup(
                worker,
                spec.world_size,
                num_cpus=spec.num_cpus,
                num_gpus=spec.num_gpus,
                worker_class=worker_class,
                wait=False,
            )

        self.spec = spec
        self._engine: ColocatedEngineClient | None = None
        if colocated_engine is not None and spec.world_size != 1:
            raise ValueError(f"the colocated engine needs the actor on one rank, not {spec.world_size}")
        # Every role's ranks start at once, each loading its model in its own process.
        self.actor = group(spec.actor, ModelWorker if colocated_engine is None else ColocatedWorker)
        self.critic = group(spec.critic)
        self.reference = group(spec.reference)
        self._ready: list[Any] = [ref for g in self._groups() for ref in g.setup_refs]
        if colocated_engine is not None:
            handle = self.actor.handles[0]
            self._ready.append(handle.start_engine.remote(colocated_engine, self.actor.setup_refs[0]))
            self._engine = ColocatedEngineClient(handle, name=f"colocated/{ColocatedWorker.engine_name}")
        if wait:
            self.wait_ready()

    def _groups(self) -> list[WorkerGroup]:
        return [g for g in (self.actor, self.critic, self.reference) if g is not None]

    def wait_ready(self) -> None:
        """Wait until every rank of every role has set up, and the colocated engine (if any) is built; raises
        the first error a rank met. ``Learner(..., wait=False)`` leaves this to the caller, who starts the
        engine and the environment actors meanwhile."""
        self.actor._ray.get(self._ready)

    async def ready(self) -> None:
        """:meth:`wait_ready` without blocking the event loop (signals and other start-up work go on)."""
        await asyncio.gather(*self._ready)

    def engine(self) -> ColocatedEngineClient:
        """The colocated engine's client (``colocated_engine`` was given)."""
        if self._engine is None:
            raise RuntimeError("this learner hosts no engine: give Learner(..., colocated_engine=EngineOptions(...))")
        return self._engine

    async def phase_peak_gib(self) -> float | None:
        """The actor's peak resident memory (GiB, the largest rank's) since the last call, which starts a new
        peak: the training loop calls it at the end of each phase. ``None`` where the system does not say."""
        peaks = [p for p in await self.actor._all("phase_peak_mib") if p is not None]
        return max(peaks) / 1024 if peaks else None

    @property
    def value_model(self) -> WorkerGroup | None:
        """The group that computes the critic's values: the critic, the actor when it carries the value head
        (``WorkerSpec.value_head``), or ``None``."""
        if self.critic is not None:
            return self.critic
        return self.actor if self.spec.actor.value_head is not None else None

    async def sync_weights(self, engine: Engine, policy_version: int, export_dir: Path | None = None) -> None:
        """Give ``engine`` the actor's current weights as ``policy_version``, the way its ``weight_sync`` asks.

        ``object_ref``: rank 0's reference goes to the engine, which resolves it where it runs;
        ``disk``: the actor is saved as a Hugging Face directory under ``export_dir`` and the engine
        loads it; ``state_dict``: the gathered weights are passed in this process. ``none`` (an engine
        that serves evaluation only) raises ``ValueError``.
        """
        match engine.weight_sync:
            case "object_ref":
                refs = self.actor.state_dict_refs()
                await engine.update_weights(refs[0], policy_version)  # Ray resolves the reference in the engine actor
                await asyncio.gather(*refs[1:])
            case "disk":
                if not isinstance(engine, DiskWeights):
                    raise TypeError(
                        f"engine {engine.name!r} declares weight_sync='disk' but has no update_weights_from_disk"
                    )
                if export_dir is None:
                    raise ValueError(f"weight sync to engine {engine.name!r} goes through disk: give export_dir")
                await self.actor.save_pretrained(export_dir, self.spec.actor.model)
                await engine.update_weights_from_disk(str(export_dir), policy_version)
            case "state_dict":
                await engine.update_weights(await self.actor.full_state_dict(), policy_version)
            case "shared":  # the colocated engine computes with the actor's tensors: nothing travels
                await engine.update_weights(None, policy_version)
            case "none":
                raise ValueError(
                    f"engine {engine.name!r} cannot load weights (it serves evaluation only): train with hf or sglang"
                )
            case other:
                raise ValueError(
                    f"engine {engine.name!r} has weight_sync={other!r}; expected one of {', '.join(WEIGHT_SYNCS)}"
                )

    def close(self) -> None:
        for group in (self.actor, self.critic, self.reference):
            if group is not None:
                group.close()
