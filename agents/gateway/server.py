"""The gateway over HTTP (aiohttp): OpenAI's chat-completions API, plus sessions.

Routes (``{sid}`` is a session id)::

    POST   /v1/chat/completions                  session from the X-Session-Id header; none: not recorded
    POST   /sessions/{sid}/v1/chat/completions   the same, for clients that only set a base URL
    GET    /v1/models, /sessions/{sid}/v1/models the served model
    POST   /sessions                             {"session_id"?, "group_id"?, "seed"?, "task"?}
                                                 -> {"session_id", "base_url"}
    GET    /sessions/{sid}                       the record: segments, ids, masks, logprobs, provenance
    POST   /sessions/{sid}/finish                {"reward", "turn_rewards"?, "success"?} -> {"trajectories": [...]}
    DELETE /sessions/{sid}                       drop the session unrecorded
    GET    /health                               {"status": "ok", "sessions": n, ...counters}

An unmodified agent built on the OpenAI SDK needs only ``base_url=<server>/sessions/<sid>/v1``.
With an API key (:mod:`agents.gateway.auth`: ``api_key=`` or ``$TURNGYM_API_KEY``; required to bind
anything but loopback) every route but ``/health`` needs ``Authorization: Bearer <key>``, which the
SDK sends as its ``api_key``. Errors are OpenAI's shape (``{"error": {"message", "type", "param",
"code"}}``, the message one line) with status 400 (bad request: not JSON, not an object, wrong
types), 401 (missing or wrong key), 404 (unknown session or route), 405 (wrong method), 409 (session
busy or already open), 413 (body over ``max_body_bytes``, 4 MiB), 429 (too many sessions), 500/503
(template or engine failure; a traceback goes to the log, never to the client). ``stream=true``
answers with server-sent events: the reply is sampled whole, then sent as a role chunk, a content
(or tool-calls) chunk, a finish chunk, an optional usage chunk and ``[DONE]``. A client that
disconnects cancels its request; nothing of it is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
from typing import Any

from aiohttp import web

from agents.gateway.auth import check_binding, key_matches, resolve_api_key
from agents.gateway.messages import GatewayError, completion_id, parse_request
from agents.gateway.service import Completion, Gateway
from envs.access import strict_json

__all__ = ["GATEWAY", "MAX_BODY_BYTES", "GatewayServer", "make_app"]

GATEWAY = web.AppKey("gateway", Gateway)
#: Largest request body accepted: a long chat history with tool schemas is well under 1 MiB.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Routes open without the key: a liveness probe needs no secret, and health shows only counters.
OPEN_PATHS = frozenset({"/health"})

logger = logging.getLogger(__name__)


def make_app(gateway: Gateway, *, api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> web.Application:
    """The gateway's aiohttp app; with ``api_key``, every route but ``/health`` needs ``Bearer <api_key>``."""
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_guard(api_key)])
    app[GATEWAY] = gateway
    app.add_routes(
        [
            web.post("/v1/chat/completions", _chat),
            web.post("/sessions/{sid}/v1/chat/completions", _chat),
            web.get("/v1/models", _models),
            web.get("/sessions/{sid}/v1/models", _models),
            web.post("/sessions", _open),
            web.get("/sessions/{sid}", _record),
            web.post("/sessions/{sid}/finish", _finish),
            web.delete("/sessions/{sid}", _discard),
            web.get("/health", _health),
        ]
    )
    return app


