"""``python -m trainer.sft``: supervised fine-tuning on token-exact trajectories, and ``trainer.run``'s warm-up.

    python -m trainer.sft env=sokoban                                 # the oracle's episodes, embedded SmolLM2
    python -m trainer.sft env=sokoban sft.source=files sft.files=[runs/eval/x.jsonl]   # rejection sampling
    python -m trainer.run env=sokoban algo=ppo                        # warms up first when the env has an oracle

The data (:mod:`trainer.sft_data`) are :class:`~agents.trajectory.Trajectory` records rendered by the same
chat template and episode loop as RL, so the loss falls exactly on the tokens a policy samples (the
oracle's turns, end-of-turn token included) and never on prompts or observations. Training runs on the
learner's FSDP2 actor (:meth:`trainer.learner_worker.ModelWorker.update_sft`): each optimizer step takes
``sft.batch_size`` trajectories and normalises the token-mean NLL over all of them, whatever the
micro-batch size and the number of ranks. The result is a Hugging Face directory (LoRA adapters merged)
that ``trainer.run model=<dir>``, ``agents.eval model=<dir>`` and SGLang load.

Layout of a phase directory (``<run_dir>/warmup`` for ``trainer.run``, ``<run_dir>`` for ``trainer.sft``):
``data.jsonl`` (the examples, when ``sft.save_dataset``), ``metrics.jsonl`` (one line per optimizer step),
``policy/`` (the checkpoint) and ``policy/COMPLETE`` once it is whole.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from agents.trajectory import Trajectory
    from trainer.config import TrainConfig

__all__ = ["USAGE", "SftResult", "main", "sft_applies", "warm_up"]

log = logging.getLogger("trainer.sft")

USAGE = """\
usage: python -m trainer.sft env=<id> [model=smollm2] [sft.<key>=<value> ...] [trainer.run_dir=<dir>]
       python -m trainer.sft --cfg env=<id> [...]       print the composed config and exit

Supervised fine-tuning on token-exact trajectories: the environment's oracle (sft.source=oracle,
sft.episodes=256 from sft.seed), JSONL trajectories written by agents.eval / agents.play / training samples
(sft.source=files sft.files=[a.jsonl,...], sft.success_only=true sft.min_return=<r>), or both (sft.source=mix).
  sft.oracle_noise=0.2: a fifth of the oracle's turns are random moves, kept as context, so the examples show
  it recovering from positions off its path (0: the oracle alone)
  sft.epochs=1 sft.batch_size=8 sft.lr=5e-5 sft.lora_rank=0 (0: every weight) sft.warmup_steps=2
  rollout.max_turns / max_new_tokens / max_total_tokens   the episode limits the examples respect
