"""``agents.eval`` and ``agents.play`` stopped by SIGTERM (``kill``, a scheduler ending the job), in subprocesses.

A stopped command closes what it started (the engine, the environments) and exits with 143 after one line on
standard error, whatever it was doing: loading the model, playing episodes, waiting before an action.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STOPPED = "turngym: error: stopped by SIGTERM"


def start(tmp_path: Path, module: str, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", module, *overrides],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"},
    )


def wait_for_file(path: Path, process: subprocess.Popen, timeout_s: float, *, nonempty: bool) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and (path.stat().st_size > 0 or not nonempty)):
        assert process.poll() is None, f"the command exited early: {process.communicate()}"
        if time.monotonic() > deadline:
            pytest.fail(f"no {path} after {timeout_s} s")
        time.sleep(0.2)


def stop(process: subprocess.Popen) -> tuple[str, str]:
    """SIGTERM ``process``; its exit code must be 143; returns its standard output and error."""
    process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err[-3000:]
    return out, err


def test_sigterm_stops_agents_play_while_a_scripted_agent_plays(tmp_path):
    out_file = tmp_path / "episodes.jsonl"
    play = start(
        tmp_path, "agents.play", "env=frozenlake", "agent=random", "episodes=1000", "delay=0.2", "seed=0",
        f"out={out_file}", "color=false",
    )  # fmt: skip
    wait_for_file(out_file, play, timeout_s=60, nonempty=True)  # an episode is over, the next ones play
    _, err = stop(play)
    assert err == STOPPED + "\n"
    lines = out_file.read_text().splitlines()
    assert 0 < len(lines) < 1000


def test_sigterm_stops_agents_play_early(tmp_path):
    """Just after start-up (its first line printed), while the first action's delay runs: the same exit."""
    play = start(tmp_path, "agents.play", "env=frozenlake", "agent=random", "episodes=5", "delay=1")
    assert play.stdout.readline(), "agents.play printed nothing"  # the header: the command is past its start-up
    _, err = stop(play)
    assert err == STOPPED + "\n"


def test_sigterm_stops_agents_eval_of_a_model_and_exits_143(tmp_path):
    out_file = tmp_path / "eval.jsonl"
    evaluation = start(
        tmp_path, "agents.eval", "env=sokoban", "agent=hf", "model=tiny", "episodes=2000", "concurrency=2",
        "max_new_tokens=16", "progress=false", f"out={out_file}",
    )  # fmt: skip
    wait_for_file(out_file, evaluation, timeout_s=120, nonempty=False)  # written once the model is loaded
    time.sleep(1.0)  # episodes play
    _, err = stop(evaluation)
    assert err == STOPPED + "\n"
    assert len(out_file.read_text().splitlines()) < 2000  # what it played is kept


@pytest.mark.parametrize("after_s", [0.2, 0.4, 0.7])
def test_sigterm_during_start_up_is_one_line_or_the_plain_signal_before_python_runs(tmp_path, after_s):
    """While the interpreter starts, imports the command and Hydra composes its config. Before the command's
    first line of Python (the interpreter's own start, about 0.05 s on an idle machine) nothing is started and
    nothing handles the signal yet: the process ends with -15. From there on: 143 and one line, no traceback
    (Hydra interrupted mid-compose raises an error of its own: it counts as the stop)."""
    play = start(tmp_path, "agents.play", "env=frozenlake", "agent=random", "episodes=5", "delay=1")
    time.sleep(after_s)
    play.send_signal(signal.SIGTERM)
    _, err = play.communicate(timeout=60)
    if play.returncode == -signal.SIGTERM:
        assert err == ""
    else:
        assert (play.returncode, err) == (143, STOPPED + "\n")
