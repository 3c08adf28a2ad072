"""Environment workers: many episodes at once in one process, against a shared engine.

:class:`EnvWorker` is a plain class (tests drive it directly with ``asyncio.run``): it holds a
renderer and an engine, builds each episode's environment with :func:`envs.make` (so plugin
environments load lazily in the worker's own process) and plays the episodes concurrently with
:func:`agents.episode.run_episode`, at most ``max_concurrent_episodes`` at a time across every call.

:class:`EnvActor` is the thin Ray shell around it: it builds the renderer and the engine client in
the actor's process from picklable factories, runs an optional ``setup`` callable first (to register
environments that are not installed as plugins), and forwards ``run_episodes``.

Guarantees of :meth:`EnvWorker.run_episodes`: one trajectory per spec, in the order of the specs;
an episode that fails (environment or engine exception, a step past ``step_timeout_s``, an
environment constructor that raises) comes back as a trajectory with ``termination == "error"``.
Only an unknown environment id raises (:class:`envs.registry.UnknownEnvironmentError`): that is a
configuration error, and retrying cannot fix it.

A step that times out leaves its thread running (Python cannot stop a thread); :attr:`WorkerStats.step_timeouts`
counts them, and the rollout manager replaces an actor after a configured number of them.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import envs
from agents.engines.base import Engine, SamplingParams
from agents.episode import EpisodeLimits, EpisodeSpec, Renderer, StepTimeoutError, run_episode
from agents.trajectory import Trajectory
from envs.registry import UnknownEnvironmentError

__all__ = ["ChatRendererFactory", "EnvActor", "EnvWorker", "WorkerStats", "is_step_timeout"]

#: How long closing an environment may take before the worker stops waiting for it.
CLOSE_TIMEOUT_S = 10.0


def is_step_timeout(trajectory: Trajectory) -> bool:
    """True when the episode ended because an environment call exceeded ``step_timeout_s``."""
    return trajectory.termination == "error" and (trajectory.error or "").startswith(StepTimeoutError.__name__)


@dataclass
class WorkerStats:
    """Counters since the worker started."""

    episodes: int = 0
    errors: int = 0  # episodes that ended in "error", step timeouts included
    step_timeouts: int = 0  # each may have left a hung thread behind
    pid: int = 0


class EnvWorker:
    """Plays episodes concurrently in this process (contract in the module docstring)."""

    def __init__(self, renderer: Renderer, engine: Engine, *, max_concurrent_episodes: int = 64) -> None:
        if max_concurrent_episodes < 1:
            raise ValueError(f"max_concurrent_episodes must be >= 1, got {max_concurrent_episodes}")
        self.renderer = renderer
        self.engine = engine
        self.max_concurrent_episodes = max_concurrent_episodes
        self._stats = WorkerStats(pid=os.getpid())
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    async def run_episodes(
        self,
        specs: Sequence[EpisodeSpec],
        sampling: SamplingParams | None = None,
        limits: EpisodeLimits | None = None,
        policy_version: int | None = None,
    ) -> list[Trajectory]:
        """Play every spec, concurrently; ``policy_version`` defaults to the engine's current one."""
        for spec in specs:  # fail fast, before any episode starts, on an id no environment has
            envs.registry.spec(spec.env_id)
        if policy_version is None:
            policy_version = (await self.engine.stats_async()).policy_version
        return list(await asyncio.gather(*(self._run_one(s, sampling, limits, policy_version) for s in specs)))

    def stats(self) -> WorkerStats:
        return WorkerStats(**vars(self._stats))

    async def _run_one(
        self, spec: EpisodeSpec, sampling: SamplingParams | None, limits: EpisodeLimits | None, version: int
    ) -> Trajectory:
        async with self._semaphore():
            try:
                env = envs.make(spec.env_id, **spec.env_options)
            except UnknownEnvironmentError:
                raise
            except Exception as exc:  # a constructor that fails (a sandbox that did not start) is an episode error
                trajectory = _error_trajectory(spec, version, f"{type(exc).__name__}: {exc}")
            else:
                trajectory = await run_episode(
                    env, self.engine, self.renderer, spec, sampling=sampling, limits=limits, policy_version=version
                )
                if not is_step_timeout(trajectory):  # a hung environment may hang in close() too
                    await _close(env)
        self._count(trajectory)
        return trajectory

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.max_concurrent_episodes))
        return self._slots[1]

    def _count(self, trajectory: Trajectory) -> None:
        self._stats.episodes += 1
        if trajectory.termination == "error":
            self._stats.errors += 1
        if is_step_timeout(trajectory):
            self._stats.step_timeouts += 1


def _error_trajectory(spec: EpisodeSpec, policy_version: int, error: str) -> Trajectory:
    return Trajectory(
        env_id=spec.env_id,
        seed=spec.seed,
        group_id=spec.group_id,
        policy_version=policy_version,
        env_options=dict(spec.env_options),
        reset_options=dict(spec.reset_options),
        termination="error",
        error=error,
    )


async def _close(env: envs.TextEnv) -> None:
    try:
        await asyncio.wait_for(asyncio.to_thread(env.close), CLOSE_TIMEOUT_S)
    except Exception as exc:  # the episode is already recorded; a failing close must not turn it into an error
        message = f"closing {type(env).__name__} failed: {type(exc).__name__}: {exc}"
        warnings.warn(message, RuntimeWarning, stacklevel=2)


@dataclass(frozen=True)
class ChatRendererFactory:
    """Builds :class:`agents.chat.ChatRenderer` on the tokenizer of ``model`` (a name :mod:`agents.models` knows).

    The tokenizer is :func:`agents.models.load_template_tokenizer`'s: where the model directory allows it, one
    without transformers, so an environment actor never imports torch (same ids as the transformers tokenizer).
    """

    model: str = "tiny"

    def __call__(self) -> Renderer:
        from agents.chat import ChatRenderer
        from agents.models import load_template_tokenizer

        return ChatRenderer(load_template_tokenizer(self.model))


class EnvActor:
    """The Ray actor shell around :class:`EnvWorker` (run with ``ray.remote(EnvActor)``; async actor).

    ``make_renderer`` and ``make_engine`` are picklable zero-argument factories called in the actor's
    process; ``setup``, if given, runs there first (for example to register test or local environments).
    """

    def __init__(
        self,
        make_renderer: Callable[[], Renderer],
        make_engine: Callable[[], Engine],
        max_concurrent_episodes: int = 64,
        setup: Callable[[], None] | None = None,
    ) -> None:
        if setup is not None:
            setup()
        self.worker = EnvWorker(make_renderer(), make_engine(), max_concurrent_episodes=max_concurrent_episodes)

    async def run_episodes(
        self,
        specs: Sequence[EpisodeSpec],
        sampling: SamplingParams | None = None,
        limits: EpisodeLimits | None = None,
        policy_version: int | None = None,
    ) -> list[Trajectory]:
        return await self.worker.run_episodes(specs, sampling, limits, policy_version)

    async def stats(self) -> WorkerStats:
        return self.worker.stats()
