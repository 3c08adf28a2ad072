"""The embedded engine against plain batched ``model.generate``, in one process (no Ray), as JSON.

    python benchmarks/hf_engine.py                                    # SmolLM2 on CPU, the three workloads
    python benchmarks/hf_engine.py --device cuda --dtype bfloat16     # the same on a GPU
    python benchmarks/hf_engine.py --model tiny --workloads rows16 --rows-prompt-tokens 64 --rows-new-tokens 16
    python benchmarks/hf_engine.py --workloads conversations --engines hf cb   # transformers' continuous batching
    python benchmarks/hf_engine.py --device cuda --dtype bfloat16 --decode dynamic static graphs  # decode steps
    python benchmarks/hf_engine.py --logprobs-only                    # logprob agreement with a full forward pass

Workloads (every one samples at temperature 1 with end-of-sequence disabled, so all runs do the same work):

* ``rows16``, ``rows64``: 16 or 64 concurrent requests of ``--rows-prompt-tokens`` (256) random tokens, each
  generating exactly ``--rows-new-tokens`` (64) tokens. ``generate`` runs them as one batch.
* ``conversations``: the multi-turn workload below; ``generate`` runs each turn of every conversation as one
  batch over the whole history (no prefix cache: every turn re-encodes the history).

Each line of output is one JSON object per workload: generated tokens per second of each engine, the ratio
of the engine to ``generate`` measured in the same run, the prefix hit rate, and the sizes. The engine's
module is the one ``agents`` resolves to, so ``PYTHONPATH=<another checkout>`` measures that checkout's
engine with this script (``--prefill-batch-size`` is passed only when given). Each engine first runs a small
warm-up (kernels, allocator), not timed; with ``--engine-warm-up workload`` (the default on CUDA) it also runs the
workload once on other random tokens, untimed, its prefix cache emptied after: the timed pass then replays the
CUDA graphs the first pass captured, as every step of a run after its first does (the first pass's wall time is
reported as ``warm_up_wall_s``). ``generate`` has no graphs to capture: its warm-up stays a short batch.

The conversations workload: ``--conversations`` concurrent conversations of ``--turns`` turns. Every
conversation starts with the same ``--system-tokens`` system prompt and its own ``--user-tokens`` first
message; every turn samples exactly ``--new-tokens`` tokens, then appends an observation of
``--observation-tokens`` tokens, and the next turn's input is the whole history.
Token ids are random (a fixed seed): throughput does not depend on the text.

Decode steps (``--decode``, one engine run each, on every workload): ``default`` (the engine's own choice, no
option passed: graphs on CUDA, dynamic on CPU), ``dynamic`` (``cuda_graphs=False``: shapes change every step),
``static`` (``static_decode=True, cuda_graphs=False``: fixed-capacity buffers and row buckets, eager) and ``graphs``
(``cuda_graphs=True``: the static step replayed from CUDA graphs; CUDA only); ``--decode-capacity`` sets the static
buffers' tokens per row. Each is reported as ``hf (<mode>)``, plain ``hf`` for ``default``.
``--sampling-noise generator counter`` runs each decode mode with each noise source (``hf (graphs, counter)``;
default: the engine's own choice). ``--profile-loop N`` prints, for every engine run, the N functions of its batching
loop (its worker thread, under cProfile) with the most own time: where the host time of a step goes.
``--profile-device N`` runs the loop under ``torch.profiler`` instead and prints the N operators and kernels with the
most own device time, and the device's busy time against the loop's wall time: where the GPU time of a step goes,
and whether the loop waits on the GPU or the GPU on the loop (warm-up and graph captures included).

Engines for the conversations workload (``--engines``; ``generate`` always runs):

* ``hf``: :class:`agents.engines.hf.HfEngine` (own batching loop, right-aligned batch cache, prefix cache of
  whole sequences);
* ``cb``: transformers' ``ContinuousBatchingManager`` (paged attention over sdpa, ``allow_block_sharing`` on,
  ``return_logprobs`` on, pages of ``--cb-page-size`` tokens), driven through ``register_result_handler``.
  Its cached tokens are counted by wrapping the cache's ``search_prefix_match`` (measurement only).

Earlier figures for ``hf`` against ``cb`` (before batched prefill and sampling), measured on the 2-core
development machine (shared with other jobs, so absolute figures move by tens of percent between runs; the
ratios held), default conversations workload, transformers 5.23, torch 2.13:

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
import json
import time
from dataclasses import dataclass


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
    wall_s: float
    generated_tokens: int
    prompt_tokens: int
    cached_tokens: int
    mean_batch: float | None
    warm_up_s: float | None = None  # the engine's untimed pass of the same workload (graph captures included)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s


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


DECODE_OPTIONS = {
    "default": {},
    "dynamic": {"cuda_graphs": False},
    "static": {"cuda_graphs": False, "static_decode": True},
    "graphs": {"cuda_graphs": True},
}


def make_engine(
    model,
    max_batch_size: int,
    prefill_batch_size: int | None,
    device: str,
    decode: str = "default",
    decode_capacity: int | None = None,
    sampling_noise: str | None = None,
    profile_loop: int = 0,
    profile_device: int = 0,
):
    from agents.engines.hf import HfEngine

    engine_class = HfEngine
    if profile_loop:
        engine_class = profiled_engine_class(engine_class, profile_loop)
    if profile_device:
        engine_class = device_profiled_engine_class(engine_class, profile_device)
    return engine_class(
        model,
        device=device,
        max_batch_size=max_batch_size,
        seed=0,
        **engine_options(prefill_batch_size, decode, decode_capacity, sampling_noise),
    )


def engine_options(
    prefill_batch_size: int | None, decode: str, decode_capacity: int | None, sampling_noise: str | None
) -> dict:

    # options the engine has defaults for are passed only when asked, so an older checkout's engine still runs
    options = {} if prefill_batch_size is None else {"prefill_batch_size": prefill_batch_size}
    options.update(DECODE_OPTIONS[decode])
    if decode_capacity is not None:
        options["decode_capacity"] = decode_capacity
    if sampling_noise is not None:
        options["sampling_noise"] = sampling_noise
    return options


def profiled_engine_class(engine_class, top: int):
    """``engine_class`` whose batching loop (its worker thread) runs under cProfile; on ``close`` the ``top``
    functions by own time go to stderr: where the loop's host time goes (warm-up and graph captures included)."""
    import cProfile
    import pstats
    import sys

    class Profiled(engine_class):
        def _loop(self) -> None:
            profile = cProfile.Profile()
            profile.enable()
            try:
                super()._loop()
            finally:
                profile.disable()
                mode = f"graphs={self.cuda_graphs} static={self.static_decode} noise={self.sampling_noise}"
                print(f"--- the batching loop ({mode}, {self.max_batch_size} rows), by own time", file=sys.stderr)
                pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(top)

    return Profiled


