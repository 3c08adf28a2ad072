"""The records a rollout manager takes and returns: what to collect, how, and what came back.

A *group* is ``group_size`` episodes of one environment from one seed, sharing a ``group_id`` (the
group a GRPO-style advantage is computed over). :class:`RolloutResult` holds only complete groups;
a group that could not be completed is dropped whole and named in ``dropped_group_ids``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents.episode import EpisodeSpec
from agents.trajectory import Trajectory

if TYPE_CHECKING:
    from agents.engines.base import SamplingParams
    from agents.episode import EpisodeLimits

__all__ = ["METRIC_NAMES", "GroupRequest", "Rollout", "RolloutConfig", "RolloutResult", "group_requests"]


@dataclass(frozen=True)
class GroupRequest:
    """``group_size`` episodes of ``env_id`` built with ``env_options`` and reset with ``seed`` and ``reset_options``.

    ``group_id`` is chosen by the manager when empty (unique within the manager's lifetime).
    """

    env_id: str
    seed: int
    group_size: int
    env_options: Mapping[str, Any] = field(default_factory=dict)
    group_id: str = ""
    reset_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")

    def specs(self, group_id: str) -> list[EpisodeSpec]:
        """One spec per member: same seed, same options, same group id, ``sample_index`` 0..G-1."""
        return [
            EpisodeSpec(
                self.env_id,
                self.seed,
                group_id,
                sample_index=i,
                env_options=dict(self.env_options),
                reset_options=dict(self.reset_options),
            )
            for i in range(self.group_size)
        ]


def group_requests(
    env_id: str, seeds: Iterable[int], group_size: int, env_options: Mapping[str, Any] | None = None
) -> list[GroupRequest]:
    """One group of ``group_size`` per seed: ``N`` seeds give ``N`` groups of ``G`` episodes."""
    return [GroupRequest(env_id, int(seed), group_size, dict(env_options or {})) for seed in seeds]


@dataclass(frozen=True)
class RolloutConfig:
    """How a :class:`~trainer.rollout.RolloutManager` runs its environment actors.

    ``num_env_actors``: Ray actors playing episodes (K). ``max_concurrent_episodes``: episodes one
    actor plays at once. ``max_episode_retries``: how many times an episode that ended in an error is
    played again before its whole group is dropped. ``restart_after_step_timeouts``: an actor is
    replaced after this many of its environment steps timed out (each may leave a hung thread
    behind). ``max_actor_restarts``: replacements allowed within one ``collect`` before it raises
    (actors that keep dying point at a broken set-up). ``collect_timeout_s``: the deadline of one
    ``collect``; groups unfinished by then are dropped. ``env_actor_num_cpus``: the CPU share Ray
    reserves for each environment actor (they mostly wait on the engine). ``env_actor_resources``: custom
    Ray resources each environment actor needs besides (on a cluster, ``{"env_node": 1}`` places them
    on the nodes started with ``ray start --resources='{"env_node": N}'``; a replacement for an actor
    lost with its node goes to another such node).
    """

    num_env_actors: int = 1
    max_concurrent_episodes: int = 64
    max_episode_retries: int = 1
    restart_after_step_timeouts: int = 4
    max_actor_restarts: int = 8
    collect_timeout_s: float | None = 1800.0
    env_actor_num_cpus: float = 0.25
    env_actor_resources: Mapping[str, float] = field(default_factory=dict)
    actor_ready_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        positive = ("num_env_actors", "max_concurrent_episodes", "restart_after_step_timeouts")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_episode_retries", "max_actor_restarts", "env_actor_num_cpus"):
            if getattr(self, name) < 0:
                raise ValueError(f"RolloutConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.collect_timeout_s is not None and self.collect_timeout_s <= 0:
            raise ValueError(f"RolloutConfig.collect_timeout_s must be > 0 or None, got {self.collect_timeout_s}")


#: Every key of :attr:`RolloutResult.metrics` (all prefixed ``rollout/``), with its meaning.
METRIC_NAMES: dict[str, str] = {
    "groups_requested": "groups asked for",
    "groups_completed": "groups returned: all group_size members, none ended in error",
    "groups_dropped": "groups dropped whole (an episode out of retries, or the deadline)",
    "groups_dropped_deadline": "of those, groups unfinished at the deadline",
    "episodes_completed": "trajectories returned",
    "episodes_failed": "episode attempts that ended in 'error' (each is in RolloutResult.failed)",
    "env_errors": "failed attempts that raised (environment, its constructor or the engine)",
    "step_timeouts": "failed attempts whose environment call exceeded step_timeout_s",
    "episodes_retried": "attempts started again after a failure",
    "episodes_redispatched": "episodes in flight on an actor that died, started again elsewhere",
    "actors_restarted": "environment actors replaced (died + recycled)",
    "actors_died": "environment actors that died (killed, crashed, out of memory)",
    "actors_recycled": "environment actors replaced after restart_after_step_timeouts hung steps",
    "deadline_exceeded": "1 if the collect hit its deadline",
    "collect_s": "wall-clock seconds of the collect",
    "episodes_per_s": "episodes_completed / collect_s",
}


@dataclass
class RolloutResult:
    """Complete groups (each a list of ``group_size`` trajectories, by sample index) and what went wrong.

    ``failed`` holds every attempt that ended in ``error`` (for the logs; never trained on), including
    those of groups that completed after a retry. ``metrics`` has every key of :data:`METRIC_NAMES`.
    """

    groups: list[list[Trajectory]] = field(default_factory=list)
    failed: list[Trajectory] = field(default_factory=list)
    dropped_group_ids: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for group in self.groups for t in group]


class Rollout(Protocol):
    """What the training loop and the held-out evaluation need of a rollout: play groups, close.

    :class:`~trainer.rollout.RolloutManager` (environment actors) and :class:`~trainer.agent_rollout.AgentRollout`
    (an external agent through the gateway) both are one.
    """

    async def collect(
        self,
        groups: Sequence[GroupRequest],
        /,
        *,
        sampling: SamplingParams,
        limits: EpisodeLimits | None = None,
        policy_version: int = 0,
        max_in_flight: int | None = None,
    ) -> RolloutResult:
        """Play every group of ``groups`` at ``policy_version``, at most ``max_in_flight`` episodes at once (None:
        the rollout's own limits); return the complete groups and the counts."""
        ...

    def close(self) -> object:
        """Stop what the rollout started (a coroutine for rollouts that close asynchronously)."""
        ...
