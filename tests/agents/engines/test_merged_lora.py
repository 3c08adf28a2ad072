"""LoRA adapters merged into their base weights for the engine (agents/engines/merged_lora.py).

* merge then unmerge gives back every base weight bit for bit, also where ``(W + D) - D`` misses ``W`` in float
  arithmetic (large adapters make such elements certain), over repeated rounds;
* merged, a forward is the unmerged one up to float rounding; an adapter changed while merged is caught;
* an ``HfEngine`` with ``merge_adapters`` samples the same seeded tokens as without, its logprobs within 1e-5, and
  a learner-style forward taken under ``unmerged()`` while a generation runs sees exactly the loaded weights.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import threading

import pytest
import torch

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.merged_lora import MergedLora, lora_layers
from tests.agents.engines.test_hf_batched_prefill import run_together
from tests.agents.engines.test_hf_engine import prompt, tiny_model

peft = pytest.importorskip("peft")
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")

SAMPLING = SamplingParams(max_new_tokens=12, temperature=1.0)


def lora_model(scale: float = 0.05, **config) -> torch.nn.Module:
    """The tiny model with rank-4 adapters on every linear layer, both factors random (B is zero when peft makes
    it, which would make the merge a no-op)."""
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", **config)
    model = peft.get_peft_model(tiny_model(), lora)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.normal_(std=scale, generator=generator)
    return model.eval()


def base_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}


def assert_bit_equal(model: torch.nn.Module, expected: dict[str, torch.Tensor]) -> None:
    for name, param in model.named_parameters():
        if name in expected:
            assert torch.equal(param, expected[name]), name


def test_the_round_trip_restores_every_base_weight_bit_for_bit():
    model = lora_model(scale=0.5)  # large deltas: some sums round into the next binade
    before = base_weights(model)
    merged_lora = MergedLora(model)
    for _ in range(3):
        merged_lora.merge()
        merged_lora.merge()  # idempotent
        assert merged_lora.is_merged and all(layer.merged for layer in merged_lora.layers)
        changed = [n for n, p in model.named_parameters() if n in before and not torch.equal(p, before[n])]
        assert len(changed) == len(merged_lora.layers)  # every adapted weight holds W + D, no other tensor moved
        merged_lora.unmerge()
        assert not merged_lora.is_merged and not any(layer.merged for layer in merged_lora.layers)
        assert_bit_equal(model, before)
        assert merged_lora.restored_elements > 0  # the plain subtraction alone would have left those off by a bit
    assert merged_lora.merges == 3


def test_a_merged_forward_is_the_unmerged_one_up_to_rounding():
    model = lora_model()
    ids = torch.tensor([prompt(30, 2)])
    merged_lora = MergedLora(model)
    with torch.no_grad():
        unmerged = model(ids).logits
        with merged_lora.merged():
            merged = model(ids).logits
        with model.disable_adapter():
            base = model(ids).logits
    torch.testing.assert_close(merged, unmerged, atol=1e-5, rtol=0)
    assert (unmerged - base).abs().max() > 1e-2  # the adapters matter: the agreement is not a no-op's


def test_an_adapter_changed_while_merged_is_caught():
    model = lora_model()
    merged_lora = MergedLora(model)
    merged_lora.merge()
    with torch.no_grad():
        merged_lora.layers[0].lora_B["default"].weight.add_(0.25)  # what an optimizer step while merged would do
    with pytest.raises(RuntimeError, match="bit for bit"):
        merged_lora.unmerge()


def test_models_it_cannot_merge_exactly_are_refused():
    with pytest.raises(ValueError, match="no"):
        MergedLora(tiny_model())
    with pytest.raises(ValueError, match="DoRA"):
        MergedLora(lora_model(use_dora=True))
    model = lora_model()
    model.merge_adapter()
    with pytest.raises(ValueError, match="unmerged"):
        MergedLora(model)
    assert lora_layers(tiny_model()) == []


async def sample(engine: HfEngine, max_new_tokens: int = SAMPLING.max_new_tokens) -> list:
    prompts = [prompt(40) + prompt(10, i) for i in range(4)]
    samplings = [dataclasses.replace(SAMPLING, seed=10 + i, max_new_tokens=max_new_tokens) for i in range(4)]
    return await run_together(engine, prompts, samplings)


async def test_the_engine_samples_the_same_tokens_with_the_adapters_merged():
    model = lora_model()
    before = base_weights(model)
    plain = HfEngine(copy.deepcopy(model), seed=0)
    merging = HfEngine(model, seed=0, merge_adapters=True)
    try:
        expected, got = await sample(plain), await sample(merging)
        assert merging.adapters.is_merged and merging.adapters.merges == 1
    finally:
        await plain.close()
        await merging.close()
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.output_ids == theirs.output_ids
        torch.testing.assert_close(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs), atol=1e-5, rtol=0)
    assert not merging.adapters.is_merged  # closing gives the weights back as loaded
    assert_bit_equal(model, before)


async def test_a_forward_under_unmerged_during_a_generation_sees_the_loaded_weights():
    model = lora_model()
    ids = torch.tensor([prompt(25, 3)])
    with torch.no_grad():
        reference = model(ids).logits
    expected_engine = HfEngine(copy.deepcopy(model), seed=0)
    try:
        expected = await sample(expected_engine, 200)
    finally:
        await expected_engine.close()
    engine = HfEngine(model, seed=0, merge_adapters=True)
    seen: list[bool] = []
    # Every third iteration of the engine's loop (between iterations, where it holds no lock) waits for one learner
    # forward, six times: the learner's forwards fall inside the generation however the threads are scheduled.
    paused, resumed = threading.Semaphore(0), threading.Semaphore(0)
    wait_for_work, iterations = engine._wait_for_work, itertools.count(1)

    def pausing_wait_for_work() -> bool:
        iteration = next(iterations)
        if iteration % 3 == 0 and iteration <= 18:
            paused.release()
            assert resumed.acquire(timeout=60), "the learner thread never took its turn"
        return wait_for_work()

    engine._wait_for_work = pausing_wait_for_work

    def learner() -> None:  # another thread, as a learner call beside the engine's loop would be
        for _ in range(6):
            assert paused.acquire(timeout=60), "the engine never paused"
            assert engine.adapters.is_merged  # the generation is under way
            with engine.adapters.unmerged(), torch.no_grad():
                seen.append(torch.equal(model(ids).logits, reference))
            resumed.release()

    try:
        generations = asyncio.create_task(sample(engine, 200))
        await asyncio.sleep(0)
        thread = threading.Thread(target=learner)
        thread.start()
        got = await generations
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
    finally:
        await engine.close()
    assert seen == [True] * 6
    assert (
        engine.adapters.merges == 7
    )  # the learner took the weights back six times; the engine merged again each time
    assert [g.output_ids for g in got] == [g.output_ids for g in expected]  # merged again as before, same bits
