"""The record of one played episode, one JSON object per line in a ``.jsonl`` file.

:class:`EpisodeRecord` is what ``python -m agents.play`` appends after every episode (and what a
person quitting mid-episode leaves behind). ``to_json`` / ``from_json`` round-trip losslessly:
``EpisodeRecord.from_json(r.to_json()) == r`` for every record whose rewards are finite floats and
whose options are JSON values. Two derived fields, ``return`` (the sum of the rewards) and
``num_turns`` (the number of actions), are written for readers of the file and checked on reading.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from envs.core import REWARD_DECIMALS

__all__ = [
    "TERMINATION_REASONS",
    "EpisodeRecord",
    "TerminationReason",
    "append_jsonl",
    "episode_return",
    "read_jsonl",
]

TerminationReason = Literal["terminated", "truncated", "abandoned", "error"]
#: ``terminated`` / ``truncated``: Gymnasium's meanings (the episode finished). ``abandoned``: the person
#: quit, restarted or skipped the episode before its end. ``error``: the agent failed (e.g. no oracle).
TERMINATION_REASONS: tuple[str, ...] = ("terminated", "truncated", "abandoned", "error")


def episode_return(rewards: Iterable[float]) -> float:
    """The undiscounted sum of ``rewards``, rounded like the step rewards themselves."""
    return round(math.fsum(rewards), REWARD_DECIMALS)


@dataclass
class EpisodeRecord:
    """One episode as played: what was configured, what was said and what it earned.

    ``messages`` is :meth:`envs.TextEnv.messages` at the end (system instructions, then observation
    and action messages alternating). ``rewards`` and ``action_is_valid`` have one entry per action.
    ``metrics`` is the last step's ``info["metrics"]``.
    """

    env_id: str
    env_options: dict[str, Any]
    seed: int
    agent: str
    messages: list[dict[str, str]]
    actions: list[str]
    rewards: list[float]
    action_is_valid: list[bool]
    success: bool
    terminated: bool
    truncated: bool
    termination_reason: TerminationReason
    metrics: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not len(self.actions) == len(self.rewards) == len(self.action_is_valid):
            raise ValueError(
                f"actions, rewards and action_is_valid must have one entry per turn, got "
                f"{len(self.actions)}, {len(self.rewards)} and {len(self.action_is_valid)}"
            )
        if self.termination_reason not in TERMINATION_REASONS:
            raise ValueError(
                f"termination_reason must be one of {TERMINATION_REASONS}, got {self.termination_reason!r}"
            )

    @property
    def episode_return(self) -> float:
        return episode_return(self.rewards)

    @property
    def num_turns(self) -> int:
        return len(self.actions)

    @property
    def finished(self) -> bool:
        """True when the environment ended the episode (terminated or truncated), False when it was cut short."""
        return self.termination_reason in ("terminated", "truncated")

    def to_json(self) -> str:
        """One line of JSON (no newline inside), with the derived ``return`` and ``num_turns`` added."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        data["return"] = self.episode_return
        data["num_turns"] = self.num_turns
        # ASCII escapes keep any str (lone surrogates from a terminal included) writable and exact.
        return json.dumps(data)

    @classmethod
    def from_json(cls, line: str) -> EpisodeRecord:
        """Parse a line written by :meth:`to_json`; ``ValueError`` on missing, unknown or inconsistent fields."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError(f"an episode record is a JSON object, got {type(data).__name__}")
        stored_return = data.pop("return", None)
        stored_turns = data.pop("num_turns", None)
        names = {f.name for f in fields(cls)}
        unknown, missing = set(data) - names, {n for n in names if n != "metrics"} - set(data)
        if unknown or missing:
            raise ValueError(f"episode record fields: unknown {sorted(unknown)}, missing {sorted(missing)}")
        record = cls(**data)
        if stored_turns is not None and stored_turns != record.num_turns:
            raise ValueError(f"num_turns is {stored_turns} but the record has {record.num_turns} actions")
        if stored_return is not None and not math.isclose(stored_return, record.episode_return, abs_tol=1e-9):
            raise ValueError(f"return is {stored_return} but the rewards sum to {record.episode_return}")
        return record


def append_jsonl(path: str | os.PathLike[str], record: EpisodeRecord) -> None:
    """Append ``record`` as one line to ``path``, creating the parent folders."""
    parent = os.path.dirname(os.fspath(path))
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(record.to_json() + "\n")


def read_jsonl(path: str | os.PathLike[str]) -> list[EpisodeRecord]:
    """Every record in a file written by :func:`append_jsonl` (blank lines are skipped)."""
    with open(path, encoding="utf-8") as file:
        return [EpisodeRecord.from_json(line) for line in file if line.strip()]
