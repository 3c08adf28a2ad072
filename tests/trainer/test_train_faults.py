"""What a run notices between steps (:mod:`trainer.faults`) and how it says so (:mod:`trainer.console`).

Plain bookkeeping, no Ray: the end-to-end versions (an environment that always raises, a SIGKILLed
engine actor or colocated actor) are in ``test_train_run.py`` and ``test_train_signals.py``.
"""

from __future__ import annotations

import logging
import sys

import pytest

from agents.trajectory import Trajectory
from trainer.checkpoint import discard_checkpoints_after, latest_checkpoint, mark_complete
from trainer.console import open_run_log, run_console
from trainer.faults import DEADLINE_ERROR, FaultWatch, RunFailedError, dropped_group_errors
from trainer.progress import progress_line
from trainer.rollout_records import RolloutResult


def failed(group_id: str, error: str) -> Trajectory:
    return Trajectory(env_id="e", seed=0, group_id=group_id, termination="error", error=error)


def all_failed(*group_ids: str, error: str = "RuntimeError: boom") -> RolloutResult:
    return RolloutResult(failed=[failed(g, error) for g in group_ids], dropped_group_ids=list(group_ids))


def one_complete() -> RolloutResult:
    return RolloutResult(groups=[[Trajectory(env_id="e", seed=0, group_id="ok")]])


def test_each_dropped_group_keeps_its_first_error_and_a_deadline_drop_says_so():
    result = RolloutResult(
        groups=[[Trajectory(env_id="e", seed=0, group_id="g0")]],
        failed=[
            failed("g0", "ValueError: retried, then fine"),  # a group that completed after a retry
            failed("g1", "RuntimeError: first\n  second line"),
            failed("g1", "RuntimeError: later"),
        ],
        dropped_group_ids=["g1", "g2"],
    )
    assert dropped_group_errors(result) == {"g1": "RuntimeError: first second line", "g2": DEADLINE_ERROR}


def test_the_run_stops_after_max_failed_steps_in_a_row_with_the_first_error(tmp_path):
    watch = FaultWatch(max_failed_steps=2, log_path=tmp_path / "train.log")
    watch.after_step(1, all_failed("a", error="OSError: old streak"))
    watch.after_step(2, one_complete())  # a step that trains ends the streak
    watch.after_step(3, all_failed("b", error="RuntimeError: no sandbox"))
    with pytest.raises(RunFailedError) as caught:
        watch.after_step(4, all_failed("c", error="RuntimeError: other"))
    assert str(caught.value) == (
        "every group failed in 2 steps in a row (trainer.max_failed_steps=2), so the run stopped; "
        f"first error: RuntimeError: no sandbox; the run's log: {tmp_path / 'train.log'}"
    )


def test_max_failed_steps_0_never_stops():
    watch = FaultWatch(max_failed_steps=0)
    for step in range(1, 6):
        watch.after_step(step, all_failed(f"g{step}"))
    assert watch.failed_steps == 5


def test_dropped_groups_are_logged_once_per_error_on_the_console_and_per_group_in_the_file(tmp_path, capsys):
    groups = [f"sokoban/{i}/{i}" for i in range(6)]
    result = all_failed(*groups, error="RuntimeError: boom")
    result.failed.append(failed("other/9/9", "KeyError: 'x'"))
    result.dropped_group_ids.append("other/9/9")
    result.groups = [[Trajectory(env_id="e", seed=0, group_id="ok")]]
    with run_console(verbose=False):
        close = open_run_log(tmp_path)
        FaultWatch().after_step(3, result)
        close()
    assert capsys.readouterr().err.splitlines() == [
        "turngym: warning: step 3: 6 of 8 groups dropped: RuntimeError: boom "
        "(groups sokoban/0/0, sokoban/1/1, sokoban/2/2, sokoban/3/3 and 2 more)",
        "turngym: warning: step 3: 1 of 8 groups dropped: KeyError: 'x' (groups other/9/9)",
    ]
    log = (tmp_path / "train.log").read_text()
    for group in [*groups, "other/9/9"]:
        assert f"step 3: group {group} dropped: " in log
    assert "WARNING trainer.faults: step 3: 6 of 8 groups dropped" in log


