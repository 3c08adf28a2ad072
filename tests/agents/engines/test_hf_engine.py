"""HfEngine against plain transformers on a tiny random Llama: outputs, logprobs, prefix reuse, batching, updates."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from agents.engines.base import DropsPrefixCache, Engine, ForgetsPrefixes, SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.hf_kv import RunningBatch, sequence_kv
from agents.models import cache_keyword

VOCAB = 512
GREEDY = SamplingParams(max_new_tokens=12, temperature=0.0)


def tiny_model(seed: int = 0, eos_token_id: int | None = None) -> LlamaForCausalLM:
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=256,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = eos_token_id
    return model


def prompt(n: int, offset: int = 0) -> list[int]:
    return [(offset + 37 * i) % (VOCAB - 3) + 3 for i in range(n)]


def reference_greedy(model: LlamaForCausalLM, input_ids: list[int], max_new_tokens: int) -> tuple[int, ...]:
    output = model.generate(
        torch.tensor([input_ids]), max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    return tuple(output[0, len(input_ids) :].tolist())


def full_forward_logprobs(model, input_ids: list[int], output_ids, temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) of every output token, from one forward pass over prompt + output."""
    ids = torch.tensor([input_ids + list(output_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(input_ids) - 1 : -1].float()
    scale = temperature if temperature > 0 else 1.0
    return torch.log_softmax(logits / scale, -1).gather(1, ids[0, len(input_ids) :, None])[:, 0]


@pytest.fixture
async def engine():
    engine = HfEngine(tiny_model(), max_batch_size=8, max_context=128, seed=0)
    yield engine
    await engine.close()


async def test_is_an_engine_and_reports_lengths(engine):
    assert isinstance(engine, Engine)
    generation = await engine.generate(prompt(20), SamplingParams(max_new_tokens=7))
    assert len(generation.output_ids) == len(generation.logprobs) == 7
    assert generation.finish_reason == "length"
    assert generation.prompt_tokens == 20 and generation.cached_tokens == 0
    stats = engine.stats()
    assert (stats.requests, stats.prompt_tokens, stats.generated_tokens) == (1, 20, 7)


async def test_greedy_matches_model_generate(engine):
    for n, offset in [(5, 0), (33, 11), (60, 4)]:
        generation = await engine.generate(prompt(n, offset), GREEDY)
        assert generation.output_ids == reference_greedy(engine.model, prompt(n, offset), 12)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
async def test_logprobs_match_a_full_forward_pass(engine, temperature):
    # top-k/top-p restrict the draw only: the reported logprob is over the whole vocabulary at temperature T
    for sampling in [
        SamplingParams(max_new_tokens=16, temperature=temperature, seed=3),
        SamplingParams(max_new_tokens=16, temperature=temperature, top_p=0.8, top_k=20, seed=4),
    ]:
        prompts = [prompt(10 + 7 * i, i) for i in range(4)]
        generations = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
        for p, generation in zip(prompts, generations, strict=True):
            expected = full_forward_logprobs(engine.model, p, generation.output_ids, temperature)
            assert torch.allclose(torch.tensor(generation.logprobs), expected, atol=1e-4)


async def test_greedy_logprobs_are_of_the_unscaled_distribution(engine):
    generation = await engine.generate(prompt(15), GREEDY)
    expected = full_forward_logprobs(engine.model, prompt(15), generation.output_ids, 1.0)
    assert torch.allclose(torch.tensor(generation.logprobs), expected, atol=1e-4)


async def test_second_turn_reuses_the_first_turn(engine):
    first_input = prompt(30)
    first = await engine.generate(first_input, GREEDY)
    second_input = first_input + list(first.output_ids) + prompt(9, 5)
    second = await engine.generate(second_input, GREEDY)
    # every token but the last sampled one (its keys/values were never computed): 30 + 12 - 1
    assert second.cached_tokens == 41
    assert second.output_ids == reference_greedy(engine.model, second_input, 12)
    stats = engine.stats()
    assert (stats.prompt_tokens, stats.cached_prompt_tokens, stats.prefilled_tokens) == (30 + 51, 41, 40)


async def test_shared_prefix_between_conversations(engine):
    system = prompt(25)
    await engine.generate(system + prompt(6, 100), GREEDY)
    other = await engine.generate(system + prompt(8, 200), GREEDY)
    assert other.cached_tokens == 25  # the shared system prompt, whose first token after it differs
    assert other.output_ids == reference_greedy(engine.model, system + prompt(8, 200), 12)


async def test_concurrent_requests_are_batched_and_equal_solo_results(engine):
    prompts = [prompt(8 + 5 * i, 13 * i) for i in range(8)]
    solo = [reference_greedy(engine.model, p, 12) for p in prompts]
    generations = await asyncio.gather(*(engine.generate(p, GREEDY) for p in prompts))
    assert [g.output_ids for g in generations] == solo
    assert engine.stats().extra["max_decode_batch_size"] > 1


async def test_requests_from_several_threads_and_event_loops(engine):
    prompts = [prompt(10 + 3 * i, 7 * i) for i in range(6)]
    results: dict[int, tuple[int, ...]] = {}

    def worker(indices: list[int]) -> None:
        async def run() -> list:
            return await asyncio.gather(*(engine.generate(prompts[i], GREEDY) for i in indices))

        for i, generation in zip(indices, asyncio.run(run()), strict=True):
            results[i] = generation.output_ids

    threads = [threading.Thread(target=worker, args=([0, 1, 2],)), threading.Thread(target=worker, args=([3, 4, 5],))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {i: reference_greedy(engine.model, p, 12) for i, p in enumerate(prompts)}


async def test_seeded_sampling_is_reproducible_and_top_k_1_is_greedy(engine):
    sampling = SamplingParams(max_new_tokens=10, temperature=1.0, seed=123)
    alone = await engine.generate(prompt(12), sampling)
    crowded = await asyncio.gather(*(engine.generate(prompt(12 + i, i), sampling) for i in range(4)))
    assert crowded[0].output_ids == alone.output_ids  # same seed, same prompt, other requests alongside
    top1 = await engine.generate(prompt(12), SamplingParams(max_new_tokens=10, temperature=1.3, top_k=1))
    assert top1.output_ids == reference_greedy(engine.model, prompt(12), 10)


async def test_stop_token_ends_generation_and_is_returned(engine):
    greedy = reference_greedy(engine.model, prompt(20), 12)
    stop = greedy[4]
    first_stop = greedy.index(stop)
    generation = await engine.generate(
        prompt(20), SamplingParams(max_new_tokens=12, temperature=0, stop_token_ids=(stop,))
    )
    assert generation.output_ids == greedy[: first_stop + 1]
    assert generation.finish_reason == "stop"


async def test_generation_config_eos_is_a_stop_token():
    greedy = reference_greedy(tiny_model(), prompt(20), 12)
    engine = HfEngine(tiny_model(eos_token_id=[greedy[2]]), max_batch_size=2)
    generation = await engine.generate(prompt(20), GREEDY)
    await engine.close()
    assert generation.output_ids == greedy[: greedy.index(greedy[2]) + 1]
    assert generation.finish_reason == "stop"


async def test_context_limit(engine):
    with pytest.raises(ValueError, match="max_context=128"):
        await engine.generate(prompt(128), GREEDY)
    with pytest.raises(ValueError, match="vocabulary"):
        await engine.generate([VOCAB], GREEDY)
    # 120 prompt tokens leave room for 128 - 120 = 8 new tokens
    generation = await engine.generate(prompt(120), SamplingParams(max_new_tokens=50, temperature=0))
    assert len(generation.output_ids) == 8 and generation.finish_reason == "length"


async def test_update_weights_leaves_no_stale_cache():
    engine = HfEngine(tiny_model(seed=0), max_batch_size=4)
    first_input = prompt(30)
    first = await engine.generate(first_input, GREEDY)
    second_input = first_input + list(first.output_ids) + prompt(5, 9)
    warm = await engine.generate(second_input, GREEDY)
    assert warm.cached_tokens == 41
    new_model = tiny_model(seed=1)
    await engine.update_weights(new_model.state_dict(), policy_version=3)
    after = await engine.generate(second_input, GREEDY)
    await engine.close()
    cold = HfEngine(tiny_model(seed=1), max_batch_size=4)
    expected = await cold.generate(second_input, GREEDY)
    await cold.close()
    assert after.cached_tokens == 0
    assert after.output_ids == expected.output_ids == reference_greedy(new_model, second_input, 12)
    assert after.output_ids != warm.output_ids
    assert engine.stats().policy_version == 3


async def test_dropping_the_prefix_cache_keeps_the_weights_and_the_version():
    engine = HfEngine(tiny_model(seed=0), max_batch_size=4)
    await engine.update_weights(tiny_model(seed=0).state_dict(), policy_version=2)
    first_input = prompt(30)
    first = await engine.generate(first_input, GREEDY)
    assert engine.stats().extra["prefix_cache_tokens"] > 0
    assert engine.stats().extra["decode_buffer_columns"] >= 30 + 12  # kept for the next admission
    await engine.drop_prefix_cache()
    assert engine.stats().extra["prefix_cache_tokens"] == 0
    assert engine.stats().extra["decode_buffer_columns"] == 0  # given back too, allocated again below
    second_input = first_input + list(first.output_ids) + prompt(5, 9)
    after = await engine.generate(second_input, GREEDY)
    await engine.close()
    assert after.cached_tokens == 0  # prefilled again, from the same weights
    assert after.output_ids == reference_greedy(tiny_model(seed=0), second_input, 12)
    assert engine.stats().policy_version == 2
    assert isinstance(engine, DropsPrefixCache)


async def test_forgetting_a_finished_conversation_frees_its_prefixes_only():
    engine = HfEngine(tiny_model(seed=0), max_batch_size=4)
    assert isinstance(engine, ForgetsPrefixes)
    one, other = prompt(30), prompt(20, 5)
    first = await engine.generate(one, GREEDY)
    second = await engine.generate(other, GREEDY)
    both = engine.stats().extra["prefix_cache_tokens"]
    assert both == 30 + 12 - 1 + 20 + 12 - 1  # each finished sequence, less its last sampled token
    await engine.forget_prefix(one + list(first.output_ids) + prompt(4, 3))  # the conversation went on, then ended
    assert engine.stats().extra["prefix_cache_tokens"] == 20 + 12 - 1  # the other one's only, at once
    again = await engine.generate(one + list(first.output_ids), GREEDY)
    kept = await engine.generate(other + list(second.output_ids), GREEDY)
    await engine.close()
    assert again.cached_tokens == 0 and kept.cached_tokens == 20 + 12 - 1  # prefilled again; the other still hits
    assert again.output_ids == reference_greedy(tiny_model(seed=0), one + list(first.output_ids), 12)
    with pytest.raises(RuntimeError, match="closed"):
        await engine.forget_prefix(one)


async def test_update_waits_for_running_requests_by_default():
    engine = HfEngine(tiny_model(seed=0), max_batch_size=4)
    long = SamplingParams(max_new_tokens=80, temperature=0)
    running = asyncio.create_task(engine.generate(prompt(10), long))
    while engine.stats().generated_tokens == 0:
        await asyncio.sleep(0.001)
    assert not running.done()  # in flight when the update arrives
    await engine.update_weights(tiny_model(seed=1).state_dict(), policy_version=1)
    assert running.done()  # the update returned only after the request finished
    finished = await running
    await engine.close()
    # the request in flight finished entirely with the old weights
    assert finished.finish_reason == "length"
    assert finished.output_ids == reference_greedy(tiny_model(seed=0), prompt(10), 80)


async def test_update_can_abort_running_requests():
    engine = HfEngine(tiny_model(seed=0), max_batch_size=4)
    running = asyncio.create_task(engine.generate(prompt(10), SamplingParams(max_new_tokens=200, temperature=0)))
    while engine.stats().generated_tokens == 0:
        await asyncio.sleep(0.001)
    await engine.update_weights(tiny_model(seed=1).state_dict(), policy_version=1, abort_in_flight=True)
    aborted = await running
    await engine.close()
    assert aborted.finish_reason == "abort"
    assert 0 < len(aborted.output_ids) < 200
    old = reference_greedy(tiny_model(seed=0), prompt(10), len(aborted.output_ids))
    assert aborted.output_ids == old  # what was sampled came from the old weights


async def test_bad_state_dict_raises_and_engine_keeps_working(engine):
    with pytest.raises(ValueError, match="missing"):
        await engine.update_weights({}, policy_version=1)
    state_dict = tiny_model(seed=1).state_dict()
    state_dict["model.norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match=r"wrong shapes \['model.norm.weight'\]"):
        await engine.update_weights(state_dict, policy_version=1)
    generation = await engine.generate(prompt(9), GREEDY)
    assert generation.output_ids == reference_greedy(engine.model, prompt(9), 12)
    assert engine.stats().policy_version == 0


async def test_close_aborts_and_rejects_later_calls():
    engine = HfEngine(tiny_model(), max_batch_size=2)
    running = asyncio.create_task(engine.generate(prompt(10), SamplingParams(max_new_tokens=200)))
    while engine.stats().generated_tokens == 0:
        await asyncio.sleep(0.001)
    await engine.close()
    assert (await running).finish_reason == "abort"
    assert not engine._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        await engine.generate(prompt(5), GREEDY)


async def test_loop_errors_reach_every_waiter():
    engine = HfEngine(tiny_model(), max_batch_size=4)
    forward = engine.model.forward
    calls = []

    def failing_forward(*args, **kwargs):
        calls.append(1)
        if len(calls) > 3:  # after the prefills, during decoding
            raise RuntimeError("injected fault")
        return forward(*args, **kwargs)

    engine.model.forward = failing_forward
    requests = [engine.generate(prompt(6 + i), SamplingParams(max_new_tokens=20)) for i in range(3)]
    outcomes = await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), timeout=30)
    assert all(isinstance(o, RuntimeError) and "injected fault" in str(o) for o in outcomes)
    with pytest.raises(RuntimeError, match="failed earlier"):
        await engine.generate(prompt(5), GREEDY)
    await engine.close()


@pytest.mark.parametrize("where", ["prefill forward", "joining the batch"])
async def test_a_failure_while_admitting_reaches_the_requests_being_admitted(where, monkeypatch):
    """Requests taken from the queue for a prefill are in no queue and not yet running: a fault there still fails
    them (and every other waiter) instead of leaving them waiting forever."""
    engine = HfEngine(tiny_model(), max_batch_size=4)

    def fault(*args, **kwargs):
        raise RuntimeError("injected fault")

    if where == "prefill forward":
        engine.model.forward = fault
    else:
        monkeypatch.setattr(RunningBatch, "add", fault)
    requests = [engine.generate(prompt(6 + 30 * i), SamplingParams(max_new_tokens=5)) for i in range(3)]
    outcomes = await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), timeout=30)
    assert all(isinstance(o, RuntimeError) and "injected fault" in str(o) for o in outcomes)
    with pytest.raises(RuntimeError, match="failed earlier"):
        await engine.generate(prompt(5), GREEDY)
    await engine.close()


