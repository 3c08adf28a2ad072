"""Counter-stream sampling noise (``HfEngine(sampling_noise="counter")``): splitmix64's known outputs, Exp(1)
draws that sample the right distribution, per-request seeds independent of the batch, the engine's contract kept."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest
import torch

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.hf_sampling import CounterStream, counter_noise, sample_next_tokens, splitmix64
from tests.agents.engines.test_hf_batched_prefill import MIXED, run_together
from tests.agents.engines.test_hf_engine import prompt, tiny_model

# splitmix64 seeded with 0: its first three outputs (the reference generator's published sequence)
SPLITMIX64_SEED0 = (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F)


def test_splitmix64_and_the_noise_follow_the_reference_sequence():
    golden = 0x9E3779B97F4A7C15
    assert tuple(splitmix64(i * golden % 2**64) for i in range(3)) == SPLITMIX64_SEED0
    # entry v of key 0 is the state (v + 1) * golden: output v of the generator seeded with 0
    expected = [-math.log(((z >> 11) + 0.5) * 2.0**-53) for z in SPLITMIX64_SEED0]
    assert counter_noise([0], 3, "cpu")[0].tolist() == pytest.approx(expected, rel=1e-6)


def test_counter_noise_is_exponential_and_differs_by_key():
    noise = counter_noise([1, 2, 2**64 - 1, 2**63], 50_000, "cpu")  # keys beyond int64's range wrap to its bits
    assert noise.shape == (4, 50_000) and bool((noise > 0).all())
    assert noise.mean(1).tolist() == pytest.approx([1.0] * 4, abs=0.02)  # Exp(1): mean 1, sd 1/sqrt(50k) = 0.0045
    assert noise.var(1).tolist() == pytest.approx([1.0] * 4, abs=0.05)
    assert all(not torch.equal(noise[a], noise[b]) for a in range(4) for b in range(a))
    assert torch.equal(counter_noise([2], 50_000, "cpu")[0], noise[1])  # a key's row, alone or in a batch


def test_counter_streams_sample_the_softmax_distribution():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log()[None].expand(4000, 4).contiguous()
    streams = [CounterStream(seed) for seed in range(4000)]
    counts = torch.zeros(4)
    for _ in range(5):  # each stream draws five times: its key advances with every draw
        tokens, logprobs = sample_next_tokens(logits, [SamplingParams(temperature=1.0)] * 4000, streams)
        counts += torch.bincount(torch.tensor(tokens), minlength=4)
        assert logprobs == pytest.approx([math.log(float(probs[t])) for t in tokens], abs=1e-6)
    assert all(stream.draws == 5 for stream in streams)
    # 20,000 draws: each frequency within 4 standard deviations of its probability
    frequencies = counts / counts.sum()
    for frequency, p in zip(frequencies.tolist(), probs.tolist(), strict=True):
        assert abs(frequency - p) < 4 * math.sqrt(p * (1 - p) / 20_000)


def test_a_counter_row_draws_the_same_alone_or_in_any_batch():
    logits = torch.randn((len(MIXED), 1000), generator=torch.Generator().manual_seed(1)) * 3
    together = sample_next_tokens(logits, MIXED, [CounterStream(7) for _ in MIXED])
    for row in range(len(MIXED)):
        alone = sample_next_tokens(logits[row : row + 1], MIXED[row : row + 1], [CounterStream(7)])
        assert alone == ([together[0][row]], [together[1][row]])
    shuffled = [3, 0, 5, 1, 4, 2]
    reordered = sample_next_tokens(logits[shuffled], [MIXED[r] for r in shuffled], [CounterStream(7) for _ in MIXED])
    assert reordered == ([together[0][r] for r in shuffled], [together[1][r] for r in shuffled])
    greedy = CounterStream(7)  # greedy draws nothing: its stream does not advance
    sample_next_tokens(logits[:1], MIXED[:1], [greedy])
    assert greedy.draws == 0


async def test_engine_with_counter_noise_keeps_seeds_and_logprobs():
    model = tiny_model()
    prompts = [prompt(5 + 7 * i, i) for i in range(4)]
    samplings = [dataclasses.replace(MIXED[1 + i], seed=100 + i, max_new_tokens=6) for i in range(4)]
    runs = []
    for batch_size in (4, 1):  # all together, then one at a time: the same tokens per seed
        engine = HfEngine(model, max_batch_size=batch_size, seed=0, sampling_noise="counter")
        try:
            runs.append(await run_together(engine, prompts, samplings))
        finally:
            await engine.close()
    together, alone = runs
    assert [g.output_ids for g in together] == [g.output_ids for g in alone]
    generator_engine = HfEngine(model, max_batch_size=4, seed=0, sampling_noise="generator")
    try:
        pairs = zip(prompts, samplings, strict=True)
        drawn = await asyncio.gather(*(generator_engine.generate(p, s) for p, s in pairs))
    finally:
        await generator_engine.close()
    assert [g.output_ids for g in drawn] != [g.output_ids for g in together]  # another noise source, other draws
    # the reported logprob is the full-vocabulary log-softmax at the temperature, as with generators
    for request, generation, sampling in zip(prompts, together, samplings, strict=True):
        ids = torch.tensor([request + list(generation.output_ids)])
        with torch.no_grad():
            logits = model(ids).logits[0, len(request) - 1 : -1] / sampling.temperature
        expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(generation.output_ids)[:, None])[:, 0]
        assert list(generation.logprobs) == pytest.approx(expected.tolist(), abs=1e-4)


def test_sampling_noise_is_checked_and_generators_are_the_default():
    with pytest.raises(ValueError, match="sampling_noise must be generator or counter"):
        HfEngine(tiny_model(), sampling_noise="philox")
    engine = HfEngine(tiny_model())
    try:
        assert engine.sampling_noise == "generator"  # the draws of a torch generator, as before
    finally:
        asyncio.run(engine.close())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_counter_noise_on_cuda_is_the_cpu_noise():
    keys = [CounterStream(seed).next_key() for seed in range(64)]
    cpu, cuda = counter_noise(keys, 49152, "cpu"), counter_noise(keys, 49152, "cuda").cpu()
    assert torch.allclose(cpu, cuda, rtol=1e-6, atol=0)  # integer hashes agree; -log in float64 to 1 ulp at most
