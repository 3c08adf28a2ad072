"""One training step, in the order ``trainer.run``'s loop runs it: the rollout, the batch's scores, the
advantages, the PPO epochs, the step's metrics and its checkpoint.

Each phase is its own function so the loop shows every one of them:

* :func:`rollout_task` - start the step's rollout (its levels' seeds, the curriculum's difficulties, the
  engine checked to hold the learner's weights); :func:`trainable` - the complete groups to train on
  (``algo.filter_groups``); :func:`episode_metrics` - ``reward/*`` and ``episode/*`` of the step;
* :func:`score_batch` - the learner's logprobs of the policy that collected the data (``old``, at the
  rollout temperature), the reference's and the critic's values, and the truncated importance weights
  between the engine's and the learner's logprobs;
* :func:`estimate_advantages` - turn rewards (plus the optional progress shaping) placed on each turn's
  last sampled token, the optional KL penalty in the reward, then the estimator ``algo.advantage`` names
  (:data:`ESTIMATORS`), plus the optional step-level group term (:mod:`trainer.algos.credit`);
* :func:`update` - ``algo.ppo_epochs`` passes over ``algo.mini_batches`` shuffled mini-batches; each
  mini-batch is one optimizer step of the actor (and of the critic), normalised by the mini-batch's
  global token and sequence counts (``trainer.algos.Aggregation``);
* :func:`timing_metrics` - the step's times and throughputs; :func:`save_checkpoint` - the learner's state,
  the policy in Hugging Face format and the trainer's counters, then old checkpoints pruned.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from agents.policy import sampling_and_limits
from agents.trajectory import Trajectory
from trainer.algos import (
    Aggregation,
    PolicyLossSpec,
    apply_kl_penalty,
    credit,
    group_statistics,
    kl_estimate,
    logprob_mismatch,
    masked_mean,
    place_turn_rewards,
    sign_weighted,
    success_signal,
    tis_level_for_step,
    truncated_is_weights,
)
from trainer.algos.estimators import ESTIMATORS, AdvantageInputs
from trainer.algos.placebo import placebo_rewards
from trainer.batch import TrainBatch, reward_positions
from trainer.checkpoint import TrainerState, checkpoint_dir, mark_complete, prune_checkpoints
from trainer.config import AlgoConfig, TrainConfig
from trainer.curriculum import difficulty_mix
from trainer.engine_sync import engine_in_sync, engine_stats, watch_engine
from trainer.learner import Learner
from trainer.rollout_records import RolloutResult, group_requests
from trainer.seeds import curriculum_draw_seed, rollout_sampling_seed, training_level_seeds

if TYPE_CHECKING:
    from trainer.components import Components

__all__ = [
    "episode_metrics",
    "estimate_advantages",
    "policy_loss_spec",
    "rollout_task",
    "save_checkpoint",
    "score_batch",
    "timing_metrics",
    "trainable",
    "update",
]

log = logging.getLogger("trainer.run")


# ---------------------------------------------------------------------------------------------- rollout
def rollout_task(config: TrainConfig, c: Components, step: int, policy_version: int) -> asyncio.Task:
    """Start step ``step``'s rollout: groups of seeds ``seed + (step - 1) * groups_per_step + i``."""
    groups, base = config.trainer.groups_per_step, config.trainer.seed
    env_options = {k: v for k, v in config.env.items() if k != "id"}
    seeds = training_level_seeds(base, step, groups)
    requests = group_requests(config.env["id"], seeds, config.algo.group_size, env_options)
    curriculum_metrics: dict[str, float] = {}
    if c.curriculum is not None:  # every group plays a level of the difficulty drawn for it
        difficulties = c.curriculum.draw(groups, seed=curriculum_draw_seed(base, step))
        requests = [replace(r, reset_options={"difficulty": d}) for r, d in zip(requests, difficulties, strict=True)]
        curriculum_metrics = {**difficulty_mix(difficulties), "curriculum/ceiling": float(c.curriculum.ceiling)}
    rollout = config.rollout
    sampling, limits = sampling_and_limits(
        rollout, seed=rollout_sampling_seed(base, step), step_timeout_s=rollout.step_timeout_s
    )

    async def collect() -> tuple[RolloutResult, dict[str, float]]:
        started = time.perf_counter()
        for attempt in range(2):
            before = await engine_in_sync(c, policy_version)
            result = await c.rollout.collect(requests, sampling=sampling, limits=limits, policy_version=policy_version)
            after = await engine_stats(c.engine)
            await watch_engine(c)
            if after.policy_version == policy_version or attempt == 1:
                break
            # The engine restarted during the rollout: part of it came from the wrong weights. Play it again.
            log.warning("the engine restarted during step %d's rollout; playing the step again", step)
        if c.engine.weight_sync == "shared":  # colocated: the learner scores and trains next, in the same process,
            # and the next sync empties the cache anyway: free it for them now; the layer inputs serve the update
            await c.engine.drop_prefix_cache(keep_layer_inputs=True)
        held = (await engine_stats(c.engine)).extra.get("prefix_cache_tokens", 0.0)  # while the learner trains
        prompt = after.prompt_tokens - before.prompt_tokens
        cached = after.cached_prompt_tokens - before.cached_prompt_tokens
        metrics = {
            "time/rollout_s": time.perf_counter() - started,
            "rollout/prefix_hit_rate": cached / prompt if prompt else 0.0,
            "rollout/prompt_tokens": float(prompt),
            "rollout/generated_tokens": float(after.generated_tokens - before.generated_tokens),
            "engine/restarts": float(c.faults.engine_restarts),
            "engine/prefix_cache_tokens_held": float(held),
            **curriculum_metrics,
        }
        return result, metrics

    return asyncio.ensure_future(collect())


