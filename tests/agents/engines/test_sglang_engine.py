"""SGLangEngine against in-process SGLang-compatible servers that serve HfEngine on the tiny model.

The servers (sglang_compat_server.py) are a stand-in for SGLang, which cannot run without CUDA: these
tests check the client's HTTP behaviour and the JSON it relies on, not SGLang itself.
"""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest
import torch
from sglang_compat_server import CompatServer

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.sglang import (
    SGLangConfig,
    SGLangEngine,
    SGLangServerError,
    SGLangTimeoutError,
    SGLangUnreachableError,
)
from agents.models import tiny_model_path

PROMPT = [3, 17, 42, 99, 7, 256, 1024, 11]
SEEDED = SamplingParams(max_new_tokens=12, temperature=1.0, seed=5)
GREEDY = SamplingParams(max_new_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
def tiny_path():
    return str(tiny_model_path())


@pytest.fixture(scope="module")
def new_weights(tiny_path, tmp_path_factory):
    """The tiny model with every weight shifted by seeded noise, as a state dict and as a checkpoint directory."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.5)
    directory = tmp_path_factory.mktemp("new-weights")
    model.save_pretrained(directory)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(f"{tiny_path}/{name}", directory / name)
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}, str(directory)


async def _serve(path: str, **server_options) -> CompatServer:
    server = CompatServer(HfEngine(path, seed=0), model_path=path, **server_options)
    await server.start()
    return server


async def _stop(*servers: CompatServer) -> None:
    for server in servers:
        await server.stop()
        await server.engine.close()


def _config(*servers: CompatServer, **options) -> SGLangConfig:
    return SGLangConfig(urls=tuple(server.url for server in servers), retry_backoff_s=0.01, **options)


async def test_ids_and_logprobs_equal_the_served_engine(tiny_path):
    direct = HfEngine(tiny_path, seed=0)
    server = await _serve(tiny_path)
    engine = await SGLangEngine.create(_config(server))
    try:
        for sampling in (SEEDED, GREEDY, SamplingParams(max_new_tokens=9, temperature=0.7, top_k=20, seed=8)):
            expected = await direct.generate(PROMPT, sampling)
            got = await engine.generate(PROMPT, sampling, affinity_key="t")
            # exact equality: the ids, and the logprob floats after the JSON round trip
            assert got == expected
        assert (await engine.model_info())[0]["model_path"] == tiny_path
    finally:
        await engine.close()
        await direct.close()
        await _stop(server)


async def test_sticky_routing_keeps_each_trajectory_on_one_server_and_hits_its_cache(tiny_path):
    servers = [await _serve(tiny_path), await _serve(tiny_path)]
    engine = await SGLangEngine.create(_config(*servers))
    expected_cached = 0

    async def trajectory(key: int) -> list[list[int]]:
        nonlocal expected_cached
        prompt, prompts, outputs = [1, 2, 3 + key, 4], [], []
        for turn in range(3):
            generation = await engine.generate(prompt, SamplingParams(max_new_tokens=4, seed=turn), f"traj-{key}")
            if turn:
                # the server holds the previous prompt and output: all but the last sampled token are cached
                assert generation.cached_tokens == len(prompts[-1]) + len(outputs[-1]) - 1
            else:
                assert generation.cached_tokens <= 2  # [1, 2] is all that first prompts share
            expected_cached += generation.cached_tokens
            prompts.append(prompt)
            outputs.append(generation.output_ids)
            prompt = prompt + list(generation.output_ids) + [5, 6]  # the next observation
        return prompts

    try:
        all_prompts = await asyncio.gather(*(trajectory(key) for key in range(6)))
        homes = []
        for prompts in all_prompts:
            holders = {i for i, server in enumerate(servers) for p in prompts if p in server.requests}
            assert len(holders) == 1  # every turn of the trajectory went to one server
            homes.append(holders.pop())
        assert sorted(homes) == [0, 0, 0, 1, 1, 1]  # six new keys spread over two idle servers
        stats = engine.stats()
        assert (stats.requests, stats.cached_prompt_tokens) == (18, expected_cached)
        assert stats.prompt_tokens == sum(len(p) for prompts in all_prompts for p in prompts)
    finally:
        await engine.close()
        await _stop(*servers)


async def test_weight_updates_flush_and_match_a_cold_server(tiny_path, new_weights):
    state_dict, directory = new_weights
    cold = HfEngine(directory, seed=0)
    server = await _serve(tiny_path)
    engine = await SGLangEngine.create(_config(server))
    try:
        old = await engine.generate(PROMPT, GREEDY)
        await engine.update_weights_from_disk(directory, policy_version=1)
        from_disk = await engine.generate(PROMPT, GREEDY)
        assert from_disk.cached_tokens == 0  # the prompt was cached under the old weights
        assert from_disk == await cold.generate(PROMPT, GREEDY)
        assert from_disk.output_ids != old.output_ids
        assert (engine.stats().policy_version, server.policy_version) == (1, 1)

        await engine.update_weights_from_disk(tiny_path, policy_version=2)  # back to the original weights
        assert (await engine.generate(PROMPT, GREEDY)).output_ids == old.output_ids
        await engine.update_weights(state_dict, policy_version=3)  # through /update_weights_from_tensor
        fresh_prompt = [9, 8, 7, 6, 5]  # cached by neither: both run it from scratch, so logprobs match bit for bit
        assert await engine.generate(fresh_prompt, SEEDED) == await cold.generate(fresh_prompt, SEEDED)
        assert (engine.stats().policy_version, server.policy_version) == (3, 3)
        with pytest.raises(SGLangServerError, match="not parameters of the served model"):
            await engine.update_weights_from_tensor([("no.such.weight", torch.zeros(1))], policy_version=4)
    finally:
        await engine.close()
        await cold.close()
        await _stop(server)


async def test_flush_waits_for_running_requests(tiny_path):
    server = await _serve(tiny_path, response_delay_s=0.5)
    engine = await SGLangEngine.create(_config(server))
    try:
        running = asyncio.ensure_future(engine.generate(PROMPT, GREEDY))
        await asyncio.sleep(0.1)
        await engine.flush_cache()  # refused with 400 while the request runs, retried until it is done
        assert running.done()
        assert (await engine.generate(PROMPT, GREEDY)).cached_tokens == 0
    finally:
        await engine.close()
        await _stop(server)


async def test_dead_server_fails_over_then_errors_clearly(tiny_path):
    servers = [await _serve(tiny_path), await _serve(tiny_path)]
    engine = await SGLangEngine.create(_config(*servers, max_retries=2))
    try:
        await engine.generate(PROMPT, GREEDY, affinity_key="a")
        home = engine.server_of("a")
        await servers[home].stop()
        generation = await asyncio.wait_for(engine.generate(PROMPT, GREEDY, affinity_key="a"), 30)
        assert generation.output_ids and engine.server_of("a") == 1 - home
        extra = engine.stats().extra
        assert (extra["failovers"], extra["retries"], extra["healthy_servers"]) == (1.0, 2.0, 1.0)
        await servers[1 - home].stop()
        started = time.monotonic()
        with pytest.raises(SGLangUnreachableError, match="every SGLang server is unreachable"):
            await asyncio.wait_for(engine.generate(PROMPT, GREEDY, affinity_key="a"), 30)
        assert time.monotonic() - started < 10
    finally:
        await engine.close()
        await _stop(*servers)


async def test_bad_requests_timeouts_and_memory(tiny_path):
    server = await _serve(tiny_path)
    engine = await SGLangEngine.create(_config(server))
    impatient = SGLangEngine(_config(server, request_timeout_s=0.3))
    try:
        with pytest.raises(ValueError, match="does not fit max_context=4096"):
            await engine.generate([5] * 4096, GREEDY)
        server.response_delay_s = 1.0  # a stuck server: the request must end at request_timeout_s, not hang
        with pytest.raises(SGLangTimeoutError, match="request_timeout_s"):
            await impatient.generate(PROMPT, GREEDY)
        server.response_delay_s = 0.0
        await engine.release_memory_occupation(["kv_cache", "weights"])
        assert server.memory_released
        with pytest.raises(ValueError, match="memory is released"):
            await engine.generate(PROMPT, GREEDY)
        await engine.resume_memory_occupation()
        assert not server.memory_released
        with pytest.raises(SGLangServerError, match="no process group"):
            await engine.init_weights_update_group("127.0.0.1", 29500)
    finally:
        await impatient.close()
        await engine.close()
        await _stop(server)
    with pytest.raises(RuntimeError, match="closed"):
        await engine.generate(PROMPT, GREEDY)
