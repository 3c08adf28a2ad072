"""Request bodies for SGLang's weight-update endpoints (SGLang 0.5.23, ``io_struct.py``).

Three ways to put new weights into running SGLang servers; every one is followed by ``/flush_cache``
(SGLang flushes by itself when ``flush_cache`` is true, the default; the explicit call is what makes
the engine's guarantee hold on servers that predate that field):

``/update_weights_from_disk``  ``{"model_path", "load_format", "weight_version"}``
    The server reads a checkpoint directory (HF layout, ``*.safetensors``) that it can see. Works for
    servers on other hosts when the directory is on a shared filesystem.
``/update_weights_from_tensor``  ``{"serialized_named_tensors": [b64, ...], "load_format", "weight_version"}``
    One entry per tensor-parallel rank, each a base64 string of ``ForkingPickler``-pickled
    ``[(name, tensor), ...]`` (SGLang's ``MultiprocessingSerializer.serialize(..., output_str=True)``).
    ``torch.multiprocessing`` pickles *handles* to shared memory (CPU tensors: a file descriptor
    passed through the sender's ``multiprocessing.resource_sharer``; CUDA tensors: CUDA IPC), not the
    data, so this path only works between processes on one host, and the sending process must stay
    alive until the server answered. Pickling a CPU tensor this way moves its storage into shared
    memory (the values are unchanged).
``/init_weights_update_group`` then ``/update_weights_from_distributed``
    ``{"master_address", "master_port", "rank_offset", "world_size", "group_name", "backend"}`` joins
    every server's ranks to a process group with the trainer at rank 0; then for each update
    ``{"names", "dtypes", "shapes", "group_name", "weight_version"}`` makes every server receive
    ``torch.distributed.broadcast(tensor, src=0)`` for each name, in that order, while the trainer
    broadcasts them. Only the HTTP side is implemented here: the NCCL broadcast needs GPUs on both
    ends and cannot run on a machine without one.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

__all__ = [
    "DEFAULT_GROUP_NAME",
    "disk_update_request",
    "distributed_update_request",
    "init_group_request",
    "serialize_named_tensors",
    "tensor_update_request",
]

DEFAULT_GROUP_NAME = "weight_update_group"  # SGLang's default group_name


def serialize_named_tensors(named_tensors: Sequence[tuple[str, Any]]) -> str:
    """``[(name, tensor), ...]`` pickled with ``ForkingPickler`` and base64-encoded, as SGLang's
    ``MultiprocessingSerializer.serialize(named_tensors, output_str=True)`` produces it."""
    import torch.multiprocessing  # noqa: F401  (registers the shared-memory reductions for tensors)

    buffer = io.BytesIO()
    ForkingPickler(buffer).dump([(str(name), tensor.detach()) for name, tensor in named_tensors])
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _version(policy_version: int | None) -> dict[str, Any]:
    return {} if policy_version is None else {"weight_version": str(policy_version)}


def disk_update_request(
    model_path: str, policy_version: int | None = None, load_format: str | None = None
) -> dict[str, Any]:
    """The ``/update_weights_from_disk`` body."""
    return {"model_path": str(model_path), "load_format": load_format, **_version(policy_version)}


def tensor_update_request(
    named_tensors: Iterable[tuple[str, Any]], tp_size: int = 1, policy_version: int | None = None
) -> dict[str, Any]:
    """The ``/update_weights_from_tensor`` body: one serialisation per tensor-parallel rank.

    Each rank gets its own copy because each rank unpickles (and so takes a reference on) only its own
    entry (``tp_worker.deserialize_own_rank`` in SGLang).
    """
    if tp_size < 1:
        raise ValueError(f"tp_size must be >= 1, got {tp_size}")
    named = list(named_tensors)
    if not named:
        raise ValueError("no tensors to send")
    return {
        "serialized_named_tensors": [serialize_named_tensors(named) for _ in range(tp_size)],
        "load_format": None,
        **_version(policy_version),
    }


def init_group_request(
    master_address: str,
    master_port: int,
    rank_offset: int,
    world_size: int,
    group_name: str = DEFAULT_GROUP_NAME,
    backend: str = "nccl",
) -> dict[str, Any]:
    """The ``/init_weights_update_group`` body for one server whose first rank is ``rank_offset``."""
    if not 0 < rank_offset < world_size:
        raise ValueError(f"rank_offset {rank_offset} must lie in [1, world_size={world_size}) (rank 0 is the trainer)")
    return {
        "master_address": master_address,
        "master_port": int(master_port),
        "rank_offset": int(rank_offset),
        "world_size": int(world_size),
        "group_name": group_name,
        "backend": backend,
    }


def distributed_update_request(
    names: Sequence[str],
    dtypes: Sequence[str],
    shapes: Sequence[Sequence[int]],
    group_name: str = DEFAULT_GROUP_NAME,
    policy_version: int | None = None,
) -> dict[str, Any]:
    """The ``/update_weights_from_distributed`` body; ``dtypes`` are names such as ``"bfloat16"``.

    The server receives the tensors in the order of ``names``, so the trainer must broadcast them in
    that order.
    """
    if not len(names) == len(dtypes) == len(shapes):
        raise ValueError(f"{len(names)} names, {len(dtypes)} dtypes and {len(shapes)} shapes: they must match")
    return {
        "names": list(names),
        "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
        "shapes": [[int(s) for s in shape] for shape in shapes],
        "group_name": group_name,
        **_version(policy_version),
    }
