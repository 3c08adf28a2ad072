"""HfEngine with a value head: each sampled token's value is the head applied to the hidden state its logits came
from, through batched prefill, cached prefixes and concurrent decoding; the tokens are those sampled without it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agents.engines.base import Generation, SamplingParams
from agents.engines.hf import HfEngine
from tests.agents.engines.test_hf_batched_prefill import run_together
from tests.agents.engines.test_hf_engine import prompt, tiny_model

SAMPLING = SamplingParams(max_new_tokens=9, temperature=1.0)


def value_head(hidden: int) -> torch.nn.Linear:
    torch.manual_seed(4)
    head = torch.nn.Linear(hidden, 1)
    torch.nn.init.normal_(head.weight, std=0.5)
    return head


def reference_values(model, head, input_ids: list[int], generation: Generation) -> list[float]:
    """The head on the vocabulary head's input of one plain forward over the prompt and the output, at the position
    before each output token (the learner's convention, trainer/batch.py)."""
    captured = []
    hook = model.get_output_embeddings().register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            model(torch.tensor([input_ids + list(generation.output_ids)]))
            start = len(input_ids) - 1
            hidden = captured[0][0, start : start + len(generation.output_ids)]
            return head(hidden).squeeze(-1).tolist()
    finally:
        hook.remove()


async def workload(engine: HfEngine) -> tuple[list[list[int]], list[Generation]]:
    """A first turn, then six requests admitted together whose cached prefixes differ (its second turn included)."""
    system = prompt(40)
    first_prompt = system + prompt(10, 1)
    first = await engine.generate(first_prompt, dataclasses.replace(SAMPLING, seed=1))
    prompts = [
        first_prompt + list(first.output_ids) + prompt(7, 3),
        system + prompt(20, 2),
        prompt(33, 9),
        system + prompt(5, 4),
        prompt(12, 50),
        prompt(33, 9) + prompt(4, 7),
    ]
    samplings = [dataclasses.replace(SAMPLING, seed=100 + i) for i in range(len(prompts))]
    return [first_prompt, *prompts], [first, *await run_together(engine, prompts, samplings)]


async def test_values_are_the_heads_output_on_each_sampled_tokens_hidden_state():
    model = tiny_model()
    head = value_head(model.config.hidden_size)
    with_head = HfEngine(model, max_batch_size=8, seed=0, value_head=head)
    prompts, generations = await workload(with_head)
    assert with_head.stats().cached_prompt_tokens > 0 and with_head.stats().extra["prefill_forwards"] < len(prompts)
    await with_head.close()
    for input_ids, generation in zip(prompts, generations, strict=True):
        assert generation.values is not None and len(generation.values) == len(generation.output_ids)
        expected = reference_values(model, head, input_ids, generation)
        torch.testing.assert_close(torch.tensor(generation.values), torch.tensor(expected), atol=2e-5, rtol=0)
    assert len({round(v, 3) for g in generations for v in g.values}) > 10  # the head does see different states

    plain = HfEngine(model, max_batch_size=8, seed=0)  # the head changes nothing that is sampled
    _, unvalued = await workload(plain)
    await plain.close()
    assert [g.output_ids for g in unvalued] == [g.output_ids for g in generations]
    assert [g.logprobs for g in unvalued] == [g.logprobs for g in generations]
    assert all(g.values is None for g in unvalued)
    assert not model.get_output_embeddings()._forward_pre_hooks  # closing the engine removed its hook


async def test_a_head_follows_its_training_and_static_decode_refuses_it():
    model = tiny_model()
    head = value_head(model.config.hidden_size)
    engine = HfEngine(model, max_batch_size=2, seed=0, value_head=head)
    request = prompt(12)
    before = await engine.generate(request, dataclasses.replace(SAMPLING, seed=5))
    with torch.no_grad():
        head.bias.add_(1.5)  # the learner's optimizer step on the shared head, between rollouts
    after = await engine.generate(request, dataclasses.replace(SAMPLING, seed=5))
    await engine.close()
    assert after.output_ids == before.output_ids
    torch.testing.assert_close(torch.tensor(after.values), torch.tensor(before.values) + 1.5, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"dynamic decode step.*cuda_graphs=False"):
        HfEngine(model, static_decode=True, value_head=head)


def test_a_generation_refuses_values_of_another_length():
    with pytest.raises(ValueError, match="2 output ids but 1 values"):
        Generation((1, 2), (-0.1, -0.2), "stop", values=(0.5,))
