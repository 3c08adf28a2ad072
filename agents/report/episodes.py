"""Episodes for the run report: every JSONL record kind turngym writes, read into one plain shape.

Three kinds of lines are read, told apart by their fields:

``trajectory``
    :class:`agents.trajectory.Trajectory` (``trainer.run``'s ``evaluations/``, ``agents.eval`` and
    ``agents.play agent=llm`` with ``out=``): token ids, masks and logprobs, so a token view.
``sample``
    :func:`trainer.samples.readable_sample` (``trainer.run``'s ``samples/``): the chat and rewards, no tokens.
``record``
    :class:`agents.record.EpisodeRecord` (``agents.play`` with a person or a scripted agent): the chat,
    rewards and the validity of each action, no tokens.

Each becomes an :class:`Episode`. A line that is none of these (not JSON, cut short, a field missing or
of the wrong type) is counted as skipped, never raised: a report shows what it can read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.record import EpisodeRecord
from agents.trajectory import Trajectory

__all__ = ["Episode", "ParsedLines", "parse_lines", "read_episode_file", "source_step"]

_STEP_FILE = re.compile(r"^step_(\d+)$")


@dataclass
class Episode:
    """One episode as the page shows it; ``turns`` hold what the environment said and the reply to it.

    ``turns[i]``: ``observation`` (the messages the environment sent before reply ``i``, joined),
    ``action`` (the reply), ``reward`` and ``valid`` (``None`` where the file does not say) and ``info``
    (what the environment reported about the turn). ``final_observation``: what came after the last reply.
    ``trajectory`` is kept for the token view (``None`` for the kinds without tokens).
    """

    kind: str
    source: str
    step: int | None
    env_id: str
    seed: int
    success: bool
    episode_return: float
    termination: str
    num_invalid_actions: int
    system: str = ""
    turns: list[dict[str, Any]] = field(default_factory=list)
    final_observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    trajectory: Trajectory | None = None


@dataclass
class ParsedLines:
    episodes: list[Episode]
    skipped: int  # non-blank lines that were not an episode record


def source_step(path: Path) -> int | None:
    """The training step a file belongs to: ``step_000004.jsonl`` is step 4; other names have none."""
    match = _STEP_FILE.match(path.stem)
    return int(match.group(1)) if match else None


def read_episode_file(path: Path, source: str | None = None) -> ParsedLines:
    """Read every episode of the JSONL file ``path``; ``source`` names it in the page (default: its name)."""
    with path.open(encoding="utf-8", errors="replace") as f:
        return parse_lines(f, source or path.stem, source_step(path))


def parse_lines(lines: Iterable[str], source: str, step: int | None) -> ParsedLines:
    """The episodes of ``lines`` (JSONL text) and how many non-blank lines were not episodes."""
    episodes, skipped = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            episodes.append(_episode(data, source, step))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            skipped += 1
    return ParsedLines(episodes, skipped)


def _episode(data: Any, source: str, step: int | None) -> Episode:
    if not isinstance(data, dict):
        raise ValueError("an episode is a JSON object")
    if "response_ids" in data:
        return _from_trajectory(Trajectory.from_dict(data), source, step)
    if "action_is_valid" in data:
        return _from_record(EpisodeRecord.from_json(json.dumps(data)), source, step)
    if "sampled_tokens" in data:
        return _from_sample(data, source, step)
    raise ValueError("not a trajectory, a sample or an episode record")


def _from_trajectory(t: Trajectory, source: str, step: int | None) -> Episode:
    t.validate()
    rewards = t.turn_rewards if len(t.turn_rewards) == t.num_turns else [None] * t.num_turns
    infos = []
    for i in range(t.num_turns):
        info: dict[str, Any] = {}
        if i < len(t.finish_reasons):
            info["finish_reason"] = t.finish_reasons[i]
        if t.has_state_info and len(t.turn_state_keys) == t.num_turns:
            info["state_key"] = t.turn_state_keys[i]
            info["distance_before"] = t.turn_distances_before[i]
            info["distance_after"] = t.turn_distances_after[i]
        infos.append(info)
    episode = _base(t.messages, rewards, [None] * t.num_turns, infos)
    episode.update(
        kind="trajectory",
        env_id=t.env_id,
        seed=t.seed,
        success=t.success,
        episode_return=t.episode_return,
        termination=t.termination,
        num_invalid_actions=t.num_invalid_actions,
        trajectory=t,
        info=_drop_empty(
            policy_version=t.policy_version,
            group_id=t.group_id,
            error=t.error,
            initial_distance=t.initial_distance,
            env_options=t.env_options,
            reset_options=t.reset_options,
            metrics=t.metrics,
            timings=t.timings,
        ),
    )
    return Episode(source=source, step=step, **episode)


def _from_sample(data: dict[str, Any], source: str, step: int | None) -> Episode:
    num_turns = int(data["num_turns"])
    rewards = list(data["turn_rewards"])
    rewards = rewards if len(rewards) == num_turns else [None] * num_turns
    after = list(data.get("turn_distances_after") or [])
    infos = [{"distance_after": after[i]} if len(after) == num_turns else {} for i in range(num_turns)]
    episode = _base(data["messages"], rewards, [None] * num_turns, infos)
    episode.update(
        kind="sample",
        env_id=str(data["env_id"]),
        seed=int(data["seed"]),
        success=bool(data["success"]),
        episode_return=float(data["episode_return"] if data["episode_return"] is not None else "nan"),
        termination=str(data["termination"]),
        num_invalid_actions=int(data["num_invalid_actions"]),
        info=_drop_empty(
            policy_version=data.get("policy_version"),
            group_id=data.get("group_id"),
            error=data.get("error"),
            initial_distance=data.get("initial_distance"),
            reset_options=data.get("reset_options"),
            tokens={k: data[k] for k in ("prompt_tokens", "response_tokens", "sampled_tokens") if k in data},
        ),
    )
    return Episode(source=source, step=step, **episode)


def _from_record(r: EpisodeRecord, source: str, step: int | None) -> Episode:
    infos = [{} for _ in r.actions]
    episode = _base(r.messages, list(r.rewards), list(r.action_is_valid), infos)
    episode.update(
        kind="record",
        env_id=r.env_id,
        seed=r.seed,
        success=r.success,
        episode_return=r.episode_return,
        termination=r.termination_reason,
        num_invalid_actions=sum(not v for v in r.action_is_valid),
        info=_drop_empty(agent=r.agent, env_options=r.env_options, metrics=r.metrics),
    )
    return Episode(source=source, step=step, **episode)


def _base(
    messages: list[dict[str, Any]], rewards: list[Any], valid: list[Any], infos: list[dict[str, Any]]
) -> dict[str, Any]:
    """System prompt, turns and final observation from a chat: each assistant message closes a turn."""
    system, turns, pending = "", [], []
    for message in messages:
        role, content = message["role"], _text(message.get("content"))
        if role == "system" and not turns and not pending:
            system = content
        elif role == "assistant":
            i = len(turns)
            turns.append(
                {
                    "observation": "\n".join(pending),
                    "action": content,
                    "reward": rewards[i] if i < len(rewards) else None,
                    "valid": valid[i] if i < len(valid) else None,
                    "info": infos[i] if i < len(infos) else {},
                }
            )
            pending = []
        else:
            pending.append(content)
    return {"system": system, "turns": turns, "final_observation": "\n".join(pending)}


def _text(content: Any) -> str:
    """A message's content as text (a list of content parts is joined; anything else is its JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return json.dumps(content, ensure_ascii=False)


def _drop_empty(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v not in (None, {}, [])}
