"""Batched prefill and batched sampling in HfEngine: the same tokens and logprobs as one request at a time."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest
import torch

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.hf_kv import PrefillLayout, sequence_kv
from agents.engines.hf_sampling import filter_top_k_top_p, sample_next_tokens
from tests.agents.engines.test_hf_engine import prompt, reference_greedy, tiny_model


def test_prefill_layout_right_aligns_cached_prefixes_and_new_tokens():
    # row 0: 3 cached + 2 new; row 1: nothing cached, 4 new; row 2: 1 cached + 1 new. past = 3 columns, queries = 4:
    #   row 0  c c c | . . n n      row 1  . . . | n n n n      row 2  . . c | . . . n
    layout = PrefillLayout(cached=(3, 0, 1), lengths=(5, 4, 2))
    assert (layout.past, layout.queries, layout.padded) == (3, 4, True)
    assert layout.columns(0).tolist() == [0, 1, 2, 5, 6]
    assert layout.columns(1).tolist() == [3, 4, 5, 6]
    assert layout.columns(2).tolist() == [2, 6]
    assert layout.attention_mask().tolist() == [[1, 1, 1, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 0, 0, 0, 1]]
    ids, positions = layout.inputs([np.array([9, 8, 7, 6, 5]), np.array([1, 2, 3, 4]), np.array([11, 12])])
    assert ids.tolist() == [[0, 0, 6, 5], [1, 2, 3, 4], [0, 0, 0, 12]]
    assert positions.tolist() == [[0, 0, 3, 4], [0, 1, 2, 3], [0, 0, 0, 1]]
    assert not PrefillLayout(cached=(2, 2), lengths=(5, 5)).padded


def test_prefill_layout_copies_each_prefix_into_its_past_columns():
    layout = PrefillLayout(cached=(2, 0), lengths=(4, 3))
    keys = torch.arange(6.0).reshape(1, 3, 2)  # [heads, 3 tokens, dim]: a longer entry, 2 tokens of it are used
    cache = layout.cache([sequence_kv([(keys, -keys)]), None], num_layers=1)
    buffer = cache.layers[0].buffer.tensor[:, 0, 0]  # layer 0's keys: [rows, heads, past + queries, dim]
    assert buffer.shape == (2, 1, 2 + 3, 2) and cache.layers[0].length == 2
    # row 1's past columns are zeros; the query columns are the forward's to write
    assert torch.equal(buffer[0, 0, :2], keys[0, :2]) and not buffer[1, :, :2].any()


async def run_together(engine: HfEngine, prompts: list[list[int]], samplings: list[SamplingParams]) -> list:
    """Queue every request before the engine's loop can admit any, so they reach one admission together."""
    engine._condition.acquire()  # re-entrant: generate() takes it again on this thread
    try:
        tasks = [asyncio.create_task(engine.generate(p, s)) for p, s in zip(prompts, samplings, strict=True)]
        await asyncio.sleep(0)  # each task runs up to its await: every request is queued
    finally:
        engine._condition.release()
    return await asyncio.gather(*tasks)


async def conversation_workload(engine: HfEngine, sampling: SamplingParams) -> list:
    """Warm the prefix cache, then six concurrent requests whose cached prefixes differ (0 to 57 tokens)."""
    system = prompt(40)
    first = await engine.generate(system + prompt(10, 1), SamplingParams(max_new_tokens=8, temperature=0))
    prompts = [
        system + prompt(10, 1) + list(first.output_ids) + prompt(7, 3),  # turn 2: 40 + 10 + 8 - 1 = 57 cached
        system + prompt(20, 2),  # the system prompt: 40 cached
        prompt(33, 9),  # nothing cached
        system + prompt(5, 4),  # 40 cached
        prompt(12, 50),
        prompt(33, 9) + prompt(4, 7),  # shares 33 with a request of the same admission: waits for its prompt
    ]
    samplings = [dataclasses.replace(sampling, seed=100 + i) for i in range(len(prompts))]
    return await run_together(engine, prompts, samplings)


def max_logprob_difference(first: list, second: list) -> float:
    pairs = [zip(a.logprobs, b.logprobs, strict=True) for a, b in zip(first, second, strict=True)]
    return max(abs(x - y) for pair in pairs for x, y in pair)


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(max_new_tokens=10, temperature=0.0),
        SamplingParams(max_new_tokens=10, temperature=1.0),
        SamplingParams(max_new_tokens=10, temperature=0.8, top_k=50, top_p=0.9),
    ],
    ids=["greedy", "sampled", "top-k-top-p"],
)
async def test_batched_prefill_equals_one_request_at_a_time(sampling):
    results = {}
    for prefill_batch_size in (1, None):
        engine = HfEngine(tiny_model(), max_batch_size=8, prefill_batch_size=prefill_batch_size, seed=0)
        results[prefill_batch_size] = (await conversation_workload(engine, sampling), engine.stats())
        await engine.close()
    (alone, alone_stats), (batched, batched_stats) = results[1], results[None]
    assert [g.cached_tokens for g in batched] == [g.cached_tokens for g in alone] == [57, 40, 0, 40, 0, 33]
    assert [g.output_ids for g in batched] == [g.output_ids for g in alone]
    worst = max_logprob_difference(alone, batched)
    assert worst < 1e-5
    # 1 warm-up + 6 one at a time, against 1 warm-up + 2 (the last request waits for its 33-token prefix)
    assert (alone_stats.extra["prefill_forwards"], batched_stats.extra["prefill_forwards"]) == (7, 3)
    if sampling.temperature == 0:
        model = tiny_model()
        system = prompt(40)
        assert batched[1].output_ids == reference_greedy(model, system + prompt(20, 2), 10)


