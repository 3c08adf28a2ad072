"""Rollout throughput: turngym's rollout against a naive loop and a lock-step batched loop, in one run.

All three play the same Sokoban episodes (same seeds, 5 turns at most) with the same model, weights,
sampling (temperature 1.0) and per-turn token limit:

* naive: episodes one after another; every turn re-renders the whole conversation with the chat
  template, re-encodes it and calls ``model.generate`` on it (no cache carried between turns);
* lock-step: all episodes advance together; every turn one batched, left-padded ``model.generate``
  over every unfinished conversation, re-encoded in full (how RAGEN-style trainers roll out);
* turngym: every episode runs concurrently through :func:`agents.episode.run_episode` against the
  ``hf`` engine (continuous batching, prefix cache); ``--ray`` adds the same through Ray env
  actors (:mod:`trainer.rollout`).

Reported: episodes/s, generated tokens/s, the ratios to both baselines, the prefix-cache hit rate
(prompt tokens served from cache / prompt tokens), and the in-process rollout's share of its roofline: the time
the same forward work takes at the model's batched rates on this machine, measured in the same run (decode:
one new token for each of as many rows as the rollout ran at once, against a cache of the rollout's mean context;
prefill: rows of the rollout's mean uncached prompt length after its mean cached prefix, in one batch, the
vocabulary head on the last position only, as the engine's prefills run it), over the rollout's wall time. The
rest of the wall time is the engine's and the episode loop's own cost (scheduling, sampling, cache copies,
environments, rendering). Since episodes end at different turns and wait on their environments, the decode steps
run with fewer rows than the episodes; the same forward work at the rows they actually had (a decode step of r rows
costing a + b r, a and b from timings of one row and of all) is reported beside it, with the engine's own time in
its decode and prefill forwards. Usage::

    python benchmarks/rollout.py --model tiny --episodes 16
    python benchmarks/rollout.py --model smollm2 --episodes 16 --max-new-tokens 48
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass

import torch

import envs
from agents.chat import ChatRenderer
from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode
from agents.models import load_model, load_tokenizer

ENV_ID = "sokoban"
ENV_OPTIONS = {"max_turns": 5}


@dataclass
class Result:
    name: str
    episodes: int
    generated_tokens: int
    seconds: float
    extra: dict

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.seconds


def stop_ids(renderer: ChatRenderer, tokenizer) -> list[int]:
    ids = set(renderer.stop_token_ids)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def new_token_count(row: torch.Tensor, stops: list[int]) -> int:
    """Tokens ``generate`` produced for one row: up to and including the first stop token."""
    for i, token in enumerate(row.tolist()):
        if token in stops:
            return i + 1
    return len(row)


def naive(model, tokenizer, renderer, seeds, max_new_tokens) -> Result:
    stops = stop_ids(renderer, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    generated = 0
    started = time.perf_counter()
    for seed in seeds:
        env = envs.make(ENV_ID, **ENV_OPTIONS)
        env.reset(seed=seed)
        while True:
            ids = tokenizer.apply_chat_template(env.messages(), add_generation_prompt=True, return_tensors="pt")
            ids = ids["input_ids"] if not isinstance(ids, torch.Tensor) else ids
            with torch.no_grad():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    eos_token_id=stops,
                    pad_token_id=pad,
                )
            new = out[0, ids.shape[1] :]
            n = new_token_count(new, stops)
            generated += n
            action = tokenizer.decode(new[:n], skip_special_tokens=True)
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    return Result("naive", len(seeds), generated, time.perf_counter() - started, {})


def lockstep(model, tokenizer, renderer, seeds, max_new_tokens) -> Result:
    stops = stop_ids(renderer, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    generated = 0
    started = time.perf_counter()
    active = []
    for seed in seeds:
        env = envs.make(ENV_ID, **ENV_OPTIONS)
        env.reset(seed=seed)
        active.append(env)
    while active:
        prompts = [
            tokenizer.apply_chat_template(env.messages(), add_generation_prompt=True, tokenize=False) for env in active
        ]
        tokenizer.padding_side = "left"
        batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(
                **batch,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                max_new_tokens=max_new_tokens,
                eos_token_id=stops,
                pad_token_id=pad,
            )
        still = []
        for env, row in zip(active, out[:, batch["input_ids"].shape[1] :], strict=True):
            n = new_token_count(row, stops)
            generated += n
            _, _, terminated, truncated, _ = env.step(tokenizer.decode(row[:n], skip_special_tokens=True))
            if not (terminated or truncated):
                still.append(env)
        active = still
    return Result("lock-step", len(seeds), generated, time.perf_counter() - started, {})


async def play_inprocess(model, renderer, seeds, max_new_tokens: int, sampling_seed: int | None = None):
    """Every episode of ``seeds`` at once through one ``hf`` engine: the wall time, the engine's stats and the
    trajectories (with ``sampling_seed``, the same tokens whenever the engine computes the same logits)."""
    engine = HfEngine(model, max_batch_size=len(seeds))
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, seed=sampling_seed)
    limits = EpisodeLimits(max_new_tokens=max_new_tokens, max_total_tokens=8192)
    started = time.perf_counter()
    runs = [
        run_episode(
            envs.make(ENV_ID, **ENV_OPTIONS),
            engine,
            renderer,
            EpisodeSpec(ENV_ID, seed, f"g{seed}"),
            sampling=sampling,
            limits=limits,
        )
        for seed in seeds
    ]
    trajectories = await asyncio.gather(*runs)
    seconds = time.perf_counter() - started
    stats = engine.stats()
    await engine.close()
    return seconds, stats, trajectories


async def turngym_inprocess(model, tokenizer, renderer, seeds, max_new_tokens) -> Result:
    seconds, stats, trajectories = await play_inprocess(model, renderer, seeds, max_new_tokens)
    errors = [t.error for t in trajectories if t.termination == "error"]
    if errors:
        raise RuntimeError(f"{len(errors)} episodes failed, first: {errors[0]}")
    generated = sum(t.num_sampled_tokens for t in trajectories)
    turns = sum(t.num_turns for t in trajectories)
    extra = {
        "prefix_hit_rate": stats.prefix_hit_rate,
        "mean_turns": turns / len(seeds),
        "prefilled_tokens": stats.prompt_tokens - stats.cached_prompt_tokens,
        "cached_tokens": stats.cached_prompt_tokens,
        "requests": turns,
        "mean_context": sum(len(t.prompt_ids) + len(t.response_ids) for t in trajectories) / len(seeds) / 2,
        "busy_seconds": stats.busy_seconds,
        **{
            key: stats.extra[key]
            for key in (
                "decode_steps",
                "mean_decode_batch_size",
                "prefill_forwards",
                "prefill_seconds",
                "decode_seconds",
            )
        },
    }
    return Result("turngym", len(seeds), generated, seconds, extra)


@torch.no_grad()
def roofline(model, result: Result, rows: int, repeats: int = 3) -> dict[str, float]:
    """The time ``result``'s forward work takes at the model's own batched rates (module docstring).

    The rates are each the best of ``repeats`` timings: a decode step of ``rows`` rows against a cache of
    ``mean_context`` tokens (mean over the episodes of half their final length: the context grows from the
    prompt to the full episode), and one batched prefill of ``rows`` rows of the mean uncached prompt length
    against a cache of the mean cached prefix (what a prefill after a prefix hit attends to), the vocabulary head on
    the last position only. A decode step of one row, timed the same way, gives the line through which the steps the
    rollout actually ran are costed. The prefill rate without the cached prefix, and the share of the roofline at that
    rate (a stricter bound: the attention to the prefixes left out), are reported beside it.
    """
    from transformers import DynamicCache

    from agents.models import cache_keyword

    keyword = cache_keyword(model)
    context = max(1, round(result.extra["mean_context"]))
    prefill_length = max(1, round(result.extra["prefilled_tokens"] / result.extra["requests"]))
    cached_length = round(result.extra["cached_tokens"] / result.extra["requests"])
    vocab = model.config.vocab_size
    ids, step = torch.randint(vocab, (rows, context)), torch.randint(vocab, (rows, 1))
    prompt = torch.randint(vocab, (rows, prefill_length))

    def best_time(cached: torch.Tensor, new: torch.Tensor) -> float:
        """The best of ``repeats`` forwards of ``new`` after ``cached`` (``[rows, 0]``: no cache), the vocabulary
        head on the last position only (as the engine runs them); each from the same cache."""
        cache = DynamicCache()
        if cached.shape[1]:
            model(input_ids=cached, use_cache=True, **{keyword: cache})
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            model(input_ids=new, use_cache=True, logits_to_keep=1, **{keyword: cache})
            best = min(best, time.perf_counter() - started)
            cache.crop(-new.shape[1])  # drop what the forward added
        return best

    decode_s = best_time(ids, step)
    prefill_s = best_time(torch.randint(vocab, (rows, cached_length)), prompt)
    decode_rate, prefill_rate = rows / decode_s, rows * prefill_length / prefill_s
    decode_ideal_s = result.generated_tokens / decode_rate
    prefill_ideal_s = result.extra["prefilled_tokens"] / prefill_rate
    ideal_s = decode_ideal_s + prefill_ideal_s
    # The same with the rows the rollout's decode steps actually had: a step of r rows costs a + b r (a line through
    # the timings of one row and of ``rows``), so its steps' total is steps a + (their rows) b.
    one_s = min(best_time(ids[:1], step[:1]), decode_s)  # timing noise: one row costs no more than every row
    per_row = (decode_s - one_s) / max(1, rows - 1)
    steps = result.extra["decode_steps"]
    decode_rows = steps * result.extra["mean_decode_batch_size"]
    occupied_s = steps * (one_s - per_row) + decode_rows * per_row + prefill_ideal_s
    # the same prefills without their cached prefixes: a stricter bound, attention to the prefix left out
    strict_rate = rows * prefill_length / best_time(prompt[:, :0], prompt)
    strict_s = decode_ideal_s + result.extra["prefilled_tokens"] / strict_rate
    return {
        "decode_tokens_per_s": decode_rate,
        "prefill_tokens_per_s": prefill_rate,
        "decode_one_row_s": one_s,
        "roofline_s": ideal_s,
        "share_of_roofline": ideal_s / result.seconds,
        "occupied_roofline_s": occupied_s,
        "share_of_occupied_roofline": occupied_s / result.seconds,
        "context": context,
        "prefill_length": prefill_length,
        "prefill_cached_length": cached_length,
        "prefill_tokens_per_s_without_prefix": strict_rate,
        "share_of_roofline_without_prefix": strict_s / result.seconds,
    }


def turngym_ray(model_name: str, seeds, max_new_tokens: int, num_env_actors: int) -> Result:
    """The same episodes through Ray env actors against the hf engine in its own actor (model loaded there)."""
    from agents.engines.registry import EngineSpec
    from trainer.engine_actor import launch_engine_actor
    from trainer.ray_cluster import init_ray
    from trainer.rollout import RolloutConfig, RolloutManager, group_requests
    from trainer.rollout_worker import ChatRendererFactory

    init_ray(num_cpus=max(4, num_env_actors + 2))
    engine = launch_engine_actor(EngineSpec("hf", model_name, max_batch_size=len(seeds), seed=0))
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0)
    limits = EpisodeLimits(max_new_tokens=max_new_tokens, max_total_tokens=8192)
    config = RolloutConfig(num_env_actors=num_env_actors)
    with RolloutManager(config, ChatRendererFactory(model_name), engine.factory()) as manager:
        # a warm-up collect: actor start-up (imports, tokenizer) is not rollout throughput
        asyncio.run(
            manager.collect(group_requests(ENV_ID, [10_000], 1, ENV_OPTIONS), sampling=sampling, limits=limits)
        )
        before = asyncio.run(engine.stats_async())
        started = time.perf_counter()
        result = asyncio.run(
            manager.collect(group_requests(ENV_ID, seeds, 1, ENV_OPTIONS), sampling=sampling, limits=limits)
        )
        seconds = time.perf_counter() - started
        after = asyncio.run(engine.stats_async())
    trajectories = [t for group in result.groups for t in group]
    if len(trajectories) != len(seeds):
        raise RuntimeError(f"only {len(trajectories)} of {len(seeds)} episodes came back: {result.metrics}")
    prompt = after.prompt_tokens - before.prompt_tokens
    cached = after.cached_prompt_tokens - before.cached_prompt_tokens
    generated = sum(t.num_sampled_tokens for t in trajectories)
    mean_turns = sum(t.num_turns for t in trajectories) / len(seeds)
    return Result(
        "turngym+ray", len(seeds), generated, seconds, {"prefix_hit_rate": cached / prompt, "mean_turns": mean_turns}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="tiny | smollm2 | a model dir")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--skip-naive", action="store_true", help="the naive loop is slow with large models")
    parser.add_argument("--ray", action="store_true", help="also run turngym through Ray env actors")
    parser.add_argument("--env-actors", type=int, default=2)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    torch.manual_seed(0)
    tokenizer = load_tokenizer(args.model)
    model = load_model(args.model, dtype="float32", device="cpu")
    renderer = ChatRenderer(tokenizer)
    seeds = list(range(args.episodes))
    results = []
    if not args.skip_naive:
        results.append(naive(model, tokenizer, renderer, seeds, args.max_new_tokens))
    results.append(lockstep(model, tokenizer, renderer, seeds, args.max_new_tokens))
    results.append(asyncio.run(turngym_inprocess(model, tokenizer, renderer, seeds, args.max_new_tokens)))
    results[-1].extra |= roofline(model, results[-1], rows=len(seeds))
    if args.ray:
        results.append(turngym_ray(args.model, seeds, args.max_new_tokens, args.env_actors))

    print(
        f"model={args.model} episodes={args.episodes} max_new_tokens={args.max_new_tokens} "
        f"threads={torch.get_num_threads()}"
    )
    print(f"{'loop':<10} {'episodes/s':>11} {'tokens/s':>9} {'seconds':>8} {'tokens':>7}")
    for r in results:
        print(
            f"{r.name:<10} {r.episodes_per_s:>11.3f} {r.tokens_per_s:>9.1f} {r.seconds:>8.1f} {r.generated_tokens:>7}"
        )
    for mine in (r for r in results if r.name.startswith("turngym")):
        for r in (r for r in results if not r.name.startswith("turngym")):
            print(
                f"{mine.name} / {r.name}: {mine.episodes_per_s / r.episodes_per_s:.1f}x episodes/s, "
                f"{mine.tokens_per_s / r.tokens_per_s:.1f}x tokens/s"
            )
        hit_rate, turns = mine.extra["prefix_hit_rate"], mine.extra["mean_turns"]
        print(f"{mine.name} prefix-cache hit rate: {hit_rate:.1%} (mean turns {turns:.2f})")
        if "share_of_roofline" in mine.extra:
            e = mine.extra
            print(
                f"{mine.name} share of its roofline: {e['share_of_roofline']:.1%} ({e['roofline_s']:.1f} s of forward "
                f"work at {e['decode_tokens_per_s']:.1f} decode tokens/s ({len(seeds)} rows, {e['context']}-token "
                f"context) and {e['prefill_tokens_per_s']:.1f} prefill tokens/s ({e['prefill_length']}-token rows "
                f"after {e['prefill_cached_length']} cached; {e['prefill_tokens_per_s_without_prefix']:.1f} without "
                f"them, a roofline {e['share_of_roofline_without_prefix']:.1%} of the wall time))"
            )
            print(
                f"{mine.name} at the rows its decode steps had (mean {e['mean_decode_batch_size']:.1f} of "
                f"{len(seeds)}, {e['decode_steps']:.0f} steps): {e['occupied_roofline_s']:.1f} s of forward work, "
                f"{e['share_of_occupied_roofline']:.1%} of the wall time; the engine: decode "
                f"{e['decode_seconds']:.1f} s, prefill {e['prefill_seconds']:.1f} s ({e['prefill_forwards']:.0f} "
                f"forwards), busy {e['busy_seconds']:.1f} s of {mine.seconds:.1f} s"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [r.__dict__ | {"episodes_per_s": r.episodes_per_s, "tokens_per_s": r.tokens_per_s} for r in results],
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
