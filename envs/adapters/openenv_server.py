"""Any registered turngym environment behind OpenEnv's HTTP/WebSocket protocol.

OpenEnv (``pip install openenv==0.4.1``) serves an ``Environment`` (``reset``, ``step``, ``state``) with
typed ``Action`` / ``Observation`` / ``State`` models; its clients (``EnvClient``, TRL's and SkyRL's
OpenEnv integrations) open a WebSocket at ``/ws`` and get their own environment session. Here the
environment is a :class:`TurngymEnvironment` wrapping one :class:`envs.TextEnv` per session, and the
app is built with OpenEnv's own ``create_app``, so the wire format is exactly OpenEnv's.

Wire models:

* :class:`TextAction`: ``{"text": "<the model's text>"}``, passed to ``TextEnv.step`` unchanged.
* :class:`TextObservation`: ``text`` (the observation), ``messages`` (the same as chat messages:
  tool results keep their ``tool`` role), ``terminated`` and ``truncated`` (Gymnasium's meanings;
  OpenEnv's ``done`` is their "or"), ``success``, ``action_is_valid``, ``turn``, ``metrics``, and on
  reset the ``instructions`` (system prompt) and ``tools`` (JSON schemas, or ``None``). ``reward`` is
  the turn's reward, format penalty included; other info keys travel in ``metadata``.
* :class:`TextState`: ``env_id``, ``turn``, ``episode_over``, ``render`` (the state as text),
  ``oracle`` (a reference solution from here, or ``None``) and ``valid_actions``.

Guard (:class:`RequestGuard`, on every app :func:`build_app` makes): with an API key, every request
but ``GET /health`` needs ``Authorization: Bearer <key>`` (401 with a one-line JSON reason; a
WebSocket handshake without it is refused before it is accepted, with 401 where the server can send
one, else close code 1008); binding anything but loopback without a key raises (:func:`check_binding`).
HTTP bodies are capped at ``max_body_bytes`` (4 MiB, 413) and must be strict JSON (400); a reset the
environment refuses (bad seed or options) is 400, a ``/step`` with no episode 409. WebSocket messages
are capped at :data:`WS_MAX_SIZE_BYTES` by the server (uvicorn closes with 1009).
"""

from __future__ import annotations

import functools
import json
import math
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envs.access import API_KEY_ENV, check_binding, is_loopback, key_matches, strict_json
from envs.optional import import_pinned

__all__ = [
    "API_KEY_ENV",
    "MAX_BODY_BYTES",
    "OPENENV_INSTALL",
    "OPENENV_VERSION",
    "LocalServer",
    "RequestError",
    "RequestGuard",
    "build_app",
    "check_binding",
    "import_openenv",
    "is_loopback",
    "local_server",
    "quiet_disconnects",
    "serve_app",
    "start_server",
]

OPENENV_VERSION = "0.4.1"
OPENENV_INSTALL = f'pip install "turngym[openenv]"  (openenv=={OPENENV_VERSION})'

#: Largest WebSocket message the server accepts: actions up to TextEnv's 16M characters, JSON-escaped.
WS_MAX_SIZE_BYTES = 128 * 1024 * 1024
#: Largest HTTP body: HTTP requests carry a seed or one action; long episodes play over the WebSocket.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The environment variable with the API key (the gateway reads the same one).
#: Paths open without the key: a liveness probe needs no secret.
OPEN_PATHS = frozenset({"/health"})


def import_openenv() -> Any:
    """The ``openenv`` module at the pinned version, or an :class:`ImportError` naming the install command."""
    return import_pinned("openenv", OPENENV_VERSION, OPENENV_INSTALL, user="the OpenEnv adapter")


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: containers recursively, numpy scalars as Python numbers, anything else as text."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)


