"""The learner's scoring pass and update with the rows' shared prefix run once, against every row in full.

    python benchmarks/shared_prefix.py                          # 16 oracle episodes of the default levels
    python benchmarks/shared_prefix.py --repeats 5 --env max_moves=null   # the full range (longer episodes)

The default run's actor in one process, no Ray: its spec as ``trainer.run`` builds it from the default config
(``trainer.run_plan.learner_spec``: SmolLM2-135M-Instruct with LoRA rank 32 and the shared value head, activation
checkpointing of the first 15 layers, chunked logits), as :class:`trainer.learner_worker.ModelWorker` on a one-rank
gloo group (FSDP2, float32). The batch is ``--rows`` Sokoban episodes played by the oracle through
the episode loop, with the default config's levels (``configs/env/sokoban.yaml``, ``--env`` over it) and episode
limits (the tokens a step trains on: the system prompt and instructions every row starts with, boards, replies).
Two workers from the same weights, ``before`` (``WorkerSpec.share_prefix=False``: every row in full) and ``after``
(the default: the prefix once per call, each micro-batch from there on), alternate
``--repeats`` times after one warm-up round, each round:

* ``score``: ``compute_logprobs_and_values`` on the whole batch at micro-batch ``--micro-batch`` (the default
  step's scoring call);
* ``update``: ``update_policy`` on each of ``--mini-batches`` mini-batches (the default step's optimizer steps).

For each phase and worker: mean seconds per round, ``before``'s over it, and ``tokens_run``, the decoder's input
tokens per round (counted at the embedding). ``max_abs_diff``: the largest difference between the two workers'
scores (logprobs and values, sampled tokens) in the first round, before either has stepped (float rounding
only); after the rounds, ``max_weight_diff``: the largest difference between the two workers' trained weights.

JSON on stdout. On a loaded machine compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

INIT = "tcp://127.0.0.1:29617"


def oracle_batch(config, rows: int):
    """``rows`` oracle episodes of the config's Sokoban levels and episode limits as a training batch, with
    advantages, values and returns to train on."""
    import torch

    from agents.chat import ChatRenderer
    from agents.config import env_options
    from agents.episode import EpisodeLimits
    from agents.models import load_tokenizer
    from trainer.batch import build_batch
    from trainer.sft_data import oracle_trajectories

    tokenizer = load_tokenizer(config.model.name)
    rollout = config.rollout
    limits = EpisodeLimits(rollout.max_turns, rollout.max_new_tokens, rollout.max_total_tokens)
    seeds = range(10**6, 10**6 + 4 * rows)
    played, _ = asyncio.run(
        oracle_trajectories("sokoban", env_options(config), seeds, ChatRenderer(tokenizer), limits)
    )
    if len(played) < rows:
        raise SystemExit(f"the oracle finished {len(played)} episodes, fewer than --rows {rows}")
    batch = build_batch(played[:rows], tokenizer.pad_token_id or 0)
    mask, generator = batch.response_mask, torch.Generator().manual_seed(0)
    batch.old_logprobs = -2.0 * mask
    batch.advantages = torch.randn(mask.shape, generator=generator) * mask
    batch.values = torch.zeros(mask.shape)
    batch.returns = torch.rand(mask.shape, generator=generator) * mask
    return batch


def update_arguments(parser: argparse.ArgumentParser, env: bool = True) -> None:
    """The options the one-process update benchmarks share: the batch, its mini-batches, rounds, threads, levels."""
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--mini-batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    if env:
        parser.add_argument(
            "--env", nargs="*", default=[], help="Sokoban options over configs/env/sokoban.yaml, key=value"
        )


@dataclass
class UpdateWorkload:
    """The default config (``--env`` over its levels), ``--rows`` oracle episodes as a batch, that batch split into
    ``--mini-batches``, and the default PPO loss's settings: what the default step's update trains on."""

    config: Any
    batch: Any
    minis: list
    loss: Any

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> UpdateWorkload:
        import torch

        from trainer.algos import PolicyLossSpec
        from trainer.config import compose_train_config, to_train_config

        torch.set_num_threads(args.threads)
        overrides = [f"env.{item}" for item in getattr(args, "env", [])]
        config = to_train_config(compose_train_config(["env=sokoban", *overrides]))
        batch = oracle_batch(config, args.rows)
        size = len(batch) // args.mini_batches
        minis = [batch.select(range(k * size, (k + 1) * size)) for k in range(args.mini_batches)]
        return cls(config, batch, minis, PolicyLossSpec(value_clip=0.5))

    def update(self, worker: Any, micro_batch: int = 1) -> list:
        """One optimizer step a mini-batch (the default step's update); each step's statistics."""
        from trainer.algos import Aggregation

        stats = []
        for mini in self.minis:
            agg = Aggregation("seq-mean-token-mean", float(mini.response_mask.sum()), float(len(mini)))
            stats.append(worker.update_policy(mini, agg, self.loss, micro_batch))
        return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    update_arguments(parser)
    parser.add_argument("--micro-batch", type=int, default=1)
    args = parser.parse_args()

    import dataclasses

    import torch

    from agents.models import resolve_model
    from trainer.learner_worker import ModelWorker, shared_prefix_length
    from trainer.run_plan import learner_spec

    work = UpdateWorkload.from_args(args)
    batch = work.batch
    actor = learner_spec(work.config, str(resolve_model(work.config.model.name))).actor
    workers, tokens_run = {}, {}
    for name, share in (("before", False), ("after", True)):
        spec = dataclasses.replace(actor, share_prefix=share, num_threads=args.threads)
        workers[name] = ModelWorker(spec, 0, 1, INIT)
        workers[name].setup()
        seen: list[int] = []
        workers[name].model.get_input_embeddings().register_forward_hook(
            lambda _m, inputs, _out, seen=seen: seen.append(inputs[0].numel())
        )
        tokens_run[name] = seen

    phases = {
        "score": lambda worker: worker.compute_logprobs_and_values(batch, 1.0, args.micro_batch),
        "update": lambda worker: work.update(worker, args.micro_batch),
    }
    times = {(phase, name): [] for phase in phases for name in workers}
    tokens = {}
    first_scores = {}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for phase, run in phases.items():
            for name, worker in workers.items():
                tokens_run[name].clear()
                started = time.perf_counter()
                out = run(worker)
                elapsed = time.perf_counter() - started
                if repeat:
                    times[phase, name].append(elapsed)
                tokens[phase, name] = sum(tokens_run[name])
                if repeat == 0 and phase == "score":
                    first_scores[name] = out
    mask = batch.response_mask > 0
    score_diff = max(
        float((a - b)[mask].abs().max()) for a, b in zip(first_scores["after"], first_scores["before"], strict=True)
    )

    def trained(worker: ModelWorker) -> dict[str, torch.Tensor]:
        # one rank in float32: plain tensors (trainer.learner_worker.one_rank_weights)
        return {n: p.detach() for n, p in worker.model.named_parameters() if p.requires_grad}

    before_w, after_w = trained(workers["before"]), trained(workers["after"])
    result = {
        "rows": len(batch),
        "row_tokens_mean": float(batch.attention_mask.sum(dim=1).float().mean()),
        "shared_prefix_tokens": shared_prefix_length(batch),
        "sampled_tokens": int(mask.sum()),
        "micro_batch": args.micro_batch,
        "mini_batches": args.mini_batches,
        "threads": args.threads,
        "max_abs_diff": score_diff,
        "max_weight_diff": max(float((after_w[n] - before_w[n]).abs().max()) for n in before_w),
    }
    for phase in phases:
        before_s = statistics.fmean(times[phase, "before"])
        for name in workers:
            seconds = statistics.fmean(times[phase, name])
            result[f"{phase}_{name}"] = {
                "s": seconds,
                "before_over_this": before_s / seconds,
                "tokens_run": tokens[phase, name],
            }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
