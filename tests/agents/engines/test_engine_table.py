"""The engine table: every row builds an engine that declares the whole protocol, and every command
that builds an engine (``make_policy`` here; ``trainer.run`` in tests/trainer) goes through it.

The ``sglang`` and ``openai`` rows are built against the in-process SGLang-compatible server
(sglang_compat_server.py, serving HfEngine on the tiny model), which speaks both SGLang's ``/generate``
and the OpenAI chat endpoint; SGLang itself needs CUDA and is not run here.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest
from sglang_compat_server import CompatServer

import envs
from agents.config import LLMOptions
from agents.engines.base import WEIGHT_SYNCS, DiskWeights, Engine, SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.registry import (
    ENGINE_KINDS,
    EngineSpec,
    UnknownEngineError,
    engine_kind,
    engine_names,
    local_device_and_dtype,
)
from agents.episode import EpisodeSpec
from agents.models import load_tokenizer, tiny_model_path
from agents.policy import MODEL_KINDS, make_policy

GREEDY = SamplingParams(max_new_tokens=4, temperature=0.0)


@pytest.fixture(scope="module")
def tiny_path() -> str:
    return str(tiny_model_path())


@pytest.fixture
async def server(tiny_path):
    served = CompatServer(HfEngine(tiny_path, seed=0), model_path=tiny_path, tokenizer=load_tokenizer(tiny_path))
    await served.start()
    yield served
    await served.stop()
    await served.engine.close()


def _spec(name: str, tiny_path: str, server: CompatServer) -> EngineSpec:
    kind = ENGINE_KINDS[name]
    if kind.placement == "local":
        return EngineSpec(name, "tiny", seed=0)
    url = server.url + "/v1" if not kind.token_level else server.url
    return EngineSpec(name, tiny_path, urls=(url,), api_key="EMPTY")


def test_the_table_names_its_rows_and_resolves_every_constructor():
    assert engine_names() == ("hf", "sglang", "openai")
    assert engine_names(aliases=True) == MODEL_KINDS == ("hf", "llm", "sglang", "openai")
    assert engine_names(trainable=True) == ("hf", "sglang")
    assert engine_names(token_level=False) == ("openai",)
    for kind in ENGINE_KINDS.values():
        for target in filter(None, (kind.build, kind.start)):
            module, _, function = target.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), target
        assert kind.start is None or kind.placement == "servers"  # only servers can be launched


def test_auto_device_and_dtype_resolve_the_same_for_every_command():
    assert local_device_and_dtype("cpu", "auto") == ("cpu", "float32")  # logprobs agree closely on the CPU
    assert local_device_and_dtype("cuda", "auto") == ("cuda", "bfloat16")
    assert local_device_and_dtype("cuda:1", "auto") == ("cuda:1", "bfloat16")
    assert local_device_and_dtype("cpu", "bfloat16") == ("cpu", "bfloat16")  # an explicit choice is kept
    device, dtype = local_device_and_dtype("auto", "auto")
    assert (device, dtype) in (("cpu", "float32"), ("cuda", "bfloat16"))


def test_aliases_resolve_and_unknown_names_list_the_choices():
    assert engine_kind("llm") is engine_kind("hf") is ENGINE_KINDS["hf"]
    with pytest.raises(UnknownEngineError, match=r"unknown engine 'vlm'; choose one of hf, llm, sglang, openai"):
        engine_kind("vlm")


@pytest.mark.parametrize("name", list(ENGINE_KINDS))
async def test_every_row_builds_an_engine_that_declares_the_protocol(name, tiny_path, server):
    kind = ENGINE_KINDS[name]
    engine = kind.build_engine(_spec(name, tiny_path, server))
    try:
        assert isinstance(engine, Engine) and engine.name == name
        assert engine.weight_sync in WEIGHT_SYNCS
        assert (engine.weight_sync != "none") == kind.trainable  # the table and the engine agree
        assert (engine.weight_sync == "disk") <= isinstance(engine, DiskWeights)
        if kind.token_level:
            generation = await engine.generate([3, 17, 42], GREEDY, affinity_key="a")
            assert len(generation.output_ids) == len(generation.logprobs) >= 1
        else:
            generation = await engine.chat([{"role": "user", "content": "hi"}], GREEDY)  # type: ignore[attr-defined]
            assert generation.text is not None and generation.output_ids == ()
        stats = await engine.stats_async()
        assert (stats.requests, stats.policy_version) == (1, 0) == (engine.stats().requests, 0)
        assert await engine.instance_async() == await engine.instance_async()  # same process, same weights
    finally:
        await engine.close()


async def test_a_spec_is_the_picklable_factory_of_its_engine(tiny_path, server):
    import pickle

    spec = pickle.loads(pickle.dumps(EngineSpec("sglang", tiny_path, launch=True, num_servers=2)))
    connected = spec.connected_to([server.url])
    assert (connected.urls, connected.launch, connected.num_servers) == ((server.url,), False, 2)
    engine = connected()  # what each environment actor does with it
    try:
        assert engine.name == "sglang" and engine.urls == [server.url]  # type: ignore[attr-defined]
    finally:
        await engine.close()
    with pytest.raises(ValueError, match="urls of running servers"):
        spec()  # launching is the driver's (start), never an actor's
    with pytest.raises(ValueError, match="cannot launch servers"):
        await ENGINE_KINDS["hf"].start_engine(replace(EngineSpec("hf", "tiny"), launch=True))


@pytest.mark.parametrize("agent", ["hf", "llm", "sglang", "openai"])
async def test_make_policy_plays_an_episode_with_every_row(agent, tiny_path, server):
    kind = engine_kind(agent)
    base_url = None if kind.placement == "local" else (server.url if kind.token_level else server.url + "/v1")
    options = LLMOptions(model=tiny_path, base_url=base_url, max_new_tokens=6, max_turns=2, temperature=0.0)
    policy = make_policy(agent, options, batch_size=2)
    env = envs.make("sokoban")
    try:
        trajectory = await policy.play(env, EpisodeSpec("sokoban", seed=3))
    finally:
        env.close()
        await policy.close()
    assert policy.name == f"{kind.name}:{tiny_path}" and policy.token_level == kind.token_level
    assert trajectory.error is None and 1 <= trajectory.num_turns <= 2
    assert (sum(trajectory.response_mask) > 0) == kind.token_level  # text-level turns carry no trainable ids


@pytest.mark.parametrize("agent", ["sglang", "openai"])
def test_server_rows_need_a_base_url(agent):
    from agents.config import UsageError

    with pytest.raises(UsageError, match=f"agent={agent} needs base_url="):
        make_policy(agent, LLMOptions(model="tiny"))
