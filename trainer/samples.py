"""Readable samples of a step's episodes: what the model saw and said, without token ids.

    write_samples(run_dir, step=3, trajectories=batch)   # run_dir/samples/step_000003.jsonl
    jq . run_dir/samples/step_000003.jsonl               # one pretty-printed episode after another

Each line is :func:`readable_sample` of one trajectory: its identity (env id, seed, group id, policy
version), its outcome (return, success, termination, per-turn rewards, invalid actions), the chat as
played (role and content of each message) and token counts. Non-finite numbers are written as
``null``, so every line is strict JSON that ``jq`` reads.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agents.trajectory import Trajectory

__all__ = ["SAMPLES_DIR", "readable_sample", "sample_path", "write_samples"]

SAMPLES_DIR = "samples"


def readable_sample(trajectory: Trajectory) -> dict[str, Any]:
    """The episode as a JSON-ready dict of readable fields (no token ids, masks or logprobs).

    Token counts: ``prompt_tokens`` (the rendered first prompt), ``response_tokens`` (everything after
    it) and ``sampled_tokens`` (those the model generated, the rest being template and observations).
    """
    sample = {
        "env_id": trajectory.env_id,
        "seed": trajectory.seed,
        "group_id": trajectory.group_id,
        "policy_version": trajectory.policy_version,
        "episode_return": trajectory.episode_return,
        "success": trajectory.success,
        "termination": trajectory.termination,
        "error": trajectory.error,
        "num_turns": trajectory.num_turns,
        "turn_rewards": list(trajectory.turn_rewards),
        "reset_options": dict(trajectory.reset_options),
        "initial_distance": trajectory.initial_distance,
        "turn_distances_after": list(trajectory.turn_distances_after),
        "num_invalid_actions": trajectory.num_invalid_actions,
        "finish_reasons": list(trajectory.finish_reasons),
        "prompt_tokens": len(trajectory.prompt_ids),
        "response_tokens": len(trajectory.response_ids),
        "sampled_tokens": trajectory.num_sampled_tokens,
        "messages": [{"role": m.get("role"), "content": m.get("content")} for m in trajectory.messages],
    }
    return _finite_or_null(sample)


def sample_path(run_dir: str | Path, step: int) -> Path:
    """Where :func:`write_samples` puts the samples of ``step``: ``run_dir/samples/step_{step:06d}.jsonl``."""
    return Path(run_dir) / SAMPLES_DIR / f"step_{step:06d}.jsonl"


def write_samples(run_dir: str | Path, step: int, trajectories: Iterable[Trajectory], *, limit: int = 8) -> Path:
    """Write the first ``limit`` trajectories as readable samples, one JSON object per line; return the path.

    The file is replaced whole (a resumed run that replays a step rewrites it), and never left half
    written: it is written next to its place and then renamed.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    path = sample_path(run_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(readable_sample(t), ensure_ascii=False, allow_nan=False) + "\n"
        for t in itertools.islice(trajectories, limit)
    ]
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("".join(lines), encoding="utf-8")
    os.replace(temporary, path)
    return path


def _finite_or_null(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth of dicts and lists) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(item) for item in value]
    return value
