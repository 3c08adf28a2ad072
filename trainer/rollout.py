"""Rollout: Ray environment actors playing groups of episodes against a shared engine.

    init_ray()                                  # trainer.ray_cluster: local Ray, capped object store
    engine = launch_engine_actor(EngineSpec("hf", "smollm2"))   # trainer.engine_actor: the shared engine
    config = RolloutConfig(num_env_actors=2)
    with RolloutManager(config, ChatRendererFactory("smollm2"), engine.factory()) as manager:
        result = asyncio.run(manager.collect(group_requests("sokoban", seeds=range(8), group_size=4)))
    result.groups        # 8 lists of 4 trajectories: same seed and group_id within a list
    result.metrics       # rollout/* counters (trainer.rollout_records.METRIC_NAMES)

:class:`RolloutManager` owns K environment actors (:class:`trainer.rollout_worker.EnvActor`). One
``collect`` sends each episode as its own actor call to the least busy actor, then settles the
calls as they finish:

* an episode that ended in ``error`` (environment exception, step timeout, engine failure) is played
  again, up to ``max_episode_retries`` times; after that its whole group is dropped and the group's
  other episodes are cancelled. Returned groups are always complete;
* an actor that dies (``ray.kill``, a crash, the OOM killer) is replaced and the episodes it had in
  flight are started again on the others, without using up their retries; more than
  ``max_actor_restarts`` replacements within one collect raise ``RuntimeError``;
* an actor whose environment steps timed out ``restart_after_step_timeouts`` times (over its life,
  across collects) is recycled: it gets no new episodes, a fresh actor takes its place, and it is
  killed once its episodes finish. This bounds the threads that hung environments leave behind
  (Python cannot stop a thread; each timed-out step may leave one running);
* at ``collect_timeout_s`` every unfinished call is cancelled and the unfinished groups are dropped.

``max_in_flight`` caps the episodes one ``collect`` has in flight across all actors (the others wait, in
request order, and start as episodes finish); each actor's own ``max_concurrent_episodes`` still applies.
Every episode in flight holds its conversation's keys and values in the engine between turns, so the cap
bounds the engine's memory where more episodes than the engine has rows would only wait.

A configuration error in a worker (an unknown environment id) or a bug in the rollout code raises
out of ``collect``. The engine actor is not the manager's: if it dies, every episode ends in
``error`` (engine failure), the groups are dropped and the metrics say so; its owner restarts it.
Every count is in :attr:`RolloutResult.metrics`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.engines.base import SamplingParams
from agents.episode import EpisodeLimits, EpisodeSpec, Renderer
from agents.trajectory import Trajectory
from trainer.engine_actor import EngineFactory
from trainer.ray_cluster import import_ray, init_ray
from trainer.rollout_records import METRIC_NAMES, GroupRequest, Rollout, RolloutConfig, RolloutResult, group_requests
from trainer.rollout_worker import EnvActor, is_step_timeout

__all__ = [
    "GroupRequest",
    "Rollout",
    "RolloutConfig",
    "RolloutManager",
    "RolloutResult",
    "group_requests",
]


@dataclass(eq=False)
class _Actor:
    """One environment actor as the manager sees it."""

    handle: Any
    index: int
    in_flight: int = 0
    step_timeouts: int = 0
    retiring: bool = False  # recycled: no new episodes, killed once in_flight reaches 0
    dead: bool = False


@dataclass(eq=False)
class _Call:
    spec: EpisodeSpec
    actor: _Actor
    ref: Any
    attempt: int  # 0 for the first play, +1 per retry after an error


@dataclass(eq=False)
class _Group:
    request: GroupRequest
    group_id: str
    members: dict[int, Trajectory] = field(default_factory=dict)
    dropped: bool = False


class RolloutManager:
    """Collects groups of trajectories with K environment actors (behaviour in the module docstring).

    ``make_renderer`` and ``make_engine`` are picklable zero-argument factories, called in every
    actor's process (:meth:`trainer.engine_actor.EngineClient.factory` for the shared engine actor).
    ``setup`` (picklable, optional) runs first in each actor's process, e.g. to register environments
    that are not installed as plugins. Starts Ray locally (:func:`init_ray`) if it is not running.
    """

    def __init__(
        self,
        config: RolloutConfig,
        make_renderer: Callable[[], Renderer],
        make_engine: EngineFactory,
        *,
        setup: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self._ray = import_ray()
        init_ray()
        self._actor_class = self._ray.remote(EnvActor).options(
            num_cpus=config.env_actor_num_cpus,
            resources=dict(config.env_actor_resources),
            max_concurrency=config.max_concurrent_episodes + 8,  # room for stats calls beside the episodes
            max_restarts=0,  # the manager replaces dead actors itself, and re-dispatches their episodes
        )
        self._actor_args = (make_renderer, make_engine, config.max_concurrent_episodes, setup)
        self._numbers = itertools.count()
        self._actors = [self._start_actor(i) for i in range(config.num_env_actors)]
        self._wait_ready(self._actors)

    # ---------------------------------------------------------------------------------------------- lifecycle
    @property
    def actor_handles(self) -> list[Any]:
        """The handles of the current actors (for inspection and fault-injection tests)."""
        return [actor.handle for actor in self._actors]

    def close(self) -> None:
        """Kill every actor. The manager cannot be used afterwards."""
        for actor in self._actors:
            self._ray.kill(actor.handle)
        self._actors = []

    def __enter__(self) -> RolloutManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _start_actor(self, index: int) -> _Actor:
        return _Actor(handle=self._actor_class.remote(*self._actor_args), index=index)

    def _wait_ready(self, actors: Sequence[_Actor]) -> None:
        refs = [actor.handle.stats.remote() for actor in actors]
        try:
            self._ray.get(refs, timeout=self.config.actor_ready_timeout_s)
        except self._ray.exceptions.GetTimeoutError:
            self.close()
            raise TimeoutError(
                f"environment actors did not start within {self.config.actor_ready_timeout_s} s; "
                "is the Ray cluster out of CPUs, or has no node the resources they need? "
                f"(RolloutConfig.env_actor_num_cpus={self.config.env_actor_num_cpus}, "
                f"env_actor_resources={dict(self.config.env_actor_resources)})"
            ) from None
        except self._ray.exceptions.RayActorError as exc:
            self.close()
            raise RuntimeError(f"an environment actor failed to start (renderer, engine or setup): {exc}") from exc

    # ---------------------------------------------------------------------------------------------- collect
    async def collect(
        self,
        groups: Sequence[GroupRequest],
        *,
        sampling: SamplingParams | None = None,
        limits: EpisodeLimits | None = None,
        policy_version: int | None = None,
        timeout_s: float | None = None,
        max_in_flight: int | None = None,
    ) -> RolloutResult:
        """Play every group; return the complete ones in request order (``timeout_s`` overrides the deadline;
        ``max_in_flight``: at most this many episodes at once, module docstring)."""
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1 or None, got {max_in_flight}")
        run = _CollectRun(self, sampling, limits, policy_version, max_in_flight)
        timeout_s = timeout_s if timeout_s is not None else self.config.collect_timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for request in groups:
            group_id = request.group_id or f"{request.env_id}/{request.seed}/{next(self._numbers)}"
            run.add_group(_Group(request, group_id))
        for group in run.groups:
            for spec in group.request.specs(group.group_id):
                run.dispatch(spec, attempt=0)
        try:
            while run.pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                done, _ = await asyncio.wait(run.pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    run.settle(future)
                run.start_waiting()
        except BaseException:
            # Cancelled (the run is stopping) or failed: the episodes still in flight are abandoned, and their
            # futures cancelled, so that the actors' deaths at close do not surface as unretrieved exceptions.
            run.cancel_all()
            raise
        run.stop_at_deadline()
        return run.result()

    # ---------------------------------------------------------------------------------------------- actors
    def _pick_actor(self) -> _Actor:
        live = [actor for actor in self._actors if not actor.retiring and not actor.dead]
        return min(live, key=lambda actor: actor.in_flight)

    def _replace(self, actor: _Actor) -> None:
        """Put a fresh actor in ``actor``'s place; a dead one is killed for good, a retiring one once drained."""
        self._actors[self._actors.index(actor)] = self._start_actor(actor.index)
        if actor.dead or actor.in_flight == 0:
            self._ray.kill(actor.handle)
        else:
            actor.retiring = True

    def _finished_call(self, actor: _Actor) -> None:
        actor.in_flight -= 1
        if actor.retiring and actor.in_flight == 0:
            self._ray.kill(actor.handle)


