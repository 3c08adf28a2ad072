"""The metrics of a training run: one JSON line per step, TensorBoard scalars, optionally wandb.

    with MetricsWriter(run_dir, resume_step=checkpoint_step) as writer:
        for step in range(checkpoint_step + 1, total_steps + 1):
            ...
            writer.write(step, {"reward/mean": 0.41, "actor/policy_loss": -0.02})
    records = read_metrics(run_dir)   # [{"step": 1, "wall_time": ..., "reward/mean": 0.41, ...}, ...]

``run_dir/metrics.jsonl`` is the record of a run that other tools read (:func:`read_metrics`,
``python -m trainer.plot``). Each line is ``{"step": <int>, "wall_time": <unix seconds>, **metrics}``,
written and flushed as soon as the step ends, so a killed run keeps every completed step; at worst
its last line is cut short, and readers skip such a line. JSON has no NaN or infinity: a non-finite
value is written as ``null`` (and reads back as ``nan``).

A resumed run passes ``resume_step`` (the step of the checkpoint it restarts from). The writer then
drops every line with ``step > resume_step``, since the killed run may have logged steps past its
last checkpoint that the resumed run will log again, and TensorBoard hides those steps too
(``purge_step``). The file then ends up as an uninterrupted run's, wall times aside.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["METRICS_FILE", "MetricsWriter", "WandbOptions", "read_metrics"]

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
WANDB_ID_FILE = "wandb_run_id"
TENSORBOARD_INSTALL_HINT = "pip install tensorboard"
WANDB_INSTALL_HINT = 'pip install "turngym[logging]"'
_RESERVED_KEYS = ("step", "wall_time")
_WANDB_MODES = ("online", "offline", "disabled")


@dataclass
class WandbOptions:
    """Where a run logs to Weights & Biases. ``mode``: online, offline (sync later with ``wandb sync``) or disabled.

    ``dir`` defaults to the run directory; ``name`` to wandb's own choice.
    """

    project: str = "turngym"
    mode: str = "offline"
    name: str | None = None
    dir: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in _WANDB_MODES:
            raise ValueError(f"wandb mode must be one of {_WANDB_MODES}, got {self.mode!r}")


class MetricsWriter:
    """Writes each step's metrics to ``run_dir/metrics.jsonl``, TensorBoard (``run_dir/tensorboard``) and wandb.

    ``write`` takes steps in increasing order; a value must convert with ``float()`` (ints, bools and
    numpy or one-element torch scalars do). Integers are written as JSON integers, non-finite values
    as ``null``. Starting without ``resume_step`` in a directory that already has metrics raises
    ``FileExistsError``: pass ``resume_step`` (``0`` starts over) or choose another directory.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = True,
        wandb: WandbOptions | None = None,
        resume_step: int | None = None,
    ) -> None:
        if resume_step is not None and resume_step < 0:
            raise ValueError(f"resume_step must be >= 0, got {resume_step}")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / METRICS_FILE
        self.last_step = self._prepare_file(resume_step)
        self._file = self.path.open("a", encoding="utf-8")
        self._tensorboard = _open_tensorboard(self.run_dir / TENSORBOARD_DIR, resume_step) if tensorboard else None
        self._wandb = _open_wandb(wandb, self.run_dir, resume_step) if wandb and wandb.mode != "disabled" else None

    def _prepare_file(self, resume_step: int | None) -> int | None:
        """Drop the steps after ``resume_step``; return the last step left in the file (``None`` if none)."""
        exists = self.path.exists() and self.path.stat().st_size > 0
        if resume_step is None:
            if exists:
                raise FileExistsError(
                    f"{self.path} already holds metrics; pass resume_step=<checkpoint step> to continue that run "
                    "(resume_step=0 starts it over) or choose a new run directory"
                )
            return None
        if not exists:
            return None
        kept = [(line, record) for line, record in _parse_lines(self.path) if record["step"] <= resume_step]
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text("".join(line + "\n" for line, _ in kept), encoding="utf-8")
        os.replace(temporary, self.path)
        return max((record["step"] for _, record in kept), default=None)

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append one line for ``step`` and flush it; then log the same scalars to TensorBoard and wandb."""
        if self._file.closed:
            raise RuntimeError("MetricsWriter is closed")
        if self.last_step is not None and step <= self.last_step:
            raise ValueError(f"step {step} comes after step {self.last_step}; steps must increase")
        values = {key: _number(key, value) for key, value in metrics.items()}
        reserved = [key for key in _RESERVED_KEYS if key in values]
        if reserved:
            raise ValueError(f"metric names {reserved} are reserved for the record itself; rename them")
        record = {"step": int(step), "wall_time": time.time(), **{k: _json_value(v) for k, v in values.items()}}
        self._file.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        self._file.flush()
        self.last_step = step
        if self._tensorboard is not None:
            for key, value in values.items():
                self._tensorboard.add_scalar(key, float(value), global_step=step)
            self._tensorboard.flush()
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def close(self) -> None:
        """Close the file and the loggers; closing twice is harmless."""
        if not self._file.closed:
            self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a run: ``path`` is a run directory or its ``metrics.jsonl``.

    ``null`` values read back as ``nan``. A last line cut short (no newline and not valid JSON: the run
    was killed while writing it) is skipped; any other line that is not a record with an integer
    ``step`` raises ``ValueError`` naming the file and line number.
    """
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no metrics file at {path}; give a run directory or its {METRICS_FILE}")
    return [{k: math.nan if v is None else v for k, v in record.items()} for _, record in _parse_lines(path)]


def _parse_lines(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each non-blank line (without its newline) and its record; see :func:`read_metrics` for the rules."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    parsed = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # the last line has no newline: a write the killed run never finished
                break
            raise ValueError(f"{path}:{number}: not a JSON line ({exc}); the file is corrupt") from exc
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ValueError(f"{path}:{number}: not a metrics record (a JSON object with an integer 'step')")
        parsed.append((line, record))
    return parsed


def _number(key: str, value: Any) -> int | float:
    if isinstance(value, int):  # bool included: True is 1
        return int(value)
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metric {key!r} must be a number, got {type(value).__name__}: {value!r}") from exc


def _json_value(value: int | float) -> int | float | None:
    return value if isinstance(value, int) or math.isfinite(value) else None


def _open_tensorboard(log_dir: Path, resume_step: int | None) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ImportError(
            f"TensorBoard logging needs the tensorboard package: {TENSORBOARD_INSTALL_HINT} "
            "(or turn TensorBoard logging off)"
        ) from exc
    # purge_step hides the events a killed run logged at or after this step in every older event file.
    purge_step = resume_step + 1 if resume_step is not None else None
    return SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)


def _open_wandb(options: WandbOptions, run_dir: Path, resume_step: int | None) -> Any:
    """Start a wandb run; a resumed run continues the wandb run whose id the first one saved in the run dir."""
    try:
        import wandb
    except ImportError as exc:
        raise ImportError(f"wandb logging needs wandb: {WANDB_INSTALL_HINT} (or leave wandb unset)") from exc
    id_file = run_dir / WANDB_ID_FILE
    run_id = id_file.read_text(encoding="utf-8").strip() if resume_step is not None and id_file.exists() else None
    run = wandb.init(
        project=options.project,
        name=options.name,
        mode=options.mode,
        dir=options.dir or str(run_dir),
        id=run_id,
        resume="allow" if run_id else None,
    )
    id_file.write_text(run.id + "\n", encoding="utf-8")
    return run
