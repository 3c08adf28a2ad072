"""Faults a run notices between steps: steps in which every group failed, and restarts of the engine actor.

:class:`FaultWatch` is plain bookkeeping (tests drive it directly); the loop calls it once per step
and whenever it reads the engine's counters.

* Every dropped group's first error is logged (``trainer`` logger: the console and ``train.log``):
  one warning per distinct error naming its groups, and one line per group in ``train.log``.
* A step in which every group failed trains nothing. After ``trainer.max_failed_steps`` such steps
  in a row :meth:`FaultWatch.after_step` raises :class:`RunFailedError` with the first error of the
  streak: an environment that raises on every step, or a dead sandbox, stops the run instead of
  writing checkpoints of an untrained model.
* Ray restarts a dead ``hf`` engine actor (``engine.max_restarts``); each restart built a new
  engine with a new instance id. :meth:`FaultWatch.engine_instance` counts the changes
  (``engine/restarts`` in the metrics, cumulative over this process) and logs a warning for each.
  Once they are used up, a dead engine stops the run: :func:`engine_died_message` is its one line.
* With ``engine.placement=colocated`` the engine runs in the actor's learner process, which Ray does not
  restart (the trained weights and the optimizer's state die with it). ``trainer.run`` starts a new one from
  the run's last checkpoint instead and plays the steps after it again (:func:`trainer.components.restart_colocated`),
  up to ``engine.max_restarts`` times: :meth:`FaultWatch.colocated_died` counts them (``learner/restarts``,
  cumulative over this process), logs a warning for each, and once they are used up raises
  :class:`RunFailedError` with :func:`engine_died_message`'s line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from agents.cli import one_line
from trainer.rollout_records import RolloutResult

__all__ = ["FaultWatch", "RunFailedError", "dropped_group_errors", "engine_died_message"]

log = logging.getLogger("trainer.faults")

DEADLINE_ERROR = "the collect deadline passed first (rollout.collect_timeout_s)"
RAY_LOGS = "/tmp/ray/session_latest/logs"  # a local Ray's logs; each worker's output and why it died
GROUPS_SHOWN = 4


class RunFailedError(RuntimeError):
    """The run cannot go on; the message is one line saying why (``trainer.run`` prints it and exits 1)."""


def engine_died_message(colocated: bool = False, max_restarts: int | None = None) -> str:
    """Why a run stops when its engine died and is restarted no more (``engine.max_restarts``, ``max_restarts`` if
    given, used up); ``colocated``: the engine ran in the actor's learner process (:mod:`trainer.colocated`),
    which the run itself restarts from its last checkpoint."""
    limit = "engine.max_restarts" if max_restarts is None else f"engine.max_restarts={max_restarts}"
    if colocated:
        return (
            "the actor's process, which also ran the engine (engine.placement=colocated), died and is restarted no "
            f"more ({limit} used up; raise it to survive more deaths): continue from the last checkpoint with "
            f"trainer.resume=true; why it died (out of memory?) is in the Ray logs in {RAY_LOGS}"
        )
    return (
        f"the engine actor died and Ray restarts it no more ({limit} used up; raise it to survive more "
        f"deaths); why it died (out of memory?) is in the Ray logs in {RAY_LOGS}"
    )


def dropped_group_errors(result: RolloutResult) -> dict[str, str]:
    """Each dropped group's first error (one line), by group id, in the order the groups were dropped."""
    first: dict[str, str] = {}
    for trajectory in result.failed:
        first.setdefault(trajectory.group_id, one_line(trajectory.error or "unknown error"))
    return {group_id: first.get(group_id, DEADLINE_ERROR) for group_id in result.dropped_group_ids}


@dataclass
class FaultWatch:
    """Counts failed steps and engine restarts (module docstring); ``max_failed_steps=0`` never stops a run."""

    max_failed_steps: int = 2
    log_path: Path | None = None  # named in the error that stops a run
    failed_steps: int = 0  # consecutive steps in which every group failed
    first_error: str | None = None  # of the current streak of failed steps
    engine_restarts: int = 0
    max_engine_restarts: int | None = None  # how many Ray allows; with engine.placement=colocated, the run
    learner_restarts: int = 0  # of the colocated actor, from the last checkpoint (colocated_died)
    _engine_instance: str | None = None

    def after_step(self, step: int, result: RolloutResult) -> None:
        """Log the step's dropped groups; raise :class:`RunFailedError` after too many failed steps in a row."""
        errors = dropped_group_errors(result)
        _log_dropped(step, errors, len(result.groups) + len(errors))
        if result.groups:
            self.failed_steps, self.first_error = 0, None
            return
        self.failed_steps += 1
        if self.first_error is None:
            self.first_error = next(iter(errors.values()), "no group was requested")
        if self.max_failed_steps and self.failed_steps >= self.max_failed_steps:
            where = f"; the run's log: {self.log_path}" if self.log_path is not None else ""
            raise RunFailedError(
                f"every group failed in {self.failed_steps} steps in a row (trainer.max_failed_steps="
                f"{self.max_failed_steps}), so the run stopped; first error: {self.first_error}{where}"
            )

    def engine_instance(self, instance_id: str) -> bool:
        """Note the engine actor's instance id; True (one more restart counted and logged) when it changed."""
        previous, self._engine_instance = self._engine_instance, instance_id
        if previous is None or previous == instance_id:
            return False
        self.engine_restarts += 1
        allowed = f" of at most engine.max_restarts={self.max_engine_restarts}" if self.max_engine_restarts else ""
        log.warning(
            "the engine actor died and Ray restarted it (restart %d%s; out of memory? see the Ray logs in "
            "%s); it gets the learner's weights again",
            self.engine_restarts,
            allowed,
            RAY_LOGS,
        )
        return True

    def colocated_died(self, checkpoint_step: int | None) -> None:
        """Count a restart of the dead colocated actor from the checkpoint of ``checkpoint_step`` (``None``: no
        checkpoint yet, the run's initial policy) and log it; raise :class:`RunFailedError` when none is left.

        The restarted run starts afresh as a resumed one does: no streak of failed steps, and the new engine's
        instance id is its first (not an engine actor's restart).
        """
        allowed = self.max_engine_restarts or 0
        if self.learner_restarts >= allowed:
            raise RunFailedError(engine_died_message(colocated=True, max_restarts=allowed))
        self.learner_restarts += 1
        self.failed_steps, self.first_error, self._engine_instance = 0, None, None
        start = "the run's initial policy" if checkpoint_step is None else f"the checkpoint of step {checkpoint_step}"
        log.warning(
            "the actor's process, which also ran the engine (engine.placement=colocated), died: restarting it from "
            "%s and playing step %d on again (restart %d of at most engine.max_restarts=%d; out of memory? see the "
            "Ray logs in %s)",
            start,
            (checkpoint_step or 0) + 1,
            self.learner_restarts,
            allowed,
            RAY_LOGS,
        )


def _log_dropped(step: int, errors: dict[str, str], requested: int) -> None:
    by_error: dict[str, list[str]] = {}
    for group_id, error in errors.items():
        by_error.setdefault(error, []).append(group_id)
        log.debug("step %d: group %s dropped: %s", step, group_id, error)
    for error, groups in by_error.items():
        shown = ", ".join(groups[:GROUPS_SHOWN]) + (
            f" and {len(groups) - GROUPS_SHOWN} more" if len(groups) > 4 else ""
        )
        log.warning("step %d: %d of %d groups dropped: %s (groups %s)", step, len(groups), requested, error, shown)
