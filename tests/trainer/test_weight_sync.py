"""``Learner.sync_weights`` picks the transport from the engine's declared ``weight_sync``, never from its type.

The actor group here records what it was asked for (the real group's three calls are exercised end to
end by the training tests: ``object_ref`` with the hf engine actor in test_train_run.py, ``disk``
with SGLang-compatible servers in test_train_sglang.py).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agents.engines.base import EngineStats
from trainer.learner import Learner

WEIGHTS = {"w": torch.ones(2)}


class RecordingGroup:
    """The actor's worker group: rank 0's weights, as object "references" and gathered."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def state_dict_refs(self) -> list:
        self.calls.append("state_dict_refs")
        return ["ref-rank-0", _answered(), _answered()]  # ranks 1 and 2 answer too (and are awaited)

    async def full_state_dict(self) -> dict:
        self.calls.append("full_state_dict")
        return WEIGHTS

    async def save_pretrained(self, directory, source: str) -> None:
        self.calls.append(f"save_pretrained {Path(directory).name} {source}")


async def _answered() -> None:
    return None


class Declared:
    """An engine that declares ``weight_sync`` and records what it receives."""

    name = "declared"

    def __init__(self, weight_sync: str) -> None:
        self.weight_sync = weight_sync
        self.received: list[tuple] = []

    async def update_weights(self, state_dict, policy_version: int) -> None:
        self.received.append(("update_weights", state_dict, policy_version))

    def stats(self) -> EngineStats:
        return EngineStats()


class FromDisk(Declared):
    async def update_weights_from_disk(self, model_path, policy_version: int) -> None:
        self.received.append(("update_weights_from_disk", Path(model_path).name, policy_version))


def _learner() -> tuple[Learner, RecordingGroup]:
    learner = Learner.__new__(Learner)  # the groups without their Ray actors
    group = RecordingGroup()
    learner.actor = group
    learner.spec = SimpleNamespace(actor=SimpleNamespace(model="tiny"))
    return learner, group


async def test_each_declared_transport_makes_its_own_calls(tmp_path):
    learner, group = _learner()
    engine = Declared("object_ref")
    await learner.sync_weights(engine, 3)
    assert engine.received == [("update_weights", "ref-rank-0", 3)] and group.calls == ["state_dict_refs"]

    learner, group = _learner()
    engine = Declared("state_dict")
    await learner.sync_weights(engine, 4)
    assert engine.received == [("update_weights", WEIGHTS, 4)] and group.calls == ["full_state_dict"]

    learner, group = _learner()
    engine = FromDisk("disk")
    await learner.sync_weights(engine, 5, export_dir=tmp_path / "engine_weights")
    assert engine.received == [("update_weights_from_disk", "engine_weights", 5)]
    assert group.calls == ["save_pretrained engine_weights tiny"]  # the HF directory first, then the load

    learner, group = _learner()
    engine = Declared("shared")
    await learner.sync_weights(engine, 6)
    assert engine.received == [("update_weights", None, 6)] and group.calls == []  # the colocated engine: no weights


async def test_engines_that_cannot_take_weights_fail_with_the_reason(tmp_path):
    learner, group = _learner()
    with pytest.raises(ValueError, match=r"cannot load weights .* evaluation only"):
        await learner.sync_weights(Declared("none"), 1)
    with pytest.raises(TypeError, match="declares weight_sync='disk' but has no update_weights_from_disk"):
        await learner.sync_weights(Declared("disk"), 1, export_dir=tmp_path)
    with pytest.raises(ValueError, match="goes through disk: give export_dir"):
        await learner.sync_weights(FromDisk("disk"), 1)
    with pytest.raises(
        ValueError, match="weight_sync='nccl'; expected one of state_dict, object_ref, disk, shared, none"
    ):
        await learner.sync_weights(Declared("nccl"), 1)
    assert group.calls == []  # nothing was gathered for an engine that could not take it
