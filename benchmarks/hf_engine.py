"""The embedded engine on a multi-turn workload: HfEngine against transformers' continuous batching, in one run.

    python benchmarks/hf_engine.py                          # SmolLM2 and the tiny model, both engines
    python benchmarks/hf_engine.py --models tiny --engines hf --conversations 8 --turns 3
    python benchmarks/hf_engine.py --logprobs-only          # logprob agreement with a full forward pass

Workload: ``--conversations`` concurrent conversations of ``--turns`` turns. Every conversation starts with
the same ``--system-tokens`` system prompt and its own ``--user-tokens`` first message; every turn samples
exactly ``--new-tokens`` tokens (temperature 1, end-of-sequence disabled so all runs do the same work), then
appends an observation of ``--observation-tokens`` tokens, and the next turn's input is the whole history.
Token ids are random (a fixed seed): throughput does not depend on the text.

Engines:

* ``hf``: :class:`agents.engines.hf.HfEngine` (own batching loop, right-aligned batch cache, prefix cache of
  whole sequences);
* ``cb``: transformers' ``ContinuousBatchingManager`` (paged attention over sdpa, ``allow_block_sharing`` on,
  ``return_logprobs`` on, pages of ``--cb-page-size`` tokens), driven through ``register_result_handler``.
  Its cached tokens are counted by wrapping the cache's ``search_prefix_match`` (measurement only).

Figures: generated tokens per second of wall time, prefix hit rate (cached prompt tokens / prompt tokens),
per-request latency (mean, p50, p95) and the mean decode batch size where the engine reports it.

Measured on the 2-core development machine (shared with other jobs, so absolute figures move by tens of percent
between runs; the ratios held), default workload, transformers 5.23, torch 2.13:

| model | dtype | engine | torch threads | generated tok/s | prefix hit rate | latency mean s | p95 s |
|---|---|---|---|---|---|---|---|
| smollm2 | float32 | hf | 2 | 71.8 | 81.9% | 6.68 | 7.31 |
| smollm2 | float32 | cb (page 16) | 2 | 38.7 | 77.0% | 12.35 | 16.13 |
| smollm2 | float32 | hf | 1 | 48.2 | 81.9% | 9.94 | 11.59 |
| smollm2 | float32 | cb (page 16) | 1 | 18.6 | 77.0% | 25.73 | 31.75 |
| smollm2 | bfloat16 | hf | 2 | 76.4 | 81.9% | 6.28 | 8.47 |
| smollm2 | bfloat16 | cb (page 16) | 2 | 52.0 | 77.0% | 9.21 | 11.86 |
| tiny | float32 | hf | 2 | 3047 | 81.9% | 0.16 | 0.17 |
| tiny | float32 | cb (page 16) | 2 | 1969 | 77.0% | 0.24 | 0.29 |

The prompt tokens total 25,600 (16 conversations x (140 + 230 + 320 + 410 + 500)); hf's 81.9% is every token
but the last sampled one of the previous turn, plus the shared system prompt for all but the first conversation.
Logprob agreement (``--logprobs-only``, 4 concurrent requests x 32 sampled tokens, max |engine - full forward|):
SmolLM2 float32 1.4e-5 (T=1.0) and 2.2e-5 (T=0.7); tiny float32 9.5e-7; SmolLM2 bfloat16 0.14 and 0.30
(bfloat16 rounding differs between a one-token decode step and a full-sequence forward).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass

MODEL_NAMES = ("smollm2", "tiny")


@dataclass
class Workload:
    conversations: int
    turns: int
    system_tokens: int
    user_tokens: int
    observation_tokens: int
    new_tokens: int
    seed: int = 0


@dataclass
class Result:
    engine: str
    model: str
    wall_s: float
    generated_tokens: int
    prompt_tokens: int
    cached_tokens: int
    latencies_s: list[float]
    mean_batch: float | None

    def row(self) -> str:
        lat = sorted(self.latencies_s)
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        batch = f"{self.mean_batch:.1f}" if self.mean_batch is not None else "-"
        return (
            f"| {self.model} | {self.engine} | {self.generated_tokens / self.wall_s:.1f} | "
            f"{self.cached_tokens / self.prompt_tokens:.1%} | {statistics.mean(lat):.2f} | "
            f"{statistics.median(lat):.2f} | {p95:.2f} | {batch} | {self.wall_s:.1f} |"
        )


def make_token_streams(
    workload: Workload, vocab_size: int
) -> tuple[list[int], list[list[int]], list[list[list[int]]]]:
    """System prompt, first user message per conversation, observation per conversation and turn."""
    import numpy as np

    rng = np.random.default_rng(workload.seed)
    low, high = 10, vocab_size - 10  # steer clear of special tokens at both ends

    def draw(n: int) -> list[int]:
        return rng.integers(low, high, size=n).tolist()

    system = draw(workload.system_tokens)
    users = [draw(workload.user_tokens) for _ in range(workload.conversations)]
    observations = [[draw(workload.observation_tokens) for _ in range(workload.turns)] for _ in users]
    return system, users, observations


async def run_conversations(generate, workload: Workload, vocab_size: int) -> tuple[list[float], int, int, int]:
    """Drive every conversation through ``generate(ids) -> (output_ids, cached)``; latencies and token counts."""
    system, users, observations = make_token_streams(workload, vocab_size)
    latencies: list[float] = []
    totals = {"generated": 0, "prompt": 0, "cached": 0}

    async def conversation(index: int) -> None:
        ids = system + users[index]
        for turn in range(workload.turns):
            started = time.perf_counter()
            output_ids, cached = await generate(ids)
            latencies.append(time.perf_counter() - started)
            totals["generated"] += len(output_ids)
            totals["prompt"] += len(ids)
            totals["cached"] += cached
            ids = ids + list(output_ids) + observations[index][turn]

    await asyncio.gather(*(conversation(i) for i in range(workload.conversations)))
    return latencies, totals["generated"], totals["prompt"], totals["cached"]


async def bench_hf(model, model_name: str, workload: Workload, max_batch_size: int) -> Result:
    from agents.engines.base import SamplingParams
    from agents.engines.hf import HfEngine

    engine = HfEngine(model, max_batch_size=max_batch_size, seed=0)
    sampling = SamplingParams(max_new_tokens=workload.new_tokens, temperature=1.0)

    async def generate(ids: list[int]) -> tuple[tuple[int, ...], int]:
        generation = await engine.generate(ids, sampling)
        return generation.output_ids, generation.cached_tokens

    started = time.perf_counter()
    latencies, generated, prompt, cached = await run_conversations(generate, workload, model.config.vocab_size)
    wall = time.perf_counter() - started
    mean_batch = engine.stats().extra["mean_decode_batch_size"]
    await engine.close()
    return Result("hf (HfEngine)", model_name, wall, generated, prompt, cached, latencies, mean_batch)


async def bench_cb(model, model_name: str, workload: Workload, max_batch_size: int, page_size: int) -> Result:
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching.cache import PagedAttentionCache

    cached_counts: list[int] = []
    original_search = PagedAttentionCache.search_prefix_match

    def counting_search(self, request_id, prompt_ids):
        matched = original_search(self, request_id, prompt_ids)
        cached_counts.append(matched)
        return matched

    PagedAttentionCache.search_prefix_match = counting_search
    generation_config = GenerationConfig(max_new_tokens=workload.new_tokens, do_sample=True, eos_token_id=-1)
    cb_config = ContinuousBatchingConfig(
        page_size=page_size,
        num_blocks=4096,
        max_batch_tokens=1024,
        max_requests_per_batch=max_batch_size,
        allow_block_sharing=True,
        return_logprobs=True,
    )
    manager = model.init_continuous_batching(generation_config=generation_config, continuous_batching_config=cb_config)
    manager.start()
    counter = iter(range(10**9))

    async def generate(ids: list[int]) -> tuple[list[int], int]:
        request_id = f"r{next(counter)}"
        future = asyncio.get_running_loop().create_future()
        manager.register_result_handler(request_id, lambda out: future.done() or future.set_result(out))
        seen = len(cached_counts)
        manager.add_request(ids, request_id=request_id, max_new_tokens=workload.new_tokens)
        output = await future
        if output.error:
            raise RuntimeError(f"continuous batching failed: {output.error}")
        # the lookup for this request happened while it was being scheduled; attribute the newest one
        return output.generated_tokens, cached_counts[-1] if len(cached_counts) > seen else 0

    try:
        started = time.perf_counter()
        latencies, generated, prompt, _ = await run_conversations(generate, workload, model.config.vocab_size)
        wall = time.perf_counter() - started
    finally:
        manager.stop(block=True)
        PagedAttentionCache.search_prefix_match = original_search
    cached = sum(cached_counts)
    return Result(f"cb (page {page_size})", model_name, wall, generated, prompt, cached, latencies, None)


def logprob_agreement(model, temperatures=(1.0, 0.7), requests: int = 4, new_tokens: int = 32) -> dict[float, float]:
    """Max |engine logprob - full-forward logprob| over ``requests`` concurrent sampled responses per temperature."""
    import torch

    from agents.engines.base import SamplingParams
    from agents.engines.hf import HfEngine

    async def run() -> dict[float, float]:
        engine = HfEngine(model, max_batch_size=requests, seed=1)
        prompts = [[100 + 7 * i + j for j in range(40 + 9 * i)] for i in range(requests)]
        worst: dict[float, float] = {}
        for temperature in temperatures:
            sampling = SamplingParams(max_new_tokens=new_tokens, temperature=temperature)
            generations = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
            diffs = []
            for prompt, generation in zip(prompts, generations, strict=True):
                ids = torch.tensor([prompt + list(generation.output_ids)])
                with torch.no_grad():
                    logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
                reference = torch.log_softmax(logits / temperature, -1)
                reference = reference.gather(1, ids[0, len(prompt) :, None])[:, 0]
                diffs.append((reference - torch.tensor(generation.logprobs)).abs().max().item())
            worst[temperature] = max(diffs)
        await engine.close()
        return worst

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument("--engines", nargs="+", default=["hf", "cb"], choices=["hf", "cb"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--system-tokens", type=int, default=100)
    parser.add_argument("--user-tokens", type=int, default=40)
    parser.add_argument("--observation-tokens", type=int, default=60)
    parser.add_argument("--new-tokens", type=int, default=30)
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--cb-page-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--logprobs-only", action="store_true", help="only measure logprob agreement")
    args = parser.parse_args()

    import torch

    if args.threads:
        # on a shared machine more threads than free cores makes every forward pass wait on spinning threads
        torch.set_num_threads(args.threads)

    from agents.models import load_model

    workload = Workload(
        args.conversations, args.turns, args.system_tokens, args.user_tokens, args.observation_tokens, args.new_tokens
    )
    results: list[Result] = []
    for model_name in args.models:
        if args.logprobs_only:
            worst = logprob_agreement(load_model(model_name, dtype=args.dtype))
            for temperature, diff in worst.items():
                print(f"{model_name} {args.dtype} temperature {temperature}: max |logprob diff| = {diff:.2e}")
            continue
        for engine in args.engines:
            model = load_model(model_name, dtype=args.dtype)  # fresh: CB switches the attention implementation
            model.generation_config.eos_token_id = None  # every turn samples exactly --new-tokens tokens
            if engine == "hf":
                result = asyncio.run(bench_hf(model, model_name, workload, args.max_batch_size))
            else:
                result = asyncio.run(bench_cb(model, model_name, workload, args.max_batch_size, args.cb_page_size))
            print(result.row(), flush=True)
            results.append(result)
    if results:
        print(f"\n{workload}, dtype {args.dtype}, torch threads {torch.get_num_threads()}\n")
        columns = ["model", "engine", "generated tok/s", "prefix hit rate", "latency mean s", "p50 s", "p95 s"]
        print("| " + " | ".join([*columns, "mean batch", "wall s"]) + " |")
        print("|---|---|---|---|---|---|---|---|---|")
        for result in results:
            print(result.row())


if __name__ == "__main__":
    main()
