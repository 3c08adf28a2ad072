"""Keeping the engine on the learner's weights through its restarts.

Ray restarts a dead ``hf`` engine actor (``engine.max_restarts``) with the weights it was built with: before
each rollout the loop checks the engine's policy version and gives it the learner's weights again if it lost
them (:func:`engine_in_sync`), and every call that reaches the engine waits out a restart in progress. An engine
actor that died with no restarts left stops the run with :class:`~trainer.faults.RunFailedError`: one line naming
``engine.max_restarts`` and where Ray's logs are. The colocated engine's death is the actor's: its ``ActorDiedError``
goes on to ``trainer.run``, which restarts the actor from the last checkpoint (:mod:`trainer.faults`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.engines.base import Engine
from trainer.engine_actor import error_from_actor_of

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
    c.faults.engine_instance(await _while_restarting(c.engine.instance_async, c.engine))


async def sync_engine(c: Components, policy_version: int) -> None:
    """Give the engine the actor's weights as ``policy_version`` (waiting out an engine actor's restart)."""
    await _while_restarting(
        lambda: c.learner.sync_weights(c.engine, policy_version, c.run_dir / "engine_weights"), c.engine
    )


async def engine_stats(engine: Engine) -> Any:
    """The engine's counters (a restarting engine actor is waited for)."""
    return await _while_restarting(engine.stats_async, engine)


async def _while_restarting(call: Callable[[], Any], engine: Engine, timeout_s: float = 300.0) -> Any:
    """``await call()``, again every half second while the actor it reaches is being restarted by Ray.

    Raises :class:`~trainer.faults.RunFailedError` if ``engine``'s actor is dead for good (Ray restarts it no more),
    and Ray's ``ActorDiedError`` itself for the colocated engine, whose death ``trainer.run`` recovers from.
    """
    from trainer.faults import RunFailedError, engine_died_message
    from trainer.rollout import import_ray

    exceptions = import_ray().exceptions
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
        except exceptions.ActorDiedError as exc:
            if error_from_actor_of(exc, engine) is False:  # another actor (a learner rank): not the engine's fault
                raise
            if engine.weight_sync == "shared":  # the colocated actor: trainer.run restarts it from a checkpoint
                raise
            raise RunFailedError(engine_died_message()) from exc
