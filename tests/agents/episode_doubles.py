"""Test doubles for the episode loop: a scripted environment, a scripted engine and a character renderer.

The engine and renderer are deliberately trivial so that every id, mask bit and logprob of a
trajectory can be written down by hand. The real renderer and engines are tested on their own
(test_chat*.py, engines/) and together with the loop in test_episode_integration.py.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agents.engines.base import EngineStats, Generation, SamplingParams
from envs.core import StepOutcome, TextEnv

STOP = 1  # the character renderer's end-of-turn token


class ScriptedEnv(TextEnv):
    """Observation ``o<turn>``; step k (1-based) pays ``rewards[k-1]``; terminates after ``len(rewards)`` steps.

    ``fail_at`` raises on that step; ``hang_at`` blocks that step until ``release`` is set.
    ``observation_chars`` pads observations to make them long.
    """

    instructions = "sys"
    action_format = "anything"

    def __init__(
        self,
        rewards: Sequence[float] = (0.0, 0.5, 1.0),
        fail_at: int | None = None,
        hang_at: int | None = None,
        observation_chars: int = 0,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(max_turns=max_turns)
        self.rewards = list(rewards)
        self.fail_at, self.hang_at = fail_at, hang_at
        self.observation_chars = observation_chars
        self.actions: list[str] = []
        self.release = threading.Event()

    def _observation(self) -> str:
        return f"o{self.turn}" + "x" * self.observation_chars

    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self.actions = []
        return self._observation(), {}

    def _step(self, action: str) -> StepOutcome:
        self.actions.append(action)
        step = len(self.actions)
        if step == self.fail_at:
            raise RuntimeError(f"scripted failure at step {step}")
        if step == self.hang_at:
            self.release.wait(timeout=30)
        done = step >= len(self.rewards)
        return StepOutcome(
            f"o{step}" + "x" * self.observation_chars,
            reward=self.rewards[step - 1],
            terminated=done,
            success=done,
            action_is_valid=action != "bad",
        )

    def render_text(self, color: bool = False) -> str:
        return f"turn {self.turn}"


class CharRenderer:
    """One token per character (id = code point); ``STOP`` ends a turn.

    prompt = ``S:<system>|U:<user>|A:``; continuation = (``STOP`` unless it was sampled) +
    ``|U:<observation>|A:``.
    """

    stop_token_ids = (STOP,)

    @staticmethod
    def encode(text: str) -> list[int]:
        return [ord(c) for c in text]

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        system, user = messages[0]["content"], messages[1]["content"]
        return self.encode(f"S:{system}|U:{user}|A:")

    def continuation_ids(
        self,
        history: Sequence[Mapping[str, str]],
        new_messages: Sequence[Mapping[str, str]],
        sampled_ids,
        finish_reason,
    ) -> list[int]:
        glue = [] if sampled_ids and sampled_ids[-1] == STOP else [STOP]
        return glue + self.encode("".join(f"|U:{m['content']}" for m in new_messages) + "|A:")

    def decode_action(self, sampled_ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in sampled_ids if i != STOP)


class ScriptedEngine:
    """Answers call k with ``script[k]`` = (text, logprob per token, finish_reason); records every request.

    A ``stop`` answer gets ``STOP`` appended (as an engine returns the stop token it sampled); the
    answer is cut to ``max_new_tokens`` (then ``finish_reason`` becomes ``length``). ``values[k]``: the value
    call k gives every token it returns (``Generation.values``), or ``None`` for a generation without values.
    """

    name = "scripted"
    weight_sync = "state_dict"

    def __init__(
        self,
        script: Sequence[tuple[str, float, str]],
        fail_at: int | None = None,
        values: Sequence[float | None] | None = None,
    ) -> None:
        self.script = list(script)
        self.values = values
        self.fail_at = fail_at
        self.requests: list[tuple[list[int], SamplingParams, str | None]] = []
        self.version = 0

    async def generate(self, input_ids, sampling: SamplingParams, affinity_key=None) -> Generation:
        self.requests.append((list(input_ids), sampling, affinity_key))
        call = len(self.requests)
        if call == self.fail_at:
            raise ConnectionError("scripted engine failure")
        text, logprob, finish = self.script[min(call, len(self.script)) - 1]
        ids = [ord(c) for c in text] + ([STOP] if finish == "stop" else [])
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        value = None if self.values is None else self.values[min(call, len(self.values)) - 1]
        values = None if value is None else (value,) * len(ids)
        return Generation(tuple(ids), tuple([logprob] * len(ids)), finish, prompt_tokens=len(input_ids), values=values)

    async def update_weights(self, state_dict, policy_version: int) -> None:
        self.version = policy_version

    def stats(self) -> EngineStats:
        return EngineStats(requests=len(self.requests), policy_version=self.version)

    async def stats_async(self) -> EngineStats:
        return self.stats()

    async def instance_async(self) -> str:
        return "scripted"

    async def close(self) -> None:
        pass
