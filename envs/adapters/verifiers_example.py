"""A small verifiers v1 taskset and env: multiplication with up to three tries, built in code (no dataset hub).

The default environment of the ``verifiers`` adapter, and an example of the v1 module convention:
``__all__`` exports one ``vf.Taskset`` subclass (configured by its ``vf.TasksetConfig`` subclass) and
one ``vf.Env`` subclass (the multi-turn control flow). Each task asks for a product of two numbers;
the answer goes in ``<answer>...</answer>``; a wrong answer is told to try again, until
``max_tries`` answers are given. Rewards: ``correct_answer`` (1 when the last answer is the product)
weighted 1.0 and ``fewer_tries`` (1 / tries when correct) weighted 0.5: a first-try solution scores
1.5. A ``@vf.stop`` ends the exchange at the right answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf

__all__ = ["MultiplicationEnv", "MultiplicationTaskset"]

SYSTEM_PROMPT = "Multiply the two numbers. Think if you like, then give the product as <answer>number</answer>."
RETRY = "That is not the product. Try again: <answer>number</answer>."
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


def parse_answer(text: str) -> str | None:
    """The last ``<answer>`` of a reply, stripped; ``None`` without one."""
    found = _ANSWER.findall(text[-4096:])
    return found[-1] if found else None


class MultiplicationConfig(vf.TasksetConfig):
    num_examples: int = 50
    seed: int = 0


class MultiplicationData(vf.TaskData):
    answer: str


class MultiplicationTask(vf.Task[MultiplicationData, vf.State, vf.TaskConfig]):
    @vf.stop
    async def answered_correctly(self, trace: vf.Trace) -> bool:
        return parse_answer(trace.last_reply) == self.data.answer

    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        return 1.0 if parse_answer(trace.last_reply) == self.data.answer else 0.0

    @vf.reward(weight=0.5)
    async def fewer_tries(self, trace: vf.Trace) -> float:
        tries = trace.num_turns
        return 1.0 / tries if tries and parse_answer(trace.last_reply) == self.data.answer else 0.0


class MultiplicationTaskset(vf.Taskset[MultiplicationTask, MultiplicationConfig]):
    def load(self) -> Iterator[MultiplicationTask]:
        draw = random.Random(self.config.seed)
        for i in range(self.config.num_examples):
            a, b = draw.randint(2, 99), draw.randint(2, 99)
            data = MultiplicationData(
                name=f"multiply#{i}", prompt=f"What is {a} * {b}?", system_prompt=SYSTEM_PROMPT, answer=str(a * b)
            )
            yield MultiplicationTask(data, self.config.task)


class MultiplicationEnvConfig(vf.EnvConfig):
    solver: vf.AgentConfig = vf.AgentConfig()
    max_tries: int = 3


class MultiplicationEnv(vf.Env[MultiplicationEnvConfig]):
    async def run(self, task, agents):
        async with agents.solver.interaction(task) as exchange:
            segment = await exchange.turn()
            for _ in range(self.config.max_tries - 1):
                if segment.terminated:
                    break
                segment = await exchange.turn(RETRY)
