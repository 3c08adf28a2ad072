"""The gateway over HTTP with the OpenAI SDK: tool calls in and out, streaming, sessions, and every refusal.

A scripted engine answers with fixed texts (tokenised with the tiny tokenizer, ending with its stop
token) so that tool calls and token ids can be written down; the engine's failures are injected.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import aiohttp
import openai
import pytest

from agents.engines.base import EngineStats, Generation, SamplingParams
from agents.gateway import Gateway, GatewayLimits
from agents.gateway.server import GatewayServer
from agents.models import load_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
]
CALL = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'


class ScriptedEngine:
    """Answers each request with the next text of ``replies``; ``fail`` raises, ``hang`` waits forever."""

    name = "scripted"

    def __init__(self, tokenizer, replies: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.inputs: list[list[int]] = []
        self.outputs: list[tuple[int, ...]] = []
        self.fail = False
        self.hang = asyncio.Event()
        self.hanging = False

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None):
        if self.fail:
            raise RuntimeError("engine exploded")
        if self.hanging:
            await self.hang.wait()
        text = self.replies.pop(0)
        ids = (*self.tokenizer.encode(text, add_special_tokens=False), sampling.stop_token_ids[0])
        ids = ids[: sampling.max_new_tokens]
        self.inputs.append(list(input_ids))
        self.outputs.append(ids)
        reason = "stop" if ids[-1] in sampling.stop_token_ids else "length"
        return Generation(ids, tuple(-0.25 for _ in ids), reason, prompt_tokens=len(input_ids))

    def stats(self) -> EngineStats:
        return EngineStats()


@pytest.fixture
def tokenizer():
    return load_tokenizer("tiny")


async def _serve(tokenizer, replies, **kwargs):
    engine = ScriptedEngine(tokenizer, replies)
    limits = kwargs.pop("limits", GatewayLimits())
    gateway = Gateway(engine, tokenizer, model_name="tiny", limits=limits, **kwargs)
    server = GatewayServer(gateway)
    await server.start()
    return engine, gateway, server


def _client(server: GatewayServer, session: str, timeout: float = 30.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.session_url(session), api_key="unused", max_retries=0, timeout=timeout)


async def test_tool_calls_go_out_in_openai_format_and_come_back_as_one_exact_segment(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, [f"Let me add. {CALL}", "It is 3."])
    try:
        client = _client(server, "ep1")
        messages = [{"role": "system", "content": "Add."}, {"role": "user", "content": "1+2"}]
        first = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content == "Let me add."
        (call,) = choice.message.tool_calls
        assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 1}
        assert first.model == "tiny"
        messages += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "3"},
        ]
        second = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        assert second.choices[0].message.content == "It is 3." and second.choices[0].finish_reason == "stop"

        session = gateway.sessions["ep1"]
        (segment,) = session.segments
        assert gateway.stats.message_extensions == 1
        t1, t2 = segment.turns
        assert tuple(segment.response_ids[t1.start : t1.end]) == engine.outputs[0]
        assert tuple(segment.response_ids[t2.start : t2.end]) == engine.outputs[1]
        assert segment.token_ids[: len(segment.prompt_ids) + t2.start] == engine.inputs[1]
        # The tool result is rendered by the template between the two turns (mask 0), after the model's own call.
        between = tokenizer.decode(segment.response_ids[t1.end : t2.start])
        assert "<tool_response>\n3\n</tool_response>" in between
        assert tokenizer.decode(engine.inputs[0]).count('"name": "add"') == 1  # the tool schema is in the prompt

        async with aiohttp.ClientSession() as http:
            async with http.get(f"{server.url}/sessions/ep1") as response:
                record = await response.json()
            assert record["segments"][0]["turns"][1]["request"] == 1
            async with http.post(f"{server.url}/sessions/ep1/finish", json={"reward": 1.0}) as response:
                assert response.status == 200
                (trajectory,) = (await response.json())["trajectories"]
        assert trajectory["turn_rewards"] == [0.0, 1.0] and trajectory["success"] is True
        assert "ep1" not in gateway.sessions
    finally:
        await server.close()


async def test_streaming_sends_the_reply_and_usage_as_server_sent_events(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, [f"Sure. {CALL}"])
    try:
        stream = await _client(server, "s").chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        usage = [c.usage for c in chunks if c.usage]
        assert content == "Sure." and calls[0].function.name == "add" and finish == ["tool_calls"]
        assert usage[0].completion_tokens == len(engine.outputs[0])
    finally:
        await server.close()


async def test_logprobs_and_token_ids_are_returned_when_asked(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, ["abc"])
    try:
        async with aiohttp.ClientSession() as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True}
            async with http.post(f"{server.session_url('s')}/chat/completions", json=body) as response:
                reply = await response.json()
        assert reply["turngym"]["completion_token_ids"] == list(engine.outputs[0])
        assert [entry["logprob"] for entry in reply["choices"][0]["logprobs"]["content"]] == [-0.25] * len(
            engine.outputs[0]
        )
        async with aiohttp.ClientSession() as http, http.get(f"{server.url}/v1/models") as response:
            assert (await response.json())["data"][0]["id"] == "tiny"
    finally:
        await server.close()


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"messages": [{"role": "user", "content": "x"}], "stop": ["\n"]}, 400, "stop strings are not supported"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, 400, "n must be 1"),
        ({"messages": []}, 400, "non-empty list"),
        ({"messages": [{"role": "robot", "content": "x"}]}, 400, "role must be one of"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text parts"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 7}, 400, "temperature must lie in"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, 400, "tool_choice"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]}, 400, 'no "name"'),
        ("not json", 400, "not JSON"),
    ],
)
async def test_malformed_requests_get_a_clear_400_and_record_nothing(tokenizer, body, status, words) -> None:
    engine, gateway, server = await _serve(tokenizer, ["ok"])
    try:
        async with aiohttp.ClientSession() as http:
            url = f"{server.session_url('s')}/chat/completions"
            payload = {"data": body} if isinstance(body, str) else {"json": body}
            async with http.post(url, **payload) as response:
                assert response.status == status
                error = (await response.json())["error"]
        assert words in error["message"] and error["type"] == "invalid_request_error"
        assert (engine.inputs == [] and not gateway.sessions.get("s", None)) or not gateway.sessions["s"].segments
    finally:
        await server.close()


async def test_engine_failure_is_a_503_and_the_session_is_unchanged(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, ["one", "two"])
    try:
        client = _client(server, "s")
        messages = [{"role": "user", "content": "x"}]
        first = await client.chat.completions.create(model="m", messages=messages)
        before = gateway.sessions["s"].to_dict()
        engine.fail = True
        more = [*messages, first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "y"}]
        with pytest.raises(openai.InternalServerError, match="engine failed: engine exploded"):
            await client.chat.completions.create(model="m", messages=more)
        assert gateway.sessions["s"].to_dict() == before
        engine.fail = False
        await client.chat.completions.create(model="m", messages=more)  # the session goes on
        assert len(gateway.sessions["s"].segments[0].turns) == 2
    finally:
        await server.close()


async def test_a_client_that_gives_up_mid_request_leaves_nothing_recorded(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, ["late", "next"])
    try:
        engine.hanging = True
        with pytest.raises(openai.APITimeoutError):
            await _client(server, "s", timeout=0.5).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
        for _ in range(50):  # the server notices the closed connection and cancels the handler
            if gateway.sessions["s"].busy == 0:
                break
            await asyncio.sleep(0.05)
        assert gateway.sessions["s"].busy == 0 and gateway.sessions["s"].segments == []
        assert gateway.stats.failed_requests == 1
    finally:
        engine.hang.set()
        await server.close()


async def test_sessions_are_bounded_reaped_and_refused_clearly(tokenizer) -> None:
    limits = GatewayLimits(max_sessions=3, session_ttl_s=0.2)
    engine, gateway, server = await _serve(tokenizer, ["a"] * 10, limits=limits, create_sessions=False)
    try:
        async with aiohttp.ClientSession() as http:
            url = f"{server.url}/v1/chat/completions"
            body = {"messages": [{"role": "user", "content": "x"}]}
            async with http.post(url, json=body, headers={"X-Session-Id": "nobody"}) as response:
                assert response.status == 404 and "no open session" in (await response.json())["error"]["message"]
            for i in range(3):
                async with http.post(f"{server.url}/sessions", json={"session_id": f"s{i}", "seed": i}) as response:
                    assert response.status == 200
            async with http.post(f"{server.url}/sessions", json={"session_id": "s3"}) as response:
                assert response.status == 429 and "max_sessions" in (await response.json())["error"]["message"]
            async with http.post(f"{server.url}/sessions", json={"session_id": "s0"}) as response:
                assert response.status == 409
            async with http.post(f"{server.url}/sessions/zzz/finish", json={"reward": 1}) as response:
                assert response.status == 404
            async with http.post(f"{server.url}/sessions/s0/finish", json={"reward": "high"}) as response:
                assert response.status == 400 and "finite number" in (await response.json())["error"]["message"]
            await asyncio.sleep(0.5)  # never finished: the reaper drops them
            async with http.get(f"{server.url}/health") as response:
                health = await response.json()
        assert health["sessions"] == 0 and health["sessions_expired"] == 3
    finally:
        await server.close()


async def test_a_conversation_longer_than_the_context_is_refused_before_sampling(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, ["a"], limits=GatewayLimits(max_total_tokens=40))
    try:
        with pytest.raises(openai.BadRequestError, match="max_total_tokens is 40"):
            await _client(server, "s").chat.completions.create(
                model="m", messages=[{"role": "user", "content": "word " * 50}]
            )
        assert engine.inputs == []
    finally:
        await server.close()


async def test_requests_without_a_session_are_answered_and_not_kept(tokenizer) -> None:
    engine, gateway, server = await _serve(tokenizer, ["plain"])
    try:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert reply.choices[0].message.content == "plain" and gateway.sessions == {}
    finally:
        await server.close()