class GatewayServer:
    """Serves a :class:`Gateway` on ``host:port`` (0: any free port) in the running event loop, and reaps
    idle sessions every ``reap_every_s`` (default: a quarter of the session time-to-live).

    ``api_key`` (default ``$TURNGYM_API_KEY``) is the key every request but ``/health`` must carry; a
    ``host`` other than loopback without one raises :class:`ValueError` here, before anything listens.
    """

    def __init__(
        self,
        gateway: Gateway,
        host: str = "127.0.0.1",
        port: int = 0,
        reap_every_s: float | None = None,
        *,
        api_key: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        self.api_key = resolve_api_key(api_key)
        check_binding(host, self.api_key, what="the gateway")
        self.gateway = gateway
        self.host = host
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.reap_every_s = reap_every_s or max(gateway.limits.session_ttl_s / 4, 0.05)
        self._runner: web.AppRunner | None = None
        self._reaper: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def session_url(self, session_id: str) -> str:
        """The base URL an OpenAI client of session ``session_id`` uses."""
        return f"{self.url}/sessions/{session_id}/v1"

    async def start(self) -> str:
        # A client that disconnects cancels its request (and the engine call under it).
        app = make_app(self.gateway, api_key=self.api_key, max_body_bytes=self.max_body_bytes)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._reaper = asyncio.create_task(self._reap_forever())
        return self.url

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> GatewayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reap_every_s)
            self.gateway.reap()


# ---------------------------------------------------------------------------------------------- handlers
def _error(exc: GatewayError) -> web.Response:
    return web.json_response(exc.body(), status=exc.status)


def _guard(api_key: str | None) -> Any:
    """Middleware: the key check, then every refusal (aiohttp's own 404/405/413 included) as one JSON line."""

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        open_path = api_key is None or request.path in OPEN_PATHS
        if not open_path and not key_matches(request.headers.get("Authorization"), api_key):
            reason = "missing or wrong API key: send Authorization: Bearer <key>"
            return _error(GatewayError(401, reason, kind="authentication_error"))
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            detail = exc.text if exc.text and exc.text != f"{exc.status}: {exc.reason}" else ""
            return _error(GatewayError(exc.status, " ".join(f"{exc.reason} {detail}".split())[:500]))
        except (asyncio.CancelledError, ConnectionResetError):
            raise  # the client went away: nobody to answer
        except Exception as exc:
            logger.exception("gateway request %s %s failed", request.method, request.path)
            return _error(GatewayError(500, f"internal error: {type(exc).__name__}", kind="server_error"))

    return guard


