"""Rollout through the gateway: a user's agent function plays the episodes instead of a ``TextEnv``.

``python -m trainer.run agent.entry=my_agent.py:agent agent.tasks=my_agent.py:task algo=grpo`` trains
the policy behind an unmodified OpenAI-SDK agent (:mod:`agents.gateway.agent`). :class:`AgentRollout`
has the interface of :class:`~trainer.rollout.RolloutManager` (``collect``, ``close``), so the
training loop, the held-out evaluation and the metrics are the same as for environments:

* the gateway (:class:`~agents.gateway.service.Gateway` behind a
  :class:`~agents.gateway.server.GatewayServer` on ``127.0.0.1``) runs in the trainer's process and
  event loop, in front of the run's engine (for ``hf``, a client of the shared engine actor);
* a group request is ``group_size`` episodes of the task ``tasks(seed)``; each attempt of an episode is
  one gateway session whose sampling is the collect's (the rollout
  temperature, whatever the agent asks for: the learner scores that distribution) and whose turns are
  stamped with the collect's policy version;
* the same rules as environment actors: an episode that ends in ``error`` (the agent raised, hung past
  ``episode_timeout_s``, returned no reward, never sent a request) is played again up to
  ``max_episode_retries`` times, then its whole group is dropped and its other episodes cancelled;
  at ``collect_timeout_s`` unfinished groups are dropped; returned groups are complete;
* an episode whose history was not append-only gives several trajectories (its segments), all in its
  group (:mod:`agents.gateway.sessions` gives the reward rule); ``rollout/segments_per_episode`` says
  how many on average.

At most ``max_concurrent_episodes`` agent episodes run at once. Agents run as tasks of the
trainer's event loop: an agent that blocks the loop (synchronous I/O, ``time.sleep``) stalls the
rollout, so use ``command`` for agents that are not async programs.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.engines.base import Engine, SamplingParams
from agents.episode import EpisodeLimits
from agents.trajectory import Trajectory
from trainer.rollout_records import METRIC_NAMES, GroupRequest, RolloutResult

__all__ = ["AgentRollout", "AgentRolloutConfig"]

log = logging.getLogger("trainer.run")


@dataclass(frozen=True)
class AgentRolloutConfig:
    """The agent (``entry`` or ``command``), its tasks, and the rollout's limits (module docstring)."""

    entry: str | None = None
    command: str | None = None
    tasks: str | None = None
    max_concurrent_episodes: int = 64
    episode_timeout_s: float | None = 300.0
    max_episode_retries: int = 1
    collect_timeout_s: float | None = 1800.0
    max_total_tokens: int = 4096
    model_name: str = "turngym"


