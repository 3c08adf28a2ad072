"""reasoning-gym datasets as turngym environments: one question per episode, answered once or with retries.

reasoning-gym (``pip install reasoning-gym==0.1.25``, pinned) generates reasoning problems procedurally
(about a hundred datasets: arithmetic, algebra, logic, games, graphs, ARC, ...), each with a verifier.
One dataset (``dataset="basic_arithmetic"``, with its options in ``config={...}``) becomes one
:class:`ReasoningGymEnv`:

* Seeds. ``reset(seed=s)`` plays the question reasoning-gym generates for seed ``s`` (its dataset built
  with ``seed=s, size=1``, entry 0): the same seed gives the same question on any machine with the pinned
  version. Without a seed the generator seed is drawn from ``self.np_random``. Generation (and scoring)
  runs with Python's and NumPy's global random states seeded from the generator seed and restored
  afterwards, because a few generators draw from them (``list_functions``, say).
* Observations. The first is the dataset's question; later ones are the verifier's feedback.
* Actions. The answer is read leniently (:func:`extract_answer`): the content of the last
  ``<answer>...</answer>`` block, else (unless ``require_answer_tag``) the last non-empty line, without
  an ``Answer:`` prefix; reasoning before a closing ``</think>`` is ignored. Text with no readable answer
  (empty, an unmatched tag, an unclosed ``<think>``, control characters, more than ``max_answer_chars``)
  is a format failure: reward ``-format_penalty``, ``info["action_is_valid"]`` False.
* Rewards. The dataset's own ``score_answer`` (a float in [0, 1]; an exception inside it, which some
  verifiers raise on malformed text, scores 0). The reward of a turn is how much the best score of the
  episode improved, so the return is the best score, never a sum over retries.
* Episode end. A score of at least ``success_threshold`` ends it with ``success``. ``max_turns`` is the
  number of answers allowed (1: single-turn); as in the code environment the attempts are part of the
  task, so the last one ends the episode as ``terminated``. Before that, the observation gives the score
  and asks for another answer (the correct answer is never revealed).
* Oracle: the dataset's answer (``entry["answer"]``) in answer tags; ``None`` for datasets without a
  single answer (their verifier checks a solution: ``rush_hour``, ``graph_color``, ...).

``scripts/reasoning_gym_offline_datasets.py`` tries every dataset and writes the list of those that run
offline to ``envs/adapters/data/reasoning_gym_offline.json``.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import random
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

import numpy as np

from envs.core import StepOutcome, TextEnv

__all__ = [
    "BROKEN_VERIFIERS",
    "REASONING_GYM_INSTALL",
    "REASONING_GYM_VERSION",
    "AnswerParse",
    "ReasoningGymEnv",
    "UnavailableDatasetError",
    "dataset_names",
    "extract_answer",
    "generate_entry",
]

REASONING_GYM_VERSION = "0.1.25"
REASONING_GYM_INSTALL = f"pip install reasoning-gym=={REASONING_GYM_VERSION}"

_RECENT_QUESTIONS = 16  # generated (dataset object, entry) pairs kept per environment, by generator seed
_ANSWER_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:=]?\s*", re.IGNORECASE)


#: Datasets whose verifier in the pinned version cannot tell a right answer from a wrong one: refused.
BROKEN_VERIFIERS = {
    "game_of_life_halting": "its score_answer compares bool(answer) with bool(entry['answer']), and both answers "
    "('True', 'False') are non-empty strings, so every non-empty answer scores 1",
}


class UnavailableDatasetError(RuntimeError):
    """A reasoning-gym dataset cannot be used here; ``kind`` is ``"generation"`` or ``"broken_verifier"``."""

    def __init__(self, message: str, kind: str = "generation") -> None:
        super().__init__(message)
        self.kind = kind


def import_reasoning_gym() -> ModuleType:
    """``reasoning_gym`` at the pinned version (its ``__version__`` string lags, so the distribution is checked)."""
    try:
        found = metadata.version("reasoning-gym")
    except metadata.PackageNotFoundError as exc:
        raise ImportError(f"the reasoning-gym adapter needs reasoning-gym: {REASONING_GYM_INSTALL}") from exc
    if found != REASONING_GYM_VERSION:
        raise ImportError(
            f"the reasoning-gym adapter is pinned to reasoning-gym {REASONING_GYM_VERSION}, found {found}: "
            f"{REASONING_GYM_INSTALL}"
        )
    import reasoning_gym

    return reasoning_gym


def dataset_names() -> list[str]:
    """Every dataset reasoning-gym registers, sorted."""
    import_reasoning_gym()
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


@contextlib.contextmanager
def seeded_global_random(seed: int) -> Iterator[None]:
    """Seed Python's and NumPy's global random states with ``seed`` inside the block; restore them afterwards."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def generate_entry(dataset: str, config: Mapping[str, Any] | None, seed: int) -> tuple[Any, dict[str, Any]]:
    """``(dataset object, entry)``: the question reasoning-gym generates for ``seed`` (entry 0 of size 1)."""
    import_reasoning_gym()
    from reasoning_gym.factory import create_dataset

    options = dict(config or {})
    if dataset == "composite" and options.get("datasets"):
        from reasoning_gym.composite import DatasetSpec

        options["datasets"] = [DatasetSpec(**d) if isinstance(d, Mapping) else d for d in options["datasets"]]
    with seeded_global_random(seed):
        generator = create_dataset(dataset, **options, seed=seed, size=1)
        return generator, generator[0]


