"""Held-out evaluation during training: fixed seeds no phase trains on, played by the current policy.

``trainer.run`` evaluates before the first update (after the warm-up, if any), every
``evaluation.every`` steps and after the last step, through the same environment actors and engine
as the rollout. The seeds (``evaluation.seed + i``) and the sampling seeds are the same at every
evaluation, so two evaluations differ only by the policy: a paired comparison. The figures are
:func:`agents.eval.summarize`'s, as ``python -m agents.eval`` prints them, under ``eval/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.policy import sampling_and_limits

if TYPE_CHECKING:
    from trainer.config import TrainConfig
    from trainer.rollout_records import Rollout

__all__ = ["evaluate_held_out", "evaluation_due", "held_out_metrics"]


def evaluation_due(config: TrainConfig, step: int) -> bool:
    """Evaluate after step ``step`` (0: before the first update)?"""
    evaluation = config.evaluation
    if not evaluation.enabled:
        return False
    if step in (0, config.trainer.total_steps):
        return True
    return evaluation.every > 0 and step % evaluation.every == 0


def held_out_metrics(trajectories: list[Any]) -> dict[str, float]:
    """``eval/*``: success rate and its standard error, return, invalid-action rate, turns, errors; for an env
    that reports the solver's distance, the success rate and episode count per difficulty bucket
    (``eval/success_moves_1-3``, ``eval/episodes_moves_1-3``, ...: the level's optimal moves) and the failures
    left with no solution or in a solvable position (``eval/failed_lost``, ``eval/failed_solvable``)."""
    from agents.eval import summarize

    summary = summarize(trajectories)
    metrics = {
        "eval/success_rate": summary.success_rate,
        "eval/success_stderr": summary.success_stderr,
        "eval/return": summary.mean_return,
        "eval/return_stderr": summary.return_stderr,
        "eval/invalid_action_rate": summary.invalid_action_rate,
        "eval/turns": summary.mean_turns,
        "eval/response_tokens": summary.mean_sampled_tokens,
        "eval/episodes": float(summary.episodes),
        "eval/errors": float(summary.errors),
        **{f"eval/success_moves_{name}": rate for name, rate, _ in summary.by_difficulty},
        **{f"eval/episodes_moves_{name}": float(n) for name, _, n in summary.by_difficulty},
    }
    if summary.failed_lost is not None:
        metrics["eval/failed_lost"] = float(summary.failed_lost)
        metrics["eval/failed_solvable"] = float(summary.failed_solvable)
    return metrics


async def evaluate_held_out(
    config: TrainConfig, rollout: Rollout, policy_version: int
) -> tuple[dict[str, float], list]:
    """Play the held-out seeds once each with the current policy; returns ``eval/*`` metrics and the episodes.

    Episodes that end in an error count as failures (as in ``agents.eval``); a seed whose episode keeps
    failing is missing from the table and counted in ``eval/missing``.
    """
    import time

    from agents.config import env_options
    from trainer.rollout import group_requests
    from trainer.seeds import evaluation_sampling_seed

    evaluation, options = config.evaluation, config.rollout
    started = time.perf_counter()
    seeds = range(evaluation.seed, evaluation.seed + evaluation.episodes)
    requests = group_requests(config.env["id"], seeds, 1, env_options(config))
    sampling, limits = sampling_and_limits(
        options,
        seed=evaluation_sampling_seed(config.trainer.seed),  # the same sampling seeds at every evaluation
        temperature=evaluation.temperature,  # None: the rollout's
        step_timeout_s=options.step_timeout_s,
    )
    result = await rollout.collect(
        requests,
        sampling=sampling,
        limits=limits,
        policy_version=policy_version,
        max_in_flight=evaluation.max_concurrent_episodes,
    )
    episodes = [t for group in result.groups for t in group]
    metrics = held_out_metrics(episodes) if episodes else {"eval/episodes": 0.0}
    metrics["eval/missing"] = float(evaluation.episodes - len(episodes))
    metrics["time/eval_s"] = time.perf_counter() - started
    return metrics, episodes
