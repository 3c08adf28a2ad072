"""The hf engine's memory on the default run's held-out evaluation, in one run.

    python benchmarks/engine_memory.py                                  # the embedded model, 64 episodes
    python benchmarks/engine_memory.py --model runs/x/policy --finished keep forget --concurrent 64 16
    python benchmarks/engine_memory.py --cached-tokens 32768 16384 8192 --finished keep
    python benchmarks/engine_memory.py --model runs/x/policy --finished forget --cached-tokens 32768 --concurrent 16 \
        --decode-slack 0.5 0.125

What the default run's actor process holds above its weights while it plays: the colocated engine's keys and
values (the running batch's buffer and the prefix cache). The workload is a held-out evaluation of the default
run: ``--episodes`` Sokoban levels of ``configs/env/sokoban.yaml`` from seed 10,000, 3 turns of up to 32 new
tokens, 1,024 tokens an episode, temperature 0.7, ``--concurrent`` episodes at once (the run's evaluation: all
64) against an engine of 16 rows, played in process by :func:`agents.episode.run_episode` as the environment
actors do. A warmed-up policy (``--model``) answers as the run's do; the base model's answers are mostly
invalid, so its episodes differ.

Configurations, each in its own process with the same sampling seeds: ``--finished`` (``keep``: a finished
episode's prefixes stay until the LRU bound drops them, the engine before ``forget_prefix``; ``forget``: each
episode's go when it ends), ``--cached-tokens`` (the engine's ``max_cached_tokens``) and ``--concurrent``.
Measured: the peak resident memory's growth over the memory before the engine existed (``VmHWM`` reset
through ``/proc/self/clear_refs``, minus ``VmRSS``), the prefix-cache hit rate, the largest decode buffer,
wall time and success. JSON on stdout, one object per configuration, with ratios against the first (the
baseline, measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import time
from importlib import resources

from omegaconf import OmegaConf

import envs
from agents.chat import ChatRenderer
from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.hf_kv import RunningBatch
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode
from agents.memory import peak_resident_mib, resident_mib, return_free_memory
from agents.models import load_model, load_tokenizer


class KeepFinished:
    """The engine as one that cannot forget a finished episode's prefixes (the behaviour before it could):
    every attribute but ``forget_prefix``, so :func:`agents.episode.run_episode` does not call it."""

    def __init__(self, engine: HfEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str):
        if name == "forget_prefix":
            raise AttributeError(name)
        return getattr(self._engine, name)


async def play(args: argparse.Namespace) -> dict[str, float]:
    import torch

    torch.set_num_threads(args.threads)
    RunningBatch.slack = args.decode_slack
    model, tokenizer = load_model(args.model), load_tokenizer(args.model)
    renderer = ChatRenderer(tokenizer)
    return_free_memory()
    before = resident_mib()  # the model loaded
    peak_resident_mib()  # a new peak from here
    engine = HfEngine(
        model, max_batch_size=16, prefill_batch_size=args.prefill_rows, max_cached_tokens=args.cached_tokens, seed=0
    )
    player = engine if args.finished == "forget" else KeepFinished(engine)
    options = {
        **OmegaConf.to_container(OmegaConf.load(resources.files("configs") / "env" / "sokoban.yaml")),
        "max_turns": 3,
    }
    options.pop("id")
    sampling = SamplingParams(max_new_tokens=32, temperature=0.7)
    limits = EpisodeLimits(max_new_tokens=32, max_total_tokens=1024)
    largest_buffer = 0.0

    async def watch() -> None:
        nonlocal largest_buffer
        while True:
            largest_buffer = max(largest_buffer, engine.stats().extra.get("decode_buffer_columns", 0.0))
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    started = time.perf_counter()
    at_once = asyncio.Semaphore(args.concurrent)

    async def episode(seed: int):
        async with at_once:
            return await run_episode(
                envs.make("sokoban", **options), player, renderer, EpisodeSpec("sokoban", seed, f"eval/{seed}"),
                sampling=sampling, limits=limits,
            )  # fmt: skip

    trajectories = await asyncio.gather(*[episode(s) for s in range(10_000, 10_000 + args.episodes)])
    seconds = time.perf_counter() - started
    watcher.cancel()
    stats = engine.stats()
    peak = peak_resident_mib(reset=False)
    await engine.close()
    return {
        "max_cached_tokens": args.cached_tokens,
        "concurrent_episodes": args.concurrent,
        "finished": args.finished,
        "prefill_rows": args.prefill_rows,
        "decode_slack": args.decode_slack,
        "peak_growth_mib": peak - before if peak is not None and before is not None else float("nan"),
        "prefix_hit_rate": stats.prefix_hit_rate,
        "largest_decode_buffer_columns": largest_buffer,
        "prefix_cache_tokens_at_end": stats.extra.get("prefix_cache_tokens", 0.0),
        "seconds": seconds,
        "success": sum(t.success for t in trajectories) / len(trajectories),
        "generated_tokens": float(sum(t.num_sampled_tokens for t in trajectories)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="smollm2 | tiny | a model dir")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--cached-tokens", type=int, nargs="+", default=[32768, 16384, 8192])
    parser.add_argument("--concurrent", type=int, nargs="+", default=[64], help="episodes played at once")
    parser.add_argument(
        "--finished", nargs="+", default=["keep", "forget"], choices=["keep", "forget"],
        help="finished episodes' prefixes: kept until the LRU bound drops them, or forgotten as each episode ends",
    )  # fmt: skip
    parser.add_argument("--prefill-rows", type=int, nargs="+", default=[16], help="the engine's prefill_batch_size")
    parser.add_argument(
        "--decode-slack", type=float, nargs="+", default=[RunningBatch.slack],
        help="free columns a decode buffer's reallocation leaves, a fraction of its width (RunningBatch.slack)",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the colocated engine's one CPU)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one value
    args = parser.parse_args()
    if args.one:  # a child process: one value of each
        for name in ("cached_tokens", "concurrent", "finished", "prefill_rows", "decode_slack"):
            setattr(args, name, getattr(args, name)[0])
        print(json.dumps(asyncio.run(play(args))), flush=True)
        return
    results = []
    grid = itertools.product(args.finished, args.cached_tokens, args.concurrent, args.prefill_rows, args.decode_slack)
    for finished, value, concurrent, prefill_rows, slack in grid:
        command = [
            sys.executable, __file__, "--one", "--model", args.model, "--episodes", str(args.episodes),
            "--cached-tokens", str(value), "--concurrent", str(concurrent), "--threads", str(args.threads),
            "--finished", finished, "--prefill-rows", str(prefill_rows), "--decode-slack", str(slack),
        ]  # fmt: skip
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        if results:
            base = results[0]
            result["peak_growth_vs_first"] = result["peak_growth_mib"] / base["peak_growth_mib"]
            result["seconds_vs_first"] = result["seconds"] / base["seconds"]
        results.append(result)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
