"""The progress of ``python -m agents.eval``: a live bar on a terminal, plain lines elsewhere.

On a terminal a rich bar on standard error redraws after every episode. Off a terminal (a CI log, a
pipe, ``nohup``) a bar would print nothing useful, so one line is printed when the evaluation starts,
then after every ``max(1, episodes // 10)`` finished episodes, and at least every ``interval_s``
seconds (30) while episodes are running, even when none has finished:

    eval: 32 episodes of sokoban, 16 at a time
    eval 4/32  success 1/4  elapsed 41s
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["EvalProgress"]

HEARTBEAT_S = 30.0


class EvalProgress:
    """Counts finished episodes and shows them (see the module docstring); ``enabled=False`` shows nothing.

    Use as a context manager; call :meth:`advance` per finished episode and :meth:`heartbeat` whenever
    :attr:`wait_s` passes without one. ``stream`` (default standard error) and ``clock`` are replaceable.
    """

    def __init__(
        self,
        total: int,
        title: str,
        *,
        enabled: bool = True,
        stream: IO[str] | None = None,
        interval_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.title, self.enabled = total, title, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self.every = max(1, total // 10)
        self.clock = clock
        self.done = self.successes = 0
        self._bar: Any = None
        self._started = self._last_line = clock()
        self._last_line_done = 0

    @property
    def wait_s(self) -> float | None:
        """How long to wait for the next episode before calling :meth:`heartbeat` (``None``: no heartbeat)."""
        if not self.enabled or self._bar is not None:
            return None
        return max(0.0, self._last_line + self.interval_s - self.clock())

    def __enter__(self) -> EvalProgress:
        if not self.enabled:
            return self
        if self.stream.isatty():
            self._start_bar()
        else:
            self._print(f"eval: {self.title}")
        return self

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("[bold]eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=Console(file=self.stream),
            transient=False,
        )
        self._task = self._bar.add_task("eval", total=self.total, status="")
        self._bar.start()

    def advance(self, success: bool) -> None:
        self.done += 1
        self.successes += bool(success)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1, status=f"success {self.successes}/{self.done}")
        elif self.done - self._last_line_done >= self.every or self.done == self.total or self.wait_s == 0:
            self._print(self.line())

    def heartbeat(self) -> None:
        """Print the line again if ``interval_s`` passed since the last one (episodes are still running)."""
        if self.wait_s == 0:
            self._print(self.line())

    def line(self) -> str:
        elapsed = round(self.clock() - self._started)
        minutes, seconds = divmod(elapsed, 60)
        shown = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
        return f"eval {self.done}/{self.total}  success {self.successes}/{self.done}  elapsed {shown}"

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
        self._last_line = self.clock()
        self._last_line_done = self.done

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
