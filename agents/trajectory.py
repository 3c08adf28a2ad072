"""The trajectory: the one record that rollout, evaluation, the learner and the logs exchange.

A :class:`Trajectory` is one episode of one environment with one policy, as tokens:

``prompt_ids``
    The chat template's rendering of the system instructions and the first observation, ending with
    the generation prompt (``<|im_start|>assistant\\n`` or the template's equivalent).
``response_ids``
    Everything after the prompt, in order: each turn's sampled tokens *exactly as the engine returned
    them* (the stop token included when one was sampled), then the tokens the chat template puts
    between that turn and the next generation prompt (end-of-turn glue, the next observation, the
    next generation prompt). Token ids are never re-derived from text.
``response_mask``
    1 exactly on sampled tokens, 0 on everything the template or the environment contributed.
``rollout_logprobs``
    The engine's log-probability of each sampled token under the sampling distribution (after
    temperature); 0.0 where the mask is 0. ``len(response_ids) == len(response_mask) ==
    len(rollout_logprobs)`` always.
``rollout_values``
    Empty, or (when every turn came from an engine given the learner's value head, see
    ``Generation.values``) the value of the state before each sampled token, 0.0 where the mask is 0, as
    long as ``response_ids``: what the learner's scoring forward would compute, so it may skip it.
``turn_rewards`` / ``turn_end_indices``
    One entry per environment step: the step's reward and the index in ``response_ids`` of that
    turn's last sampled token (where a learner places the reward). A turn that sampled no token
    (possible only with an empty generation) has no entry; its reward is still in ``episode_return``.

``turn_state_keys`` / ``turn_distances_before`` / ``turn_distances_after``
    Aligned with ``turn_rewards``, for environments that report their exact state (``info["state_key"]``
    and ``info["distance_to_goal"]``, see :mod:`envs.core`): the key of the position each turn started
    from, and the solver's distance to the goal before and after the turn (``None``: unsolvable or
    unknown). Empty when the environment reports neither key; ``initial_distance`` is the distance at
    the reset (the level's difficulty). For the learner and the curriculum only: the model never saw them.

``turn_move_end_indices`` / ``turn_move_distances``
    Empty, or aligned with ``turn_rewards`` for environments that report each move of a turn
    (``info["move_distances"]`` and ``info["move_spans"]``): per turn, the index in ``response_ids`` of the
    last sampled token that wrote each move, and the distance to the goal after each move. A turn whose
    moves could not be placed on its tokens (its text does not decode token by token) has empty lists.

``termination`` says why the episode ended: ``terminated`` and ``truncated`` with Gymnasium's
meanings (``truncated`` includes the turn limit), ``max_tokens`` when the context budget ran out,
``error`` when the environment or the engine failed (``error`` holds the message). A trajectory
that ended in ``error`` is kept for the logs but is never trained on.

JSON Lines round-trip losslessly: ``Trajectory.from_json(t.to_json()) == t``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

__all__ = ["TERMINATIONS", "Termination", "Trajectory", "read_trajectories", "write_trajectories"]

Termination = Literal["terminated", "truncated", "max_tokens", "error"]
TERMINATIONS: tuple[str, ...] = ("terminated", "truncated", "max_tokens", "error")


@dataclass
class Trajectory:
    """One episode as token ids, masks, logprobs and rewards (see the module docstring for each field)."""

    env_id: str
    seed: int
    group_id: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    rollout_logprobs: list[float] = field(default_factory=list)
    rollout_values: list[float] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    turn_end_indices: list[int] = field(default_factory=list)
    episode_return: float = 0.0
    success: bool = False
    termination: Termination = "terminated"
    error: str | None = None
    policy_version: int = 0
    num_turns: int = 0
    num_invalid_actions: int = 0
    env_options: dict[str, Any] = field(default_factory=dict)
    reset_options: dict[str, Any] = field(default_factory=dict)  # what env.reset got besides the seed
    messages: list[dict[str, Any]] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    turn_state_keys: list[str | None] = field(default_factory=list)
    turn_distances_before: list[int | None] = field(default_factory=list)
    turn_distances_after: list[int | None] = field(default_factory=list)
    initial_distance: int | None = None
    turn_move_end_indices: list[list[int]] = field(default_factory=list)
    turn_move_distances: list[list[int | None]] = field(default_factory=list)
    #: Wall-clock seconds: ``generate_s`` (waiting for the engine), ``env_s`` (env.reset/step), ``total_s``.
    timings: dict[str, float] = field(default_factory=dict)
    #: Environment metrics of the last step (``info["metrics"]``) plus the loop's own counters.
    metrics: dict[str, float] = field(default_factory=dict)

    # ----------------------------------------------------------------------------------------------
    @property
    def num_sampled_tokens(self) -> int:
        return sum(self.response_mask)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def trainable(self) -> bool:
        """False for trajectories that ended in an error or sampled nothing: a learner skips them."""
        return self.termination != "error" and self.num_sampled_tokens > 0

    @property
    def has_state_info(self) -> bool:
        """True when the environment reported its state on every turn (see ``turn_state_keys``)."""
        return len(self.turn_state_keys) == len(self.turn_rewards) > 0

    def validate(self) -> None:
        """Raise ``ValueError`` if the record breaks an invariant of the module docstring."""
        n = len(self.response_ids)
        if not (len(self.response_mask) == n == len(self.rollout_logprobs)):
            raise ValueError(
                f"response_ids ({n}), response_mask ({len(self.response_mask)}) and rollout_logprobs "
                f"({len(self.rollout_logprobs)}) must have the same length"
            )
        if any(m not in (0, 1) for m in self.response_mask):
            raise ValueError("response_mask holds values other than 0 and 1")
        if any(lp != 0.0 for lp, m in zip(self.rollout_logprobs, self.response_mask, strict=True) if m == 0):
            raise ValueError("rollout_logprobs must be 0.0 where response_mask is 0")
        if any(not (lp <= 0.0) for lp, m in zip(self.rollout_logprobs, self.response_mask, strict=True) if m == 1):
            raise ValueError("rollout_logprobs must be finite log-probabilities (<= 0) on sampled tokens")
        if self.rollout_values and len(self.rollout_values) != n:
            raise ValueError(f"rollout_values ({len(self.rollout_values)}) must be empty or one per response id ({n})")
        if any(v != 0.0 for v, m in zip(self.rollout_values, self.response_mask, strict=False) if m == 0):
            raise ValueError("rollout_values must be 0.0 where response_mask is 0")
        if not all(math.isfinite(v) for v in self.rollout_values):
            raise ValueError("rollout_values must be finite")
        if len(self.turn_rewards) != len(self.turn_end_indices):
            raise ValueError("turn_rewards and turn_end_indices must have the same length")
        if any(not (0 <= i < n and self.response_mask[i] == 1) for i in self.turn_end_indices):
            raise ValueError("every turn_end_index must point at a sampled token of response_ids")
        if list(self.turn_end_indices) != sorted(set(self.turn_end_indices)):
            raise ValueError("turn_end_indices must be strictly increasing")
        state_lists = (self.turn_state_keys, self.turn_distances_before, self.turn_distances_after)
        if any(state_lists) and any(len(x) != len(self.turn_rewards) for x in state_lists):
            raise ValueError(
                "turn_state_keys, turn_distances_before and turn_distances_after are empty or one per turn reward"
            )
        self._validate_moves()
        if self.termination not in TERMINATIONS:
            raise ValueError(f"termination must be one of {TERMINATIONS}, got {self.termination!r}")
        if (self.termination == "error") != (self.error is not None):
            raise ValueError("error is set exactly when termination is 'error'")

    def _validate_moves(self) -> None:
        ends, distances = self.turn_move_end_indices, self.turn_move_distances
        if not ends and not distances:
            return
        if len(ends) != len(self.turn_rewards) or len(distances) != len(self.turn_rewards):
            raise ValueError("turn_move_end_indices and turn_move_distances are empty or one list per turn reward")
        previous = -1
        for turn, (indices, after, end) in enumerate(zip(ends, distances, self.turn_end_indices, strict=True)):
            if len(indices) != len(after):
                raise ValueError(f"turn {turn}: {len(indices)} move end indices but {len(after)} move distances")
            if any(not (previous < i <= end and self.response_mask[i] == 1) for i in indices):
                raise ValueError(f"turn {turn}: every move end index must point at a sampled token of that turn")
            if list(indices) != sorted(set(indices)):
                raise ValueError(f"turn {turn}: move end indices must be strictly increasing")
            previous = end

    # ----------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        """One line of JSON. Floats are written with ``repr`` precision, so reading them back is exact."""
        data = self.to_dict()
        for key in ("episode_return",):
            if not math.isfinite(data[key]):
                raise ValueError(f"{key} is not finite ({data[key]!r}); JSON cannot hold it")
        return json.dumps(data, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown Trajectory fields {unknown}; was the file written by a newer turngym?")
        return cls(**data)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        return cls.from_dict(json.loads(line))


def write_trajectories(path: str | Path, trajectories: Iterable[Trajectory], *, append: bool = True) -> int:
    """Write one JSON line per trajectory; returns how many were written. Parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("a" if append else "w", encoding="utf-8") as f:
        for trajectory in trajectories:
            f.write(trajectory.to_json() + "\n")
            count += 1
    return count


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """Read a JSONL file written by :func:`write_trajectories`; blank lines are skipped."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_json(line)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a trajectory record: {exc}") from exc
