"""The OpenEnv server (``envs.serve``) refuses strangers and malformed requests without falling over.

* Binding: loopback needs no key; any other address without one is refused before anything listens,
  by ``start_server``/``serve_app`` and by ``python -m envs.serve``.
* Key: every HTTP route but ``/health`` answers 401 without ``Authorization: Bearer <key>``; a WebSocket
  handshake without it is refused before it is accepted.
* Malformed requests (random bytes, random JSON, non-finite numbers, bodies over the cap, a ``/step``
  with no episode, a reset with bad options) get a 4xx with a one-line reason; the server answers a
  good request after. Starlette's ``TestClient`` drives the app in-process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.adapters.openenv_server import (
    API_KEY_ENV,
    OPENENV_INSTALL,
    RequestGuard,
    build_app,
    check_binding,
    is_loopback,
    serve_app,
    start_server,
)

try:
    from fastapi.testclient import TestClient
    from starlette.testclient import WebSocketDenialResponse
    from starlette.websockets import WebSocketDisconnect
except ImportError as exc:
    raise ImportError(f"tests/envs/test_openenv_guard.py needs openenv: {OPENENV_INSTALL}") from exc

KEY = "s3cret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def open_client() -> TestClient:
    return TestClient(build_app("frozenlake", max_body_bytes=64 * 1024), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def keyed_client() -> TestClient:
    return TestClient(build_app("frozenlake", api_key=KEY), raise_server_exceptions=False)


def assert_one_line_4xx(response, status: int) -> None:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    text = detail if isinstance(detail, str) else str(detail)  # FastAPI's 422: a list of field errors
    assert text and "\n" not in text and "Traceback" not in text


def assert_answers_good_requests(client: TestClient, headers: dict[str, str] | None = None) -> None:
    assert client.get("/health").json()["status"] == "healthy"
    reset = client.post("/reset", json={"seed": 3}, headers=headers)
    assert reset.status_code == 200 and reset.json()["observation"]["turn"] == 0


# ---------------------------------------------------------------------------------------------- binding and key
@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False), ("", False), ("192.168.1.4", False)],
)
def test_binding_rule(host, loopback):
    assert is_loopback(host) is loopback
    if loopback:
        check_binding(host, None)
    else:
        with pytest.raises(ValueError, match=f"without an API key: set {API_KEY_ENV}"):
            check_binding(host, None)
        check_binding(host, "k")


def test_start_server_and_serve_app_refuse_a_public_address_without_a_key():
    with pytest.raises(ValueError, match=r"'0\.0\.0\.0'.*without an API key"):
        start_server("frozenlake", host="0.0.0.0")
    with pytest.raises(ValueError, match="without an API key"):
        serve_app(build_app("frozenlake"), host="0.0.0.0")


def test_envs_serve_refuses_a_public_address_without_a_key_in_one_line():
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    result = subprocess.run(
        [sys.executable, "-m", "envs.serve", "frozenlake", "host=0.0.0.0", "port=1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("envs.serve: ") and f"set {API_KEY_ENV}" in line and "bind 127.0.0.1" in line


def test_api_key_option_is_read_as_text():
    from envs.serve import parse_args

    assert parse_args(["sokoban", "api_key=0x1F"])[2]["api_key"] == "0x1F"
    assert parse_args(["sokoban", "api_key="])[2]["api_key"] is None


def test_with_a_key_every_http_route_but_health_needs_it(keyed_client):
    for headers in [None, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": "Basic x"}]:
        for method, path in [
            ("POST", "/reset"),
            ("POST", "/step"),
            ("GET", "/state"),
            ("GET", "/schema"),
            ("GET", "/metadata"),
            ("GET", "/docs"),
            ("POST", "/mcp"),
            ("GET", "/nowhere"),
        ]:
            response = keyed_client.request(method, path, json={}, headers=headers)
            assert_one_line_4xx(response, 401)
            assert "API key" in response.json()["detail"]
    assert keyed_client.get("/health").status_code == 200
    assert_answers_good_requests(keyed_client, AUTH)


def test_with_a_key_a_websocket_without_it_is_refused_before_accept(keyed_client):
    for headers in [{}, {"Authorization": "Bearer wrong"}]:
        with pytest.raises(WebSocketDenialResponse) as denied, keyed_client.websocket_connect("/ws", headers=headers):
            pass
        assert denied.value.status_code == 401 and "API key" in denied.value.json()["detail"]
    with keyed_client.websocket_connect("/ws", headers=AUTH) as ws:
        ws.send_json({"type": "reset", "data": {"seed": 3}})
        assert ws.receive_json()["type"] == "observation"


def test_without_the_denial_extension_a_refused_websocket_closes_with_1008():
    async def app(scope, receive, send):
        raise AssertionError("the guard let a request without the key through")

    async def receive():
        return {"type": "websocket.connect"}

    async def send(message):
        sent.append(message)

    sent: list[dict] = []
    scope = {"type": "websocket", "path": "/ws", "headers": [(b"authorization", b"Bearer no")], "extensions": {}}
    asyncio.run(RequestGuard(app, api_key=KEY)(scope, receive, send))
    assert [(m["type"], m["code"]) for m in sent] == [("websocket.close", 1008)]


# ---------------------------------------------------------------------------------------------- malformed requests
def test_named_malformed_requests_get_one_line_4xx(open_client):
    def post(path: str, data: bytes):
        return open_client.post(path, content=data, headers={"Content-Type": "application/json"})

    assert_one_line_4xx(post("/reset", b"{not json"), 400)
    assert_one_line_4xx(post("/reset", b"\xff\xfe\x00"), 400)
    assert_one_line_4xx(post("/reset", b'{"seed": 1e400}'), 400)  # was a 500: FastAPI cannot echo infinity
    assert_one_line_4xx(post("/reset", b'{"seed": NaN}'), 400)
    assert_one_line_4xx(post("/reset", b"[" * 30_000 + b"]" * 30_000), 400)  # nested too deep
    assert_one_line_4xx(post("/reset", b" " * (64 * 1024 + 1)), 413)
    assert_one_line_4xx(post("/reset", b'{"seed": 3, "options": 5}'), 400)  # was a 500: the env's TypeError
    assert_one_line_4xx(post("/reset", b'{"seed": -1}'), 422)
    assert_one_line_4xx(post("/step", b'{"action": {"text": "Up"}}'), 409)  # was a 500: no episode over HTTP
    assert_one_line_4xx(post("/step", b'{"action": {"text": 5}}'), 422)
    assert_one_line_4xx(open_client.post("/reset", content=b"x", headers={"Content-Length": "99999999"}), 413)
    assert_answers_good_requests(open_client)


def test_malformed_websocket_messages_leave_the_session_and_server_serving(open_client):
    with open_client.websocket_connect("/ws") as ws:
        ws.send_text("{not json")
        assert ws.receive_json()["type"] == "error"
        ws.send_json({"type": "step", "data": {"text": "Up"}})  # before any reset
        assert ws.receive_json()["type"] == "error"
        ws.send_json({"type": "reset", "data": {"seed": 3}})
        assert ws.receive_json()["type"] == "observation"
    with pytest.raises(WebSocketDisconnect), open_client.websocket_connect("/ws") as ws:
        ws.close()  # a client that goes away at once
        ws.receive_json()
    assert_answers_good_requests(open_client)


# ---------------------------------------------------------------------------------------------- property tests
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=9),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
reset_bodies = st.fixed_dictionaries(
    {}, optional={"seed": json_values | st.integers(-3, 2**70), "episode_id": json_values, "options": json_values}
)
step_bodies = st.fixed_dictionaries(
    {"action": json_values | st.fixed_dictionaries({"text": json_values | st.text(max_size=30)})},
    optional={"timeout_s": json_values},
)
paths = st.sampled_from(["/reset", "/step", "/state", "/mcp", "/schema", "/metadata", "/frozenlake/tasks"])
fuzz_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@fuzz_settings
@given(path=paths, body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes_never_break_the_server(open_client, path, body):
    response = open_client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code < 500, response.text
    assert_answers_good_requests(open_client)


@fuzz_settings
@given(path=paths, method=st.sampled_from(["POST", "GET"]), body=json_values | reset_bodies | step_bodies)
def test_random_json_never_breaks_the_server(open_client, path, method, body):
    response = open_client.request(method, path, json=body)
    assert response.status_code < 500, response.text
    if response.status_code >= 400 and response.headers.get("content-type") == "application/json":
        assert_one_line_4xx(response, response.status_code)
    assert_answers_good_requests(open_client)


@fuzz_settings
@given(
    messages=st.lists(
        json_values
        | st.fixed_dictionaries({"type": st.sampled_from(["reset", "step", "state", "x"]), "data": json_values}),
        max_size=4,
    )
)
def test_random_websocket_messages_never_break_the_server(open_client, messages):
    with open_client.websocket_connect("/ws") as ws:
        for message in messages:
            ws.send_json(message)
            try:
                reply = ws.receive_json()
            except WebSocketDisconnect as closed:  # OpenEnv ends a session on a message that is not an object
                assert closed.code == 1000 and any(
                    not isinstance(m, dict) or not isinstance(m.get("data"), dict) for m in messages
                )
                break
            assert reply["type"] in {"observation", "state", "error"}, reply
    assert_answers_good_requests(open_client)
