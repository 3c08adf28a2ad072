"""Peak memory and time of the warm-up's optimizer steps: rows per micro-batch, checkpointing, the shared prefix.

    python benchmarks/warmup_memory.py --data runs/x/warmup/data.jsonl            # the default run's warm-up data
    python benchmarks/warmup_memory.py --data ... --steps 4 --configs 2:0 1:0 2:1 1:1
    python benchmarks/warmup_memory.py --data ... --configs 2:1:0 1:1:0 2:1:1 1:1:1   # the shared prefix off and on

The warm-up's actor, one process, no Ray: SmolLM2-135M-Instruct, every weight trained (float32 weights,
gradients and AdamW's two moments), as :class:`trainer.learner_worker.ModelWorker` on a one-rank gloo group
(FSDP2) with the warm-up's optimizer (``trainer.sft``'s spec of the default config). The data is a warm-up's
own ``data.jsonl``; its first ``--steps`` batches of ``sft.batch_size`` trajectories, in the warm-up's seeded
order, are trained.

Each configuration (``ROWS:CHECKPOINTING[:SHARE]``: ``sft.micro_batch_size`` rows per forward/backward, activation
checkpointing off or on, and ``trainer.share_prefix`` off or on, on by default: the rows' shared system prompt run
once per optimizer step, or every row in full with a micro-batch's rows packed) runs in its own process: the
model's set-up, then the steps, with the peak resident memory's growth over the resident memory after set-up
(``VmHWM`` after resetting it, minus ``VmRSS``), the mean time per optimizer step, and a digest of the weights
after the last step. Equal digests mean bit-identical weights: activation checkpointing recomputes the same
arithmetic, so it should not change them; a different micro-batch size or the shared prefix sums the gradient in
another order, so they may, by rounding.

Printed: one JSON object per configuration with ratios against the first one (measured in the same run). On a
loaded machine compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import math
import subprocess
import sys
import time

INIT = "tcp://127.0.0.1:29614"


def measure(rows: int, checkpointing: bool, share: bool, args: argparse.Namespace) -> dict[str, float | str]:
    import torch

    from agents.memory import peak_resident_mib, resident_mib, return_free_memory
    from agents.models import load_tokenizer, resolve_model
    from agents.trajectory import read_trajectories
    from trainer.algos import Aggregation
    from trainer.batch import build_batch
    from trainer.config import compose_train_config, to_train_config
    from trainer.learner_worker import ModelWorker
    from trainer.seeds import sft_shuffle_seed
    from trainer.sft import _sft_worker_spec

    torch.set_num_threads(args.threads)
    overrides = [
        "env=sokoban",
        f"sft.gradient_checkpointing={str(checkpointing).lower()}",
        f"trainer.share_prefix={str(share).lower()}",
    ]
    config = to_train_config(compose_train_config(overrides))
    model = resolve_model(config.model.name)
    examples = list(read_trajectories(args.data))
    total = math.ceil(len(examples) / config.sft.batch_size) * config.sft.epochs  # the warm-up's schedule
    spec = dataclasses.replace(_sft_worker_spec(config, model, total), num_threads=args.threads)
    tokenizer = load_tokenizer(model)
    batch = build_batch(examples, tokenizer.pad_token_id)
    order = torch.randperm(len(batch), generator=torch.Generator().manual_seed(sft_shuffle_seed(config.trainer.seed)))
    parts = [batch.select(part) for part in torch.split(order, config.sft.batch_size)][: args.steps]

    worker = ModelWorker(spec, 0, 1, INIT)
    worker.setup()
    gc.collect()
    return_free_memory()
    before = resident_mib()
    peak_resident_mib()  # a new peak from here
    started = time.perf_counter()
    for part in parts:
        agg = Aggregation("token-mean", float(part.num_sampled_tokens), float(len(part)))
        worker.update_sft(part, agg, rows)
    seconds = (time.perf_counter() - started) / len(parts)
    peak = peak_resident_mib(reset=False)
    digest = hashlib.sha256()
    for name, value in sorted(worker.model.state_dict().items()):
        local = value.full_tensor() if hasattr(value, "full_tensor") else value
        digest.update(name.encode())
        digest.update(local.detach().contiguous().numpy().tobytes())
    return {
        "step_s": seconds,
        "resident_after_setup_mib": before,
        "peak_growth_mib": peak - before,
        "peak_rss_mib": peak,
        "tokens_per_step": sum(float(p.attention_mask.sum()) for p in parts) / len(parts),
        "weights_sha256": digest.hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a warm-up's data.jsonl")
    parser.add_argument(
        "--configs", nargs="+", default=["2:0", "1:0", "2:1", "1:1"], metavar="ROWS:CHECKPOINTING[:SHARE]"
    )
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", nargs=3, type=int, metavar=("ROWS", "CHECKPOINTING", "SHARE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], bool(args.one[1]), bool(args.one[2]), args)))
        return
    forwarded = ["--data", args.data, "--steps", str(args.steps), "--threads", str(args.threads)]
    results = []
    for item in args.configs:
        rows, checkpointing, share = (int(part) for part in (item + ":1").split(":")[:3])
        command = [sys.executable, __file__, "--one", str(rows), str(checkpointing), str(share), *forwarded]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        row: dict = {
            "micro_batch_size": rows,
            "gradient_checkpointing": bool(checkpointing),
            "share_prefix": bool(share),
        }
        row.update(json.loads(output.strip().splitlines()[-1]))
        results.append(row)
        base = results[0]
        for key in ("step_s", "peak_growth_mib"):
            row[f"{key}_ratio"] = round(row[key] / base[key], 3)
        row["same_weights_as_first"] = row["weights_sha256"] == base["weights_sha256"]
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
