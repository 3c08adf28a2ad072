"""Tool-calling tasks: the record, loading the bundled set, and the question templates.

A :class:`Task` holds the question, how the final answer is checked (``kind``: ``"number"``,
``"text"``, ``"date"`` or ``"state"``), the gold answer, and the gold call sequence: turns of tool
calls, each turn's calls independent of each other, each turn using only results of earlier turns.
The answers are computed here from the world's data directly, never through the tools, so that
an oracle run through the tools checks both.

The bundled set (``data/tasks.json``) is written by :mod:`envs.toolcall.generate` from the templates
in :mod:`envs.toolcall.templates`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DATA_DIR", "Call", "Task", "load_tasks", "load_world"]

DATA_DIR = Path(__file__).parent / "data"

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Task:
    """One task. ``tolerance``: absolute, for numeric answers; ``accepted``: every correct text answer.

    ``state_tool`` and ``expected_state``: for stateful tasks, the tool whose final state is scored
    and that state (the whole table; money in cents).
    """

    id: str
    template: str
    split: str
    question: str
    kind: str
    answer: str
    gold_turns: tuple[tuple[Call, ...], ...]
    accepted: tuple[str, ...] = ()
    tolerance: float = 0.0
    state_tool: str | None = None
    expected_state: Mapping[str, int] | None = None
    hops: int = field(default=0)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gold_turns"] = [[{"name": name, "arguments": args} for name, args in turn] for turn in self.gold_turns]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Task:
        turns = tuple(tuple((c["name"], dict(c["arguments"])) for c in turn) for turn in data["gold_turns"])
        return cls(**{**data, "gold_turns": turns, "accepted": tuple(data.get("accepted", ()))})


def load_world(path: Path | None = None) -> dict[str, Any]:
    return json.loads((path or DATA_DIR / "world.json").read_text())


def load_tasks(split: str | None = None, path: Path | None = None) -> list[Task]:
    """The bundled tasks of ``split`` (``"train"``, ``"test"``, or ``None`` for all), in file order."""
    tasks = [Task.from_json(t) for t in json.loads((path or DATA_DIR / "tasks.json").read_text())]
    if split is None:
        return tasks
    chosen = [t for t in tasks if t.split == split]
    if not chosen:
        raise ValueError(f"no tasks in split {split!r}; splits: {sorted({t.split for t in tasks})}")
    return chosen
