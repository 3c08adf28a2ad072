"""``python -m trainer.run``: train an LLM agent on an environment (:data:`USAGE` is the user reference).

The loop, one step at a time (every await of the orchestration is in :func:`train_loop`):

    rollout (groups of episodes, Ray env actors, the engine) -> trajectories
    -> batch -> old / reference logprobs and values (learner) -> advantages
    -> PPO epochs over mini-batches (FSDP2 actor and critic) -> weight sync to the engine
    -> metrics (JSONL, TensorBoard, wandb), progress line, samples, checkpoint

With ``algo.off_policy=true`` the rollout of step k+1 runs while step k trains, on the weights from
before step k, and is trained one step later with the importance-sampling correction.

With ``engine.placement=colocated``, a death of the actor's process (learner and engine in one) in any phase
reaches :func:`_train` as Ray's ``ActorDiedError``: while ``engine.max_restarts`` allows, a new actor starts
from the run's last checkpoint (:func:`trainer.components.restart_colocated`) and the loop plays the steps
after it again, as ``trainer.resume=true`` would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from trainer.components import Components
    from trainer.config import TrainConfig

__all__ = ["PLOT_EVERY", "USAGE", "main", "train"]

PLOT_EVERY = 2  # steps between rewrites of learning_curves.png
STOPPED_HINT = "continue from the last checkpoint with trainer.resume=true"
log = logging.getLogger("trainer.run")

USAGE = """\
usage: python -m trainer.run env=<id> [algo=ppo] [model=smollm2] [engine=hf] [key=value ...]
       python -m trainer.run --cfg env=<id> [...]       print the composed config and exit

