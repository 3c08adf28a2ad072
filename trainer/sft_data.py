"""Data for supervised fine-tuning: token-exact trajectories from an environment's oracle or from JSONL files.

Every example is a :class:`~agents.trajectory.Trajectory`, the record reinforcement learning trains on,
so a warm-up sees exactly the token sequences, masks and turn boundaries the later RL phase sees:

* :func:`oracle_trajectories` plays the environment's oracle through the episode loop
  (:func:`agents.episode.run_episode`) with a :class:`~agents.engines.teacher.TeacherEngine`: the
  chat template renders system prompt, observations and glue; the oracle's turns are the "sampled"
  tokens (mask 1, logprob 0). Only episodes the oracle finishes with success within the limits are kept.
* :func:`file_trajectories` reads trajectories that ``agents.eval``, ``agents.play`` or a training run's
  samples wrote, and keeps those that pass :class:`TrajectoryFilter` (success only, a minimum return):
  rejection-sampling fine-tuning.

Both are deterministic: the same seeds give the same examples, in the same order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.base import OracleAgent
from agents.engines.base import SamplingParams
from agents.engines.teacher import TeacherEngine
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode
from agents.trajectory import Trajectory, read_trajectories

__all__ = ["TrajectoryFilter", "file_trajectories", "oracle_trajectories"]


async def oracle_trajectories(
    env_id: str,
    env_options: Mapping[str, Any],
    seeds: Iterable[int],
    renderer: Any,
    limits: EpisodeLimits,
    *,
    concurrency: int = 16,
) -> tuple[list[Trajectory], int]:
    """The oracle's successful episodes for ``seeds`` (in seed order) and how many episodes were dropped.

    An episode is dropped when the oracle has no solution, fails to finish within ``limits`` (a turn
    cap tighter than the oracle's plan, a context budget too small) or the environment errs.
    """
    import envs

    seeds = list(seeds)
    sampling = SamplingParams(max_new_tokens=limits.max_new_tokens, temperature=1.0)
    agent = OracleAgent()
    gate = asyncio.Semaphore(concurrency)

    async def play(seed: int) -> Trajectory:
        async with gate:
            env = envs.make(env_id, **env_options)
            try:
                engine = TeacherEngine(env, renderer, lambda e: agent.act(e, ""))
                spec = EpisodeSpec(env_id, seed, group_id=f"sft-{seed}", env_options=dict(env_options))
                return await run_episode(
                    env, engine, renderer, spec, sampling=sampling, limits=limits, policy_version=0
                )
            finally:
                env.close()

    played = await asyncio.gather(*(play(seed) for seed in seeds))
    kept = [t for t in played if t.trainable and t.success]
    return kept, len(played) - len(kept)


@dataclass(frozen=True)
class TrajectoryFilter:
    """Which recorded trajectories to learn from: successful ones only, and/or a minimum return."""

    success_only: bool = True
    min_return: float | None = None

    def keep(self, trajectory: Trajectory) -> bool:
        if not trajectory.trainable or not trajectory.prompt_ids:  # text-level records have no token ids
            return False
        if self.success_only and not trajectory.success:
            return False
        return self.min_return is None or trajectory.episode_return >= self.min_return


def file_trajectories(
    paths: Sequence[str | Path], keep: TrajectoryFilter, vocab_size: int | None = None
) -> tuple[list[Trajectory], int]:
    """The trajectories of JSONL ``paths`` that ``keep`` accepts, and how many were rejected.

    Raises ``ValueError`` when a kept trajectory holds token ids outside ``vocab_size`` (it was recorded
    with another model's tokenizer, and its ids would mean other words to this one).
    """
    kept: list[Trajectory] = []
    rejected = 0
    for path in paths:
        for trajectory in read_trajectories(path):
            if not keep.keep(trajectory):
                rejected += 1
                continue
            trajectory.validate()
            if vocab_size is not None and max(trajectory.prompt_ids + trajectory.response_ids) >= vocab_size:
                raise ValueError(
                    f"{path}: a trajectory (seed {trajectory.seed}) holds token ids beyond this model's vocabulary "
                    f"({vocab_size}); it was recorded with another tokenizer: record it again with this model"
                )
            kept.append(trajectory)
    return kept, rejected
