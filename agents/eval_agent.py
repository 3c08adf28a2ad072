"""``python -m agents.eval env=agent``: evaluate an agent program (:mod:`agents.gateway.agent`) on its tasks.

The same agent function that ``trainer.run env=agent`` trains is run once per seed:

* ``agent=openai base_url=...``: directly against any OpenAI-compatible endpoint; the JSONL records
  hold each episode's reward and success (an endpoint returns no token ids);
* ``agent=hf`` / ``sglang``: through a gateway in this process in front of that engine, so every
  episode is recorded as token-level trajectories (one per segment), usable for ``trainer.sft``
  (``sft.source=files``) and for reading.

The table counts episodes (an episode's segments share its reward); an agent that fails (raises,
times out, returns no reward) counts as a failure and its error is recorded.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from agents.engines.registry import engine_names
from agents.trajectory import Trajectory

if TYPE_CHECKING:
    from agents.config import EvalConfig

__all__ = ["evaluate_program"]


async def evaluate_program(config: EvalConfig) -> tuple[list[Trajectory], list[Trajectory], dict[str, Any]]:
    """Play the agent on seeds ``seed, seed + 1, ...``: (one record per episode, all records, engine metrics)."""
    from agents.config import UsageError
    from agents.gateway.agent import evaluate_agent, load_agent, load_tasks

    try:
        agent = load_agent(config.agent_entry, config.agent_command)
        tasks = load_tasks(config.agent_tasks)
        tasks(config.seed)
    except Exception as exc:
        raise UsageError(f"env=agent: {type(exc).__name__}: {exc}") from exc
    seeds = list(range(config.seed, config.seed + config.episodes))
    name = f"agent:{config.agent_entry or config.agent_command}"
    if config.agent == "openai":
        if not config.base_url:
            raise UsageError("agent=openai needs base_url=<an OpenAI-compatible .../v1 URL>")
        api_key = os.environ.get(config.api_key_env, "EMPTY")
        results = await evaluate_agent(
            agent, tasks, seeds, base_url=config.base_url, api_key=api_key, concurrency=config.concurrency
        )
        records = [_outcome_record(name, seed, outcome, error) for seed, outcome, error in results]
        return records, records, {}
    if config.agent not in engine_names(token_level=True, aliases=True):
        choices = ", ".join(engine_names(token_level=True))  # through the gateway; openai: the endpoint directly
        raise UsageError(f"env=agent runs an agent program: use agent={choices} or openai, not {config.agent}")
    return await _through_gateway(config, agent, tasks, seeds, name)


async def _through_gateway(config: EvalConfig, agent: Any, tasks: Any, seeds: list[int], name: str):
    from agents.gateway.agent import play_session
    from agents.gateway.server import GatewayServer
    from agents.gateway.service import Gateway, GatewayLimits
    from agents.policy import make_policy

    policy = make_policy(config.agent, config, batch_size=config.concurrency)
    assert policy.engine is not None and policy.renderer is not None
    gateway = Gateway(
        policy.engine,
        policy.renderer.tokenizer,  # type: ignore[attr-defined]
        model_name=config.model,
        limits=GatewayLimits(max_total_tokens=config.max_total_tokens, default_max_tokens=config.max_new_tokens),
        create_sessions=False,
    )
    limit = asyncio.Semaphore(config.concurrency)
    try:
        async with GatewayServer(gateway) as server:

            async def one(seed: int) -> list[Trajectory]:
                async with limit:
                    return await play_session(
                        gateway,
                        server.session_url,
                        agent,
                        tasks(seed),
                        session_id=f"eval-{seed}",
                        group_id=f"eval/{seed}",
                        seed=seed,
                        task_name=name,
                    )

            episodes = await asyncio.gather(*(one(seed) for seed in seeds))
        metrics = policy.engine.stats().as_metrics()
    finally:
        await policy.close()
    return [segments[0] for segments in episodes], [t for segments in episodes for t in segments], metrics


def _outcome_record(name: str, seed: int, outcome: Any, error: str | None) -> Trajectory:
    if outcome is None:
        return Trajectory(name, seed, f"eval/{seed}", termination="error", error=error)
    success = outcome.reward > 0 if outcome.success is None else outcome.success
    episode_return = outcome.reward + sum(outcome.turn_rewards or [])
    return Trajectory(name, seed, f"eval/{seed}", episode_return=episode_return, success=success)