def trainable(result: RolloutResult, keep_fraction: float = 1.0) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories to train on: every member of the complete groups (failed attempts are not in groups),
    or with ``keep_fraction`` < 1 of the groups whose returns vary most (``algo.filter_groups``,
    :func:`trainer.algos.select_groups_by_std`); returns them and ``filter/*`` metrics."""
    from trainer.algos import select_groups_by_std

    groups = [[t for t in group if t.trainable] for group in result.groups]
    groups = [group for group in groups if group]
    if keep_fraction >= 1.0 or not groups:
        return [t for group in groups for t in group], {}
    kept = select_groups_by_std([[t.episode_return for t in group] for group in groups], keep_fraction)
    return [t for i in kept for t in groups[i]], {
        "filter/kept_groups": float(len(kept)),
        "filter/groups": float(len(groups)),
    }


def episode_metrics(result: RolloutResult) -> dict[str, float]:
    """reward/*, episode/* over the step's complete episodes (empty when every group was dropped).

    The same definitions as ``python -m agents.eval``'s table (:func:`agents.eval.summarize`), plus
    ``env/<name>``: the mean of every numeric metric the episodes' ``Trajectory.metrics`` hold (their
    env's last ``info["metrics"]``), over the episodes that report it. Where the env reports the solver's
    distance, ``episode/lost_fraction``: the share of episodes that failed in a position with no solution.
    """
    import statistics

    from agents.eval import summarize

    episodes = result.trajectories
    if not episodes:
        return {}
    returns = [t.episode_return for t in episodes]
    summary = summarize(episodes)
    n = summary.episodes
    ended = {"truncated": summary.truncated, "max_tokens": summary.max_tokens}
    ended["terminated"] = n - summary.truncated - summary.max_tokens - summary.errors
    return {
        "reward/mean": summary.mean_return,
        "reward/std": statistics.pstdev(returns),
        "reward/max": max(returns),
        "reward/min": min(returns),
        "reward/success_rate": summary.success_rate,
        "episode/turns": summary.mean_turns,
        "episode/response_tokens": summary.mean_sampled_tokens,
        "episode/total_tokens": summary.mean_total_tokens,
        "episode/invalid_action_rate": summary.invalid_action_rate,
        "episode/count": float(n),
        **{f"episode/{kind}_fraction": ended[kind] / n for kind in ("terminated", "truncated", "max_tokens")},
        **({} if summary.failed_lost is None else {"episode/lost_fraction": summary.failed_lost / n}),
        **_env_metric_means(episodes),
    }


def _env_metric_means(episodes: list[Any]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for episode in episodes:
        for name, value in episode.metrics.items():
            if isinstance(value, (int, float)):
                values.setdefault(name, []).append(float(value))
    return {f"env/{name}": sum(found) / len(found) for name, found in sorted(values.items())}


def timing_metrics(metrics: dict[str, Any], started: float, train_started: float) -> dict[str, float]:
    step_s = time.perf_counter() - started
    train_s = time.perf_counter() - train_started
    sampled = metrics.get("episode/response_tokens", 0.0) * metrics.get("episode/count", 0.0)
    out = {
        "time/step_s": step_s,
        "time/train_s": train_s,
        "throughput/tokens_per_s": sampled / metrics["time/rollout_s"] if metrics.get("time/rollout_s") else 0.0,
        "throughput/learner_tokens_per_s": metrics.get("train/tokens", 0.0) / train_s if train_s > 0 else 0.0,
    }
    return out


# ---------------------------------------------------------------------------------------------- scoring
async def score_batch(
    batch: TrainBatch, learner: Learner, config: TrainConfig, *, on_policy: bool = True
) -> dict[str, float]:
    """Fill ``old_logprobs``, ``ref_logprobs``, ``values`` and ``is_weights``; return their metrics.

    ``on_policy``: every trajectory was sampled by the actor's current weights. Then, with
    ``algo.reuse_rollout_logprobs``, the engine's logprobs serve as the old logprobs (the same quantity,
    :mod:`agents.engines.base`), after a check on ``algo.reuse_check_rows`` rows recomputed by the
    actor: if any sampled token differs by more than ``algo.reuse_max_mismatch``, every row is
    recomputed. With the critic's value head on the actor (``algo.critic_model=shared``) the forward that
    computes the values gives every row's logprobs too, and those are the old logprobs; unless the engine gave
    every row's values as well (the colocated engine applies the actor's value head as it samples:
    ``batch.rollout_values``), when the same check, on values and logprobs, lets both stand without that forward.
    The reference is the reference role, or with LoRA the actor with its adapters off.
    """
    temperature, micro = config.rollout.temperature, config.trainer.micro_batch_size
    started = time.perf_counter()
    mask = batch.response_mask
    metrics = await _old_logprobs(batch, learner, config, on_policy, values=learner.value_model is learner.actor)
    if learner.reference is not None:
        batch.ref_logprobs = await learner.reference.compute_logprobs(batch, temperature, micro)
    elif config.algo.reference:
        batch.ref_logprobs = await learner.actor.compute_logprobs(batch, temperature, micro, base=True)
    if learner.critic is not None:
        batch.values = await learner.critic.compute_values(batch, micro)
    metrics["time/score_s"] = time.perf_counter() - started
    tis = config.algo.tis
    level = tis_level_for_step(tis.level, metrics["rollout/logprob_mismatch"], tis.min_mismatch)
    metrics["rollout/tis_applied"] = float(level != "none")
    if level != "none":
        batch.is_weights, stats = truncated_is_weights(
            batch.old_logprobs, batch.rollout_logprobs, mask, level=level, mode=tis.mode, cap=tis.cap
        )
        metrics.update({f"rollout/{k}": float(v) for k, v in stats.items()})
    if batch.ref_logprobs is not None:
        kl = kl_estimate(batch.old_logprobs, batch.ref_logprobs, config.algo.kl_estimator)
        metrics["rollout/kl_ref"] = float(masked_mean(kl, mask))
    return metrics


async def _old_logprobs(
    batch: TrainBatch, learner: Learner, config: TrainConfig, on_policy: bool, *, values: bool = False
) -> dict[str, float]:
    """``batch.old_logprobs`` (and with ``values``, from the actor's value head, ``batch.values``): the engine's,
    verified on a few rows, or recomputed for every row in one forward (see :func:`score_batch`)."""
    algo, temperature, micro = config.algo, config.rollout.temperature, config.trainer.micro_batch_size
    actor = learner.actor

    async def score(rows: TrainBatch) -> tuple[Tensor, Tensor | None]:
        if values:
            return await actor.compute_logprobs_and_values(rows, temperature, micro)
        return await actor.compute_logprobs(rows, temperature, micro), None

    def mismatch(logprobs: Tensor, row_values: Tensor | None, rows: TrainBatch) -> dict[str, float]:
        metrics = _mismatch(logprobs, rows)
        if row_values is not None and rows.rollout_values is not None:
            metrics.update(_value_mismatch(row_values, rows))
        return metrics

    reused = {"rollout/old_logprobs_reused": 1.0, **({"rollout/values_reused": 1.0} if values else {})}
    reusable = algo.reuse_rollout_logprobs and on_policy and (not values or batch.rollout_values is not None)
    if reusable and len(batch) > algo.reuse_check_rows:
        check = batch.select(list(range(algo.reuse_check_rows)))
        metrics = mismatch(*await score(check), check)
        worst = max(metrics["rollout/logprob_mismatch_max"], metrics.get("rollout/value_mismatch_max", 0.0))
        if worst <= algo.reuse_max_mismatch:
            batch.old_logprobs = batch.rollout_logprobs.clone()
            if values:
                batch.values = batch.rollout_values.clone()
            return {**metrics, **reused}
    batch.old_logprobs, scored_values = await score(batch)
    if values:
        batch.values = scored_values
    return {**mismatch(batch.old_logprobs, scored_values, batch), **{key: 0.0 for key in reused}}


def _value_mismatch(recomputed: Tensor, batch: TrainBatch) -> dict[str, float]:
    """The largest |learner - engine| value over ``batch``'s sampled tokens."""
    worst = ((recomputed - batch.rollout_values).abs() * batch.response_mask).max() if len(batch) else 0.0
    return {"rollout/value_mismatch_max": float(worst)}


def _mismatch(recomputed: Tensor, batch: TrainBatch) -> dict[str, float]:
    """The mean and largest |learner - engine| logprob over ``batch``'s sampled tokens."""
    mask = batch.response_mask
    worst = float(((recomputed - batch.rollout_logprobs).abs() * mask).max()) if len(batch) else 0.0
    return {
        "rollout/logprob_mismatch": float(logprob_mismatch(recomputed, batch.rollout_logprobs, mask)),
        "rollout/logprob_mismatch_max": worst,
    }


# ---------------------------------------------------------------------------------------------- advantages
def estimate_advantages(
    batch: TrainBatch,
    trajectories: Sequence[Trajectory],
    algo: AlgoConfig,
    *,
    step: int = 1,
    moves_per_turn: int | None = None,
) -> dict[str, float]:
    """Fill ``batch.advantages`` (and ``batch.returns`` for the critic); return the metrics.

    ``step`` is the training step (1-based); it sets a fading shaping coefficient (``algo.shaping.fade_steps``).
    ``moves_per_turn``: the env's move limit a turn (``env.max_actions_per_turn``), which a charged stop
    (``algo.move_credit.stop``) needs.

    Episode scores are the sum of the turn rewards the trajectory carries (its return); with
    ``algo.kl_in_reward`` the per-token KL penalty is subtracted from the token rewards and so from
    the scores too.
    """
    mask = batch.response_mask
    turn_rewards, metrics = _shaped_turn_rewards(trajectories, algo, step)
    columns = [reward_positions(t) for t in trajectories]
    token_rewards = place_turn_rewards(turn_rewards, columns, tuple(mask.shape))
    if algo.kl_in_reward and algo.kl_coef > 0:
        kl = kl_estimate(batch.old_logprobs, batch.ref_logprobs, algo.kl_estimator)
        token_rewards = apply_kl_penalty(token_rewards, kl, mask, algo.kl_coef)
    scores = token_rewards.sum(dim=1)
    groups = {group: i for i, group in enumerate(dict.fromkeys(t.group_id for t in trajectories))}
    group_index = torch.tensor([groups[t.group_id] for t in trajectories], dtype=torch.long)
    inputs = AdvantageInputs(token_rewards, mask, scores, group_index, batch.values)
    batch.advantages, batch.returns = ESTIMATORS[algo.advantage].compute(inputs, algo)
    if algo.episode_weight != 1:  # the returns (the critic's targets) stay whole
        batch.advantages = algo.episode_weight * batch.advantages
    metrics["advantage/episode_abs_mean"] = float(masked_mean(batch.advantages.abs(), mask))
    if algo.step_groups.weight > 0:
        # position groups compare the rewards as shaped; distance groups the progress form, which end=keep already is
        as_shaped = algo.step_groups.key == "state" or algo.shaping.end == "keep"
        judged = turn_rewards if as_shaped else _progress_turn_rewards(trajectories, algo, step)
        step_term, step_metrics = _step_group_term(trajectories, judged, columns, mask, algo)
        batch.advantages = batch.advantages + algo.step_groups.weight * step_term
        metrics.update(step_metrics)
        metrics["advantage/step_abs_mean"] = float(masked_mean((algo.step_groups.weight * step_term).abs(), mask))
    if algo.move_credit.weight > 0:
        if algo.move_credit.stop and moves_per_turn is None:
            raise ValueError("algo.move_credit.stop charges the moves a turn gave up: pass moves_per_turn")
        move_term, move_metrics = _move_term(
            trajectories,
            mask,
            algo.shaping.unsolvable_distance,
            center=algo.move_credit.center,
            moves_per_turn=moves_per_turn if algo.move_credit.stop else None,
        )
        batch.advantages = batch.advantages + algo.move_credit.weight * move_term
        metrics.update(move_metrics)
        metrics["advantage/move_abs_mean"] = float(masked_mean((algo.move_credit.weight * move_term).abs(), mask))
    if algo.positive_weight != 1 or algo.negative_weight != 1:
        absolute = (batch.advantages.abs() * mask).sum()
        negative = (batch.advantages.clamp(max=0).abs() * mask).sum()
        metrics["advantage/negative_share"] = float(negative / absolute) if absolute > 0 else 0.0
        batch.advantages = sign_weighted(batch.advantages, algo.positive_weight, algo.negative_weight)
    metrics["advantage/mean"] = float(masked_mean(batch.advantages, mask))
    metrics["advantage/abs_mean"] = float(masked_mean(batch.advantages.abs(), mask))
    metrics.update({f"groups/{k}": float(v) for k, v in group_statistics(scores, group_index).items()})
    success = torch.tensor([bool(t.success) for t in trajectories])
    signal = success_signal(success, group_index, (batch.advantages.abs() * mask).sum(dim=1))
    metrics["groups/mixed_success_group_fraction"] = signal["mixed_success_group_fraction"]
    metrics["advantage/share_without_success"] = signal["advantage_share_without_success"]
    metrics["credit/no_success_group_fraction"] = signal["no_success_group_fraction"]
    metrics.update(_progress_metrics(trajectories))
    if batch.returns is not None:
        # The values the advantages were estimated with; critic/value_mean is the update's (its value loss's).
        metrics["critic/return_mean"] = float(masked_mean(batch.returns, mask))
        metrics["advantage/value_mean"] = float(masked_mean(batch.values, mask))
    return metrics


def _shaped_turn_rewards(
    trajectories: Sequence[Trajectory], algo: AlgoConfig, step: int
) -> tuple[list[list[float]], dict[str, float]]:
    """Each trajectory's turn rewards (with ``algo.placebo`` another episode's return, :func:`placebo_rewards`),
    plus progress shaping when ``algo.shaping.coef`` is positive (at ``step``'s coefficient, ``shaping/coef``).

    The shaping is logged apart (``shaping/return_mean``); the environment's return, success and every
    evaluation stay the environment's own.
    """
    rewards = [list(t.turn_rewards) for t in trajectories]
    if algo.placebo:
        rewards = placebo_rewards(rewards, seed=step)
    shaping = algo.shaping
    if shaping.coef == 0:
        return rewards, {}
    coef = shaping.coef_at(step)
    terms = [
        credit.progress_shaping(
            t.turn_distances_before,
            t.turn_distances_after,
            coef=coef,
            gamma=shaping.gamma,
            unsolvable_distance=shaping.unsolvable_distance,
            zero_end=shaping.end == "zero",
        )
        if t.has_state_info
        else [0.0] * len(t.turn_rewards)
        for t in trajectories
    ]
    shaped = [[r + f for r, f in zip(row, extra, strict=True)] for row, extra in zip(rewards, terms, strict=True)]
    return shaped, {
        "shaping/coef": coef,
        "shaping/return_mean": statistics.fmean(sum(extra) for extra in terms) if terms else 0.0,
    }


def _progress_turn_rewards(trajectories: Sequence[Trajectory], algo: AlgoConfig, step: int) -> list[list[float]]:
    """Each trajectory's turn rewards plus the shaping in its progress form (``end=keep``, whatever
    ``algo.shaping.end``): what ``algo.step_groups.key=distance`` compares, so that a turn is judged by where it
    led. With ``end=zero`` the last turn would earn its starting distance instead, and last turns would outrank
    earlier turns from the same distance whatever they did."""
    progress = replace(algo, shaping=replace(algo.shaping, end="keep"))
    return _shaped_turn_rewards(trajectories, progress, step)[0]


def _step_group_term(
    trajectories: Sequence[Trajectory],
    turn_rewards: Sequence[Sequence[float]],
    columns: Sequence[Sequence[int]],
    mask: Tensor,
    algo: AlgoConfig,
) -> tuple[Tensor, dict[str, float]]:
    """GiGPO's step-level advantage on every turn's tokens ``[B, L]`` (before the weight), and its metrics.

    The groups' keys: each turn's starting position (``algo.step_groups.key=state``) or its starting distance to
    the goal (``distance``); a turn without state info is a group of its own."""
    returns = [credit.turn_returns(rewards, algo.step_groups.gamma) for rewards in turn_rewards]
    keys = [key for t in trajectories for key in _turn_group_keys(t, algo.step_groups.key)]
    flat = torch.tensor([r for row in returns for r in row], dtype=torch.float64)
    step = credit.step_group_advantages(flat, keys, normalize_std=algo.normalize_std)
    per_turn, start = [], 0
    for row in returns:
        per_turn.append(step[start : start + len(row)].tolist())
        start += len(row)
    counts = Counter(keys)
    turns = max(len(keys), 1)
    grouped = [counts[k] for k in keys if k is not None]
    metrics = {
        "credit/step_grouped_turn_fraction": sum(key is not None and counts[key] > 1 for key in keys) / turns,
        "credit/step_signal_turn_fraction": float((step != 0).double().sum()) / turns,
        "credit/step_group_size_mean": statistics.fmean(grouped) if grouped else 0.0,
    }
    return credit.turn_values_to_tokens(per_turn, columns, mask), metrics


def _move_term(
    trajectories: Sequence[Trajectory],
    mask: Tensor,
    unsolvable_distance: float,
    *,
    center: bool = False,
    moves_per_turn: int | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Each move's optimal advantage on the tokens that wrote it ``[B, L]`` (before the weight), and its metrics:
    the share of turns whose moves were placed on their tokens, and of the moves the optimal and the losing ones.
    ``center``: the mean over the step's moves is subtracted from each. ``moves_per_turn``: a turn's stop is charged
    too (:func:`trainer.algos.credit.stop_advantage`, not centred), on its tokens after its last move. A trajectory
    without per-move information gets none of it."""
    values, ends, starts, stops = [], [], [], []
    optimal = lost = moves = placed = turns = charged = 0
    for t in trajectories:
        offset, count = len(t.prompt_ids), len(t.turn_rewards)
        move_distances = t.turn_move_distances or [[] for _ in range(count)]
        move_ends = t.turn_move_end_indices or [[] for _ in range(count)]
        before = t.turn_distances_before if t.has_state_info else [None] * count
        row, row_stops = [], []
        for start, after, last in zip(before, move_distances, t.turn_end_indices, strict=True):
            turn = credit.move_advantages(start, after, unsolvable_distance=unsolvable_distance)
            row.append(turn)
            optimal += sum(v == 0 and d is not None for v, d in zip(turn, after, strict=True))
            lost += sum(v < 0 and d is None for v, d in zip(turn, after, strict=True))
            moves += len(turn)
            placed += bool(turn)
            # a turn with no move placed is not charged: an invalid one pays the format penalty, and one whose moves
            # could not be placed on its tokens did not stop where its tokens say
            charge = moves_per_turn is not None and bool(turn)
            stop = credit.stop_advantage(len(turn), after[-1], moves_per_turn) if charge else 0.0
            charged += stop < 0
            row_stops.append((stop, offset + last))
        turns += count
        values.append(row)
        stops.append(row_stops)
        ends.append([[offset + i for i in turn] for turn in move_ends])
        starts.append([offset + (t.turn_end_indices[k - 1] + 1 if k else 0) for k in range(count)])
    if center and moves:
        mean = sum(v for row in values for turn in row for v in turn) / moves
        values = [[[v - mean for v in turn] for turn in row] for row in values]
    metrics = {
        "credit/move_placed_turn_fraction": placed / turns if turns else 0.0,
        "credit/move_optimal_fraction": optimal / moves if moves else 0.0,
        "credit/move_lost_fraction": lost / moves if moves else 0.0,
    }
    if moves_per_turn is not None:
        metrics["credit/move_stop_charged_turn_fraction"] = charged / turns if turns else 0.0
    return credit.move_values_to_tokens(values, ends, starts, mask, stops), metrics


def _turn_group_keys(trajectory: Trajectory, key: str) -> list[Hashable | None]:
    if not trajectory.has_state_info:
        return [None] * len(trajectory.turn_rewards)
    if key == "distance":  # an unsolvable start (None) is a group of its own: no distance to compare at
        return list(trajectory.turn_distances_before)
    return list(trajectory.turn_state_keys)


def _progress_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Whether failed episodes carry a signal: the turns that moved towards the goal, and those that lost ground."""
    metrics = {}
    known = [
        (before, after)
        for t in trajectories
        if t.has_state_info
        for before, after in zip(t.turn_distances_before, t.turn_distances_after, strict=True)
        if before is not None
    ]
    if known:
        metrics["credit/progress_turn_fraction"] = sum(a is not None and a < b for b, a in known) / len(known)
        metrics["credit/regress_turn_fraction"] = sum(a is None or a > b for b, a in known) / len(known)
    return metrics


# ---------------------------------------------------------------------------------------------- update
def policy_loss_spec(config: TrainConfig) -> PolicyLossSpec:
    algo = config.algo
    return PolicyLossSpec(
        policy_loss=algo.policy_loss,
        clip_low=algo.clip_low,
        clip_high=algo.clip_high,
        dual_clip=algo.dual_clip,
        entropy_coef=algo.entropy_coef,
        kl_coef=0.0 if algo.kl_in_reward else algo.kl_coef,
        kl_estimator=algo.kl_estimator,
        temperature=config.rollout.temperature,
        value_clip=algo.value_clip,
    )


def mini_batches(size: int, count: int, generator: torch.Generator) -> list[Tensor]:
    """A shuffled split of ``range(size)`` into ``count`` near-equal parts."""
    order = torch.randperm(size, generator=generator)
    return [part for part in torch.tensor_split(order, count) if len(part)]


async def update(
    batch: TrainBatch, learner: Learner, config: TrainConfig, generator: torch.Generator
) -> dict[str, float]:
    """The PPO epochs over mini-batches; every mini-batch is one optimizer step of each trained role."""
    algo = config.algo
    loss = policy_loss_spec(config)
    norm_length = float(algo.norm_length or config.rollout.max_total_tokens)
    actor_stats: list[dict[str, float]] = []
    critic_stats: list[dict[str, float]] = []
    for _ in range(algo.ppo_epochs):
        for rows in mini_batches(len(batch), algo.mini_batches, generator):
            part = batch.select(rows)
            agg = Aggregation(algo.loss_agg_mode, float(part.num_sampled_tokens), float(len(part)), norm_length)
            actor_stats.append(await learner.actor.update_policy(part, agg, loss, config.trainer.micro_batch_size))
            if learner.critic is not None:
                value_agg = Aggregation("token-mean", float(part.num_sampled_tokens), float(len(part)), norm_length)
                critic_stats.append(
                    await learner.critic.update_value(
                        part, value_agg, algo.value_clip, config.trainer.micro_batch_size
                    )
                )
    metrics = {}
    for name, value in _mean_stats(actor_stats).items():  # a shared value head reports as the critic
        head, _, key = name.partition("value_head.")
        metrics[f"critic/{key}" if not head and key else f"actor/{name}"] = value
    metrics.update({f"critic/{k}": v for k, v in _mean_stats(critic_stats).items()})
    return metrics


def _mean_stats(stats: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each statistic over the optimizer steps (``tokens`` summed)."""
    if not stats:
        return {}
    out = {name: statistics.fmean(s[name] for s in stats) for name in stats[0] if name != "tokens"}
    out["tokens"] = sum(s["tokens"] for s in stats)
    return out


# ---------------------------------------------------------------------------------------------- checkpoint
async def save_checkpoint(config: TrainConfig, c: Components, step: int, policy_version: int) -> Path:
    """Write step ``step``'s checkpoint (layout: ``trainer.checkpoint``), then prune old ones."""
    directory = checkpoint_dir(c.run_dir, step)
    directory.mkdir(parents=True, exist_ok=True)
    await c.learner.actor.save_checkpoint(directory / "actor")
    if c.learner.critic is not None:
        await c.learner.critic.save_checkpoint(directory / "critic")
    await c.learner.actor.save_pretrained(directory / "policy", c.learner.spec.actor.model)
    ceiling = None if c.curriculum is None else c.curriculum.ceiling
    TrainerState(step=step, policy_version=policy_version, curriculum_ceiling=ceiling).save(directory)
    mark_complete(directory)
    prune_checkpoints(c.run_dir, config.trainer.keep_checkpoints)
    return directory