def device_profiled_engine_class(engine_class, top: int):
    """``engine_class`` whose batching loop runs under ``torch.profiler`` (CPU and, where there is one, CUDA
    activity); on ``close`` the ``top`` operators and kernels by own device time go to stderr, with the device's
    busy time (the kernels' own time summed) against the loop's wall time."""
    import sys
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile

    class DeviceProfiled(engine_class):
        def _loop(self) -> None:
            cuda = self.device.type == "cuda"
            activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
            started = time.perf_counter()
            with profile(activities=activities) as profiler:
                try:
                    super()._loop()
                finally:
                    if cuda:
                        torch.cuda.synchronize(self.device)
            wall = time.perf_counter() - started
            averages = profiler.key_averages()
            sort = "self_device_time_total" if cuda else "self_cpu_time_total"
            busy = sum(event.self_device_time_total for event in averages) / 1e6 if cuda else float("nan")
            mode = f"graphs={self.cuda_graphs} static={self.static_decode} noise={self.sampling_noise}"
            print(f"--- the batching loop ({mode}, {self.max_batch_size} rows) under torch.profiler", file=sys.stderr)
            print(f"loop wall {wall:.3f} s, device busy {busy:.3f} s (kernels' own time summed)", file=sys.stderr)
            print(averages.table(sort_by=sort, row_limit=top, max_name_column_width=100), file=sys.stderr)

    return DeviceProfiled


