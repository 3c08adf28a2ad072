"""``TeacherEngine``: an engine that answers every turn with a teacher's text, as token ids.

It lets a scripted agent (an environment's oracle, above all) play through the same episode loop
as a model, so the resulting :class:`~agents.trajectory.Trajectory` has exactly the token ids,
masks and turn boundaries a model's episode would have: the supervised warm-up
(:mod:`trainer.sft`) trains on these. Each turn's ids are :meth:`agents.chat.ChatRenderer.assistant_ids`
of the teacher's text (the content, then the end-of-turn token); their logprobs are 0 (the teacher
is deterministic: probability 1).

One engine per episode: the teacher reads the environment's current state when the loop asks for
the next turn (the loop steps the environment only after ``generate`` returns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents.engines.base import EngineStats, Generation, SamplingParams, WeightSync
from envs.core import TextEnv

__all__ = ["TeacherEngine"]


class TeacherEngine:
    """Serves ``teacher(env)`` as the sampled ids of each turn (contract: module docstring).

    A turn longer than ``sampling.max_new_tokens`` is cut there with ``finish_reason == "length"``,
    as a model's would be. A teacher that raises ends the episode in error (the loop records it).
    """

    name = "teacher"
    weight_sync: WeightSync = "none"

    def __init__(self, env: TextEnv, renderer: Any, teacher: Callable[[TextEnv], str]) -> None:
        self.env, self.renderer, self.teacher = env, renderer, teacher
        self._stats = EngineStats()

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        ids = self.renderer.assistant_ids(self.teacher(self.env))
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        self._stats.requests += 1
        self._stats.prompt_tokens += len(input_ids)
        self._stats.generated_tokens += len(ids)
        return Generation(tuple(ids), (0.0,) * len(ids), finish, prompt_tokens=len(input_ids))

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        raise TypeError("a TeacherEngine has no weights to update")

    def stats(self) -> EngineStats:
        return self._stats

    async def stats_async(self) -> EngineStats:
        return self._stats

    async def instance_async(self) -> str:
        return f"teacher-{id(self):x}"

    async def close(self) -> None:
        return None