async def _json_body(request: web.Request) -> Any:
    """The body as strict JSON (no NaN, Infinity or numbers beyond a double), or a 400."""
    raw = await request.read()
    try:
        return strict_json(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise GatewayError(400, f"the request body is not JSON: {' '.join(str(exc).split())[:200]}") from exc


async def _chat(request: web.Request) -> web.StreamResponse:
    gateway: Gateway = request.app[GATEWAY]
    session_id = request.match_info.get("sid") or request.headers.get("X-Session-Id")
    try:
        chat = parse_request(await _json_body(request))
        completion = await gateway.complete(session_id, chat)
    except GatewayError as exc:
        return _error(exc)
    created = int(time.time())
    reply_id = completion_id()
    if chat.stream:
        return await _stream(request, gateway, completion, reply_id, created, chat.include_usage)
    message: dict[str, Any] = {"role": "assistant", "content": completion.message["content"] or None}
    if completion.tool_calls:
        message["tool_calls"] = completion.tool_calls
    elif message["content"] is None:
        message["content"] = ""
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": completion.finish_reason}
    if chat.logprobs:
        choice["logprobs"] = {"content": _token_logprobs(gateway, completion)}
    body = {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": gateway.model_name,
        "choices": [choice],
        "usage": _usage(completion),
        "turngym": _provenance(completion),
    }
    return web.json_response(body)


async def _stream(
    request: web.Request, gateway: Gateway, completion: Completion, reply_id: str, created: int, usage: bool
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": reply_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": gateway.model_name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    await response.write(chunk({"role": "assistant", "content": ""}))
    if completion.message["content"]:
        await response.write(chunk({"content": completion.message["content"]}))
    if completion.tool_calls:
        calls = [{"index": i, **call} for i, call in enumerate(completion.tool_calls)]
        await response.write(chunk({"tool_calls": calls}))
    await response.write(chunk({}, completion.finish_reason, turngym=_provenance(completion)))
    if usage:
        body = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": gateway.model_name}
        body.update(choices=[], usage=_usage(completion))
        await response.write(f"data: {json.dumps(body)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _usage(completion: Completion) -> dict[str, Any]:
    sampled = len(completion.generation.output_ids)
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": sampled,
        "total_tokens": completion.prompt_tokens + sampled,
        "prompt_tokens_details": {"cached_tokens": completion.generation.cached_tokens},
    }


def _provenance(completion: Completion) -> dict[str, Any]:
    turn = completion.turn
    return {
        "session_id": completion.session_id,
        "segment": turn.segment,
        "request": turn.request,
        "policy_version": turn.policy_version,
        "completion_token_ids": list(completion.generation.output_ids),
    }


def _token_logprobs(gateway: Gateway, completion: Completion) -> list[dict[str, Any]]:
    entries = []
    for token_id, logprob in zip(completion.generation.output_ids, completion.generation.logprobs, strict=True):
        token = gateway.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        entries.append({"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []})
    return entries


async def _models(request: web.Request) -> web.Response:
    gateway: Gateway = request.app[GATEWAY]
    model = {"id": gateway.model_name, "object": "model", "created": 0, "owned_by": "turngym"}
    return web.json_response({"object": "list", "data": [model]})


_SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")  # it becomes a path segment of the session's base URL


async def _open(request: web.Request) -> web.Response:
    gateway: Gateway = request.app[GATEWAY]
    try:
        body = await _json_body(request) if request.can_read_body else {}
        if not isinstance(body, dict):
            raise GatewayError(400, "the body must be a JSON object")
        seed = body.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise GatewayError(400, "seed must be an integer", param="seed")
        session_id = body.get("session_id")
        if session_id is not None and not (isinstance(session_id, str) and _SESSION_ID.fullmatch(session_id)):
            raise GatewayError(400, "session_id must be 1-128 letters, digits, '.', '_' or '-'", param="session_id")
        session = gateway.open_session(
            session_id,
            group_id=str(body.get("group_id", "")),
            seed=seed,
            task=str(body.get("task", "gateway")),
        )
    except GatewayError as exc:
        return _error(exc)
    base = f"{request.scheme}://{request.host}"
    return web.json_response({"session_id": session.id, "base_url": f"{base}/sessions/{session.id}/v1"})


async def _record(request: web.Request) -> web.Response:
    try:
        session = request.app[GATEWAY].session(request.match_info["sid"])
    except GatewayError as exc:
        return _error(exc)
    return web.json_response(session.to_dict())


async def _finish(request: web.Request) -> web.Response:
    gateway: Gateway = request.app[GATEWAY]
    try:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise GatewayError(400, "the body must be a JSON object")
        reward = body.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise GatewayError(400, "reward must be a finite number", param="reward")
        turn_rewards = body.get("turn_rewards")
        if turn_rewards is not None and (
            not isinstance(turn_rewards, list)
            or not all(
                isinstance(r, int | float) and not isinstance(r, bool) and math.isfinite(r) for r in turn_rewards
            )
        ):
            raise GatewayError(400, "turn_rewards must be a list of finite numbers", param="turn_rewards")
        success = body.get("success")
        trajectories = gateway.finish(
            request.match_info["sid"], reward, turn_rewards, None if success is None else bool(success)
        )
    except GatewayError as exc:
        return _error(exc)
    return web.json_response({"trajectories": [t.to_dict() for t in trajectories]})


async def _discard(request: web.Request) -> web.Response:
    gateway: Gateway = request.app[GATEWAY]
    try:
        gateway.session(request.match_info["sid"])
    except GatewayError as exc:
        return _error(exc)
    gateway.discard(request.match_info["sid"])
    return web.json_response({"deleted": True})


async def _health(request: web.Request) -> web.Response:
    gateway: Gateway = request.app[GATEWAY]
    return web.json_response({"status": "ok", "sessions": len(gateway.sessions), **vars(gateway.stats)})
