"""A single-turn verifiers v1 taskset for the adapter's tests (loaded by its plain id, ``v1_capitals``)."""

from __future__ import annotations

import asyncio
import re

import verifiers.v1 as vf

__all__ = ["CapitalsTaskset"]

ROWS = [("Capital of France?", "Paris"), ("Capital of Italy?", "Rome")]


def answer_of(text: str) -> str:
    found = re.findall(r"<answer>(.*?)</answer>", text)
    return found[-1].strip() if found else ""


class CapitalsConfig(vf.TasksetConfig):
    bonus: float = 0.5


class CapitalsData(vf.TaskData):
    answer: str
    bonus: float


class CapitalsTask(vf.Task[CapitalsData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def exact(self, trace: vf.Trace) -> float:
        await asyncio.sleep(0)  # a real coroutine: scoring must await it
        return 1.0 if answer_of(trace.last_reply) == self.data.answer else 0.0

    @vf.reward
    async def short_answer(self, trace: vf.Trace) -> dict:
        # keyed scores; the bonus rides in the score because a decorator's weight is fixed at import
        return {"short_answer": self.data.bonus if 0 < len(answer_of(trace.last_reply)) <= 5 else 0.0}

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class CapitalsTaskset(vf.Taskset[CapitalsTask, CapitalsConfig]):
    def load(self):
        for question, answer in ROWS:
            data = CapitalsData(
                prompt=question, system_prompt="Answer in <answer></answer>.", answer=answer, bonus=self.config.bonus
            )
            yield CapitalsTask(data, self.config.task)
