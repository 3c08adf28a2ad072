"""``trainer.run`` and ``trainer.sft`` stopped by SIGTERM (``kill``, a scheduler ending the job), and a run whose
engine died for good, end to end in subprocesses.

A stopped command must close what it started (the engine, the learner, the environment actors, Ray's processes),
at any point (start-up included), and exit with 143 and one line, not abort inside Ray's signal handler with a
stack dump (exit 134). A dead engine (an engine actor, or the colocated actor that runs it) with no restarts left
ends the run with exit 1 and one line.
"""

from __future__ import annotations

import os
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


STOPPED_RUN = "turngym: error: stopped by SIGTERM; continue from the last checkpoint with trainer.resume=true"


def start(tmp_path: Path, module: str, *overrides: str) -> tuple[subprocess.Popen, Path]:
    """``python -m <module> <overrides>`` with its standard output and error together in the returned file."""
    log = tmp_path / "command.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", module, *overrides],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            # its lines in the file as they are printed; every thread's stack there on SIGABRT (a hang's diagnosis)
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
        )
    return process, log


def run_overrides(tmp_path: Path, *more: str) -> list[str]:
    return [
        "env=sokoban",
        "model=tiny",
        "sft.warmup=false",
        "evaluation.enabled=false",
        "trainer.total_steps=1000",
        "trainer.progress=false",
        "rollout.num_env_actors=1",
        f"trainer.run_dir={tmp_path / 'run'}",
        *more,
    ]


def children(process: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(process.pid).children(recursive=True)


def stop_and_check(process: subprocess.Popen, log: Path, last_line: str, started: list[psutil.Process]) -> None:
    """SIGTERM ``process``: it exits 143, its last line is ``last_line``, and every process it had started ends."""
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)  # faulthandler (PYTHONFAULTHANDLER) writes every thread's stack
        process.wait(timeout=30)
        pytest.fail(f"still running 180 s after SIGTERM; its log and stacks:\n{read(log)[-12000:]}")
    assert code == 143, read(log)[-3000:]
    text = read(log)
    assert "SIGTERM received" not in text and "Traceback" not in text  # Ray's abort, or an uncaught exception
    assert text.strip().splitlines()[-1] == last_line
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive if p.is_running()]


def test_sigterm_stops_the_run_closes_everything_it_started_and_exits_143(tmp_path):
    run, log = start(tmp_path, "trainer.run", *run_overrides(tmp_path))
    try:
        wait_for(tmp_path / "run" / "train.log", "started in", run, timeout_s=240)
        time.sleep(2)  # into the first step
        started = children(run)
        assert len(started) >= 3  # Ray's processes, the engine, the learner, an environment actor
        stop_and_check(run, log, STOPPED_RUN, started)
    finally:
        if run.poll() is None:
            run.kill()
    text = read(log)  # and no debris off a terminal: Ray's notice that token authentication is on, progress bars
    assert "Token authentication is enabled" not in text and "%|" not in text and "\r" not in text, text[-3000:]


@pytest.mark.parametrize("phase", ["starting Ray", "starting the engine"])
def test_sigterm_during_the_start_up_closes_what_was_started_and_exits_143(tmp_path, phase):
    """While Ray starts (its handlers replace the run's) and while the engine loads (Ray is up, no loop yet)."""
    run, log = start(tmp_path, "trainer.run", *run_overrides(tmp_path))
    try:
        wait_for(tmp_path / "run" / "train.log", phase, run, timeout_s=240)
        stop_and_check(run, log, STOPPED_RUN, children(run))
    finally:
        if run.poll() is None:
            run.kill()
    assert "started in" not in read(tmp_path / "run" / "train.log")  # it was stopped during the start-up


def test_sigterm_stops_supervised_fine_tuning_and_exits_143(tmp_path):
    sft, log = start(
        tmp_path,
        "trainer.sft",
        "env=sokoban",
        "model=tiny",
        "sft.episodes=64",
        "sft.batch_size=2",
        "sft.epochs=20",
        f"trainer.run_dir={tmp_path / 'sft'}",
    )
    try:
        wait_for(log, "warm-up: step 1/", sft, timeout_s=300)  # Ray, the fine-tuning actor, the first step
        started = children(sft)
        assert len(started) >= 2  # Ray's processes and the fine-tuning actor
        stop_and_check(sft, log, "turngym: error: stopped by SIGTERM", started)
    finally:
        if sft.poll() is None:
            sft.kill()
    assert not (tmp_path / "sft" / "policy" / "COMPLETE").exists()


def actor_process(run: subprocess.Popen, actor_class: str = "EngineHost") -> psutil.Process:
    """The run's actor of ``actor_class`` (Ray names its worker process ``ray::<class>``): the engine by default."""
    for process in children(run):
        try:
            if actor_class in " ".join(process.cmdline()):
                return process
        except psutil.NoSuchProcess:
            continue
    pytest.fail(f"no {actor_class} actor among the run's processes")


def kill_after_step_one(tmp_path: Path, actor_class: str, *overrides: str) -> str:
    """Start a run, SIGKILL its ``actor_class`` actor once step 1 is done (as the out-of-memory killer would), check
    that the run exits 1 without a traceback, and return its last line."""
    run, log = start(tmp_path, "trainer.run", *run_overrides(tmp_path, *overrides))
    try:
        wait_for(tmp_path / "run" / "metrics.jsonl", "\n", run, timeout_s=300)  # step 1 is done
        actor_process(run, actor_class).kill()
        assert run.wait(timeout=180) == 1, read(log)[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    text = read(log)
    assert "Traceback" not in text
    return text.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_dead_engine_with_no_restarts_left_stops_the_run_with_one_line(tmp_path):
    assert kill_after_step_one(tmp_path, "EngineHost", "engine.max_restarts=0") == (
        "turngym: error: the engine actor died and Ray restarts it no more (engine.max_restarts used up; raise it "
        "to survive more deaths); why it died (out of memory?) is in the Ray logs in /tmp/ray/session_latest/logs"
    )


@pytest.mark.slow
def test_a_dead_colocated_actor_with_no_restarts_left_stops_the_run_with_one_line(tmp_path):
    """With LoRA the engine runs in the actor's process (engine.placement=auto): the run restarts it from its last
    checkpoint (tests/trainer/test_train_run.py) while engine.max_restarts allows; with none left it stops with one
    line that says how to continue."""
    assert kill_after_step_one(
        tmp_path, "ColocatedWorker", "model.lora_rank=4", "trainer.checkpoint_every=1", "engine.max_restarts=0"
    ) == (
        "turngym: error: the actor's process, which also ran the engine (engine.placement=colocated), died and is "
        "restarted no more (engine.max_restarts=0 used up; raise it to survive more deaths): continue from the last "
        "checkpoint with trainer.resume=true; why it died (out of memory?) is in the Ray logs in "
        "/tmp/ray/session_latest/logs"
    )