def engine_label(options: dict) -> str:
    parts = [options.get("decode", "default"), options.get("sampling_noise") or "default"]
    named = [part for part in parts if part != "default"]
    return f"hf ({', '.join(named)})" if named else "hf"


async def warm_up_engine(engine, vocab_size: int) -> None:
    from agents.engines.base import SamplingParams

    sampling = SamplingParams(max_new_tokens=4, temperature=1.0)
    await asyncio.gather(*(engine.generate([10 + i] * (8 + i), sampling) for i in range(4)))
    await engine.drop_prefix_cache()


async def bench_hf_rows(
    model, rows: int, prompt_tokens: int, new_tokens: int, options: dict, full_warm_up: bool = False
) -> Result:
    """``rows`` concurrent requests of ``prompt_tokens`` random tokens, ``new_tokens`` each. With ``full_warm_up``,
    the engine first runs the same workload on other random tokens, untimed, and its prefix cache is emptied."""
    import numpy as np

    from agents.engines.base import SamplingParams

    engine = make_engine(model, max_batch_size=rows, **options)
    await warm_up_engine(engine, model.config.vocab_size)
    sampling = SamplingParams(max_new_tokens=new_tokens, temperature=1.0)

    async def run(seed: int):
        prompts = np.random.default_rng(seed).integers(10, model.config.vocab_size - 10, size=(rows, prompt_tokens))
        started = time.perf_counter()
        generations = await asyncio.gather(*(engine.generate(p.tolist(), sampling) for p in prompts))
        return generations, time.perf_counter() - started

    warm_up_s = None
    if full_warm_up:
        _, warm_up_s = await run(1)
        await engine.drop_prefix_cache()
    generations, wall = await run(0)
    mean_batch = engine.stats().extra["mean_decode_batch_size"]
    await engine.close()
    generated = sum(len(g.output_ids) for g in generations)
    cached = sum(g.cached_tokens for g in generations)
    return Result(engine_label(options), wall, generated, rows * prompt_tokens, cached, mean_batch, warm_up_s)


def bench_generate_rows(model, rows: int, prompt_tokens: int, new_tokens: int, device: str) -> Result:
    """The same prompts as one ``model.generate`` batch."""
    import numpy as np
    import torch

    prompts = np.random.default_rng(0).integers(10, model.config.vocab_size - 10, size=(rows, prompt_tokens))
    input_ids = torch.as_tensor(prompts, device=device)
    generate_batch(model, input_ids[:, :8], 4)  # warm-up
    started = time.perf_counter()
    output = generate_batch(model, input_ids, new_tokens)
    wall = time.perf_counter() - started
    return Result("generate", wall, output.shape[0] * (output.shape[1] - prompt_tokens), rows * prompt_tokens, 0, rows)


def generate_batch(model, input_ids, new_tokens: int):
    """Plain batched sampling at temperature 1, exactly ``new_tokens`` tokens per row (no padding needed)."""
    import torch

    if input_ids.device.type == "cuda":
        torch.cuda.synchronize()
    with torch.no_grad():
        output = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            eos_token_id=None,
            pad_token_id=0,
        )
    if input_ids.device.type == "cuda":
        torch.cuda.synchronize()
    return output


