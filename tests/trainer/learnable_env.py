"""A trivially learnable environment for the training tests: reward = the share of digits in the answer.

Each of ``turns`` turns asks for "digits"; the turn's reward is the fraction of the answer's
non-space characters that are digits (0 for an empty answer). A random tiny model writes about one
digit in six characters, and a policy gradient can raise that within a few steps: the reward must
rise. Several turns exercise the multi-turn masks (observation gaps between turns).

Nothing registers at import: :func:`register` does it (the training tests pass it as the rollout's
``setup``, so it runs in every environment actor).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any

import envs
from envs.core import StepOutcome, TextEnv

ENV_ID = "digits-test"


def digit_share(text: str) -> float:
    characters = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in characters) / len(characters) if characters else 0.0


class DigitsEnv(TextEnv):
    instructions = "Write digits."
    action_format = "digits"

    def __init__(self, turns: int = 2) -> None:
        super().__init__(max_turns=turns, format_penalty=0.0)
        self.turns = turns

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return f"Turn 1 of {self.turns}: digits please.", {}

    def _step(self, action: str) -> StepOutcome:
        reward = digit_share(action)
        finished = self.turn + 1 >= self.turns  # self.turn counts the steps before this one
        return StepOutcome(
            f"Turn {self.turn + 2} of {self.turns}: digits please.",
            reward=reward,
            terminated=finished,
            success=finished and reward >= 0.5,
        )

    def render_text(self, color: bool = False) -> str:
        return f"turn {self.turn} of {self.turns}"


class StatefulDigitsEnv(DigitsEnv):
    """DigitsEnv that reports its state (``state_key`` = the turn, ``distance_to_goal`` = the turns left) and
    takes ``reset(options={"difficulty": d})``: an episode of ``d`` turns, ``difficulty_range`` 1 to ``turns``."""

    def __init__(self, turns: int = 3) -> None:
        super().__init__(turns)
        self.max_turns_setting, self.length = turns, turns

    @property
    def difficulty_range(self) -> tuple[int, int]:
        return 1, self.max_turns_setting

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self.length = int(options.get("difficulty", self.max_turns_setting))
        if not 1 <= self.length <= self.max_turns_setting:
            raise ValueError(f"difficulty must lie in [1, {self.max_turns_setting}], got {self.length}")
        self.turns = self.length
        observation, info = super()._reset(options)
        return observation, {**info, "state_key": "turn0", "distance_to_goal": self.length}

    def _step(self, action: str) -> StepOutcome:
        outcome = super()._step(action)
        state = {"state_key": f"turn{self.turn + 1}", "distance_to_goal": self.length - self.turn - 1}
        return dataclasses.replace(outcome, extra_info={**outcome.extra_info, **state})


STATEFUL_ID = "digits-state-test"


def register() -> None:
    with contextlib.suppress(ValueError):  # already registered in this process
        envs.register(ENV_ID, DigitsEnv)
    with contextlib.suppress(ValueError):
        envs.register(STATEFUL_ID, StatefulDigitsEnv)


class CrashingEnv(DigitsEnv):
    """Every step raises: every episode ends in ``error`` and every group is dropped."""

    def _step(self, action: str) -> StepOutcome:
        raise RuntimeError("this environment always crashes")


CRASHING_ID = "crashing-test"


def register_crashing() -> None:
    register()
    with contextlib.suppress(ValueError):
        envs.register(CRASHING_ID, CrashingEnv)


class CueEnv(TextEnv):
    """One turn: the observation names a side ("left" or "right", drawn by the seed); answering that word
    wins (reward 1, success). A random tiny model never writes either word; after supervised fine-tuning on
    the oracle's episodes it should answer every cue. The oracle answers the cue."""

    instructions = "Answer with the side you are shown."
    action_format = "left | right"

    def __init__(self) -> None:
        super().__init__(max_turns=1, format_penalty=0.0)
        self.side = "left"

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self.side = ("left", "right")[int(self.np_random.integers(2))]
        return f"Side: {self.side}", {}

    def _step(self, action: str) -> StepOutcome:
        won = action.strip() == self.side
        return StepOutcome("Done.", reward=float(won), terminated=True, success=won)

    def render_text(self, color: bool = False) -> str:
        return self.side

    def oracle(self) -> list[str] | None:
        return [] if self.episode_over else [self.side]


CUE_ID = "cue-test"


def register_cue() -> None:
    with contextlib.suppress(ValueError):
        envs.register(CUE_ID, CueEnv)


def register_all() -> None:
    register()
    register_cue()