async def test_a_cancelled_request_leaves_the_batch(engine):
    cancelled = asyncio.create_task(engine.generate(prompt(10), SamplingParams(max_new_tokens=200, temperature=0)))
    while engine.stats().generated_tokens == 0:
        await asyncio.sleep(0.001)
    cancelled.cancel()
    generation = await asyncio.wait_for(engine.generate(prompt(12, 3), GREEDY), timeout=30)
    assert generation.output_ids == reference_greedy(engine.model, prompt(12, 3), 12)
    while engine._running:  # retired at the next decode step, long before its 200 tokens
        await asyncio.sleep(0.001)
    assert engine.stats().generated_tokens < 200 + 12


@torch.no_grad()
def test_decode_steps_over_rows_that_join_longer_and_leave_match_each_rows_own_forward():
    """The running batch reads from its first used column and takes longer rows into its free left columns: every
    row's next-token logits equal a forward over that row alone, through joins past and within the margin."""
    model = tiny_model()
    keyword = cache_keyword(model)
    batch, rows = RunningBatch(max_rows=4), []  # rows: each running row's tokens

    def join(tokens: list[int]) -> None:
        cache = DynamicCache()
        model(input_ids=torch.tensor([tokens[:-1]]), use_cache=True, **{keyword: cache})
        batch.add(sequence_kv([(layer.keys[0], layer.values[0]) for layer in cache.layers]))
        rows.append(tokens)  # the last token is the next step's input, as a sampled token is

    def step() -> None:
        cache, mask = batch.step_inputs()
        logits = model(
            input_ids=torch.tensor([[tokens[-1]] for tokens in rows]),
            position_ids=torch.tensor([[len(tokens) - 1] for tokens in rows]),
            attention_mask=mask,
            use_cache=True,
            **{keyword: cache},
        ).logits[:, -1]
        batch.advance()
        for row, tokens in enumerate(rows):
            alone = model(input_ids=torch.tensor([tokens])).logits[0, -1]
            torch.testing.assert_close(logits[row], alone, atol=1e-5, rtol=0)
            tokens.append(int(alone.argmax()))

    join(prompt(12))
    join(prompt(5, 1))
    step()
    join(prompt(110, 2))  # 100 columns longer than the longest running row: past the 64 free ones, a copy
    step()
    join(prompt(60, 3))
    step()
    batch.remove(2)  # the longest row leaves: the reads start at the next row's first column
    rows[2] = rows.pop()
    start = batch.start
    step()
    buffer = batch.kv
    join(prompt(130, 4))  # within the margin learned from the first long row: no copy
    assert batch.kv is buffer and batch.start < start
    step()
    step()