class RequestError(ValueError):
    """A request the environment server refuses: ``status`` (4xx) and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(" ".join(message.split())[:500])
        self.status = status


def _key_matches(headers: list[tuple[bytes, bytes]], api_key: str) -> bool:
    """Whether the ASGI ``headers`` carry ``Authorization: Bearer <api_key>`` (:func:`envs.access.key_matches`)."""
    return key_matches(next((v for k, v in headers if k.lower() == b"authorization"), b""), api_key)


class RequestGuard:
    """ASGI middleware: the API key check (see the module docstring), then a body cap and a strict-JSON check."""

    def __init__(self, app: Any, *, api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
        self.app, self.api_key, self.max_body_bytes = app, api_key or None, max_body_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if self.api_key and scope["path"] not in OPEN_PATHS and not _key_matches(scope["headers"], self.api_key):
            return await self._deny(
                scope, receive, send, 401, "missing or wrong API key: send Authorization: Bearer <key>"
            )
        if scope["type"] == "websocket":
            return await self.app(scope, receive, send)
        body, more = b"", True
        declared = next((v for k, v in scope["headers"] if k.lower() == b"content-length"), b"0")
        if not declared.isdigit() or int(declared) > self.max_body_bytes:
            return await self._deny(scope, receive, send, 413, f"the body is over {self.max_body_bytes} bytes")
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away mid-body: nobody to answer
            body, more = body + message.get("body", b""), message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                return await self._deny(scope, receive, send, 413, f"the body is over {self.max_body_bytes} bytes")
        if body.strip():
            try:
                strict_json(body)
            except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                return await self._deny(scope, receive, send, 400, f"the body is not JSON: {exc}")
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    @staticmethod
    async def _deny(scope: Any, receive: Any, send: Any, status: int, reason: str) -> None:
        """Answer ``status`` with ``{"detail": reason}``; a WebSocket is refused before it is accepted."""
        payload = json.dumps({"detail": " ".join(reason.split())[:500]}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": status, "headers": headers})
            return await send({"type": "http.response.body", "body": payload})
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            return await send({"type": "websocket.http.response.body", "body": payload})
        await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})


@functools.cache
def _models() -> tuple[type, type, type, type]:
    """The OpenEnv wire models and environment class (built on first use: openenv is an optional dependency)."""
    import_openenv()
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field

    class TextAction(Action):
        """One turn of a turngym environment: the model's text, parsed leniently by the environment."""

        text: str = Field(description="The model's response text for this turn")

    class TextObservation(Observation):
        """A turngym observation; ``reward`` includes the format penalty, ``done`` is terminated or truncated."""

        text: str = Field(description="The observation as text (the next user message)")
        messages: list[dict[str, str]] = Field(default_factory=list, description="The observation as chat messages")
        terminated: bool = Field(default=False, description="The task ended (Gymnasium's meaning)")
        truncated: bool = Field(default=False, description="A limit outside the task ended the episode")
        success: bool = Field(default=False, description="The task is solved")
        action_is_valid: bool = Field(default=True, description="The environment could read the action")
        turn: int = Field(default=0, description="Turns taken so far")
        metrics: dict[str, float] = Field(default_factory=dict, description="Numbers for logging")
        instructions: str | None = Field(default=None, description="The system prompt (on reset)")
        tools: list[dict[str, Any]] | None = Field(default=None, description="Tool schemas (on reset)")

    class TextState(State):
        """Where the episode stands, with a reference solution from here where the environment has an oracle."""

        env_id: str = ""
        turn: int = 0
        episode_over: bool = True
        render: str = ""
        oracle: list[str] | None = None
        valid_actions: list[str] | None = None

    class TurngymEnvironment(Environment):
        """One turngym environment per OpenEnv session (see the module docstring for the wire format)."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, env_id: str, options: Mapping[str, Any] | None = None) -> None:
            import envs

            super().__init__()
            self.env_id = env_id
            self.env = envs.make(env_id, **dict(options or {}))
            self.episode_id: str | None = None
            self.started = False

        def reset(
            self, seed: int | None = None, episode_id: str | None = None, options: dict[str, Any] | None = None
        ) -> TextObservation:
            try:
                text, info = self.env.reset(seed=seed, options=options)
            except (TypeError, ValueError, KeyError, OverflowError) as exc:  # the client's seed or options
                raise RequestError(400, f"the environment refused the reset: {type(exc).__name__}: {exc}") from exc
            self.episode_id, self.started = episode_id, True
            observation = self._observation(text, 0.0, False, False, info)
            observation.instructions = self.env.unwrapped.instructions
            observation.tools = _jsonable(self.env.unwrapped.tools)
            observation.reward = None
            return observation

        def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
            if not self.started:  # HTTP /step gets a fresh environment per request
                raise RequestError(409, "no episode to step: reset first, in a WebSocket session at /ws")
            if self.env.unwrapped.episode_over:
                raise RequestError(409, "the episode is over: reset to start another")
            text, reward, terminated, truncated, info = self.env.step(action.text)
            return self._observation(text, reward, terminated, truncated, info)

        @property
        def state(self) -> TextState:
            env = self.env.unwrapped
            if not self.started:
                return TextState(env_id=self.env_id)
            return TextState(
                episode_id=self.episode_id,
                step_count=env.turn,
                env_id=self.env_id,
                turn=env.turn,
                episode_over=env.episode_over,
                render=env.render_text(),
                oracle=env.oracle(),
                valid_actions=env.valid_actions(),
            )

        def get_metadata(self) -> EnvironmentMetadata:
            import envs

            description = envs.spec(self.env_id).description or self.env_id
            return EnvironmentMetadata(name=self.env_id, description=description, version="turngym")

        def close(self) -> None:
            self.env.close()

        def _observation(
            self, text: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
        ) -> TextObservation:
            standard = {"success", "action_is_valid", "metrics", "turn"}
            return TextObservation(
                text=text,
                messages=self.env.unwrapped.observation_messages(),
                terminated=terminated,
                truncated=truncated,
                done=terminated or truncated,
                reward=reward,
                success=info["success"],
                action_is_valid=info["action_is_valid"],
                turn=info["turn"],
                metrics=info["metrics"],
                metadata=_jsonable({k: v for k, v in info.items() if k not in standard}),
            )

    return TextAction, TextObservation, TextState, TurngymEnvironment


def build_app(
    env_id: str,
    options: Mapping[str, Any] | None = None,
    *,
    max_sessions: int = 256,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Any:
    """A FastAPI app (OpenEnv's ``create_app``) serving ``env_id``; each WebSocket session gets its own instance.

    The options are checked by building one environment first, so a bad option fails here, not in a session.
    Requests pass :class:`RequestGuard` (``api_key``: the key every request but ``/health`` needs).
    """
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    text_action, text_observation, _, environment = _models()
    from fastapi.responses import JSONResponse
    from openenv.core.env_server.http_server import create_app

    environment(env_id, options).close()
    factory = functools.partial(environment, env_id, dict(options or {}))
    app = create_app(factory, text_action, text_observation, env_name=env_id, max_concurrent_envs=max_sessions)

    async def refuse(request: Any, exc: RequestError) -> Any:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    app.add_exception_handler(RequestError, refuse)
    app.add_middleware(RequestGuard, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


def quiet_disconnects(app: Any) -> Any:
    """``app`` without the traceback OpenEnv 0.4.1 logs when a WebSocket client has already gone at session end."""
    from starlette.websockets import WebSocketDisconnect

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise

    return wrapped


@dataclass
class LocalServer:
    """A server running in a background thread of this process; ``url`` is ``http://127.0.0.1:<port>``."""

    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)