async def test_identical_prompts_are_prefilled_once_then_served_from_the_cache():
    engine = HfEngine(tiny_model(), max_batch_size=8, seed=0)
    generations = await run_together(engine, [prompt(30)] * 4, [SamplingParams(max_new_tokens=6, seed=1)] * 4)
    forwards = engine.stats().extra["prefill_forwards"]
    await engine.close()
    assert [g.cached_tokens for g in generations] == [0, 29, 29, 29]
    assert forwards == 2
    assert len({g.output_ids for g in generations}) == 1  # same seed, same prompt


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 1.0])
async def test_smollm2_batched_prefill_equals_one_request_at_a_time(temperature):
    from agents.models import load_model

    model = load_model("smollm2")
    model.generation_config.eos_token_id = None
    sampling = SamplingParams(max_new_tokens=8, temperature=temperature)
    results = {}
    for prefill_batch_size in (1, None):
        engine = HfEngine(model, max_batch_size=8, prefill_batch_size=prefill_batch_size, seed=0)
        results[prefill_batch_size] = await conversation_workload(engine, sampling)
        await engine.close()
    alone, batched = results[1], results[None]
    assert [g.cached_tokens for g in batched] == [g.cached_tokens for g in alone]
    assert [g.output_ids for g in batched] == [g.output_ids for g in alone]
    worst = max_logprob_difference(alone, batched)
    assert worst < 1e-4, worst


MIXED = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.7, top_k=20),
    SamplingParams(temperature=1.0, top_p=0.9),
    SamplingParams(temperature=1.2, top_k=50, top_p=0.5),
    SamplingParams(temperature=0.9, top_k=1),
]


def per_row_multinomial(logits: torch.Tensor, params, generators) -> tuple[list[int], list[float]]:
    """The sampler before batching: a loop over rows, ``torch.multinomial`` with each row's CPU generator."""
    temperatures = torch.tensor([p.temperature if p.temperature > 0 else 1.0 for p in params])
    scaled = logits.float() / temperatures[:, None]
    logprobs = torch.log_softmax(scaled, dim=-1)
    tokens = []
    for row, (param, generator) in enumerate(zip(params, generators, strict=True)):
        if param.temperature == 0:
            tokens.append(int(torch.argmax(logits[row])))
            continue
        probs = torch.softmax(filter_top_k_top_p(scaled[row], param.top_k, param.top_p), dim=-1)
        tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
    return tokens, logprobs.gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()


def test_batched_sampler_draws_what_per_row_multinomial_drew():
    # multinomial(probs, 1) is argmax(probs / q) with q ~ Exp(1) from the generator: the same draws, seed for seed
    logits = torch.randn((len(MIXED), 1000), generator=torch.Generator().manual_seed(0)) * 3  # [B, V]
    batched = [torch.Generator().manual_seed(seed) for seed in range(len(MIXED))]
    looped = [torch.Generator().manual_seed(seed) for seed in range(len(MIXED))]
    for step in range(30):  # the generators advance step after step in both
        step_logits = logits.roll(step, dims=1)
        assert sample_next_tokens(step_logits, MIXED, batched) == per_row_multinomial(step_logits, MIXED, looped)


def test_a_row_draws_the_same_alone_or_in_any_batch():
    logits = torch.randn((len(MIXED), 1000), generator=torch.Generator().manual_seed(1)) * 3
    together = sample_next_tokens(logits, MIXED, [torch.Generator().manual_seed(7) for _ in MIXED])
    for row in range(len(MIXED)):
        alone = sample_next_tokens(logits[row : row + 1], MIXED[row : row + 1], [torch.Generator().manual_seed(7)])
        assert alone == ([together[0][row]], [together[1][row]])
    shuffled = [3, 0, 5, 1, 4, 2]
    reordered = sample_next_tokens(
        logits[shuffled], [MIXED[r] for r in shuffled], [torch.Generator().manual_seed(7) for _ in MIXED]
    )
    assert reordered == ([together[0][r] for r in shuffled], [together[1][r] for r in shuffled])
    # greedy draws nothing: its generator is untouched
    generator = torch.Generator().manual_seed(7)
    sample_next_tokens(logits[:1], MIXED[:1], [generator])
    assert torch.equal(generator.get_state(), torch.Generator().manual_seed(7).get_state())


async def test_the_engine_times_its_prefill_and_decode_forwards_within_its_busy_time():
    engine = HfEngine(tiny_model(), max_batch_size=8, seed=0)
    await run_together(engine, [prompt(30, i) for i in range(3)], [SamplingParams(max_new_tokens=6, seed=1)] * 3)
    # the loop adds an iteration's busy time after the forward that resolves the last request, so the totals are
    # read once the loop has stopped
    await engine.close()
    stats = engine.stats()
    prefill, decode = stats.extra["prefill_seconds"], stats.extra["decode_seconds"]
    assert stats.extra["prefill_forwards"] == 1 and stats.extra["decode_steps"] == 5  # 6 tokens: 1 from the prefill
    assert prefill > 0 and decode > 0
    assert prefill + decode <= stats.busy_seconds
