"""Keeping the engine on the learner's weights through its restarts.

Ray restarts a dead ``hf`` engine actor (``engine.max_restarts``) with the weights it was built with: before
each rollout the loop checks the engine's policy version and gives it the learner's weights again if it lost
them (:func:`engine_in_sync`), and every call that reaches the engine waits out a restart in progress.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.engines.base import Engine

if TYPE_CHECKING:
    from trainer.components import Components

__all__ = ["engine_in_sync", "engine_stats", "sync_engine", "watch_engine"]

log = logging.getLogger("trainer.run")


async def engine_in_sync(c: Components, policy_version: int) -> Any:
    """The engine's counters, after giving it the learner's weights again if it lost them (version 0 again).

    Ray restarts a dead ``hf`` engine actor (``engine.max_restarts``) with the weights it was built
    with; the rollout must not sample from them under a later version's name.
    """
    stats = await engine_stats(c.engine)
    await watch_engine(c)
    if stats.policy_version != policy_version:
        log.warning(
            "the engine is at policy version %d, not %d (restarted?): syncing it", stats.policy_version, policy_version
        )
        await sync_engine(c, policy_version)
        stats = await engine_stats(c.engine)
    return stats


async def watch_engine(c: Components) -> None:
    """Count a restart of the engine since the last look (:meth:`trainer.faults.FaultWatch.engine_instance`)."""
    c.faults.engine_instance(await _while_restarting(c.engine.instance_async))


async def sync_engine(c: Components, policy_version: int) -> None:
    """Give the engine the actor's weights as ``policy_version`` (waiting out an engine actor's restart)."""
    await _while_restarting(lambda: c.learner.sync_weights(c.engine, policy_version, c.run_dir / "engine_weights"))


async def engine_stats(engine: Engine) -> Any:
    """The engine's counters (a restarting engine actor is waited for)."""
    return await _while_restarting(engine.stats_async)


async def _while_restarting(call: Callable[[], Any], timeout_s: float = 300.0) -> Any:
    """``await call()``, again every half second while the actor it reaches is being restarted by Ray."""
    from trainer.rollout import import_ray

    unavailable = import_ray().exceptions.ActorUnavailableError
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
