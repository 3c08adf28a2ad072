"""One learner rank with FSDP holding the trained weights, against every weight left out of FSDP (the default).

    python benchmarks/one_rank_fsdp.py                 # 16 oracle episodes of the default levels, 3 rounds
    python benchmarks/one_rank_fsdp.py --repeats 5 --phases update

On a one-rank group in float32 the learner leaves every weight out of FSDP
(:func:`trainer.learner_worker.one_rank_weights`). Before, only the weights that train nothing were left out and FSDP
held the trained ones: this benchmark builds that placement again by patching ``one_rank_weights`` while a worker is
set up, and runs both placements in one process, no Ray, on the same batch, alternating ``--repeats`` rounds after a
warm-up round:

* ``warmup``: ``update_sft`` on each of ``--mini-batches`` mini-batches, the warm-up's actor (``trainer.sft``'s spec
  of the default config: SmolLM2-135M-Instruct, every weight trained, activation checkpointing);
* ``score`` and ``update``: ``compute_logprobs_and_values`` on the whole batch and ``update_policy`` on each
  mini-batch, the RL actor (``trainer.run_plan.learner_spec``: LoRA rank 32 and the shared value head).

The batch is ``--rows`` Sokoban episodes played by the oracle (``benchmarks/shared_prefix.py``'s), one row a
micro-batch. For each phase: mean seconds per round of each placement and ``fsdp_over_plain``. ``same_outputs``:
the two placements' scores equal to the bit in the first round; ``same_weights``: their trained weights equal to
the bit after the last round (the warm-up's and the RL actor's). One process holds four workers (about 6 GiB).

JSON on stdout. On a loaded machine compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

from shared_prefix import UpdateWorkload, update_arguments

PORTS = iter(range(29641, 29660))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    update_arguments(parser, env=False)
    parser.add_argument(
        "--phases", nargs="+", default=["warmup", "score", "update"], choices=["warmup", "score", "update"]
    )
    args = parser.parse_args()

    import torch

    import trainer.learner_worker as learner_worker
    from agents.models import resolve_model
    from trainer.algos import Aggregation
    from trainer.run_plan import learner_spec
    from trainer.sft import _sft_worker_spec

    work = UpdateWorkload.from_args(args)
    config, batch, minis = work.config, work.batch, work.minis
    model = str(resolve_model(config.model.name))
    rl_spec = dataclasses.replace(learner_spec(config, model).actor, num_threads=args.threads)
    steps = (args.repeats + 1) * args.mini_batches  # the warm-up's schedule over the optimizer steps this run takes
    sft_spec = dataclasses.replace(_sft_worker_spec(config, model, steps), num_threads=args.threads)

    plain_placement = learner_worker.one_rank_weights

    def fsdp_placement(model):  # the placement before: FSDP holds the trained weights
        return {param for param in plain_placement(model) if not param.requires_grad}

    def build(spec, placement):
        learner_worker.one_rank_weights = placement
        try:
            worker = learner_worker.ModelWorker(spec, 0, 1, f"tcp://127.0.0.1:{next(PORTS)}")
            worker.setup()
        finally:
            learner_worker.one_rank_weights = plain_placement
        return worker

    wanted_rl = {"score", "update"} & set(args.phases)
    placements = {"fsdp": fsdp_placement, "plain": plain_placement}
    sft = {name: build(sft_spec, p) for name, p in placements.items()} if "warmup" in args.phases else {}
    rl = {name: build(rl_spec, p) for name, p in placements.items()} if wanted_rl else {}

    def warmup(worker) -> None:
        for mini in minis:
            worker.update_sft(mini, Aggregation("token-mean", float(mini.num_sampled_tokens), float(len(mini))), 1)

    phases = {
        "warmup": (sft, warmup),
        "score": (rl, lambda worker: worker.compute_logprobs_and_values(batch, 1.0, 1)),
        "update": (rl, work.update),
    }
    phases = {name: phases[name] for name in ("warmup", "score", "update") if name in args.phases}
    times = {(phase, name): [] for phase in phases for name in placements}
    first_scores = {}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for phase, (workers, run) in phases.items():
            for name, worker in workers.items():
                started = time.perf_counter()
                out = run(worker)
                if repeat:
                    times[phase, name].append(time.perf_counter() - started)
                elif phase == "score":
                    first_scores[name] = out

    def trained(worker) -> dict[str, torch.Tensor]:
        def whole(param):
            return param.full_tensor() if hasattr(param, "full_tensor") else param

        return {n: whole(p.detach()) for n, p in worker.model.named_parameters() if p.requires_grad}

    result: dict = {"rows": len(batch), "mini_batches": args.mini_batches, "threads": args.threads}
    if first_scores:
        result["same_outputs"] = all(
            torch.equal(a, b) for a, b in zip(first_scores["fsdp"], first_scores["plain"], strict=True)
        )
    for label, workers in (("warmup", sft), ("rl", rl)):
        if workers:
            fsdp, plain = trained(workers["fsdp"]), trained(workers["plain"])
            result[f"same_weights_{label}"] = all(torch.equal(fsdp[n], plain[n]) for n in fsdp)
    for phase in phases:
        seconds = {name: statistics.fmean(times[phase, name]) for name in placements}
        result[phase] = {
            "fsdp_s": seconds["fsdp"],
            "plain_s": seconds["plain"],
            "fsdp_over_plain": seconds["fsdp"] / seconds["plain"],
            "rounds_fsdp": times[phase, "fsdp"],
            "rounds_plain": times[phase, "plain"],
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
