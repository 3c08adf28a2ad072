"""Progress display: formatting by value, plain lines off a terminal, the live bar on one."""

from __future__ import annotations

import math
import re
from io import StringIO

import pytest
from rich.console import Console

from trainer.progress import ProgressDisplay, format_duration, progress_line

METRICS = {
    "reward/mean": 0.4123,
    "reward/success_rate": 0.125,
    "throughput/tokens_per_s": 310.4,
    "time/step_s": 41.23,
    "critic/value_loss": 0.5,  # not shown
}


class Clock:
    """Seconds that advance only when a test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (45.4, "45s"),
        (59.6, "1m00s"),  # rounds to 60 s
        (680, "11m20s"),  # 11 * 60 + 20
        (3599.4, "59m59s"),
        (7500, "2h05m"),  # 2 * 3600 + 5 * 60
        (3 * 86400 + 4 * 3600 + 10, "3d04h"),
        (math.nan, "-"),
        (math.inf, "-"),
        (-1.0, "-"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_progress_line_shows_the_main_metrics():
    # 0.4123 -> "0.41"; 0.125 -> 12.5%; 310.4 -> "310"; 41.23 -> "41.2s"; 680 s -> 11m20s
    line = progress_line(3, 20, METRICS, 680.0)
    assert line == "step 3/20  reward 0.41  success 12.5%  tok/s 310  step 41.2s  eta 11m20s"
    line = progress_line(3, 20, METRICS, 680.0, elapsed_s=123.0)
    assert line == "step 3/20  reward 0.41  success 12.5%  tok/s 310  step 41.2s  elapsed 2m03s  eta 11m20s"


def test_progress_line_leaves_out_what_is_missing_and_shows_nan():
    assert progress_line(1, 2, {}, None) == "step 1/2"
    assert progress_line(2, 2, {"reward/mean": math.nan, "time/step_s": 2.0}, 0.0) == (
        "step 2/2  reward nan  step 2.0s  eta 0s"
    )


def plain_console() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=200), out


def test_plain_lines_off_a_terminal_with_eta_from_the_mean_step_time():
    console, out = plain_console()
    clock = Clock()
    with ProgressDisplay(4, console=console, clock=clock) as progress:
        clock.now += 10  # step 1 took 10 s: eta = 10 s * 3 steps left = 30 s
        progress.update(1, METRICS)
        clock.now += 30  # steps 1-2 took 40 s: mean 20 s, eta = 20 s * 2 = 40 s
        progress.update(2, {"reward/mean": 1.0})
    assert out.getvalue().splitlines() == [
        "step 1/4  reward 0.41  success 12.5%  tok/s 310  step 41.2s  elapsed 10s  eta 30s",
        "step 2/4  reward 1.00  elapsed 40s  eta 40s",
    ]


def test_a_resumed_run_estimates_from_its_own_steps():
    console, out = plain_console()
    clock = Clock()
    progress = ProgressDisplay(20, start_step=10, console=console, clock=clock)
    clock.now += 5  # step 11 is the first this process ran: 5 s each, 9 steps left -> 45 s
    progress.update(11, {})
    progress.close()
    assert out.getvalue() == "step 11/20  elapsed 5s  eta 45s\n"
    assert progress.eta_s(10) is None  # no step run yet: unknown


def test_disabled_shows_nothing():
    console, out = plain_console()
    with ProgressDisplay(3, enabled=False, console=console) as progress:
        progress.update(1, METRICS)
    assert out.getvalue() == ""


def test_a_terminal_gets_a_live_bar():
    out = StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    clock = Clock()
    with ProgressDisplay(20, console=console, clock=clock) as progress:
        clock.now += 60  # 3 steps in 60 s: 20 s each, 17 left -> 340 s = 5m40s
        progress.update(3, METRICS)
    text = out.getvalue()
    assert "\x1b[" in text  # cursor control: the bar redraws in place
    assert "step 3/20" in text
    assert "reward 0.41  success 12.5%  tok/s 310  step 41.2s  eta 5m40s" in text
    assert "━" in text  # the bar itself


def test_a_narrow_terminal_keeps_the_step_and_bar_whole_and_cuts_the_figures():
    out = StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    with ProgressDisplay(120, console=console, clock=Clock()) as progress:
        progress.update(3, METRICS)
    frames = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).replace("\r", "\n").splitlines()
    last = [frame for frame in frames if frame.strip()][-1]
    # rich shrank every column before, the step count first: "ste… reward 0.41 ..."
    assert re.fullmatch(r"step 3/120 +╸ +0:00:00 reward 0\.41  success 12\.5%.*…", last.rstrip()), last
    assert len(last.rstrip()) <= 80


@pytest.mark.parametrize(
    ("total", "start", "message"), [(0, 0, "total_steps"), (5, 6, "start_step"), (5, -1, "start")]
)
def test_bad_arguments_are_refused(total, start, message):
    with pytest.raises(ValueError, match=message):
        ProgressDisplay(total, start_step=start, console=plain_console()[0])
