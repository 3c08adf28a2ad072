"""The step's scoring pass with its rows' shared prefix run once, against every row in full.

    python benchmarks/scoring.py                           # 16 oracle episodes of the default levels, 3 repeats
    python benchmarks/scoring.py --rows 16 --repeats 5 --env max_moves=null   # the full range (longer episodes)

The default actor in one process, no Ray: SmolLM2-135M-Instruct with LoRA rank 32 and the shared value head,
as :class:`trainer.learner_worker.ModelWorker` on a one-rank gloo group (FSDP2, float32, chunked logits). The
batch is ``--rows`` Sokoban episodes played by the oracle through the episode loop (the tokens a step scores:
the system prompt and instructions every row starts with, boards, replies). Two workers score the same batch
with ``compute_logprobs_and_values`` at micro-batch ``--micro-batch`` (the default step's scoring call),
alternating, ``--repeats`` times each after one warm-up call:

* ``before``: every row in full (``WorkerSpec.share_prefix=False``);
* ``after`` (the default): the rows' shared prefix once, then each micro-batch's rows from there.

For each: the mean seconds per call and ``before``'s over it; ``tokens_run``, the decoder's input tokens per call
(counted at the embedding); ``max_abs_diff``, the largest difference from ``before``'s logprobs and values over the
sampled tokens (the same model and weights: float rounding only).

JSON on stdout. On a loaded machine compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

INIT = "tcp://127.0.0.1:29617"


def oracle_batch(rows: int, env_overrides: dict[str, object]):
    from agents.chat import ChatRenderer
    from agents.episode import EpisodeLimits
    from agents.models import load_tokenizer
    from trainer.batch import build_batch
    from trainer.sft_data import oracle_trajectories

    tokenizer = load_tokenizer("smollm2")
    limits = EpisodeLimits(max_turns=3, max_new_tokens=32, max_total_tokens=1024)
    played, _ = asyncio.run(
        oracle_trajectories("sokoban", env_overrides, range(10**6, 10**6 + 4 * rows), ChatRenderer(tokenizer), limits)
    )
    if len(played) < rows:
        raise SystemExit(f"the oracle finished {len(played)} episodes, fewer than --rows {rows}")
    return build_batch(played[:rows], tokenizer.pad_token_id or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--env", nargs="*", default=[], help="Sokoban options, key=value (YAML values)")
    args = parser.parse_args()

    import torch
    import yaml

    from agents.models import resolve_model
    from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
    from trainer.learner_worker import ModelWorker, shared_prefix_length

    torch.set_num_threads(args.threads)
    env = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.env)}
    batch = oracle_batch(args.rows, env)
    workers, tokens_run = {}, {}
    for name, share in (("before", False), ("after", True)):
        spec = WorkerSpec(
            "actor",
            resolve_model("smollm2"),
            OptimizerSpec(lr=1e-4),
            LoraSpec(rank=32, alpha=64.0),
            share_prefix=share,
            value_head=OptimizerSpec(lr=1e-3),
            num_threads=args.threads,
        )
        workers[name] = ModelWorker(spec, 0, 1, INIT)
        workers[name].setup()
        seen: list[int] = []
        workers[name].model.get_input_embeddings().register_forward_hook(
            lambda _m, inputs, _out, seen=seen: seen.append(inputs[0].numel())
        )
        tokens_run[name] = seen
    outputs, times = {}, {name: [] for name in workers}
    for repeat in range(args.repeats + 1):  # the first call of each warms up
        for name, worker in workers.items():
            tokens_run[name].clear()
            started = time.perf_counter()
            outputs[name] = worker.compute_logprobs_and_values(batch, 1.0, args.micro_batch)
            if repeat:
                times[name].append(time.perf_counter() - started)
    mask = batch.response_mask > 0
    before_s = statistics.fmean(times["before"])
    result = {
        "rows": len(batch),
        "row_tokens_mean": float(batch.attention_mask.sum(dim=1).float().mean()),
        "shared_prefix_tokens": shared_prefix_length(batch),
        "sampled_tokens": int(mask.sum()),
        "micro_batch": args.micro_batch,
        "threads": args.threads,
    }
    for name in workers:
        diff = max(float((a - b)[mask].abs().max()) for a, b in zip(outputs[name], outputs["before"], strict=True))
        seconds = statistics.fmean(times[name])
        result[name] = {
            "s": seconds,
            "before_over_this": before_s / seconds,
            "tokens_run": sum(tokens_run[name]),
            "max_abs_diff": diff,
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
