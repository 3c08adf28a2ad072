"""Peak memory and time of the default actor's micro-batch: chunked vocabulary logits and activation checkpointing.

    python benchmarks/learner_memory.py                        # the default run's actor and micro-batch
    python benchmarks/learner_memory.py --chunks 0 1024 256 --repeats 3 --threads 1
    python benchmarks/learner_memory.py --rows 1 --threads 2 --configs 1024:off 1024:15 1024:all   # layers

The actor of the default run, one process, no Ray: SmolLM2-135M-Instruct with LoRA rank 32 and the shared
value head, as :class:`trainer.learner_worker.ModelWorker` on a one-rank gloo group (FSDP2, float32). The
micro-batch is the default one: 2 rows of ``--length`` tokens whose first ``--prefix`` tokens agree (the
system prompt and instructions, so the rows run packed), a ``--prompt``-token prompt, then turns of
sampled tokens and observations (random ids).

Each configuration (``trainer.logits_chunk_size`` in ``--chunks``, ``model.gradient_checkpointing`` off and
on; or ``--configs CHUNK:LAYERS``, LAYERS ``off``, ``all`` or the ``model.checkpoint_layers`` that recompute,
from the first; ``--rows 1`` trains the first row alone, the default run's micro-batch) runs in its own
process: set-up, one warm-up update (AdamW's state exists from then on), then for each
phase the peak resident memory's growth over the resident memory before it (``VmHWM`` after resetting it
through ``/proc/self/clear_refs``, minus ``VmRSS``) and the mean time per micro-batch over ``--repeats``:

* ``update``: ``update_policy`` on the micro-batch (forward, PPO loss with the value loss, backward, AdamW);
* ``score``: ``compute_logprobs`` (the no-grad scoring pass of the old and the reference logprobs).

Printed: one JSON object per configuration with ratios against the first (by default chunking off,
checkpointing off; measured in the same run). On a loaded machine compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time

INIT = "tcp://127.0.0.1:29613"


def make_batch(args: argparse.Namespace, vocab: int):
    import torch

    from trainer.batch import TrainBatch

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (2, args.length), generator=generator)
    ids[:, : args.prefix] = ids[0, : args.prefix]
    mask = torch.zeros(2, args.length)
    turn = (args.length - args.prompt) // args.turns
    for k in range(args.turns):  # each turn: sampled tokens, then the observation
        start = args.prompt + k * turn
        mask[:, start : start + turn // 2] = 1
    batch = TrainBatch(
        ids,
        torch.ones(2, args.length, dtype=torch.long),
        mask,
        torch.zeros(2, args.length),
        torch.tensor([args.prompt] * 2),
    )
    batch.old_logprobs = -2.0 * mask
    batch.advantages = torch.randn(2, args.length, generator=generator) * mask
    batch.values = torch.zeros(2, args.length)
    batch.returns = torch.rand(2, args.length, generator=generator) * mask
    return batch


def measure(chunk: int, layers: str, args: argparse.Namespace) -> dict[str, float]:
    import torch

    from agents.memory import peak_resident_mib, resident_mib, return_free_memory
    from agents.models import resolve_model
    from trainer.algos import Aggregation, PolicyLossSpec
    from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
    from trainer.learner_worker import ModelWorker

    torch.set_num_threads(args.threads)
    spec = WorkerSpec(
        "actor",
        resolve_model("smollm2"),
        OptimizerSpec(lr=1e-4),
        LoraSpec(rank=32, alpha=64.0),
        gradient_checkpointing=layers != "off",
        checkpoint_layers=int(layers) if layers.isdigit() else None,
        value_head=OptimizerSpec(lr=1e-3),
        logits_chunk_size=chunk,
        num_threads=args.threads,
    )
    worker = ModelWorker(spec, 0, 1, INIT)
    worker.setup()
    batch = make_batch(args, worker.model.get_output_embeddings().out_features).select(range(args.rows))
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(args.rows))
    loss = PolicyLossSpec(value_clip=0.5)
    phases = {
        "update": lambda: worker.update_policy(batch, agg, loss, 2),
        "score": lambda: worker.compute_logprobs(batch, 1.0, 2),
    }
    phases["update"]()  # warm-up: AdamW's moments, the allocator's first pages
    result: dict[str, float] = {}
    for name, run in phases.items():
        gc.collect()
        return_free_memory()
        before = resident_mib()
        peak_resident_mib()  # a new peak from here
        started = time.perf_counter()
        for _ in range(args.repeats):
            run()
        result[f"{name}_s"] = (time.perf_counter() - started) / args.repeats
        peak = peak_resident_mib(reset=False)
        result[f"{name}_peak_growth_mib"] = peak - before
        result[f"{name}_peak_rss_mib"] = peak
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[0, 1024, 256])
    parser.add_argument("--length", type=int, default=480)
    parser.add_argument("--prompt", type=int, default=260)
    parser.add_argument("--prefix", type=int, default=200)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, choices=(1, 2), default=2, help="rows per micro-batch (1: the first)")
    parser.add_argument("--configs", nargs="+", metavar="CHUNK:LAYERS", help="instead of --chunks x off/all")
    parser.add_argument("--one", nargs=2, metavar=("CHUNK", "LAYERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args)))
        return
    options = ("length", "prompt", "prefix", "turns", "repeats", "threads", "rows")
    forwarded = [part for name in options for part in (f"--{name}", str(getattr(args, name)))]
    configs = args.configs or [f"{chunk}:{layers}" for layers in ("off", "all") for chunk in args.chunks]
    results = []
    for item in configs:
        chunk, layers = item.split(":")
        command = [sys.executable, __file__, "--one", chunk, layers, *forwarded]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        row = {"logits_chunk_size": int(chunk), "gradient_checkpointing": layers}
        row.update(json.loads(output.strip().splitlines()[-1]))
        results.append(row)
    base = results[0]
    for row in results:
        for key in ("update_s", "update_peak_growth_mib", "score_s", "score_peak_growth_mib"):
            row[f"{key}_ratio"] = round(row[key] / base[key], 3)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))


if __name__ == "__main__":
    main()