Writes <run_dir>/policy (Hugging Face format), metrics.jsonl and data.jsonl; default run_dir runs/sft/<env>-<time>.
"""


@dataclass
class SftResult:
    """What a fine-tuning phase produced: the policy directory and its figures."""

    policy_dir: Path
    examples: int
    dropped: int
    steps: list[dict[str, float]]
    seconds: float

    def summary(self) -> dict[str, float]:
        first, last = (self.steps[0], self.steps[-1]) if self.steps else ({}, {})
        return {
            "sft/examples": float(self.examples),
            "sft/dropped": float(self.dropped),
            "sft/optimizer_steps": float(len(self.steps)),
            "sft/nll_first": first.get("nll", 0.0),
            "sft/nll_last": last.get("nll", 0.0),
            "time/sft_s": self.seconds,
        }


def sft_applies(config: TrainConfig) -> bool:
    """Whether ``trainer.run`` warms up (``sft.warmup``: auto, true or false); raises ``UsageError`` for true
    without data (an environment without an oracle and no files)."""
    import envs
    from agents.base import has_oracle
    from agents.config import UsageError, env_options

    choice = str(config.sft.warmup).lower()
    if choice == "false":
        return False
    if config.sft.source != "oracle":
        return True
    if config.agent_mode:  # an agent program has no oracle (the config check refused sft.warmup=true)
        return False
    env = envs.make(config.env["id"], **env_options(config))
    try:
        oracle = has_oracle(env)
    finally:
        env.close()
    if choice == "true" and not oracle:
        raise UsageError(
            f"sft.warmup=true but {config.env['id']} has no oracle: give sft.source=files sft.files=[...], "
            "or set sft.warmup=false"
        )
    return oracle


async def sft_examples(config: TrainConfig, renderer: Any, vocab_size: int) -> tuple[list[Trajectory], int]:
    """The examples ``config.sft`` asks for, in a fixed order, and how many candidates were dropped."""
    from agents.config import env_options
    from agents.episode import EpisodeLimits
    from trainer.sft_data import TrajectoryFilter, file_trajectories, oracle_trajectories

    sft, rollout = config.sft, config.rollout
    examples: list[Trajectory] = []
    dropped = 0
    if sft.source in ("oracle", "mix"):
        limits = EpisodeLimits(rollout.max_turns, rollout.max_new_tokens, rollout.max_total_tokens)
        seeds = range(sft.seed, sft.seed + sft.episodes)
        played, dropped = await oracle_trajectories(
            config.env["id"], env_options(config), seeds, renderer, limits, noise=sft.oracle_noise
        )
        examples += played
    if sft.source in ("files", "mix"):
        keep = TrajectoryFilter(success_only=sft.success_only, min_return=sft.min_return)
        recorded, rejected = file_trajectories(sft.files, keep, vocab_size)
        examples += recorded
        dropped += rejected
    return examples, dropped


async def train_sft(group: Any, examples: list[Trajectory], config: TrainConfig, pad_id: int, on_step=None):
    """``sft.epochs`` passes over ``examples`` in seeded shuffled batches of ``sft.batch_size``; one optimizer
    step per batch; returns each step's statistics (``nll``, ``grad_norm``, ``lr``, ``tokens``)."""
    import torch

    from trainer.algos import Aggregation
    from trainer.batch import build_batch
    from trainer.seeds import sft_shuffle_seed

    batch = build_batch(examples, pad_id)
    generator = torch.Generator().manual_seed(sft_shuffle_seed(config.trainer.seed))
    steps: list[dict[str, float]] = []
    for _ in range(config.sft.epochs):
        order = torch.randperm(len(batch), generator=generator)
        for rows in torch.split(order, config.sft.batch_size):
            part = batch.select(rows)
            agg = Aggregation("token-mean", float(part.num_sampled_tokens), float(len(part)))
            stats = await group.update_sft(part, agg, config.sft.micro_batch_size)
            steps.append(stats)
            if on_step is not None:
                on_step(len(steps), stats)
    return steps


def _sft_worker_spec(config: TrainConfig, model_path: str, total_steps: int) -> Any:
    from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
    from trainer.run_plan import mixed_precision

    optim, gpu = config.optim, config.trainer.n_gpus > 0
    optimizer = OptimizerSpec(
        lr=config.sft.lr,
        betas=(optim.betas[0], optim.betas[1]),
        weight_decay=optim.weight_decay,
        grad_clip=optim.grad_clip,
        warmup_steps=min(config.sft.warmup_steps, max(total_steps - 1, 0)),
        total_steps=total_steps,
        schedule="cosine",
        min_lr_ratio=0.1,
    )
    return WorkerSpec(
        "actor",
        model_path,
        optimizer,
        LoraSpec(rank=config.sft.lora_rank, alpha=2.0 * max(config.sft.lora_rank, 1)),
        device="cuda" if gpu else "cpu",
        mixed_precision=mixed_precision(config, config.sft.lora_rank),
        gradient_checkpointing=config.sft.gradient_checkpointing,
        share_prefix=config.trainer.share_prefix,
        logits_chunk_size=config.trainer.logits_chunk_size,
        num_threads=config.trainer.threads or os.cpu_count() or 1,
        mmap_threshold_mib=config.trainer.mmap_threshold_mib,
        seed=config.trainer.seed,
    )