@dataclass(frozen=True)
class AnswerParse:
    """The answer read from a model's text, or ``None`` with ``error`` saying why none could be read."""

    answer: str | None
    error: str = ""


def extract_answer(text: str, *, tag: str = "answer", require_tag: bool = False, max_chars: int = 4096) -> AnswerParse:
    """The final answer in ``text`` (see the module docstring); linear in the length of ``text``, never raises."""
    body = text
    think_end = _last_match(re.compile(r"</think\s*>", re.IGNORECASE), body)
    if think_end is not None:
        body = body[think_end.end() :]
    elif re.search(r"<think\s*>", body, re.IGNORECASE):
        return AnswerParse(None, "the <think> block is never closed; close it with </think> before the answer")
    close = _last_match(re.compile(rf"</{re.escape(tag)}\s*>", re.IGNORECASE), body)
    opening = _last_match(re.compile(rf"<{re.escape(tag)}\s*>", re.IGNORECASE), body[: close.start()] if close else "")
    if close is not None and opening is not None:
        candidate = body[opening.end() : close.start()].strip()
    elif re.search(rf"</?{re.escape(tag)}\s*>", body, re.IGNORECASE):
        return AnswerParse(None, f"unmatched <{tag}> tag; write the answer as <{tag}>...</{tag}>")
    elif require_tag:
        return AnswerParse(None, f"no <{tag}>...</{tag}> block")
    else:
        lines = [line for line in body.splitlines() if line.strip()]
        candidate = _ANSWER_PREFIX.sub("", lines[-1]).strip() if lines else ""
    if not candidate:
        return AnswerParse(None, "the answer is empty")
    if len(candidate) > max_chars:
        return AnswerParse(None, f"the answer is longer than {max_chars} characters")
    if any(unicodedata.category(c) == "Cc" and c not in "\n\t\r" for c in candidate):
        return AnswerParse(None, "the answer contains control characters")
    return AnswerParse(candidate)


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text):  # noqa: B007  (the loop keeps the last match)
        pass
    return last


