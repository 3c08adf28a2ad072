"""The progress of a training run on the console: a live bar on a terminal, one plain line per step elsewhere.

    with ProgressDisplay(total_steps=20, start_step=checkpoint_step) as progress:
        for step in range(checkpoint_step + 1, 21):
            ...
            progress.update(step, metrics)

Each update shows the step out of the total, the time elapsed, the estimated time left, the mean
reward, the success rate, the rollout throughput and the step's duration, from the metric names the
training loop logs (``reward/mean``, ``reward/success_rate``, ``throughput/tokens_per_s``,
``time/step_s``); a metric the step did not log is left out. A step that dropped groups says so
first (``dropped 8/8 groups``, from ``rollout/groups_dropped`` and ``rollout/groups_requested``).
The estimate is the mean wall time of the steps this process ran (so a resumed run's restart time
does not distort it) times the steps left.

On a terminal the display is a rich progress bar that redraws in place. Elsewhere (CI logs, pipes,
files) it prints one line per step, such as
``step 3/20  reward 0.41  success 12.5%  tok/s 310  step 41.2s  elapsed 2m03s  eta 11m20s``.
Output goes to standard error unless a console is given.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

__all__ = ["ProgressDisplay", "format_duration", "progress_line"]

#: (metric name, label, format of the value) in the order the line shows them.
_FIELDS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("eval/success_rate", "held-out", lambda v: f"{100 * v:.1f}%"),
    ("eval/success_stderr", "±", lambda v: f"{100 * v:.1f}"),
    ("eval/invalid_action_rate", "held-out invalid", lambda v: f"{100 * v:.1f}%"),
    ("reward/mean", "reward", lambda v: f"{v:.2f}"),
    ("reward/success_rate", "success", lambda v: f"{100 * v:.1f}%"),
    ("episode/invalid_action_rate", "invalid", lambda v: f"{100 * v:.1f}%"),
    ("actor/kl_ref", "kl", lambda v: f"{v:.2g}"),
    ("actor/policy_loss", "loss", lambda v: f"{v:.3f}"),
    ("throughput/tokens_per_s", "tok/s", lambda v: f"{v:.0f}"),
    ("time/step_s", "step", lambda v: f"{v:.1f}s"),
)
#: Metrics a step may not log that the display keeps showing from the step that last did (the held-out figures).
_STICKY = ("eval/success_rate", "eval/success_stderr", "eval/invalid_action_rate")


def format_duration(seconds: float) -> str:
    """A compact duration rounded to the second: ``45s``, ``11m20s``, ``2h05m``, ``3d04h``; ``-`` if unknown.

    Negative and non-finite durations are unknown.
    """
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def progress_line(
    step: int, total: int, metrics: Mapping[str, float], eta_s: float | None, *, elapsed_s: float | None = None
) -> str:
    """The one-line summary of a step: ``step 3/20  reward 0.41  success 12.5%  ...  eta 11m20s``.

    Metrics that are absent are left out; ``elapsed`` and ``eta`` only when given.
    """
    return "  ".join([f"step {step}/{total}", *_stats_parts(metrics, eta_s, elapsed_s)])


def _stats_parts(metrics: Mapping[str, float], eta_s: float | None, elapsed_s: float | None) -> list[str]:
    parts = []
    dropped = float(metrics.get("rollout/groups_dropped", 0.0))
    if dropped:  # a step that trained on fewer groups, or on none, says so first
        parts.append(f"dropped {dropped:.0f}/{float(metrics.get('rollout/groups_requested', dropped)):.0f} groups")
    for key, label, show in _FIELDS:
        if key in metrics:
            value = show(float(metrics[key]))
            if label == "±" and parts:
                parts[-1] += f"±{value}"
            elif label != "±":
                parts.append(f"{label} {value}")
    if elapsed_s is not None:
        parts.append(f"elapsed {format_duration(elapsed_s)}")
    if eta_s is not None:
        parts.append(f"eta {format_duration(eta_s)}")
    return parts


class ProgressDisplay:
    """Shows a run's progress after each step (see the module docstring); ``enabled=False`` shows nothing.

    ``start_step`` is the step a resumed run restarts from (0 for a new run): the first ``update`` is
    for ``start_step + 1``. ``clock`` (seconds, monotonic) is replaceable for tests.
    """

    def __init__(
        self,
        total_steps: int,
        *,
        start_step: int = 0,
        enabled: bool = True,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        if not 0 <= start_step <= total_steps:
            raise ValueError(f"start_step must be between 0 and total_steps ({total_steps}), got {start_step}")
        self.total_steps = total_steps
        self.start_step = start_step
        self.enabled = enabled
        self.console = console if console is not None else Console(stderr=True)
        self._clock = clock
        self._started_at = clock()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._sticky: dict[str, Any] = {}
        if enabled and self.console.is_terminal:
            self._start_bar()

    def _start_bar(self) -> None:
        # One line, whatever the terminal's width: the step count, bar and time keep their width, the figures
        # take what is left and end in an ellipsis where they do not fit (rich shrank every column before,
        # down to "ste…" on 80 columns).
        step_width = len(f"step {self.total_steps}/{self.total_steps}")
        self._progress = Progress(
            TextColumn("step {task.completed:.0f}/{task.total:.0f}", table_column=Column(min_width=step_width)),
            BarColumn(bar_width=20),
            TimeElapsedColumn(table_column=Column(min_width=len("0:00:00"))),
            TextColumn("{task.fields[stats]}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            console=self.console,
            refresh_per_second=2,  # steps take seconds to minutes: redrawing faster only costs CPU
            expand=True,
        )
        self._task = self._progress.add_task("train", total=self.total_steps, completed=self.start_step, stats="")
        self._progress.start()

    def eta_s(self, step: int) -> float | None:
        """Seconds left after ``step``: the mean duration of the steps this process ran times the steps left."""
        steps_run = step - self.start_step
        if steps_run <= 0:
            return None
        return (self._clock() - self._started_at) / steps_run * max(self.total_steps - step, 0)

    def update(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Show the state after ``step`` (counted from 1) with that step's metrics (and the last held-out figures)."""
        if not self.enabled:
            return
        self._sticky.update({k: metrics[k] for k in _STICKY if k in metrics})
        metrics = {**self._sticky, **metrics}
        eta_s = self.eta_s(step)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=step, stats="  ".join(_stats_parts(metrics, eta_s, None)))
            return
        elapsed_s = self._clock() - self._started_at
        line = progress_line(step, self.total_steps, metrics, eta_s, elapsed_s=elapsed_s)
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the live bar, leaving its last state on screen; closing twice is harmless."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
