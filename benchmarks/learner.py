"""The learner's update throughput and peak memory on CPU: the FSDP2 worker against a plain PyTorch loop.

    python benchmarks/learner.py                       # tiny and SmolLM2, 8 rows of 700 tokens
    python benchmarks/learner.py --models tiny --rows 16 --length 400 --repeats 3

Workload: ``--rows`` trajectories of ``--length`` tokens (``--prompt`` of them prompt), three turns of
sampled tokens separated by observation gaps (the Sokoban shape), random token ids. Each measurement
runs in its own process (so peak memory is that configuration's) and does ``--repeats`` updates after
one warm-up:

* ``plain``: the model in one process without FSDP, the same PPO loss on the same micro-batches
  (``--micro`` rows), AdamW; the baseline;
* ``fsdp2``: :class:`trainer.learner_worker.ModelWorker` (``fully_shard`` over a one-rank gloo group):
  ``compute_logprobs`` (the no-grad scoring pass) and ``update_policy`` (forward, backward, AdamW step).

Figures: tokens per second (every real token of the batch, prompt included, per second of update or
scoring), the FSDP2/plain ratio, and peak resident memory of the process (MiB).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from agents.models import load_model, resolve_model
from trainer.algos import Aggregation, PolicyLossSpec, ppo_policy_loss, token_logprobs
from trainer.batch import TrainBatch
from trainer.learner_specs import OptimizerSpec, WorkerSpec
from trainer.learner_worker import ModelWorker


def make_batch(rows: int, length: int, prompt: int, vocab: int) -> TrainBatch:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (rows, length), generator=generator)
    mask = torch.zeros(rows, length)
    turn = (length - prompt) // 3
    for k in range(3):  # 30% of each turn sampled, the rest observation
        start = prompt + k * turn
        mask[:, start : start + turn * 3 // 10] = 1
    batch = TrainBatch(
        input_ids,
        torch.ones(rows, length, dtype=torch.long),
        mask,
        torch.zeros(rows, length),
        torch.full((rows,), prompt),
    )
    batch.old_logprobs = torch.zeros(rows, length) - 8.0 * mask
    batch.advantages = torch.randn(rows, length, generator=generator) * mask
    return batch


def plain_update(model, optimizer, batch: TrainBatch, micro: int) -> None:
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    for start in range(0, len(batch), micro):
        mb = batch.select(range(start, min(start + micro, len(batch))))
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[:, :-1].float()
        logprobs = torch.nn.functional.pad(token_logprobs(logits, mb.input_ids[:, 1:]), (1, 0))
        loss, _ = ppo_policy_loss(logprobs, mb.old_logprobs, mb.advantages, mb.response_mask, agg)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure(model_name: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    torch.set_num_threads(args.threads)
    path = resolve_model(model_name)
    if mode == "plain":
        model = load_model(path).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        batch = make_batch(args.rows, args.length, args.prompt, model.config.vocab_size)
        update = lambda: plain_update(model, optimizer, batch, args.micro)  # noqa: E731
        score = None
    else:
        worker = ModelWorker(
            WorkerSpec("actor", path, OptimizerSpec(lr=1e-6), num_threads=args.threads), 0, 1, "tcp://127.0.0.1:29611"
        )
        worker.setup()
        batch = make_batch(args.rows, args.length, args.prompt, worker.model.config.vocab_size)
        agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
        update = lambda: worker.update_policy(batch, agg, PolicyLossSpec(), args.micro)  # noqa: E731
        score = lambda: worker.compute_logprobs(batch, 1.0, args.micro)  # noqa: E731
    tokens = float(batch.attention_mask.sum())
    update()  # warm-up
    started = time.perf_counter()
    for _ in range(args.repeats):
        update()
    result = {"update_tokens_per_s": tokens * args.repeats / (time.perf_counter() - started)}
    if score is not None:
        started = time.perf_counter()
        for _ in range(args.repeats):
            score()
        result["score_tokens_per_s"] = tokens * args.repeats / (time.perf_counter() - started)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=700)
    parser.add_argument("--prompt", type=int, default=300)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one, args)))
        return
    options = ("rows", "length", "prompt", "micro", "repeats", "threads")
    forwarded = [part for name in options for part in (f"--{name}", str(getattr(args, name)))]
    print(
        f"{args.rows} rows x {args.length} tokens ({args.prompt} prompt), "
        f"micro-batch {args.micro}, {args.threads} threads"
    )
    print("| model | learner | update tok/s | scoring tok/s | update vs plain | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for model in args.models:
        results = {}
        for mode in ("plain", "fsdp2"):
            command = [sys.executable, __file__, "--one", model, mode, *forwarded]
            output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            results[mode] = json.loads(output.strip().splitlines()[-1])
        for mode, r in results.items():
            ratio = r["update_tokens_per_s"] / results["plain"]["update_tokens_per_s"]
            score = f"{r['score_tokens_per_s']:.0f}" if "score_tokens_per_s" in r else "-"
            print(
                f"| {model} | {mode} | {r['update_tokens_per_s']:.0f} | {score} | {ratio:.2f}x "
                f"| {r['peak_rss_mib']:.0f} |"
            )


if __name__ == "__main__":
    main()