class ReasoningGymEnv(TextEnv):
    """A reasoning-gym dataset: one generated question per episode, scored by the dataset's verifier.

    Args:
        dataset: a reasoning-gym dataset name, e.g. ``"basic_arithmetic"``, ``"knights_knaves"``, ``"maze"``.
        config: the dataset's configuration options (difficulty and the like), without ``seed`` and ``size``.
        max_turns: answers allowed per episode (1: single-turn; ``None``: until solved); the last one
            terminates the episode (module docstring).
        format_penalty: subtracted from the reward of a turn without a readable answer.
        answer_tag: the answer is read from ``<answer_tag>...</answer_tag>``.
        require_answer_tag: without the tag, a turn is a format failure (else the last line is the answer).
        max_answer_chars: a longer answer is a format failure.
        success_threshold: a score at least this solves the question.
        render_mode: ``"ansi"`` or ``None``.

    Info keys besides the standard ones: ``dataset``, ``generator_seed``, ``score`` (this turn's),
    ``best_score``; ``score_error`` when the verifier raised.
    """

    def __init__(
        self,
        *,
        dataset: str = "basic_arithmetic",
        config: Mapping[str, Any] | None = None,
        max_turns: int | None = 1,
        format_penalty: float = 0.1,
        answer_tag: str = "answer",
        require_answer_tag: bool = False,
        max_answer_chars: int = 4096,
        success_threshold: float = 1.0,
        render_mode: str | None = "ansi",
    ) -> None:
        # The base class's turn limit truncates; here the attempts end the task itself (module docstring).
        super().__init__(max_turns=None, format_penalty=format_penalty, render_mode=render_mode)
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer or None, got {max_turns!r}")
        if not answer_tag or not re.fullmatch(r"[A-Za-z_][\w-]*", answer_tag):
            raise ValueError(f"answer_tag must be a tag name such as 'answer', got {answer_tag!r}")
        if max_answer_chars < 1 or not 0.0 < success_threshold <= 1.0:
            raise ValueError("max_answer_chars must be positive and success_threshold in (0, 1]")
        if config is not None and {"seed", "size"} & set(config):
            raise ValueError("config may not set seed or size: the reset's seed chooses the question")
        self.dataset = str(dataset)
        self.config = dict(config or {})
        self.max_attempts = max_turns
        self.answer_tag = answer_tag
        self.require_answer_tag = bool(require_answer_tag)
        self.max_answer_chars = int(max_answer_chars)
        self.success_threshold = float(success_threshold)
        self.instructions = _instructions(answer_tag, max_turns)
        self.action_format = f"reasoning, then <{answer_tag}>your final answer</{answer_tag}>"
        self._check_dataset()
        self._recent: OrderedDict[int, tuple[Any, dict[str, Any]]] = OrderedDict()
        self._requested_seed: int | None = None
        self.generator_seed = 0
        self._generator, self.entry = self._generate(0)
        self._best_score = 0.0
        self._last_answer: str | None = None

    def _check_dataset(self) -> None:
        names = dataset_names()
        if self.dataset not in names:
            close = difflib.get_close_matches(self.dataset, names, n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown reasoning-gym dataset {self.dataset!r}.{hint} The datasets are listed in "
                "envs/adapters/data/reasoning_gym_offline.json"
            )
        if self.dataset in BROKEN_VERIFIERS:
            raise UnavailableDatasetError(
                f"reasoning-gym {REASONING_GYM_VERSION}'s dataset {self.dataset!r} gives no usable reward: "
                f"{BROKEN_VERIFIERS[self.dataset]}",
                kind="broken_verifier",
            )

    def _generate(self, seed: int) -> tuple[Any, dict[str, Any]]:
        # A few datasets load data files whenever they are built (arc_agi: about a second); groups of episodes
        # that share a seed (GRPO) reuse the question generated for it.
        if seed in self._recent:
            self._recent.move_to_end(seed)
            return self._recent[seed]
        try:
            generated = generate_entry(self.dataset, self.config, seed)
        except Exception as exc:  # a dataset that needs a download or rejects its config: say which and why
            raise UnavailableDatasetError(
                f"reasoning-gym dataset {self.dataset!r} (config {self.config}) cannot generate a question here: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self._recent[seed] = generated
        if len(self._recent) > _RECENT_QUESTIONS:
            self._recent.popitem(last=False)
        return generated

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._requested_seed = seed  # the generator seed is the reset's seed itself (module docstring)
        return super().reset(seed=seed, options=options)

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        seed = self._requested_seed
        self.generator_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else int(seed)
        self._generator, self.entry = self._generate(self.generator_seed)
        self._best_score, self._last_answer = 0.0, None
        return str(self.entry["question"]), {"dataset": self.dataset, "generator_seed": self.generator_seed}

    def _step(self, action: str) -> StepOutcome:
        last = self.max_attempts is not None and self.turn + 1 >= self.max_attempts
        left = None if self.max_attempts is None else self.max_attempts - self.turn - 1
        info: dict[str, Any] = {"dataset": self.dataset, "generator_seed": self.generator_seed}
        parsed = extract_answer(
            action, tag=self.answer_tag, require_tag=self.require_answer_tag, max_chars=self.max_answer_chars
        )
        if parsed.answer is None:
            info.update(score=0.0, best_score=self._best_score)
            observation = f"No answer could be read: {parsed.error}.{_retry_text(left, self.answer_tag)}"
            metrics = {"score": 0.0, "best_score": self._best_score}
            return StepOutcome(observation, terminated=last, action_is_valid=False, metrics=metrics, extra_info=info)
        self._last_answer = parsed.answer
        score, error = self._score(parsed.answer)
        improvement = max(0.0, score - self._best_score)
        self._best_score = max(self._best_score, score)
        solved = score >= self.success_threshold
        info.update(score=score, best_score=self._best_score)
        if error:
            info["score_error"] = error
        if solved:
            observation = f"Correct (score {score:.2f})."
        else:
            observation = f"Your answer scored {score:.2f} (1.00 is correct).{_retry_text(left, self.answer_tag)}"
        return StepOutcome(
            observation,
            reward=improvement,
            terminated=solved or last,
            success=solved,
            metrics={"score": score, "best_score": self._best_score},
            extra_info=info,
        )

    def _score(self, answer: str) -> tuple[float, str]:
        """The verifier's score clipped to [0, 1], and the error it raised ("" if none; it then scores 0)."""
        try:
            with seeded_global_random(self.generator_seed):
                value = float(self._generator.score_answer(answer, self.entry))
        except Exception as exc:  # a verifier that raises on malformed text: a wrong answer, not a crash
            return 0.0, f"{type(exc).__name__}: {str(exc)[:200]}"
        return (min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.0), ""

    def render_text(self, color: bool = False) -> str:
        header = f"reasoning-gym {self.dataset}, generator seed {self.generator_seed}, turn {self.turn}"
        if color:
            header = f"\x1b[1m{header}\x1b[0m"
        answer = "none yet" if self._last_answer is None else self._last_answer[:200]
        return f"{header}\n{self.entry['question']}\nLast answer: {answer}\nBest score: {self._best_score:.2f}"

    def oracle(self) -> list[str] | None:
        if self.episode_over:
            return []
        answer = self.entry.get("answer")
        if answer is None:
            return None
        return [f"<{self.answer_tag}>{answer}</{self.answer_tag}>"]


def _retry_text(left: int | None, tag: str) -> str:
    if left == 0:
        return " No attempts left."
    attempts = "" if left is None else f" ({left} attempt{'s' if left != 1 else ''} left)"
    return f" Try again{attempts}: reply with your final answer in <{tag}>...</{tag}>."


def _instructions(tag: str, max_turns: int | None) -> str:
    text = (
        "Solve the problem in the user's message. You may reason step by step first; then give only the final "
        f"answer, in exactly the format the problem asks for, inside <{tag}>...</{tag}>, "
        f"e.g. <{tag}>42</{tag}>."
    )
    if max_turns is None or max_turns > 1:
        limit = "until it is correct" if max_turns is None else f"up to {max_turns} answers in all"
        text += f" A wrong answer is scored (1.00 is correct) and you may answer again, {limit}."
    return text