class _CollectRun:
    """The state of one ``collect``: calls in flight, groups so far, counters."""

    def __init__(
        self,
        manager: RolloutManager,
        sampling: SamplingParams | None,
        limits: EpisodeLimits | None,
        policy_version: int | None,
        max_in_flight: int | None = None,
    ) -> None:
        self.manager = manager
        self.max_in_flight = max_in_flight
        self.waiting: collections.deque[tuple[EpisodeSpec, int]] = collections.deque()  # over the cap, in order
        self.config = manager.config
        self.args = (sampling, limits, policy_version)
        self.started = time.perf_counter()
        self.groups: list[_Group] = []
        self.by_id: dict[str, _Group] = {}
        self.pending: dict[asyncio.Future, _Call] = {}
        self.failed: list[Trajectory] = []
        self.counts = dict.fromkeys(METRIC_NAMES, 0.0)
        self.restarts = 0

    def add_group(self, group: _Group) -> None:
        if group.group_id in self.by_id:
            raise ValueError(f"two groups of one collect share the group_id {group.group_id!r}")
        self.groups.append(group)
        self.by_id[group.group_id] = group

    def dispatch(self, spec: EpisodeSpec, attempt: int) -> None:
        if self.max_in_flight is not None and len(self.pending) >= self.max_in_flight:
            self.waiting.append((spec, attempt))
            return
        actor = self.manager._pick_actor()
        ref = actor.handle.run_episodes.remote([spec], *self.args)
        actor.in_flight += 1
        self.pending[asyncio.wrap_future(ref.future())] = _Call(spec, actor, ref, attempt)

    def start_waiting(self) -> None:
        """Dispatch waiting episodes (of groups still playing) while the cap allows."""
        while self.waiting and (self.max_in_flight is None or len(self.pending) < self.max_in_flight):
            spec, attempt = self.waiting.popleft()
            if not self.by_id[spec.group_id].dropped:
                self.dispatch(spec, attempt)

    def settle(self, future: asyncio.Future) -> None:
        call = self.pending.pop(future, None)
        if call is None:  # cancelled (its group was dropped) after it had finished
            return
        self.manager._finished_call(call.actor)
        group = self.by_id[call.spec.group_id]
        error = future.exception()
        if isinstance(error, self.manager._ray.exceptions.RayActorError):
            self._actor_died(call, error)
        elif error is not None:
            self.cancel_all()
            raise RuntimeError(f"an environment actor failed on {call.spec}: {error}") from error
        elif not group.dropped:
            self._episode_done(call, group, future.result()[0])

    def _episode_done(self, call: _Call, group: _Group, trajectory: Trajectory) -> None:
        if trajectory.termination != "error":
            trajectory.validate()
            group.members[call.spec.sample_index] = trajectory
            return
        self.failed.append(trajectory)
        self.counts["episodes_failed"] += 1
        if is_step_timeout(trajectory):
            self.counts["step_timeouts"] += 1
            self._count_step_timeout(call.actor)
        else:
            self.counts["env_errors"] += 1
        if call.attempt < self.config.max_episode_retries:
            self.counts["episodes_retried"] += 1
            self.dispatch(call.spec, call.attempt + 1)
        else:
            self._drop(group)

    def _count_step_timeout(self, actor: _Actor) -> None:
        actor.step_timeouts += 1
        if actor.step_timeouts >= self.config.restart_after_step_timeouts and not actor.retiring and not actor.dead:
            self.counts["actors_recycled"] += 1
            self._restart(actor)

    def _actor_died(self, call: _Call, error: Exception) -> None:
        if not call.actor.dead and not call.actor.retiring:
            call.actor.dead = True
            self.counts["actors_died"] += 1
            self._restart(call.actor, error)
        if not self.by_id[call.spec.group_id].dropped:
            self.counts["episodes_redispatched"] += 1
            self.dispatch(call.spec, call.attempt)

    def _restart(self, actor: _Actor, error: Exception | None = None) -> None:
        self.restarts += 1
        if self.restarts > self.config.max_actor_restarts:
            self.cancel_all()
            raise RuntimeError(
                f"environment actors were replaced {self.restarts} times in one collect "
                f"(RolloutConfig.max_actor_restarts={self.config.max_actor_restarts}); last failure: {error}"
            )
        self.counts["actors_restarted"] += 1
        self.manager._replace(actor)

    def _drop(self, group: _Group) -> None:
        group.dropped = True
        self.counts["groups_dropped"] += 1
        for future, call in list(self.pending.items()):
            if call.spec.group_id == group.group_id:
                self._cancel(future, call)

    def _cancel(self, future: asyncio.Future, call: _Call) -> None:
        del self.pending[future]
        future.cancel()
        if not call.actor.dead:
            self.manager._ray.cancel(call.ref)
        self.manager._finished_call(call.actor)

    def cancel_all(self) -> None:
        for future, call in list(self.pending.items()):
            self._cancel(future, call)

    def stop_at_deadline(self) -> None:
        if not self.pending and not self.waiting:
            return
        self.counts["deadline_exceeded"] = 1.0
        unfinished = {call.spec.group_id for call in self.pending.values()} | {s.group_id for s, _ in self.waiting}
        self.waiting.clear()
        self.cancel_all()
        for group in self.groups:
            if group.group_id in unfinished and not group.dropped:
                self.counts["groups_dropped_deadline"] += 1
                self._drop(group)

    def result(self) -> RolloutResult:
        complete = [group for group in self.groups if not group.dropped]
        assert all(len(g.members) == g.request.group_size for g in complete), "a group finished incomplete"
        collect_s = time.perf_counter() - self.started
        self.counts.update(
            groups_requested=float(len(self.groups)),
            groups_completed=float(len(complete)),
            episodes_completed=float(sum(len(g.members) for g in complete)),
            collect_s=collect_s,
        )
        self.counts["episodes_per_s"] = self.counts["episodes_completed"] / collect_s if collect_s > 0 else 0.0
        return RolloutResult(
            groups=[[g.members[i] for i in range(g.request.group_size)] for g in complete],
            failed=self.failed,
            dropped_group_ids=[g.group_id for g in self.groups if g.dropped],
            metrics={f"rollout/{name}": value for name, value in self.counts.items()},
        )