def start_server(
    env_id: str,
    options: Mapping[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_sessions: int = 256,
    api_key: str | None = None,
) -> LocalServer:
    """Serve ``env_id`` from a daemon thread of this process (``port=0``: a free port); returns once it listens.

    A ``host`` other than loopback needs ``api_key`` (:func:`check_binding`), which every request then carries.
    """
    check_binding(host, api_key)  # before building an environment
    app = build_app(env_id, options, max_sessions=max_sessions)
    return serve_app(app, host=host, port=port, name=env_id, api_key=api_key)


def serve_app(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    name: str = "app",
    startup_timeout_s: float = 60.0,
    api_key: str | None = None,
) -> LocalServer:
    """Run an ASGI app (any OpenEnv server app) with uvicorn in a daemon thread; returns once it listens.

    With ``api_key`` the app is wrapped in :class:`RequestGuard` (every request but ``/health`` carries the
    key); a ``host`` other than loopback needs one.
    """
    import uvicorn

    check_binding(host, api_key)
    if api_key:
        app = RequestGuard(app, api_key=api_key)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # No keepalive pings: client and server often share this process, where a ping says nothing more.
    config = uvicorn.Config(
        quiet_disconnects(app),
        log_level="warning",
        ws_max_size=WS_MAX_SIZE_BYTES,
        ws_ping_interval=None,
        ws_ping_timeout=None,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"openenv-{name}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started and thread.is_alive():
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"the OpenEnv server for {name!r} did not start within {startup_timeout_s} s")
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"the OpenEnv server for {name!r} exited during start-up (see the log above)")
    bound_host, bound_port = sock.getsockname()[:2]
    return LocalServer(url=f"http://{bound_host}:{bound_port}", server=server, thread=thread)


_local_servers: dict[str, LocalServer] = {}
_local_lock = threading.Lock()


def local_server(env_id: str, options: Mapping[str, Any] | None = None) -> LocalServer:
    """The in-process server for ``env_id`` with ``options``, started on first use and shared in this process."""
    key = json.dumps([env_id, _jsonable(options or {})], sort_keys=True)
    with _local_lock:
        running = _local_servers.get(key)
        if running is None or not running.thread.is_alive():
            running = _local_servers[key] = start_server(env_id, options)
        return running
