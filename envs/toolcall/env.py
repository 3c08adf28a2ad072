"""Tool calling as a multi-turn text environment: answer questions about a fictional world with tools.

Each episode is one bundled task (:mod:`envs.toolcall.tasks`): a one- to four-hop question with a
numeric, text or date answer, or a stateful job (bank transfers, inventory changes) scored by the
final state. Tools: ``lookup`` (tables of cities, companies, people, products), ``search`` (BM25
over documents), ``calculator``, ``convert_units``, ``date_calculator``, ``bank`` and ``inventory``;
their schemas are :attr:`ToolCallEnv.tools` (for the chat template's ``tools=``).

A turn is one of:

* tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes/Qwen
  format, read by :func:`tools.parsers.parse_hermes`; calls inside ``<think>`` are ignored), at
  most ``max_calls_per_turn`` run per turn, in order. The observation is one ``tool`` message per
  call (``StepOutcome.observation_messages``), holding the result or the error; an ``<answer>`` in
  the same turn is ignored (a note says so).
* a final answer: ``<answer>...</answer>`` outside tool calls and reasoning. It ends the episode
  (``terminated``); the reward is 1 if correct (:mod:`envs.toolcall.scoring`; for stateful tasks:
  the final state equals the expected one, whatever the answer text), else 0.

Rewards and penalties: each invalid call (malformed, unknown tool, arguments against the schema)
costs ``invalid_call_penalty``; calls over the per-turn limit are not run and cost it once; a call
that runs and fails (an unknown city, a division by zero) costs nothing. A turn with neither a
valid call nor a non-empty answer is invalid: ``format_penalty`` (the base class). ``max_turns``
truncates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from envs.actions import extract_answer
from envs.core import Message, StepOutcome, TextEnv
from envs.toolcall.scoring import answer_is_correct
from envs.toolcall.stateful import BankTool, InventoryTool
from envs.toolcall.tasks import Task, load_tasks, load_world
from envs.toolcall.text import instructions, render_episode
from tools import CalculatorTool, DateTool, Document, LookupTool, SearchTool, ToolBox, UnitTool, render_hermes
from tools.base import Tool, ToolOutcome, tool_schema
from tools.parsers import parse_hermes

__all__ = ["ToolCallEnv", "build_tools"]

_TABLES_DESCRIPTION = (
    "Look up a record of the fictional world by its name. Tables: cities (country, population, area_km2, "
    "elevation_m, founded year), companies (industry, founded date, headquarters city, ceo, employees, "
    "revenue_musd, products), people (born date, city, employer, job, height_cm), products (maker, category, "
    "price_usd, weight_kg, released date). Give field to get one value, or omit it for the whole record."
)
_SEARCH_DESCRIPTION = (
    "Search documents about the cities (landmarks, tallest building, river, yearly festival) and the history "
    "of the companies (founders). Returns the best matching documents with their text."
)


def build_tools(world: Mapping[str, Any]) -> list[Tool]:
    """The environment's tools over ``world`` (as loaded by :func:`~envs.toolcall.tasks.load_world`)."""
    documents = [Document(d["title"], d["text"]) for d in world["documents"]]
    return [
        LookupTool(world["tables"], description=_TABLES_DESCRIPTION),
        SearchTool(documents, description=_SEARCH_DESCRIPTION),
        CalculatorTool(),
        UnitTool(),
        DateTool(),
        BankTool(world["bank"]),
        InventoryTool(world["inventory"]),
    ]


