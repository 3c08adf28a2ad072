"""The gateway refuses strangers and malformed requests without falling over.

* Binding: loopback needs no key; any other address without a key is refused before anything listens.
* Key: with one, every route but ``/health`` needs ``Authorization: Bearer <key>`` (401 otherwise);
  the OpenAI SDK's ``api_key`` is that header, and a session played through ``play_session`` sends
  ``$TURNGYM_API_KEY``.
* Malformed requests (random bytes, random JSON, near-miss chat bodies, bodies over the cap, a client
  that hangs up mid-body) get a 4xx with a one-line JSON reason; the server answers a good request after.

A real server listens on an ephemeral port from a background event loop; clients are blocking ``requests``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator, Sequence

import openai
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.engines.base import EngineStats, Generation, SamplingParams
from agents.gateway import Gateway
from agents.gateway.auth import API_KEY_ENV, check_binding, is_loopback, key_matches, resolve_api_key
from agents.gateway.server import GatewayServer
from agents.models import load_tokenizer

KEY = "s3cret-key"
GOOD_CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class EchoEngine:
    """Answers every request with "ok" and the stop token."""

    name = "echo"

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None):
        ids = (*self.tokenizer.encode("ok", add_special_tokens=False), sampling.stop_token_ids[0])
        ids = ids[: sampling.max_new_tokens]
        reason = "stop" if ids[-1] in sampling.stop_token_ids else "length"
        return Generation(ids, tuple(-0.5 for _ in ids), reason, prompt_tokens=len(input_ids))

    def stats(self) -> EngineStats:
        return EngineStats()


class ThreadedGateway:
    """A :class:`GatewayServer` on 127.0.0.1:<free port>, run by an event loop in a daemon thread."""

    def __init__(self, **server_kwargs) -> None:
        tokenizer = load_tokenizer("tiny")
        self.gateway = Gateway(EchoEngine(tokenizer), tokenizer, model_name="tiny")
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = GatewayServer(self.gateway, **server_kwargs)
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def open_server() -> Iterator[ThreadedGateway]:
    server = ThreadedGateway(api_key="")  # no key, whatever the environment says
    yield server
    server.close()


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[ThreadedGateway]:
    server = ThreadedGateway(api_key=KEY, max_body_bytes=64 * 1024)
    yield server
    server.close()


def assert_one_line_error(response: requests.Response, status: int) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert message and "\n" not in message and "Traceback" not in message


def assert_answers_good_requests(server: ThreadedGateway, headers: dict[str, str] | None = None) -> None:
    assert requests.get(f"{server.url}/health", timeout=10).json()["status"] == "ok"
    reply = requests.post(f"{server.url}/v1/chat/completions", json=GOOD_CHAT, headers=headers, timeout=30)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "ok"


# ---------------------------------------------------------------------------------------------- binding and key
@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.2", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts_need_no_key(host):
    assert is_loopback(host)
    check_binding(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.1.2.3", "example.com", "localhost.example.com"])
def test_other_hosts_need_a_key(host):
    assert not is_loopback(host)
    with pytest.raises(ValueError, match=f"without an API key: set {API_KEY_ENV}.*or bind 127.0.0.1"):
        check_binding(host, None)
    with pytest.raises(ValueError, match="without an API key"):
        check_binding(host, "")  # an empty key is no key
    check_binding(host, "k")


def test_gateway_server_refuses_a_public_address_without_a_key_before_listening(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    tokenizer = load_tokenizer("tiny")
    gateway = Gateway(EchoEngine(tokenizer), tokenizer)
    with pytest.raises(ValueError, match=r"'0\.0\.0\.0'.*without an API key"):
        GatewayServer(gateway, host="0.0.0.0")
    assert GatewayServer(gateway, host="0.0.0.0", api_key="k").api_key == "k"
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert GatewayServer(gateway, host="0.0.0.0").api_key == "from-env"
    assert GatewayServer(gateway, api_key="given").api_key == "given"  # the argument wins over the environment


def test_key_resolution_and_comparison(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "")
    assert resolve_api_key() is None and resolve_api_key("k") == "k"
    monkeypatch.setenv(API_KEY_ENV, "env")
    assert resolve_api_key() == "env" and resolve_api_key("") is None
    assert key_matches("Bearer k", "k") and key_matches("bearer  k ", "k")
    for header in [None, "", "k", "Bearer", "Bearer kk", "Basic k", "Bearer K", "Bearer \udcff"]:
        assert not key_matches(header, "k"), header


def test_with_a_key_every_route_but_health_needs_it(keyed_server):
    url, good = keyed_server.url, {"Authorization": f"Bearer {KEY}"}
    for headers in [None, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}]:
        for method, path in [("post", "/v1/chat/completions"), ("get", "/v1/models"), ("post", "/sessions")]:
            response = requests.request(method, url + path, json=GOOD_CHAT, headers=headers, timeout=10)
            assert_one_line_error(response, 401)
            assert response.json()["error"]["type"] == "authentication_error"
        assert_one_line_error(requests.get(f"{url}/sessions/nobody", headers=headers, timeout=10), 401)
    assert not keyed_server.gateway.sessions  # nothing was opened without the key
    assert requests.get(f"{url}/health", timeout=10).status_code == 200
    assert_answers_good_requests(keyed_server, good)
    opened = requests.post(f"{url}/sessions", json={"session_id": "k1"}, headers=good, timeout=10)
    assert opened.status_code == 200 and "k1" in keyed_server.gateway.sessions
    keyed_server.gateway.discard("k1")


async def test_openai_sdk_sends_the_key_as_its_api_key(keyed_server):
    base_url = f"{keyed_server.url}/v1"
    async with openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
        reply = await client.chat.completions.create(**GOOD_CHAT)
        assert reply.choices[0].message.content == "ok"
    async with openai.AsyncOpenAI(base_url=base_url, api_key="wrong", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError, match="missing or wrong API key"):
            await client.chat.completions.create(**GOOD_CHAT)


async def test_play_session_sends_the_environment_key(monkeypatch):
    from agents.gateway.agent import play_session

    monkeypatch.setenv(API_KEY_ENV, KEY)
    tokenizer = load_tokenizer("tiny")
    gateway = Gateway(EchoEngine(tokenizer), tokenizer, model_name="tiny")

    async def agent(client, task):
        reply = await client.chat.completions.create(**GOOD_CHAT)
        return 1.0 if reply.choices[0].message.content == "ok" else 0.0

    async with GatewayServer(gateway) as server:
        assert server.api_key == KEY
        (trajectory,) = await play_session(gateway, server.session_url, agent, None, session_id="s1")
    assert trajectory.error is None and trajectory.success is True


# ---------------------------------------------------------------------------------------------- malformed requests
def test_named_malformed_requests_get_one_line_4xx(keyed_server):
    url, good = keyed_server.url, {"Authorization": f"Bearer {KEY}"}

    def post(path: str, data: bytes) -> requests.Response:
        return requests.post(url + path, data=data, headers={**good, "Content-Type": "application/json"}, timeout=10)

    assert_one_line_error(post("/v1/chat/completions", b"{not json"), 400)
    assert_one_line_error(post("/v1/chat/completions", b"\xff\xfe\x00"), 400)
    assert_one_line_error(post("/v1/chat/completions", b'{"messages": NaN}'), 400)
    assert_one_line_error(post("/sessions/x/finish", b'{"reward": 1e400}'), 400)  # no infinity through JSON
    assert_one_line_error(post("/v1/chat/completions", b"[" * 100_000 + b"]" * 100_000), 413)
    assert_one_line_error(post("/v1/chat/completions", b"[" * 30_000 + b"]" * 30_000), 400)  # nested too deep
    assert_one_line_error(post("/v1/chat/completions", b'"x"'), 400)
    assert_one_line_error(post("/v1/chat/completions", json.dumps({"messages": 3}).encode()), 400)
    # a session id becomes a path segment of its base URL: text of URL-safe characters only (a list was a 500)
    assert_one_line_error(post("/sessions", json.dumps({"session_id": [None]}).encode()), 400)
    assert_one_line_error(post("/sessions", json.dumps({"session_id": "a/b"}).encode()), 400)
    assert_one_line_error(post("/sessions/nobody/finish", b'{"reward": 1}'), 404)
    assert_one_line_error(requests.get(f"{url}/sessions/nobody", headers=good, timeout=10), 404)
    assert_one_line_error(requests.get(f"{url}/no/such/route", headers=good, timeout=10), 404)
    assert_one_line_error(requests.put(f"{url}/sessions", headers=good, timeout=10), 405)
    big = {**GOOD_CHAT, "messages": [{"role": "user", "content": "x" * (65 * 1024)}]}
    assert_one_line_error(requests.post(f"{url}/v1/chat/completions", json=big, headers=good, timeout=10), 413)
    assert_answers_good_requests(keyed_server, good)


def test_a_client_that_hangs_up_mid_body_or_mid_stream_leaves_the_server_serving(open_server):
    host, port = open_server.url.removeprefix("http://").split(":")
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    for request in [
        head + "Content-Length: 1000\r\n\r\n" + '{"messages": [',  # promised 1000 bytes, sent 14
        head + 'Transfer-Encoding: chunked\r\n\r\n5\r\n{"mes',  # a chunked body cut off
        head + "Content-Length: 86\r\n\r\n" + json.dumps({**GOOD_CHAT, "stream": True})[:86],  # gone before the reply
    ]:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(request.encode())
    assert_answers_good_requests(open_server)
    streamed = requests.post(
        f"{open_server.url}/v1/chat/completions", json={**GOOD_CHAT, "stream": True}, stream=True, timeout=30
    )
    first = next(streamed.iter_lines())
    streamed.close()  # hang up after the first chunk
    assert first.startswith(b"data: ")
    assert_answers_good_requests(open_server)


# ---------------------------------------------------------------------------------------------- property tests
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "robot", 3]), "content": json_values},
    optional={"tool_calls": json_values, "tool_call_id": json_values, "name": json_values},
)
chat_bodies = st.fixed_dictionaries(
    {"messages": st.lists(message, max_size=3) | json_values},
    optional={
        key: json_values | st.integers(-5, 5) | st.floats(-3, 3)
        for key in ["model", "tools", "tool_choice", "temperature", "top_p", "max_tokens", "seed", "stream", "n"]
    },
)
session_bodies = st.fixed_dictionaries(
    {}, optional={k: json_values for k in ["session_id", "group_id", "seed", "task", "reward", "turn_rewards"]}
)
paths = st.sampled_from(
    ["/v1/chat/completions", "/sessions/fz/v1/chat/completions", "/sessions", "/sessions/fz/finish", "/sessions/fz"]
)
fuzz_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@fuzz_settings
@given(path=paths, body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes_never_break_the_server(open_server, path, body):
    response = requests.post(open_server.url + path, data=body, timeout=30)
    assert 400 <= response.status_code < 500 or response.status_code == 200, response.text
    assert_answers_good_requests(open_server)


@fuzz_settings
@given(path=paths, method=st.sampled_from(["POST", "GET", "DELETE"]), body=json_values | chat_bodies | session_bodies)
def test_random_json_never_breaks_the_server(open_server, path, method, body):
    response = requests.request(method, open_server.url + path, json=body, timeout=30)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert_one_line_error(response, response.status_code)
    open_server.gateway.discard("fz")
    assert_answers_good_requests(open_server)


@fuzz_settings
@given(authorization=st.none() | st.from_regex(r"(Bearer )?([!-~][ -~]{0,40}[!-~])?", fullmatch=True), path=paths)
def test_random_credentials_never_pass(keyed_server, authorization, path):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = requests.post(keyed_server.url + path, json=GOOD_CHAT, headers=headers, timeout=30)
    assert_one_line_error(response, 401)