class AgentRollout:
    """Collects groups of agent episodes through a gateway over ``engine`` (module docstring)."""

    def __init__(self, config: AgentRolloutConfig, engine: Engine, tokenizer: Any) -> None:
        from agents.gateway.agent import load_agent, load_tasks
        from agents.gateway.service import Gateway, GatewayLimits

        self.config = config
        self.agent = load_agent(config.entry, config.command)
        self.tasks = load_tasks(config.tasks)
        limits = GatewayLimits(
            max_total_tokens=config.max_total_tokens,
            max_sessions=max(4096, 4 * config.max_concurrent_episodes),
            session_ttl_s=config.episode_timeout_s or 3600.0,
        )
        self.gateway = Gateway(engine, tokenizer, model_name=config.model_name, limits=limits, create_sessions=False)
        self._server: Any = None
        self._numbers = itertools.count()

    @property
    def task_name(self) -> str:
        return f"agent:{self.config.entry or self.config.command}"

    async def start(self) -> str:
        """Start the gateway's HTTP server (done by the first ``collect`` otherwise); returns its URL."""
        from agents.gateway.server import GatewayServer

        if self._server is None:
            self._server = GatewayServer(self.gateway)
            await self._server.start()
        return self._server.url

    async def collect(
        self,
        requests: Sequence[GroupRequest],
        *,
        sampling: SamplingParams,
        limits: EpisodeLimits | None = None,
        policy_version: int = 0,
        max_in_flight: int | None = None,
    ) -> RolloutResult:
        """Play every group of ``requests`` with the agent (rules: module docstring); ``max_in_flight`` lowers
        ``max_concurrent_episodes`` for this call."""
        await self.start()
        started = time.perf_counter()
        counts = dict.fromkeys(METRIC_NAMES, 0.0)
        cap = self.config.max_concurrent_episodes
        limit = asyncio.Semaphore(cap if max_in_flight is None else max(1, min(cap, max_in_flight)))
        failed: list[Trajectory] = []

        async def episode(group_id: str, request: GroupRequest, index: int) -> list[Trajectory]:
            for attempt in range(self.config.max_episode_retries + 1):
                if attempt:
                    counts["episodes_retried"] += 1
                async with limit:
                    trajectories = await self._play(group_id, request, index, attempt, sampling, policy_version)
                if trajectories[0].termination != "error":
                    return trajectories
                counts["episodes_failed"] += 1
                counts["env_errors"] += 1
                failed.extend(trajectories)
            raise _EpisodeFailed(trajectories[0].error or "the agent failed")

        async def group(request: GroupRequest) -> tuple[str, list[Trajectory] | None]:
            group_id = request.group_id or f"{self.task_name}/{request.seed}/{next(self._numbers)}"
            members = [asyncio.ensure_future(episode(group_id, request, i)) for i in range(request.group_size)]
            try:
                results = await asyncio.gather(*members)
            except _EpisodeFailed as exc:
                for member in members:
                    member.cancel()
                await asyncio.gather(*members, return_exceptions=True)
                log.debug("group %s dropped: %s", group_id, exc)
                return group_id, None
            return group_id, [t for result in results for t in result]

        tasks = [asyncio.ensure_future(group(request)) for request in requests]
        _, pending = await asyncio.wait(tasks, timeout=self.config.collect_timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        result = RolloutResult(failed=failed)
        for request, task in zip(requests, tasks, strict=True):
            if task in pending:
                result.dropped_group_ids.append(request.group_id or f"{self.task_name}/{request.seed}")
                counts["groups_dropped_deadline"] += 1
                continue
            group_id, trajectories = task.result()
            if trajectories is None:
                result.dropped_group_ids.append(group_id)
            else:
                result.groups.append(trajectories)
        collect_s = time.perf_counter() - started
        episodes = len({(t.group_id, t.metrics.get("gateway/episode")) for t in result.trajectories})
        counts.update(
            groups_requested=float(len(requests)),
            groups_completed=float(len(result.groups)),
            groups_dropped=float(len(result.dropped_group_ids)),
            episodes_completed=float(len(result.trajectories)),
            deadline_exceeded=float(bool(pending)),
            collect_s=collect_s,
            episodes_per_s=episodes / collect_s if collect_s > 0 else 0.0,
        )
        result.metrics = {f"rollout/{k}": v for k, v in counts.items()}
        result.metrics["rollout/segments_per_episode"] = len(result.trajectories) / episodes if episodes else 0.0
        return result

    async def _play(
        self,
        group_id: str,
        request: GroupRequest,
        index: int,
        attempt: int,
        sampling: SamplingParams,
        policy_version: int,
    ) -> list[Trajectory]:
        from agents.gateway.agent import play_session

        session_id = f"{uuid.uuid4().hex}-{index}-{attempt}"
        try:
            task = self.tasks(request.seed)
        except Exception as exc:
            raise RuntimeError(f"the task source failed on seed {request.seed}: {exc}") from exc
        trajectories = await play_session(
            self.gateway,
            self._server.session_url,
            self.agent,
            task,
            session_id=session_id,
            group_id=group_id,
            seed=request.seed,
            task_name=self.task_name,
            timeout_s=self.config.episode_timeout_s,
            sampling=sampling,
            policy_version=policy_version,
        )
        for trajectory in trajectories:
            trajectory.metrics["gateway/episode"] = float(index)
        return trajectories

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()
            self._server = None


class _EpisodeFailed(Exception):
    """An episode out of retries: its group is dropped."""


def agent_rollout_factory(config: AgentRolloutConfig) -> Callable[[Engine, Any], AgentRollout]:
    """Build the rollout once the engine and tokenizer exist (``trainer.components``)."""
    return lambda engine, tokenizer: AgentRollout(config, engine, tokenizer)
