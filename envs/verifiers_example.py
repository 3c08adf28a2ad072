"""A small verifiers environment (classic API): multiplication with up to three tries, built offline.

The default environment of the ``verifiers`` adapter and an example of the ``load_environment``
convention: a module (or an installed package) exposing ``load_environment(**env_args)`` that returns
a ``verifiers.MultiTurnEnv``. Each row asks for a product of two numbers; the answer goes in
``<answer>...</answer>``; a wrong answer is told to try again, until ``max_turns`` answers are given.
The rubric: ``correct_answer`` (1 when the last answer equals the product) weighted 1.0 and
``fewer_tries`` (1 / tries when correct) weighted 0.5, so a first-try solution scores 1.5.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["load_environment"]

SYSTEM_PROMPT = "Multiply the two numbers. Think if you like, then give the product as <answer>number</answer>."


def load_environment(num_examples: int = 50, max_turns: int = 3, seed: int = 0) -> Any:
    """The multiplication environment: ``num_examples`` rows drawn with ``seed``, ``max_turns`` tries each."""
    import verifiers as vf
    from datasets import Dataset

    rows = []
    draw = random.Random(seed)
    for _ in range(num_examples):
        a, b = draw.randint(2, 99), draw.randint(2, 99)
        rows.append({"question": f"What is {a} * {b}?", "answer": str(a * b)})
    parser = vf.XMLParser(["answer"])

    def correct_answer(completion: Any, answer: str, **kwargs: Any) -> float:
        return 1.0 if parser.parse_answer(completion) == answer else 0.0

    async def fewer_tries(completion: Any, answer: str, state: Any, **kwargs: Any) -> float:
        tries = len(state["trajectory"])
        return 1.0 / tries if tries and parser.parse_answer(completion) == answer else 0.0

    rubric = vf.Rubric(funcs=[correct_answer, fewer_tries], weights=[1.0, 0.5], parser=parser)
    return _MultiplicationEnv(
        dataset=Dataset.from_list(rows),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        pass_threshold=1.0,
    )


def _environment_class() -> type:
    import verifiers as vf

    class MultiplicationEnv(vf.MultiTurnEnv):
        """Tells a wrong answer to try again; stops at the right one."""

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            return [vf.UserMessage(content="That is not the product. Try again: <answer>number</answer>.")]

        @vf.stop
        async def answered_correctly(self, state: Any) -> bool:
            if not state["trajectory"]:
                return False
            return self.parser.parse_answer(state["trajectory"][-1]["completion"]) == state["answer"]

    return MultiplicationEnv


def _MultiplicationEnv(**kwargs: Any) -> Any:
    return _environment_class()(**kwargs)