class ToolCallEnv(TextEnv):
    """Questions and jobs over a fictional world, solved by calling tools (contract in the module docstring).

    Args:
        split: ``"train"`` or ``"test"`` (the bundled task set), or ``"all"``.
        max_turns: turns per episode before truncation (the longest gold solution takes 5).
        max_calls_per_turn: calls run per turn; further calls are not run and cost one invalid-call penalty.
        invalid_call_penalty: subtracted per invalid call (a magnitude).
        format_penalty: subtracted for a turn with neither a valid call nor an answer.
        max_result_chars: a tool result longer than this is cut (and says so).
        render_mode: ``"ansi"`` or ``None``.

    Reset options: ``{"task_id": "city_population-03"}`` or ``{"task_index": i}`` (within the split);
    otherwise the seed picks a task. Info keys besides the standard ones: ``task_id``, ``template``,
    ``hops``; after a step also ``tool_calls`` (names), ``invalid_calls`` (their errors) and, on the
    answer turn, ``answer`` and ``gold_answer``. Metrics: ``tool_calls``, ``invalid_calls``,
    ``failed_calls`` (ran, ``ok`` False) for the turn.
    """

    def __init__(
        self,
        *,
        split: str = "train",
        max_turns: int | None = 8,
        max_calls_per_turn: int = 8,
        invalid_call_penalty: float = 0.05,
        format_penalty: float = 0.1,
        max_result_chars: int = 2000,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if split not in ("train", "test", "all"):
            raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
        if max_calls_per_turn < 1 or max_result_chars < 100:
            raise ValueError("max_calls_per_turn must be >= 1 and max_result_chars >= 100")
        if invalid_call_penalty < 0:
            raise ValueError(f"invalid_call_penalty is a magnitude and must be >= 0, got {invalid_call_penalty!r}")
        self.split = split
        self.max_calls_per_turn = int(max_calls_per_turn)
        self.invalid_call_penalty = float(invalid_call_penalty)
        self.max_result_chars = int(max_result_chars)
        self.tasks = load_tasks(None if split == "all" else split)
        self._tool_list = build_tools(load_world())
        self.tools = [tool_schema(tool) for tool in self._tool_list]
        self.instructions = instructions(self._tool_list, max_calls_per_turn)
        self.action_format = '<tool_call>{"name": "lookup", "arguments": {...}}</tool_call> or <answer>...</answer>'
        self._task: Task | None = None
        self._box: ToolBox | None = None
        self._log: list[str] = []

    @property
    def task(self) -> Task:
        if self._task is None:
            raise RuntimeError("ToolCallEnv has no task before reset(); call reset() first")
        return self._task

    @property
    def tool_state(self) -> Mapping[str, Any]:
        """The current episode's tool states by tool name (the bank's balances in cents, ...)."""
        if self._box is None:
            raise RuntimeError("ToolCallEnv has no tool state before reset(); call reset() first")
        return self._box.states

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self._task = self._choose_task(options)
        if self._box is not None:
            self._box.close()
        self._box = ToolBox(self._tool_list)
        self._log = [f"Task {self._task.id}: {self._task.question}"]
        ask = "Use the tools as needed, then give your final answer in <answer></answer>."
        observation = f"{self._task.question}\n{ask}"
        return observation, self._task_info()

    def _step(self, action: str) -> StepOutcome:
        parsed = parse_hermes(action)
        answer = extract_answer(parsed.content, require_tag=True)
        if parsed.calls:
            return self._run_calls(parsed.calls, answer_ignored=answer is not None)
        if answer is not None and answer.strip():
            return self._finish(answer.strip())
        self._log.append("(no tool call and no answer)")
        problem = "an empty <answer></answer>" if answer is not None else "neither a tool call nor an <answer>"
        return StepOutcome(
            observation=f"Your message had {problem}. Call a tool with {self.action_format}.",
            action_is_valid=False,
            metrics={"tool_calls": 0, "invalid_calls": 0, "failed_calls": 0},
            extra_info={**self._task_info(), "tool_calls": [], "invalid_calls": []},
        )

    def render_text(self, color: bool = False) -> str:
        return render_episode(self._log, self.turn, self.max_turns, color=color)

    def oracle(self) -> list[str] | None:
        """The gold turns not yet taken (``<tool_call>`` blocks), then the answer.

        Read-only tasks: the answer turn is right whatever happened before. Stateful tasks: the
        remaining gold turns assume the agent followed the oracle so far (``turn`` gold turns taken).
        """
        if self._task is None:
            return None
        if self.episode_over:
            return []
        turns = [render_hermes(turn) for turn in self._task.gold_turns] + [f"<answer>{self._task.answer}</answer>"]
        return turns[min(self.turn, len(turns) - 1) :]

    def close(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None
        super().close()

    # ----------------------------------------------------------------------------------------------
    # Turns
    # ----------------------------------------------------------------------------------------------
    def _run_calls(self, calls: tuple, answer_ignored: bool) -> StepOutcome:
        assert self._box is not None
        outcomes = self._box.run_sync(calls[: self.max_calls_per_turn])
        messages = [self._tool_message(outcome) for outcome in outcomes]
        invalid = [o.result.content for o in outcomes if not o.valid]
        extra = len(calls) - len(outcomes)
        if extra:
            limit = f"{extra} more tool call(s) not run: at most {self.max_calls_per_turn} calls per turn"
            messages.append({"role": "tool", "name": "invalid_call", "content": f"Error: {limit}"})
            invalid.append(limit)
        failed = sum(o.valid and not o.result.ok for o in outcomes)
        if answer_ignored:
            note = "Your <answer> was ignored because the message also called tools: answer in a message of its own."
            messages.append({"role": "user", "content": note})
        self._log.append(_log_line(outcomes))
        return StepOutcome(
            observation="\n\n".join(f"[{m.get('name', m['role'])}] {m['content']}" for m in messages),
            reward=-self.invalid_call_penalty * len(invalid),
            action_is_valid=any(o.valid for o in outcomes),
            metrics={"tool_calls": len(calls), "invalid_calls": len(invalid), "failed_calls": failed},
            extra_info={**self._task_info(), "tool_calls": [o.name for o in outcomes], "invalid_calls": invalid},
            observation_messages=tuple(messages),
        )

    def _tool_message(self, outcome: ToolOutcome) -> Message:
        content = outcome.result.content
        if len(content) > self.max_result_chars:
            content = content[: self.max_result_chars] + f"\n[cut at {self.max_result_chars} characters]"
        return {"role": "tool", "name": outcome.name, "content": content}

    def _finish(self, answer: str) -> StepOutcome:
        task = self.task
        if task.kind == "state":
            assert self._box is not None and task.state_tool is not None
            correct = dict(self._box.states[task.state_tool]) == dict(task.expected_state or {})
            verdict = "The final state is correct." if correct else "The final state is not the expected one."
        else:
            correct = answer_is_correct(task, answer)
            verdict = "Correct." if correct else f"Incorrect; the answer was {task.answer}."
        self._log.append(f"answer: {answer[:200]} -> {'correct' if correct else 'wrong'}")
        return StepOutcome(
            observation=f"{verdict} The episode is over.",
            reward=1.0 if correct else 0.0,
            terminated=True,
            success=correct,
            metrics={"tool_calls": 0, "invalid_calls": 0, "failed_calls": 0},
            extra_info={
                **self._task_info(),
                "tool_calls": [],
                "invalid_calls": [],
                "answer": answer[:1000],
                "gold_answer": task.answer,
            },
        )

    def _choose_task(self, options: Mapping[str, Any]) -> Task:
        unknown = sorted(set(options) - {"task_id", "task_index"})
        if unknown:
            raise ValueError(f"unknown reset options {unknown}; ToolCallEnv accepts 'task_id' and 'task_index'")
        if options.get("task_id") is not None:
            for task in self.tasks:
                if task.id == options["task_id"]:
                    return task
            raise ValueError(f"no task {options['task_id']!r} in split {self.split!r}")
        index = options.get("task_index")
        if index is None:
            index = int(self.np_random.integers(len(self.tasks)))
        if not 0 <= index < len(self.tasks):
            raise ValueError(f"task_index must lie in [0, {len(self.tasks)}), got {index!r}")
        return self.tasks[index]

    def _task_info(self) -> dict[str, Any]:
        task = self.task
        return {"task_id": task.id, "template": task.template, "hops": task.hops}


def _log_line(outcomes: list[ToolOutcome]) -> str:
    parts = []
    for outcome in outcomes:
        arguments = json.dumps(dict(outcome.call.arguments), ensure_ascii=False)[:120]
        status = "ok" if outcome.valid and outcome.result.ok else "failed" if outcome.valid else "invalid"
        parts.append(f"{outcome.name}({arguments}) [{status}] -> {outcome.result.content[:120]}")
    return "\n".join(parts)
