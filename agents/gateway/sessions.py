"""What the gateway records for one session (one episode of an agent): segments of exact token ids.

A *segment* is one token sequence the engine actually saw: a prompt, then alternately context ids
(mask 0: the template's glue, tool results, the next user message, the generation prompt) and the
ids a request sampled (mask 1, with the engine's logprobs), exactly as returned. A request extends a
segment when its conversation continues what the segment has recorded (see
:class:`agents.gateway.service.Gateway`); otherwise it opens a new segment with its own prompt. So
an append-only agent yields one segment per session, and an agent that edits its history (drops old
reasoning, compacts, runs sub-agents) yields several, each exact.

Every sampled turn keeps its provenance (:class:`TurnRecord`): the session's request number, the
policy version that sampled it, its token range in the segment and its finish reason.

**Rewards.** :meth:`Session.trajectories` turns the segments into one
:class:`~agents.trajectory.Trajectory` each, in the session's group. The rule: a per-turn reward
given for request ``i`` lands on that turn's last sampled token, in the segment that holds the turn;
the session's final ``reward`` is added on the last sampled token of *every* segment, because each
segment's tokens contributed to the outcome. A session with one segment therefore has the return
``sum(turn_rewards) + reward``, like an environment episode; with ``k`` segments its outcome counts
``k`` times in a group's statistics (``metrics["gateway/segments"]`` says how many).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agents.engines.base import Generation, SamplingParams
from agents.trajectory import Trajectory

__all__ = ["Segment", "Session", "TurnRecord"]


@dataclass(frozen=True)
class TurnRecord:
    """One sampled reply: ids ``[start, end)`` of its segment's ``response_ids`` (all mask 1)."""

    request: int
    segment: int
    start: int
    end: int
    policy_version: int
    finish_reason: str


@dataclass
class Segment:
    """One exact token sequence (module docstring). ``messages`` is the conversation it has rendered, in
    the normalised client form, ending with the gateway's last reply; ``template_messages`` the same
    conversation as it was given to the chat template."""

    index: int
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    template_messages: list[dict[str, Any]] = field(default_factory=list)
    tools_key: str = ""  # the tool list its conversation was rendered with

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def last_turn(self) -> TurnRecord | None:
        return self.turns[-1] if self.turns else None

    def last_sampled(self) -> list[int]:
        turn = self.last_turn
        return self.response_ids[turn.start : turn.end] if turn else []

    def record(self, context_ids: list[int], generation: Generation, request: int, policy_version: int) -> TurnRecord:
        """Append ``context_ids`` (mask 0) and the generation's sampled ids (mask 1, logprobs)."""
        self.response_ids += context_ids
        self.response_mask += [0] * len(context_ids)
        self.logprobs += [0.0] * len(context_ids)
        start = len(self.response_ids)
        self.response_ids += generation.output_ids
        self.response_mask += [1] * len(generation.output_ids)
        self.logprobs += generation.logprobs
        turn = TurnRecord(request, self.index, start, len(self.response_ids), policy_version, generation.finish_reason)
        self.turns.append(turn)
        return turn

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "prompt_ids": self.prompt_ids,
            "response_ids": self.response_ids,
            "response_mask": self.response_mask,
            "logprobs": self.logprobs,
            "turns": [vars(turn) for turn in self.turns],
            "messages": self.messages,
        }


@dataclass
class Session:
    """One episode of an agent. ``group_id``, ``seed`` and ``task`` label its trajectories."""

    id: str
    group_id: str = ""
    seed: int = 0
    task: str = "gateway"
    segments: list[Segment] = field(default_factory=list)
    requests: int = 0
    busy: int = 0  # requests in flight
    created: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    #: Training: the sampling that replaces the requests' (see ``Gateway``), and the version of the policy
    #: the engine serves for this session; ``None``: the gateway's.
    sampling: SamplingParams | None = None
    policy_version: int | None = None
    #: The text each reply of this session was sampled as, by the reply's normalised form: an agent that
    #: sends a reply back is rendered with the model's own text, not a re-serialisation of it.
    sampled_text: dict[str, str] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        return sum(segment.num_tokens for segment in self.segments)

    def new_segment(self, prompt_ids: list[int]) -> Segment:
        segment = Segment(len(self.segments), list(prompt_ids))
        self.segments.append(segment)
        return segment

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "group_id": self.group_id,
            "seed": self.seed,
            "task": self.task,
            "requests": self.requests,
            "segments": [segment.to_dict() for segment in self.segments],
        }

    def trajectories(
        self, reward: float, turn_rewards: list[float] | None = None, success: bool | None = None
    ) -> list[Trajectory]:
        """One trajectory per segment that sampled something (rewards: module docstring).

        ``turn_rewards`` has one entry per request of the session, in order (``None``: all 0).
        """
        if turn_rewards is not None and len(turn_rewards) != self.requests:
            raise ValueError(
                f"turn_rewards has {len(turn_rewards)} entries but the session made {self.requests} requests"
            )
        per_request = list(turn_rewards) if turn_rewards is not None else [0.0] * self.requests
        segments = [segment for segment in self.segments if segment.turns]
        episode_return = sum(per_request) + reward
        trajectories = []
        for segment in segments:
            rewards = [per_request[turn.request] for turn in segment.turns]
            rewards[-1] += reward
            versions = [turn.policy_version for turn in segment.turns]
            trajectory = Trajectory(
                env_id=self.task,
                seed=self.seed,
                group_id=self.group_id,
                prompt_ids=list(segment.prompt_ids),
                response_ids=list(segment.response_ids),
                response_mask=list(segment.response_mask),
                rollout_logprobs=list(segment.logprobs),
                turn_rewards=rewards,
                turn_end_indices=[turn.end - 1 for turn in segment.turns],
                episode_return=episode_return,
                success=reward > 0 if success is None else bool(success),
                termination="terminated",
                policy_version=min(versions),
                num_turns=len(segment.turns),
                messages=[dict(m) for m in segment.messages],
                finish_reasons=[turn.finish_reason for turn in segment.turns],
                metrics={
                    "gateway/segment": float(segment.index),
                    "gateway/segments": float(len(segments)),
                    "gateway/requests": float(self.requests),
                    "gateway/policy_version_max": float(max(versions)),
                },
            )
            trajectory.validate()
            trajectories.append(trajectory)
        return trajectories
