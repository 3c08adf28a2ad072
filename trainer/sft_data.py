"""Data for supervised fine-tuning: token-exact trajectories from an environment's oracle or from JSONL files.

Every example is a :class:`~agents.trajectory.Trajectory`, the record reinforcement learning trains on,
so a warm-up sees exactly the token sequences, masks and turn boundaries the later RL phase sees:

* :func:`oracle_trajectories` plays the environment's oracle through the episode loop
  (:func:`agents.episode.run_episode`) with a :class:`~agents.engines.teacher.TeacherEngine`: the
  chat template renders system prompt, observations and glue; the oracle's turns are the "sampled"
  tokens (mask 1, logprob 0). Only episodes the oracle finishes with success within the limits are kept.
  With ``noise`` > 0 a turn is, with that probability, a uniformly random valid action instead (DART's noise
  injection, Laskey et al. 2017, "DART: Noise Injection for Robust Imitation Learning"): the episode then
  shows the oracle recovering from positions off its own path, which a policy's mistakes lead to and clean
  oracle episodes never visit. A random turn's words stay in the episode as context (mask 0); only the
  oracle's turns are targets.
* :func:`file_trajectories` reads trajectories that ``agents.eval``, ``agents.play`` or a training run's
  samples wrote, and keeps those that pass :class:`TrajectoryFilter` (success only, a minimum return):
  rejection-sampling fine-tuning.

Both are deterministic: the same seeds give the same examples, in the same order.
"""

from __future__ import annotations

import asyncio
import random
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
    noise: float = 0.0,
) -> tuple[list[Trajectory], int]:
    """The oracle's successful episodes for ``seeds`` (in seed order) and how many episodes were dropped.

    An episode is dropped when the oracle has no solution, fails to finish within ``limits`` (a turn
    cap tighter than the oracle's plan, a context budget too small) or the environment errs. ``noise``:
    the probability that a turn is a random valid action, kept as context (module docstring); the draws
    are seeded by the episode's seed, so the same seeds give the same examples.
    """
    import envs

    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise}")
    seeds = list(seeds)
    sampling = SamplingParams(max_new_tokens=limits.max_new_tokens, temperature=1.0)
    gate = asyncio.Semaphore(concurrency)

    async def play(seed: int) -> Trajectory:
        async with gate:
            env = envs.make(env_id, **env_options)
            teacher = _NoisyOracle(noise, seed)
            try:
                engine = TeacherEngine(env, renderer, teacher.act)
                spec = EpisodeSpec(env_id, seed, group_id=f"sft-{seed}", env_options=dict(env_options))
                trajectory = await run_episode(
                    env, engine, renderer, spec, sampling=sampling, limits=limits, policy_version=0
                )
            finally:
                env.close()
            return _as_context(trajectory, teacher.random_turns)

    played = await asyncio.gather(*(play(seed) for seed in seeds))
    kept = [t for t in played if t.trainable and t.success]
    return kept, len(played) - len(kept)


class _NoisyOracle:
    """The oracle's action each turn, or with probability ``noise`` a random valid one (``random_turns``)."""

    def __init__(self, noise: float, seed: int) -> None:
        self.noise, self.oracle = noise, OracleAgent()
        self.rng = random.Random(f"oracle-noise-{seed}")
        self.random_turns: set[int] = set()
        self._turn = 0

    def act(self, env: Any) -> str:
        turn, self._turn = self._turn, self._turn + 1
        planned = self.oracle.act(env, "")
        if self.noise == 0.0 or self.rng.random() >= self.noise:
            return planned
        choices = env.valid_actions()
        if not choices:
            return planned
        action = self.rng.choice(list(choices))
        if action != planned:  # the oracle's own move, drawn at random, is still a target
            self.random_turns.add(turn)
        return action


def _as_context(trajectory: Trajectory, turns: set[int]) -> Trajectory:
    """``trajectory`` with the action tokens of ``turns`` masked out (kept as context, not trained on).

    A turn's last token (the end of turn) stays sampled: a trajectory's turns end on sampled tokens
    (:meth:`agents.trajectory.Trajectory.validate`), and closing the turn after a move is what a policy does anyway.
    Those turns lose their per-move records too (their moves' tokens are no longer sampled).
    """
    if not turns:
        return trajectory
    mask = list(trajectory.response_mask)
    start = 0
    for k, end in enumerate(trajectory.turn_end_indices):
        if k in turns:
            mask[start:end] = [0] * (end - start)
            if trajectory.turn_move_end_indices:
                trajectory.turn_move_end_indices[k] = []
                trajectory.turn_move_distances[k] = []
        start = end + 1
    trajectory.response_mask = mask
    return trajectory


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