Train an LLM agent with reinforcement learning on a turngym environment. Options are Hydra
overrides of configs/train.yaml (each group's file documents its keys):
  env=<id>              configs/env/<id>.yaml or any registered id; env.<option>=<v> sets an option
  algo=ppo              ppo | grpo | gigpo | dr_grpo | rloo | reinforce_pp | reinforce_pp_baseline | gspo | cispo
                        (algo.policy_loss=ppo|gspo|cispo picks the policy loss alone)
                        (algo.group_size=8 algo.kl_coef=0.001 algo.loss_agg_mode=... algo.tis.level=token ...)
                        algo.shaping.coef=0.5 algo.step_groups.weight=1: credit from the env's exact state
  curriculum=none       none | adaptive (levels of the env's difficulty_range, moved by training success)
  model=smollm2         smollm2 (embedded SmolLM2-135M-Instruct) | tiny | a Hugging Face model directory
                        (model.lr=1e-6 model.critic_lr=1e-5 model.lora_rank=8 ...)
  engine=hf             hf (embedded transformers engine) | sglang (engine.urls=[http://host:port])
  rollout.*             temperature, max_new_tokens, max_total_tokens, max_turns, num_env_actors
  trainer.*             total_steps, groups_per_step, micro_batch_size, n_gpus, run_dir, resume,
                        checkpoint_every, sample_every, seed, max_failed_steps
  optim.* logging.*     AdamW and schedule; tensorboard, wandb, plot

A run writes to trainer.run_dir (default runs/train/<env>-<algo>-<time>): config.yaml, metrics.jsonl,
tensorboard/, samples/, checkpoints/ (policy/ in Hugging Face format) and learning_curves.png.
Continue a stopped run with trainer.run_dir=<dir> trainer.resume=true.

Examples:
  python -m trainer.run env=sokoban algo=ppo
  python -m trainer.run env=sokoban algo=grpo algo.group_size=8 trainer.total_steps=50
  python -m trainer.run env=frozenlake algo=rloo model=tiny trainer.total_steps=3
  python -m trainer.plot runs/train/<run>            the learning curves of a run, as a PNG
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m trainer.run``; returns the exit code.

    The preamble is :func:`agents.cli.run_command`'s; a run that stops early exits 1, one stopped by SIGTERM or
    Ctrl-C, at any point, closes what it started and exits ``128 + the signal number``.
    """
    from agents.cli import run_command

    return run_command(USAGE, _compose, _train_and_report, argv, stopped_hint=STOPPED_HINT)


def _compose(overrides: list[str]) -> DictConfig:
    from trainer.config import compose_train_config

    return compose_train_config(overrides)


def _train_and_report(cfg: DictConfig) -> int:
    """Train to the last step and print the run directory; a failure is one error line (a stop is
    :func:`agents.cli.run_command`'s)."""
    from agents.cli import FAILURE_EXIT, print_error
    from trainer.config import to_train_config
    from trainer.faults import RunFailedError

    try:
        run_dir = train(to_train_config(cfg))
    except RunFailedError as exc:
        return print_error(exc, FAILURE_EXIT)
    print(f"run directory: {run_dir}")
    return 0


def train(config: TrainConfig, *, setup: Callable[[], None] | None = None) -> Path:
    """Run ``config`` to its last step; returns the run directory. ``setup`` runs first in every env actor.

    Raises :class:`~agents.config.UsageError` before anything heavy starts if the run cannot work
    (:func:`trainer.preflight.preflight`), :class:`trainer.faults.RunFailedError` if it stops early.
    SIGTERM (``kill``, a scheduler ending the job), at any point, stops the run the way Ctrl-C does: a
    ``KeyboardInterrupt`` (its argument the signal number) unwinds it, closing what was started (the engine,
    the learner, the environment actors; Ray's processes end with this process), instead of Ray's handler
    aborting the process with a stack dump (exit 134) with nothing closed.
    """
    from agents.cli import sigterm_interrupts
    from trainer.console import run_console
    from trainer.preflight import preflight

    with run_console(config.trainer.progress), sigterm_interrupts():
        preflight(config, setup)
        return asyncio.run(_train(config, setup))


async def _train(config: TrainConfig, setup: Callable[[], None] | None) -> Path:
    from trainer.components import build_components, colocated_actor_died, restart_colocated

    components = await build_components(config, setup)  # closes what it started if it fails or is stopped
    try:
        while True:
            try:
                await train_loop(config, components)
                break
            except Exception as exc:
                if not colocated_actor_died(components, exc):
                    raise
            # The colocated actor died: a new one from the last checkpoint (RunFailedError once none is left).
            await restart_colocated(config, components)
    finally:
        await components.close()
    return components.run_dir


async def _drop_evaluation_prefixes(c: Components) -> None:
    """Empty the engine's prefix cache after a held-out evaluation: its episodes' prefixes serve no training
    rollout (other seeds) but would sit in the engine's memory through the next update, until the next
    weight sync empties it (up to ``max_cached_tokens`` of keys and values: 1.4 GiB for SmolLM2 in float32)."""
    from agents.engines.base import DropsPrefixCache

    if isinstance(c.engine, DropsPrefixCache):
        await c.engine.drop_prefix_cache()


async def train_loop(config: TrainConfig, c: Components) -> None:
    """The training loop (module docstring); ``c`` holds the started engine, rollout, learner and writers."""
    import torch

    from trainer.batch import build_batch
    from trainer.engine_sync import sync_engine
    from trainer.evaluation import evaluate_held_out, evaluation_due
    from trainer.seeds import update_shuffle_seed
    from trainer.train_step import (
        episode_metrics,
        estimate_advantages,
        rollout_task,
        save_checkpoint,
        score_batch,
        timing_metrics,
        trainable,
        update,
    )

    step, version = c.start_step, c.policy_version
    # The policy RL starts from (the warm-up's, if any); not again after a restart that kept its line.
    if step == 0 and evaluation_due(config, 0) and c.writer.last_step is None:
        log.info("held-out evaluation before the first update (%d episodes)", config.evaluation.episodes)
        metrics0, episodes = await evaluate_held_out(config, c.rollout, version)
        await _drop_evaluation_prefixes(c)
        c.write_evaluation(0, episodes)
        c.writer.write(0, {**c.warmup_metrics, **metrics0, "policy_version": float(version)})
        c.write_report()
        log.info(_evaluation_line(metrics0))
    # The actor's peak memory per phase, while the phases take turns (one-step off-policy overlaps them).
    peaks = _PhasePeaks(c.learner, enabled=not config.algo.off_policy)
    await peaks.read(None)  # what set-up and the first evaluation held is not a step's
    pending = rollout_task(config, c, step + 1, version)
    try:
        while step < config.trainer.total_steps:
            step += 1
            started = time.perf_counter()
            result, rollout_metrics = await pending
            await peaks.read("rollout")
            trajectories, filter_metrics = trainable(result, config.algo.filter_groups)
            if c.curriculum is not None and result.trajectories:  # the next rollouts' levels follow this success
                c.curriculum.update(sum(t.success for t in result.trajectories) / len(result.trajectories))
            overlapping = config.algo.off_policy and step < config.trainer.total_steps
            if overlapping:  # the next rollout plays on the current weights while this step trains
                pending = rollout_task(config, c, step + 1, version)
            metrics: dict[str, Any] = {
                **result.metrics,
                **episode_metrics(result),
                **rollout_metrics,
                **filter_metrics,
            }
            train_started = time.perf_counter()
            if trajectories:
                batch = build_batch(trajectories, c.pad_id)
                on_policy = all(t.policy_version == version for t in trajectories)
                metrics.update(await score_batch(batch, c.learner, config, on_policy=on_policy))
                await peaks.read("score")
                moves_per_turn = config.env.get("max_actions_per_turn")
                metrics.update(
                    estimate_advantages(batch, trajectories, config.algo, step=step, moves_per_turn=moves_per_turn)
                )
                generator = torch.Generator().manual_seed(update_shuffle_seed(config.trainer.seed, step))
                update_started = time.perf_counter()
                metrics.update(await update(batch, c.learner, config, generator))
                metrics["time/update_s"] = time.perf_counter() - update_started
                await peaks.read("update")
                if overlapping:  # weights change only between rollouts: every trajectory has one version
                    pending = await _settled(pending)
                version += 1
                sync_started = time.perf_counter()
                await sync_engine(c, version)
                metrics["time/sync_s"] = time.perf_counter() - sync_started
                metrics["train/tokens"] = float(batch.attention_mask.sum())
            metrics["policy_version"] = float(version)
            if c.relaunch is not None:  # the colocated actor's restarts from a checkpoint (trainer.faults)
                metrics["learner/restarts"] = float(c.faults.learner_restarts)
            if evaluation_due(config, step):  # the updated policy, before the next rollout shares the engine
                evaluation, episodes = await evaluate_held_out(config, c.rollout, version)
                if not overlapping:  # else the next rollout is running and its prefixes are in the cache too
                    await _drop_evaluation_prefixes(c)
                c.write_evaluation(step, episodes)
                metrics.update(evaluation)
                await peaks.read("evaluation")
                log.info(_evaluation_line(evaluation))
            if not overlapping and step < config.trainer.total_steps:
                pending = rollout_task(config, c, step + 1, version)
            metrics.update(timing_metrics(metrics, started, train_started))
            metrics.update(peaks.take())
            c.writer.write(step, metrics)
            c.progress.update(step, metrics)
            c.faults.after_step(step, result)  # logs dropped groups; stops after trainer.max_failed_steps failed steps
            if config.trainer.sample_every and (step == 1 or step % config.trainer.sample_every == 0):
                c.write_samples(step, [t for group in result.groups for t in group])
            if evaluation_due(config, step) or step == config.trainer.total_steps:
                c.write_report()  # at each held-out evaluation and at the end, so a stopped run has one
            if (config.trainer.checkpoint_every and step % config.trainer.checkpoint_every == 0) or (
                step == config.trainer.total_steps
            ):
                await save_checkpoint(config, c, step, version)
            if config.logging.plot and (step % PLOT_EVERY == 0 or step == config.trainer.total_steps):
                c.plot()  # rewritten as the run goes, so a stopped run still has its curves
    except Exception:
        await _cancel(pending)  # a step that failed may leave the next step's rollout running
        raise


class _PhasePeaks:
    """The actor's peak resident memory in each phase of a step (``memory/actor_<phase>_peak_gib``): each
    reading ends a phase and starts the next one's peak (:meth:`trainer.learner.Learner.phase_peak_gib`).
    Not ``enabled``: no reading, nothing logged."""

    def __init__(self, learner: Any, enabled: bool) -> None:
        self.learner, self.enabled, self.readings = learner, enabled, {}

    async def read(self, phase: str | None) -> None:
        if not self.enabled:
            return
        peak = await self.learner.phase_peak_gib()
        if phase is not None and peak is not None:
            self.readings[f"memory/actor_{phase}_peak_gib"] = peak

    def take(self) -> dict[str, float]:
        readings, self.readings = self.readings, {}
        return readings


def _evaluation_line(metrics: dict[str, float]) -> str:
    return (
        f"held-out: success {100 * metrics.get('eval/success_rate', 0.0):.1f}% "
        f"± {100 * metrics.get('eval/success_stderr', 0.0):.1f}, invalid actions "
        f"{100 * metrics.get('eval/invalid_action_rate', 0.0):.1f}%, return {metrics.get('eval/return', 0.0):.2f} "
        f"({metrics.get('eval/episodes', 0):.0f} episodes, {metrics.get('time/eval_s', 0.0):.0f} s)"
    )


async def _cancel(task: asyncio.Task) -> None:
    """Cancel ``task`` and wait until it has stopped; its own outcome is moot (the step's error goes on)."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _settled(task: asyncio.Task) -> asyncio.Task:
    """Wait for ``task`` to finish and hand it back (its result is read by the next step)."""
    await asyncio.wait([task])
    return task


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
