"""OpenAIEngine with the openai SDK against the compat server's /v1/chat/completions (tiny model, real tokenizer)."""

from __future__ import annotations

import json

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from sglang_compat_server import CompatServer, parse_tool_calls

from agents.engines.base import Generation, SamplingParams
from agents.engines.hf import HfEngine
from agents.engines.openai import OpenAIConfig, OpenAIEngine, render_tool_calls
from agents.models import load_tokenizer, tiny_model_path

MESSAGES = [{"role": "system", "content": "Push boxes."}, {"role": "user", "content": "Where next?"}]
TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]


class ScriptedEngine:
    """Replies with fixed token ids (a tokenised tool call) so the tool-call path can be exercised exactly."""

    def __init__(self, output_ids: list[int]) -> None:
        self.output_ids = tuple(output_ids)
        self.prompts: list[list[int]] = []

    async def generate(self, input_ids, sampling, affinity_key=None) -> Generation:
        self.prompts.append(list(input_ids))
        return Generation(self.output_ids, (-1.0,) * len(self.output_ids), "stop", len(input_ids), 0)


@pytest.fixture(scope="module")
def tiny_path():
    return str(tiny_model_path())


async def test_chat_text_is_the_served_engines_generation(tiny_path):
    tokenizer = load_tokenizer(tiny_path)
    served, direct = HfEngine(tiny_path, seed=0), HfEngine(tiny_path, seed=0)
    server = CompatServer(served, model_path=tiny_path, tokenizer=tokenizer)
    await server.start()
    engine = OpenAIEngine(OpenAIConfig(model="tiny", base_url=server.url + "/v1", api_key="EMPTY", max_retries=0))
    try:
        sampling = SamplingParams(max_new_tokens=10, temperature=1.0, top_k=50, seed=3)
        generation = await engine.chat(MESSAGES, sampling)
        prompt_text = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer.encode(prompt_text, add_special_tokens=False)
        assert server.requests == [prompt_ids]  # the template rendered the messages; top_k went through extra_body
        expected = await direct.generate(prompt_ids, sampling)
        assert generation.text == tokenizer.decode(list(expected.output_ids), skip_special_tokens=True)
        assert (generation.output_ids, generation.logprobs) == ((), ())  # text level: nothing to train on
        assert (generation.finish_reason, generation.prompt_tokens) == ("length", len(prompt_ids))
        stats = engine.stats()
        assert (stats.requests, stats.prompt_tokens, stats.generated_tokens) == (1, len(prompt_ids), 10)
        with pytest.raises(NotImplementedError, match="chat"):
            await engine.generate(prompt_ids, sampling)
        with pytest.raises(NotImplementedError, match="evaluation only"):
            await engine.update_weights({}, 1)
    finally:
        await engine.close()
        await server.stop()
        await served.close()
        await direct.close()


async def test_tool_calls_come_back_as_hermes_blocks(tiny_path):
    tokenizer = load_tokenizer(tiny_path)
    reply = 'Going up.\n<tool_call>\n{"name": "move", "arguments": {"direction": "up", "steps": 2}}\n</tool_call>'
    scripted = ScriptedEngine([*tokenizer.encode(reply, add_special_tokens=False), tokenizer.eos_token_id])
    server = CompatServer(scripted, model_path=tiny_path, tokenizer=tokenizer)
    await server.start()
    engine = OpenAIEngine(OpenAIConfig(model="tiny", base_url=server.url + "/v1", api_key="EMPTY", max_retries=0))
    try:
        generation = await engine.chat(MESSAGES, SamplingParams(max_new_tokens=64), tools=TOOLS)
        # the server split the call out into OpenAI tool_calls; the engine wrote it back as the same block
        assert generation.text == reply
        assert generation.finish_reason == "stop"  # OpenAI's "tool_calls"
        assert "# Tools" in tokenizer.decode(scripted.prompts[0])  # the tools reached the chat template
    finally:
        await engine.close()
        await server.stop()


def test_render_tool_calls_formats():
    calls = [
        {"function": {"name": "a", "arguments": '{"x": 1}'}},
        {"function": {"name": "b", "arguments": "{not json"}},  # a malformed call is kept as the raw string
    ]
    assert render_tool_calls(None, calls) == (
        '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": "{not json"}\n</tool_call>'
    )
    assert render_tool_calls("plain", None) == "plain"


scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@settings(max_examples=50, deadline=None)
@given(
    content=st.none() | st.text(max_size=20).filter(lambda t: "<tool_call>" not in t and t.strip() == t),
    calls=st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.dictionaries(st.text(max_size=5), json_values, max_size=3)),
        max_size=3,
    ),
)
def test_hermes_rendering_round_trips_through_the_parser(content, calls):
    tool_calls = [{"function": {"name": n, "arguments": json.dumps(a)}} for n, a in calls]
    text = render_tool_calls(content, tool_calls)
    parsed_content, parsed = parse_tool_calls(text)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed] == calls
    assert parsed_content == ((content or None) if calls else text)


def test_config_and_key_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIEngine(OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAIConfig(model="m", max_concurrency=0)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIEngine(OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"))._client.api_key == "from-env"
