"""What the judge is given and what it gives back: :class:`JudgeConfig` in, :class:`CaseResult` and
:class:`TestReport` out.

Plain records shared by :mod:`envs.code.runners` (which drives the judging) and :mod:`envs.code.judge_jobs`
(which computes each case's verdict); this module imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CASE_STATUSES", "CaseResult", "JudgeConfig", "RewardMode", "TestReport"]

RewardMode = Literal["all", "fraction"]
CASE_STATUSES = ("passed", "wrong_answer", "error", "timeout", "output_limit", "not_run", "sandbox")


@dataclass(frozen=True)
class JudgeConfig:
    """Limits and comparison settings for judging.

    ``case_timeout_s``: wall time per case (the harness kills the case's process group).
    ``total_timeout_s``: wall time for all cases of one run; cases that would start after it are ``not_run``.
    ``memory_mb``: address space per process in the sandbox. ``max_output_bytes``: captured bytes per
    case and stream. ``message_chars``: verdict messages (expected/got, traceback tails) are clipped to
    about this many characters per part.
    """

    case_timeout_s: float = 4.0
    total_timeout_s: float = 30.0
    memory_mb: int = 1024
    max_output_bytes: int = 1 << 20
    message_chars: int = 300

    def __post_init__(self) -> None:
        for name in ("case_timeout_s", "total_timeout_s", "memory_mb", "max_output_bytes", "message_chars"):
            if not getattr(self, name) > 0:
                raise ValueError(f"JudgeConfig.{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case: ``status`` is one of :data:`CASE_STATUSES`; ``message`` explains a failure."""

    status: str
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class TestReport:
    """Verdicts on every case of a problem, in test order, and how the sandbox runs ended.

    ``tamper``: which signs of touching the judge's protocol the submission showed
    (:func:`envs.code.runners.tamper_signals`); a metric for watching a policy, never part of the verdict.
    """

    cases: tuple[CaseResult, ...]
    sandbox_status: str
    wall_time_s: float
    tamper: dict[str, bool] = field(default_factory=dict)

    @property
    def num_passed(self) -> int:
        return sum(case.passed for case in self.cases)

    @property
    def all_passed(self) -> bool:
        return bool(self.cases) and self.num_passed == len(self.cases)

    @property
    def pass_fraction(self) -> float:
        return self.num_passed / len(self.cases) if self.cases else 0.0

    def reward(self, mode: RewardMode = "all") -> float:
        """1.0 or 0.0 by whether every case passed (``"all"``), or the fraction passed (``"fraction"``)."""
        if mode == "all":
            return 1.0 if self.all_passed else 0.0
        if mode == "fraction":
            return self.pass_fraction
        raise ValueError(f"reward mode must be 'all' or 'fraction', got {mode!r}")