async def bench_hf_conversations(
    model, workload: Workload, max_batch_size: int, options: dict, full_warm_up: bool = False
) -> Result:
    """The conversations workload; with ``full_warm_up`` first once on other random tokens, untimed."""
    import dataclasses

    from agents.engines.base import SamplingParams

    engine = make_engine(model, max_batch_size=max_batch_size, **options)
    await warm_up_engine(engine, model.config.vocab_size)
    sampling = SamplingParams(max_new_tokens=workload.new_tokens, temperature=1.0)

    async def generate(ids: list[int]) -> tuple[tuple[int, ...], int]:
        generation = await engine.generate(ids, sampling)
        return generation.output_ids, generation.cached_tokens

    warm_up_s = None
    if full_warm_up:
        started = time.perf_counter()
        other_tokens = dataclasses.replace(workload, seed=workload.seed + 1)
        await run_conversations(generate, other_tokens, model.config.vocab_size)
        warm_up_s = time.perf_counter() - started
        await engine.drop_prefix_cache()
    started = time.perf_counter()
    _, generated, prompt, cached = await run_conversations(generate, workload, model.config.vocab_size)
    wall = time.perf_counter() - started
    mean_batch = engine.stats().extra["mean_decode_batch_size"]
    await engine.close()
    return Result(engine_label(options), wall, generated, prompt, cached, mean_batch, warm_up_s)


def bench_generate_conversations(model, workload: Workload, device: str) -> Result:
    """Lock-step turns: each turn of every conversation in one ``generate`` batch over the whole history."""
    import torch

    system, users, observations = make_token_streams(workload, model.config.vocab_size)
    histories = [system + user for user in users]  # every history has the same length at every turn
    generate_batch(model, torch.tensor([h[:8] for h in histories], device=device), 4)  # warm-up
    generated = prompt = 0
    started = time.perf_counter()
    for turn in range(workload.turns):
        input_ids = torch.tensor(histories, device=device)
        output = generate_batch(model, input_ids, workload.new_tokens)[:, input_ids.shape[1] :].tolist()
        generated += sum(len(o) for o in output)
        prompt += input_ids.numel()
        histories = [h + o + obs[turn] for h, o, obs in zip(histories, output, observations, strict=True)]
    wall = time.perf_counter() - started
    return Result("generate", wall, generated, prompt, 0, workload.conversations)


async def bench_cb(model, workload: Workload, max_batch_size: int, page_size: int) -> Result:
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
        _, generated, prompt, _ = await run_conversations(generate, workload, model.config.vocab_size)
        wall = time.perf_counter() - started
    finally:
        manager.stop(block=True)
        PagedAttentionCache.search_prefix_match = original_search
    cached = sum(cached_counts)
    return Result(f"cb (page {page_size})", wall, generated, prompt, cached, None)


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


