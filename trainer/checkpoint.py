"""Checkpoints of a training run: where they live, when one is complete, and the loop's own state.

    <run dir>/checkpoints/step_000010/
        policy/              the actor in Hugging Face format (from_pretrained, SGLang and vLLM load it)
        actor/ critic/       each role's sharded weights and optimizer (torch.distributed.checkpoint),
                             learning-rate schedule and every rank's RNG state
        trainer_state.json   the loop's state (:class:`TrainerState`)
        COMPLETE             written last: a checkpoint without it (a run killed while saving) is ignored

``trainer.resume=true`` loads the newest complete checkpoint and continues from the step after it.
Episode seeds and sampling seeds are functions of the step, so a resumed run plays the same episodes
an uninterrupted one would. A run whose colocated actor died does the same in the same process
(:func:`trainer.components.restart_colocated`).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "TrainerState",
    "checkpoint_dir",
    "discard_checkpoints_after",
    "latest_checkpoint",
    "mark_complete",
    "prune_checkpoints",
]

COMPLETE = "COMPLETE"


@dataclass
class TrainerState:
    """What the loop needs besides the models: the last finished step, the engine's policy version and the
    curriculum's ceiling (``None`` without a curriculum)."""

    step: int
    policy_version: int
    curriculum_ceiling: int | None = None

    def save(self, directory: Path) -> None:
        (directory / "trainer_state.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> TrainerState:
        return cls(**json.loads((directory / "trainer_state.json").read_text()))


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def mark_complete(directory: Path) -> None:
    (directory / COMPLETE).write_text("")


def _complete(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith("step_") and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("_")[1]))


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of ``run_dir``, or ``None``."""
    complete = _complete(run_dir)
    return complete[-1] if complete else None


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest complete checkpoints, and every incomplete one older than them."""
    complete = _complete(run_dir)
    for old in complete[: max(0, len(complete) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
    newest = complete[-1] if complete else None
    root = run_dir / "checkpoints"
    if newest is not None and root.is_dir():
        newest_step = int(newest.name.split("_")[1])
        for path in root.iterdir():
            incomplete = path.name.startswith("step_") and not (path / COMPLETE).is_file()
            if incomplete and int(path.name.split("_")[1]) < newest_step:
                shutil.rmtree(path, ignore_errors=True)


def discard_checkpoints_after(run_dir: Path, step: int) -> None:
    """Delete every checkpoint of a step after ``step``: a run that goes back to ``step`` writes them again.

    Only incomplete ones can be there when ``step`` is the newest complete checkpoint's (or 0, none): a save that
    a dead actor cut short.
    """
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.name.startswith("step_") and int(path.name.split("_")[1]) > step:
            shutil.rmtree(path, ignore_errors=True)
