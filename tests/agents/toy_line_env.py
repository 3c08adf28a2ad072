"""A tiny TextEnv for the agents tests: walk left or right along a line to a goal.

The play CLI tests call :func:`register` in a subprocess (``toy-line`` and ``toy-line-no-oracle``),
which also exercises the fallback to ``env/registered.yaml``. Nothing registers at import, so the
test process's registry (which tests/envs checks env by env) holds only real environments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import envs
from envs.core import StepOutcome, TextEnv

MOVES = {"left": -1, "right": +1}


class ToyLineEnv(TextEnv):
    """The player ``P`` starts at 0 on a line of ``length`` cells; the goal ``G`` is drawn by the seed.

    Reward 1 on reaching the goal (terminated, success); an unknown word is an invalid action.
    """

    instructions = "Walk to G. Answer with left or right."
    action_format = "left | right"

    def __init__(self, length: int = 6, max_turns: int | None = 20, format_penalty: float = 0.1) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty)
        if length < 2:
            raise ValueError(f"length must be >= 2, got {length}")
        self.length = length
        self.position = 0
        self.goal = 1

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self.position = 0
        self.goal = int(self.np_random.integers(1, self.length))
        return f"Board:\n{self.render_text()}", {"goal": self.goal}

    def _step(self, action: str) -> StepOutcome:
        move = MOVES.get(action.strip().lower())
        if move is None:
            return StepOutcome(f"Invalid action {action!r}. Answer with left or right.", action_is_valid=False)
        self.position = min(max(self.position + move, 0), self.length - 1)
        solved = self.position == self.goal
        return StepOutcome(
            f"Board:\n{self.render_text()}",
            reward=1.0 if solved else 0.0,
            terminated=solved,
            success=solved,
            metrics={"distance": float(abs(self.goal - self.position))},
        )

    def render_text(self, color: bool = False) -> str:
        cells = ["."] * self.length
        cells[self.goal] = "\x1b[32mG\x1b[0m" if color else "G"
        cells[self.position] = "\x1b[33mP\x1b[0m" if color else "P"
        return "".join(cells)

    def oracle(self) -> list[str] | None:
        step = "right" if self.goal > self.position else "left"
        return [step] * abs(self.goal - self.position)

    def valid_actions(self) -> list[str] | None:
        return list(MOVES)


class ToyLineNoOracleEnv(ToyLineEnv):
    """The same line without an oracle or a list of valid actions."""

    oracle = TextEnv.oracle
    valid_actions = TextEnv.valid_actions


def register() -> None:
    """Register both toy environments once per process (without loading the plugins, as a user's import would not)."""
    for env_id, cls in (("toy-line", ToyLineEnv), ("toy-line-no-oracle", ToyLineNoOracleEnv)):
        with contextlib.suppress(ValueError):  # already registered by an earlier import in this process
            envs.register(env_id, cls)