def test_an_engine_restart_is_counted_and_said(capsys):
    watch = FaultWatch(max_engine_restarts=3)
    with run_console(verbose=False):
        assert not watch.engine_instance("a")  # the first look
        assert not watch.engine_instance("a")
        assert watch.engine_instance("b")
        assert watch.engine_instance("c")
    assert watch.engine_restarts == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[1].startswith(
        "turngym: warning: the engine actor died and Ray restarted it (restart 2 of at most engine.max_restarts=3"
    )


def test_a_colocated_actors_restart_is_counted_and_said_until_none_is_left(capsys):
    watch = FaultWatch(max_engine_restarts=2)
    watch.after_step(1, all_failed("a"))  # a streak of failed steps, and the dead actor's engine seen
    watch.engine_instance("old")
    with run_console(verbose=False):
        watch.colocated_died(None)
        watch.colocated_died(4)
    assert watch.learner_restarts == 2 and watch.failed_steps == 0 and watch.first_error is None
    assert not watch.engine_instance("new")  # the new actor's engine is its first, not an engine actor's restart
    assert watch.engine_restarts == 0
    assert capsys.readouterr().err.splitlines() == [
        "turngym: warning: the actor's process, which also ran the engine (engine.placement=colocated), died: "
        f"restarting it from {start} and playing step {step} on again (restart {n} of at most engine.max_restarts=2; "
        "out of memory? see the Ray logs in /tmp/ray/session_latest/logs)"
        for n, start, step in [(1, "the run's initial policy", 1), (2, "the checkpoint of step 4", 5)]
    ]
    with pytest.raises(RunFailedError) as caught:
        watch.colocated_died(6)
    assert str(caught.value) == (
        "the actor's process, which also ran the engine (engine.placement=colocated), died and is restarted no more "
        "(engine.max_restarts=2 used up; raise it to survive more deaths): continue from the last checkpoint with "
        "trainer.resume=true; why it died (out of memory?) is in the Ray logs in /tmp/ray/session_latest/logs"
    )
    assert watch.learner_restarts == 2


def test_going_back_to_a_checkpoint_discards_the_save_a_death_cut_short(tmp_path):
    for step in (1, 2, 3):
        (tmp_path / "checkpoints" / f"step_00000{step}" / "actor").mkdir(parents=True)
        if step < 3:
            mark_complete(tmp_path / "checkpoints" / f"step_00000{step}")
    assert latest_checkpoint(tmp_path).name == "step_000002"
    discard_checkpoints_after(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000001", "step_000002"]
    discard_checkpoints_after(tmp_path / "no-run", 0)  # nothing to discard


def test_start_up_lines_show_only_with_progress_and_the_console_goes_away_after_the_run(capsys):
    log = logging.getLogger("trainer.run")
    with run_console(verbose=True):
        log.info("starting Ray (local, 8 logical CPUs)")
    with run_console(verbose=False):
        log.info("not shown")
    err = capsys.readouterr().err
    assert err.startswith("turngym: [") and err.endswith("s] starting Ray (local, 8 logical CPUs)\n")
    assert err.count("\n") == 1
    assert not [h for h in logging.getLogger("trainer").handlers if getattr(h, "stream", None) is sys.stderr]


def test_a_step_that_dropped_groups_says_so_on_its_progress_line():
    metrics = {"rollout/groups_dropped": 8.0, "rollout/groups_requested": 8.0, "time/step_s": 0.04}
    assert progress_line(1, 10, metrics, None) == "step 1/10  dropped 8/8 groups  step 0.0s"
    assert progress_line(1, 10, {"rollout/groups_dropped": 0.0, "time/step_s": 1.0}, None) == "step 1/10  step 1.0s"
