"""A minimal third-party environment package for turngym.

It declares three entry points in the ``turngym.envs`` group (see pyproject.toml): an environment
class, a function registering two variants of it, and one that is broken on purpose.
"""

from __future__ import annotations

from typing import Any

import envs
from envs.actions import parse_actions


class CountdownEnv(envs.TextEnv):
    """Count down from a number to zero by answering the next number each turn."""

    instructions = "Count down to zero. Each turn, answer with the next smaller number."
    action_format = "a number, e.g. 4"

    def __init__(
        self,
        *,
        start: int = 3,
        max_turns: int | None = 10,
        format_penalty: float = 0.1,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        self.start = start
        self.value = start

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.value = self.start + int(self.np_random.integers(0, 3))
        return f"The number is {self.value}.", {"value": self.value}

    def _step(self, action: str) -> envs.StepOutcome:
        numbers = [str(n) for n in range(self.value)]
        parsed = parse_actions(action, numbers, max_actions=1)
        if not parsed.is_valid or int(parsed.actions[0]) != self.value - 1:
            return envs.StepOutcome(f"Wrong. The number is {self.value}.", action_is_valid=parsed.is_valid)
        self.value -= 1
        done = self.value == 0
        return envs.StepOutcome(
            f"The number is {self.value}.",
            reward=1.0 if done else 0.0,
            terminated=done,
            success=done,
            extra_info={"value": self.value},
        )

    def render_text(self, color: bool = False) -> str:
        return f"\x1b[1m{self.value}\x1b[0m" if color else str(self.value)

    def oracle(self) -> list[str]:
        return [str(n) for n in range(self.value - 1, -1, -1)]


def register_all() -> None:
    envs.register("countdown-long", CountdownEnv, start=10, max_turns=20)
    envs.register("countdown-short", CountdownEnv, gym_id="example/CountdownShort-v1", start=1)
