"""A training run stopped by SIGTERM (``kill``, a scheduler ending the job), end to end in a subprocess.

The run must close what it started (the engine, the learner, the environment actors, Ray's processes) and
exit with 143 and one line, not abort inside Ray's signal handler with a stack dump (exit 134).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.ray


def read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def wait_for(path: Path, text: str, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in read(path):
            return
        assert process.poll() is None, f"the run exited early:\n{read(path)[-3000:]}"
        time.sleep(0.5)
    pytest.fail(f"no {text!r} in {path} after {timeout_s} s:\n{read(path)[-3000:]}")


def test_sigterm_stops_the_run_closes_everything_it_started_and_exits_143(tmp_path):
    log = tmp_path / "run.log"
    command = [
        sys.executable,
        "-m",
        "trainer.run",
        "env=sokoban",
        "model=tiny",
        "sft.warmup=false",
        "evaluation.enabled=false",
        "trainer.total_steps=1000",
        "trainer.progress=false",
        "rollout.num_env_actors=1",
        f"trainer.run_dir={tmp_path / 'run'}",
    ]
    with log.open("w") as out:
        run = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(tmp_path / "run" / "train.log", "started in", run, timeout_s=240)
        time.sleep(2)  # into the first step
        started = psutil.Process(run.pid).children(recursive=True)
        assert len(started) >= 3  # Ray's processes, the engine, the learner, an environment actor
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=120) == 143
    finally:
        if run.poll() is None:
            run.kill()
    text = log.read_text(errors="replace")
    assert "SIGTERM received" not in text  # Ray's abort
    last = text.strip().splitlines()[-1]
    assert last == "turngym: error: stopped by SIGTERM; continue from the last checkpoint with trainer.resume=true"
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive if p.is_running()]
