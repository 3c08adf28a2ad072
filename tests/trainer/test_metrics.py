"""MetricsWriter and read_metrics: JSON lines, TensorBoard events, resume truncation, killed and corrupt files."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from trainer.metrics import MetricsWriter, WandbOptions, read_metrics

REPO_ROOT = Path(__file__).resolve().parents[2]


def step_metrics(step: int) -> dict[str, float]:
    # reward/mean = step / 4, so steps 1..3 give 0.25, 0.5, 0.75 (exact in binary floating point)
    return {"reward/mean": step / 4, "actor/policy_loss": -step / 8, "policy_version": step, "custom/extra": 7.0}


def without_wall_time(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "wall_time"} for line in lines]


def scalars(log_dir: Path, tag: str) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def test_lines_are_written_flushed_and_read_back(tmp_path):
    before = time.time()
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.write(1, {"reward/mean": 0.25, "policy_version": 3, "episode/turns": 4.5})
    # not closed yet: the line must already be in the file
    line = (tmp_path / "metrics.jsonl").read_text()
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert before <= record.pop("wall_time") <= time.time()
    assert record == {"step": 1, "reward/mean": 0.25, "policy_version": 3, "episode/turns": 4.5}
    assert isinstance(record["policy_version"], int)  # integers stay integers
    writer.close()
    writer.close()  # twice is harmless
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]
    assert read_metrics(tmp_path / "metrics.jsonl")[0]["reward/mean"] == 0.25


def test_non_finite_values_are_null_in_json_and_nan_when_read(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(1, {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 1.5})
    raw = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert (raw["a"], raw["b"], raw["c"], raw["d"]) == (None, None, None, 1.5)
    record = read_metrics(tmp_path)[0]
    assert math.isnan(record["a"]) and math.isnan(record["b"]) and record["d"] == 1.5


def test_numpy_torch_and_bool_values_are_numbers(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(1, {"np": np.float32(0.5), "np64": np.float64(0.25), "torch": torch.tensor(2.0), "ok": True})
    assert without_wall_time(tmp_path / "metrics.jsonl") == [
        {"step": 1, "np": 0.5, "np64": 0.25, "torch": 2.0, "ok": 1}
    ]


@pytest.mark.parametrize(
    ("step", "metrics", "error", "message"),
    [
        (2, {"x": 1.0}, ValueError, "steps must increase"),
        (3, {"x": "high"}, TypeError, "metric 'x' must be a number"),
        (3, {"x": [1.0]}, TypeError, "metric 'x' must be a number"),
        (3, {"step": 1.0}, ValueError, "reserved"),
        (3, {"wall_time": 1.0}, ValueError, "reserved"),
    ],
)
def test_bad_writes_are_refused_and_leave_the_file_alone(tmp_path, step, metrics, error, message):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(2, {"x": 1.0})
        with pytest.raises(error, match=message):
            writer.write(step, metrics)
    assert without_wall_time(tmp_path / "metrics.jsonl") == [{"step": 2, "x": 1.0}]


def test_writing_after_close_raises(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.write(1, {})


def test_tensorboard_events_hold_the_values(tmp_path):
    with MetricsWriter(tmp_path) as writer:
        for step in (1, 2, 3):
            writer.write(step, step_metrics(step))
    log_dir = tmp_path / "tensorboard"
    assert scalars(log_dir, "reward/mean") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert scalars(log_dir, "actor/policy_loss") == [(1, -0.125), (2, -0.25), (3, -0.375)]
    assert scalars(log_dir, "policy_version") == [(1, 1.0), (2, 2.0), (3, 3.0)]


def test_tensorboard_off_writes_no_events(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(1, {"x": 1.0})
    assert not (tmp_path / "tensorboard").exists()


def test_resume_drops_steps_after_the_checkpoint_in_the_file_and_in_tensorboard(tmp_path):
    killed, uninterrupted = tmp_path / "killed", tmp_path / "uninterrupted"
    # The killed run logged steps 1..5, was cut while writing step 6, and its checkpoint is at step 3.
    with MetricsWriter(killed) as writer:
        for step in range(1, 6):
            writer.write(step, {**step_metrics(step), "reward/mean": 100.0 + step})  # values the rerun must replace
    with (killed / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "wall_time": 1.0, "rew')
    # Steps 1..3 as logged before the kill, then the resumed run's 4..6.
    with MetricsWriter(killed, resume_step=3) as writer:
        assert writer.last_step == 3
        for step in range(4, 7):
            writer.write(step, step_metrics(step))
    with MetricsWriter(uninterrupted, tensorboard=False) as writer:
        for step in range(1, 7):
            writer.write(
                step, {**step_metrics(step), "reward/mean": 100.0 + step} if step <= 3 else step_metrics(step)
            )

    assert without_wall_time(killed / "metrics.jsonl") == without_wall_time(uninterrupted / "metrics.jsonl")
    assert [r["reward/mean"] for r in read_metrics(killed)] == [101.0, 102.0, 103.0, 1.0, 1.25, 1.5]
    # TensorBoard: the old run's steps 4 and 5 are purged, the rerun's 4..6 follow steps 1..3.
    assert scalars(killed / "tensorboard", "reward/mean") == [
        (1, 101.0),
        (2, 102.0),
        (3, 103.0),
        (4, 1.0),
        (5, 1.25),
        (6, 1.5),
    ]


def test_resume_from_zero_starts_over_and_resume_without_a_file_starts_fresh(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(1, {"x": 1.0})
    with MetricsWriter(tmp_path, tensorboard=False, resume_step=0) as writer:
        assert writer.last_step is None
        writer.write(1, {"x": 2.0})
    assert without_wall_time(tmp_path / "metrics.jsonl") == [{"step": 1, "x": 2.0}]
    with MetricsWriter(tmp_path / "new", tensorboard=False, resume_step=4) as writer:
        writer.write(5, {"x": 3.0})
    assert [r["step"] for r in read_metrics(tmp_path / "new")] == [5]


def test_a_new_run_refuses_a_directory_with_metrics(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as writer:
        writer.write(1, {"x": 1.0})
    with pytest.raises(FileExistsError, match="resume_step"):
        MetricsWriter(tmp_path, tensorboard=False)
    with pytest.raises(ValueError, match="resume_step must be >= 0"):
        MetricsWriter(tmp_path, tensorboard=False, resume_step=-1)


def test_a_killed_process_keeps_every_completed_step(tmp_path):
    # Fault injection: the process kills itself with SIGKILL (no close, no exit handlers) after 3 steps.
    program = textwrap.dedent(
        f"""
        import os, signal
        from trainer.metrics import MetricsWriter
        writer = MetricsWriter({str(tmp_path)!r}, tensorboard=False)
        for step in (1, 2, 3):
            writer.write(step, {{"reward/mean": step / 4}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, timeout=60, check=False)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()
    assert [(r["step"], r["reward/mean"]) for r in read_metrics(tmp_path)] == [(1, 0.25), (2, 0.5), (3, 0.75)]


def test_a_truncated_last_line_is_skipped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "x": 1.0}\n{"step": 2, "x": 2.0}\n{"step": 3, "x"')
    assert [r["step"] for r in read_metrics(path)] == [1, 2]
    # a complete last record that only lacks its newline is kept
    path.write_text('{"step": 1, "x": 1.0}\n{"step": 2, "x": 2.0}')
    assert [r["step"] for r in read_metrics(path)] == [1, 2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"step": 1}\n{"step": 2, "x\n{"step": 3}\n', r"metrics.jsonl:2: not a JSON line"),
        ('{"step": 1}\n{"step": 2}\n{"step": 3, "x\n', r"metrics.jsonl:3: not a JSON line"),  # has its newline
        ('{"step": 1}\n\n[1, 2]\n', r"metrics.jsonl:3: not a metrics record"),
        ('{"step": "1"}\n', r"metrics.jsonl:1: not a metrics record"),
    ],
)
def test_corruption_before_the_last_line_names_the_line(tmp_path, text, message):
    (tmp_path / "metrics.jsonl").write_text(text)
    with pytest.raises(ValueError, match=message):
        read_metrics(tmp_path)


def test_resume_refuses_a_corrupt_file(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2"):
        MetricsWriter(tmp_path, tensorboard=False, resume_step=1)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\nnot json\n{"step": 2}\n'  # untouched


def test_missing_file_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="run directory"):
        read_metrics(tmp_path)


def test_missing_optional_loggers_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` raise ImportError
    with pytest.raises(ImportError, match=r'pip install "turngym\[logging\]"'):
        MetricsWriter(tmp_path / "a", tensorboard=False, wandb=WandbOptions())
    with MetricsWriter(tmp_path / "b", tensorboard=False, wandb=WandbOptions(mode="disabled")) as writer:
        writer.write(1, {"x": 1.0})  # disabled: wandb is never imported
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ImportError, match="pip install tensorboard"):
        MetricsWriter(tmp_path / "c")


def test_wandb_mode_is_checked():
    with pytest.raises(ValueError, match="online"):
        WandbOptions(mode="cloud")
