"""The default update starting at the first adapted layer on the engine's inputs, against every layer run.

    python benchmarks/frozen_layers.py                  # 16 oracle episodes of the default levels, 3 rounds
    python benchmarks/frozen_layers.py --repeats 5 --env max_moves=null   # the full range (longer episodes)

The default run's actor in one process, no Ray: its spec as ``trainer.run`` builds it from the default config
(``trainer.run_plan.learner_spec``: SmolLM2-135M-Instruct, LoRA rank 32 on the last 15 of 30 layers, the shared
value head, chunked logits), as the colocated worker (:class:`trainer.colocated.ColocatedWorker`, one-rank gloo
group, float32) with its engine. The batch is ``--rows`` Sokoban episodes played by the oracle through the episode
loop (``benchmarks/shared_prefix.py``'s batch); the engine then runs each row as a prompt (one token sampled),
which gives it what a rollout gives it: the first adapted layer's input at every position
(:mod:`agents.engines.layer_inputs`), the shared system prompt once. Then ``--repeats`` rounds after one warm-up
round, each the default step's optimizer steps (``update_policy`` on ``--mini-batches`` mini-batches, one row a
micro-batch) twice, alternating: ``engine`` (the forward starts at the first adapted layer, on the engine's
inputs) and ``every_layer`` (the store hidden from the worker: the forward runs all 30 layers).

Figures: mean seconds per round for each, ``every_layer`` over ``engine``, the share of trained tokens whose
frozen layers came from the engine (1.0 expected), and the seconds the engine took to run the rows. JSON on
stdout. On a loaded machine compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from shared_prefix import UpdateWorkload, update_arguments

INIT = "tcp://127.0.0.1:29619"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    update_arguments(parser)
    args = parser.parse_args()

    import dataclasses

    from agents.engines.base import SamplingParams
    from agents.models import resolve_model
    from trainer.colocated import ColocatedWorker, EngineOptions
    from trainer.run_plan import learner_spec

    work = UpdateWorkload.from_args(args)
    batch = work.batch
    spec = dataclasses.replace(
        learner_spec(work.config, str(resolve_model(work.config.model.name))).actor, num_threads=args.threads
    )
    worker = ColocatedWorker(spec, 0, 1, INIT)
    worker.setup()
    worker.start_engine(EngineOptions(max_batch_size=16, max_context=None, seed=0))
    store = worker.layer_inputs
    if store is None:
        raise SystemExit(
            "the default actor keeps no layer inputs: are its adapters on every layer (model.lora_layers)?"
        )

    async def run_rows() -> None:
        one = SamplingParams(max_new_tokens=1, temperature=0.0)
        rows = [batch.input_ids[r, : int(batch.attention_mask[r].sum())].tolist() for r in range(len(batch))]
        await asyncio.gather(*(worker.generate(row, one) for row in rows))

    started = time.perf_counter()
    asyncio.run(run_rows())
    engine_s = time.perf_counter() - started

    shares: list[float] = []

    def update(reading: bool) -> None:
        worker.layer_inputs = store if reading else None
        for stats in work.update(worker):
            if reading:
                shares.append(stats.token_weighted["frozen_layers_from_engine"] / stats.tokens)
        worker.layer_inputs = store

    times: dict[str, list[float]] = {"engine": [], "every_layer": []}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for name in times:
            started = time.perf_counter()
            update(name == "engine")
            if repeat:
                times[name].append(time.perf_counter() - started)
    asyncio.run(worker.close())
    engine, every = statistics.fmean(times["engine"]), statistics.fmean(times["every_layer"])
    result = {
        "rows": len(batch),
        "row_tokens_mean": float(batch.attention_mask.sum(dim=1).float().mean()),
        "sampled_tokens": int(batch.response_mask.sum()),
        "first_adapted_layer": store.layer,
        "threads": args.threads,
        "engine_rows_s": engine_s,
        "update_engine_s": engine,
        "update_every_layer_s": every,
        "every_layer_over_engine": every / engine,
        "rounds_s": times,
        "frozen_layers_from_engine": min(shares),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