def report(name: str, sizes: dict, results: list[Result], args: argparse.Namespace) -> dict:
    """One JSON-ready record: each engine's figures and its ratio to ``generate`` in this run."""
    baseline = next(r for r in results if r.engine == "generate")
    record = {"workload": name, **sizes, "model": args.model, "device": args.device, "dtype": args.dtype}
    for result in results:
        record[result.engine] = {
            "tokens_per_s": round(result.tokens_per_s, 1),
            "ratio_to_generate": round(result.tokens_per_s / baseline.tokens_per_s, 3),
            "wall_s": round(result.wall_s, 2),
            "generated_tokens": result.generated_tokens,
            "prefix_hit_rate": round(result.cached_tokens / result.prompt_tokens, 4),
            "mean_decode_batch": result.mean_batch,
        }
        if result.warm_up_s is not None:
            record[result.engine]["warm_up_wall_s"] = round(result.warm_up_s, 2)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or a model directory")
    parser.add_argument("--workloads", nargs="+", default=["rows16", "rows64", "conversations"])
    parser.add_argument("--engines", nargs="+", default=["hf"], choices=["hf", "cb"], help="for conversations")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--rows-prompt-tokens", type=int, default=256)
    parser.add_argument("--rows-new-tokens", type=int, default=64)
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--system-tokens", type=int, default=100)
    parser.add_argument("--user-tokens", type=int, default=40)
    parser.add_argument("--observation-tokens", type=int, default=60)
    parser.add_argument("--new-tokens", type=int, default=30, help="per turn of the conversations")
    parser.add_argument("--max-batch-size", type=int, default=16, help="the engine's, for conversations")
    parser.add_argument("--prefill-batch-size", type=int, default=None, help="the engine's (default: its own)")
    parser.add_argument("--decode", nargs="+", default=["default"], choices=sorted(DECODE_OPTIONS))
    parser.add_argument("--decode-capacity", type=int, default=None, help="static decode: tokens per row")
    parser.add_argument(
        "--sampling-noise",
        nargs="+",
        default=["default"],
        choices=["default", "generator", "counter"],
        help="the engine's noise sources (default: its own, counter on CUDA); one engine run per decode and noise",
    )
    parser.add_argument(
        "--engine-warm-up",
        default="auto",
        choices=["auto", "short", "workload"],
        help="short: four small requests; workload: also one untimed pass of the workload (graph captures out of "
        "the timed pass); auto: workload on CUDA, short elsewhere",
    )
    parser.add_argument(
        "--profile-loop", type=int, default=0, help="print the N functions of the engine's loop with most own time"
    )
    parser.add_argument(
        "--profile-device", type=int, default=0, help="print the engine loop's N ops/kernels with most device time"
    )
    parser.add_argument("--cb-page-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--logprobs-only", action="store_true", help="only measure logprob agreement")
    args = parser.parse_args()

    import torch

    if args.threads:
        # on a shared machine more threads than free cores makes every forward pass wait on spinning threads
        torch.set_num_threads(args.threads)

    from agents.models import load_model

    def fresh_model():
        model = load_model(args.model, dtype=args.dtype, device=args.device)  # fresh: CB changes the attention
        model.generation_config.eos_token_id = None  # every request samples exactly its new tokens
        return model

    if args.logprobs_only:
        for temperature, diff in logprob_agreement(load_model(args.model, dtype=args.dtype)).items():
            print(f"{args.model} {args.dtype} temperature {temperature}: max |logprob diff| = {diff:.2e}")
        return
    shared = {"prefill_batch_size": args.prefill_batch_size, "device": args.device}
    full_warm_up = args.engine_warm_up == "workload" or (args.engine_warm_up == "auto" and args.device != "cpu")
    decodes = [
        {
            **shared,
            "decode": decode,
            "decode_capacity": args.decode_capacity,
            "sampling_noise": None if noise == "default" else noise,
            "profile_loop": args.profile_loop,
            "profile_device": args.profile_device,
        }
        for decode in args.decode
        for noise in args.sampling_noise
    ]
    model = fresh_model()
    for name in args.workloads:
        if name.startswith("rows"):
            rows, prompt_tokens, new_tokens = int(name[4:]), args.rows_prompt_tokens, args.rows_new_tokens
            results = [
                bench_generate_rows(model, rows, prompt_tokens, new_tokens, args.device),
                *(
                    asyncio.run(bench_hf_rows(model, rows, prompt_tokens, new_tokens, o, full_warm_up))
                    for o in decodes
                ),
            ]
            sizes = {"rows": rows, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens}
        elif name == "conversations":
            workload = Workload(
                args.conversations,
                args.turns,
                args.system_tokens,
                args.user_tokens,
                args.observation_tokens,
                args.new_tokens,
            )
            results = [
                bench_generate_conversations(model, workload, args.device),
                *(
                    asyncio.run(bench_hf_conversations(model, workload, args.max_batch_size, o, full_warm_up))
                    for o in decodes
                ),
            ]
            if "cb" in args.engines:
                results.append(asyncio.run(bench_cb(fresh_model(), workload, args.max_batch_size, args.cb_page_size)))
            sizes = {k: v for k, v in workload.__dict__.items() if k != "seed"}
        else:
            raise SystemExit(f"unknown workload {name!r}: use rows<N> (e.g. rows16) or conversations")
        print(json.dumps(report(name, sizes, results, args)), flush=True)


if __name__ == "__main__":
    main()
