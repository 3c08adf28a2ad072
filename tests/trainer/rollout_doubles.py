"""Test doubles for rollout: a character renderer, a fixed-answer engine and fault-injecting environments.

Ray workers cannot import this file (tests/trainer is not on their path), so the Ray tests register
it with ``ray.cloudpickle.register_pickle_by_value``: its classes and functions travel by value.
:func:`register_test_envs` is the ``setup`` the rollout manager runs in every environment actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import envs
from agents.engines.base import EngineStats, Generation, SamplingParams
from envs.core import StepOutcome, TextEnv

STOP = 1  # the renderer's end-of-turn token
ACTION_LOGPROB = -1.0


class CharRenderer:
    """One token per character (id = code point): prompt ``S:<system>|U:<user>|A:``, then ``|U:<obs>|A:`` per turn."""

    stop_token_ids = (STOP,)

    @staticmethod
    def encode(text: str) -> list[int]:
        return [ord(c) for c in text]

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        return self.encode(f"S:{messages[0]['content']}|U:{messages[1]['content']}|A:")

    def continuation_ids(self, history, new_messages, sampled_ids, finish_reason) -> list[int]:
        glue = [] if sampled_ids and sampled_ids[-1] == STOP else [STOP]
        return glue + self.encode("".join(f"|U:{m['content']}" for m in new_messages) + "|A:")

    def decode_action(self, sampled_ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in sampled_ids if i != STOP)


class FixedEngine:
    """Answers every request with ``action`` + STOP, logprob -1.0 per token, after ``delay_s`` seconds.

    ``max_concurrent`` records the most requests it had in flight at once.
    """

    name = "fixed"
    weight_sync = "state_dict"

    def __init__(self, action: str = "right", delay_s: float = 0.0) -> None:
        self.action = action
        self.delay_s = delay_s
        self.requests = 0
        self.in_flight = 0
        self.max_concurrent = 0
        self.version = 0

    async def generate(self, input_ids, sampling: SamplingParams, affinity_key=None) -> Generation:
        self.requests += 1
        self.in_flight += 1
        self.max_concurrent = max(self.max_concurrent, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        ids = [ord(c) for c in self.action] + [STOP]
        ids = ids[: sampling.max_new_tokens]
        finish = "stop" if ids[-1] == STOP else "length"
        return Generation(tuple(ids), (ACTION_LOGPROB,) * len(ids), finish, prompt_tokens=len(input_ids))

    async def update_weights(self, state_dict, policy_version: int) -> None:
        self.version = policy_version

    def stats(self) -> EngineStats:
        extra = {"max_concurrent": float(self.max_concurrent)}
        return EngineStats(requests=self.requests, policy_version=self.version, extra=extra)

    async def stats_async(self) -> EngineStats:
        return self.stats()

    async def instance_async(self) -> str:
        return "fixed"

    async def close(self) -> None:
        pass


class CounterEnv(TextEnv):
    """Observation ``n=<k>`` where k starts at the seed's draw in [0, 1000); terminates after ``turns`` steps.

    ``step_sleep_s`` makes each step take that long (in the worker's env thread).
    """

    instructions = "Say anything."
    action_format = "any text"

    def __init__(self, turns: int = 2, step_sleep_s: float = 0.0, max_turns: int | None = None) -> None:
        super().__init__(max_turns=max_turns)
        self.turns = turns
        self.step_sleep_s = step_sleep_s
        self.value = 0

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self.value = int(self.np_random.integers(0, 1000))
        return f"n={self.value}", {}

    def _step(self, action: str) -> StepOutcome:
        time.sleep(self.step_sleep_s)
        self.fault()
        self.value += 1
        done = self.turn + 1 >= self.turns
        return StepOutcome(f"n={self.value}", reward=1.0 if done else 0.0, terminated=done, success=done)

    def fault(self) -> None:
        """Subclasses inject their failure here."""

    def render_text(self, color: bool = False) -> str:
        return f"n={self.value}"


class RaisingEnv(CounterEnv):
    """Raises on every step."""

    def fault(self) -> None:
        raise RuntimeError("injected step failure")


class HangingEnv(CounterEnv):
    """Blocks every step for ``hang_s`` seconds (far beyond the tests' step timeout)."""

    def __init__(self, hang_s: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hang_s = hang_s

    def fault(self) -> None:
        threading.Event().wait(self.hang_s)


class FlakyEnv(CounterEnv):
    """Raises on the first step of the first episode of each seed, in any process (a marker file in ``marker_dir``)."""

    def __init__(self, marker_dir: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.marker_dir = marker_dir
        self.seed = -1

    def reset(self, *, seed: int | None = None, options: Any = None):
        self.seed = -1 if seed is None else seed
        return super().reset(seed=seed, options=options)

    def fault(self) -> None:
        if self.turn > 0:
            return
        try:  # O_EXCL: exactly one episode per seed creates the marker, on any actor
            os.close(os.open(Path(self.marker_dir) / f"seed-{self.seed}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        raise RuntimeError(f"injected first-time failure for seed {self.seed}")


class CrashingEnv(CounterEnv):
    """Ends its whole process on the first step, as a segfaulting extension or the OOM killer would."""

    def fault(self) -> None:
        os._exit(17)


class BrokenConstructorEnv(CounterEnv):
    def __init__(self, **kwargs: Any) -> None:
        raise OSError("injected constructor failure")


TEST_ENVS = {
    "test-counter": CounterEnv,
    "test-raising": RaisingEnv,
    "test-hanging": HangingEnv,
    "test-flaky": FlakyEnv,
    "test-broken-constructor": BrokenConstructorEnv,
    "test-crashing": CrashingEnv,
}


def failing_setup() -> None:
    raise RuntimeError("injected setup failure")


def register_test_envs() -> None:
    """Register the test environments in this process (once; later calls do nothing)."""
    for env_id, cls in TEST_ENVS.items():
        with contextlib.suppress(ValueError):  # registered by an earlier call in this process
            envs.register(env_id, cls)