async def warm_up(config: TrainConfig, model_path: str, directory: Path, say=print) -> SftResult:
    """Fine-tune ``model_path`` as ``config.sft`` says, into ``directory/policy``; reuses a complete one.

    Needs Ray started (the actor is a :class:`trainer.learner.WorkerGroup` of ``config.learner_ranks``
    ranks); ``say`` receives one line per phase and every few optimizer steps.
    """
    from agents.chat import ChatRenderer
    from agents.models import load_tokenizer
    from agents.trajectory import write_trajectories
    from trainer.learner import WorkerGroup

    policy_dir = directory / "policy"
    if (policy_dir / "COMPLETE").is_file():
        say(f"warm-up: reusing {policy_dir}")
        return SftResult(policy_dir, 0, 0, [], 0.0)
    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(model_path)
    examples, dropped = await sft_examples(config, ChatRenderer(tokenizer), len(tokenizer))
    if not examples:
        raise RuntimeError(
            f"supervised fine-tuning found no examples ({dropped} dropped): check sft.source and limits"
        )
    tokens = sum(t.num_sampled_tokens for t in examples)
    say(f"warm-up: {len(examples)} examples ({dropped} dropped), {tokens} target tokens; fine-tuning {model_path}")
    if config.sft.save_dataset:
        write_trajectories(directory / "data.jsonl", examples, append=False)
    total = config.sft.epochs * -(-len(examples) // config.sft.batch_size)
    group = WorkerGroup(_sft_worker_spec(config, model_path, total), config.learner_ranks, num_cpus=1.0)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    metrics = (directory / "metrics.jsonl").open("w")

    def on_step(step: int, stats: dict[str, float]) -> None:
        metrics.write(json.dumps({"step": step, **stats}) + "\n")
        metrics.flush()
        if step == 1 or step % 8 == 0 or step == total:
            say(f"warm-up: step {step}/{total} nll {stats['nll']:.3f} ({time.perf_counter() - started:.0f} s)")

    try:
        steps = await train_sft(group, examples, config, int(pad_id), on_step)
        await group.save_pretrained(policy_dir, model_path)
    finally:
        metrics.close()
        group.close()
    (policy_dir / "COMPLETE").write_text("")
    return SftResult(policy_dir, len(examples), dropped, steps, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m trainer.sft``; returns the exit code (the preamble is
    :func:`agents.cli.run_command`'s: SIGTERM or Ctrl-C, at any point, closes what was started and exits
    ``128 +`` the signal number)."""
    from agents.cli import run_command

    return run_command(USAGE, _compose, _fine_tune, argv)


def _compose(overrides: list[str]) -> DictConfig:
    from trainer.config import compose_train_config

    return compose_train_config(overrides)


def _fine_tune(cfg: DictConfig) -> int:
    """Fine-tune as the config says and print the summary and the policy directory."""
    from trainer.config import to_train_config

    config = to_train_config(cfg)
    run_dir = Path(config.trainer.run_dir or f"runs/sft/{config.env['id']}-{time.strftime('%Y%m%d-%H%M%S')}")
    result = asyncio.run(_standalone(config, run_dir))
    print(json.dumps(result.summary()))
    print(f"policy: {result.policy_dir}")
    return 0


async def _standalone(config: TrainConfig, run_dir: Path) -> SftResult:
    from agents.cli import sigterm_reclaimed
    from agents.models import resolve_model
    from trainer.ray_cluster import init_ray

    with sigterm_reclaimed():  # Ray's start installs SIGTERM handlers that exit or abort
        init_ray(config.trainer.ray_address)
    return await warm_up(config, resolve_model(config.model.name), run_dir)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
