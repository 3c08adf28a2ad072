"""The gateway's core, without HTTP: chat requests of sessions in, exact token records out.

For each request of a session (requests of one session run one at a time, in arrival order):

1. The messages are normalised (:mod:`agents.gateway.messages`) and turned into the messages the
   chat template renders: a reply the gateway gave earlier in the session is rendered as the text
   the model sampled; an assistant message the agent wrote itself with ``tool_calls`` becomes its
   text plus Hermes ``<tool_call>`` blocks; ``tool`` messages become ``user`` messages wrapped in
   ``<tool_response>`` when the template cannot render tool messages. When the template ignores
   ``tools``, the tool list is added to the system message.
2. The request is placed in a segment, first match wins:
   a. *message-level extension*: the request's conversation starts with everything a segment has
      rendered (its last reply included, in normalised form) and the template is append-only: the
      new ids are :meth:`~agents.chat.ChatRenderer.continuation_ids` after the segment's recorded
      ids, so sampled ids are never re-encoded;
   b. *token-level extension*: the rendering of the whole conversation starts with a segment's
      recorded ids (any template): the new ids are the rest of that rendering;
   c. otherwise a *new segment* whose prompt is that rendering (edited or compacted history, a
      template that strips earlier reasoning, a second conversation in the session).
   Segments are tried newest first, so interleaved sub-conversations each extend their own.
3. The engine samples from the segment's ids plus the new ids; the new ids (mask 0) and the sampled
   ids (mask 1, logprobs) are appended to the segment with the turn's provenance.

A request that fails (engine error, client gone, a bad request) changes nothing in the session.
Sessions idle for ``session_ttl_s`` are dropped by :meth:`Gateway.reap`; at most ``max_sessions``
are open at once, and a session holds at most ``max_segments`` segments.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.chat import ChatRenderer, ChatTemplateError
from agents.engines.base import Engine, Generation, SamplingParams
from agents.gateway.messages import ChatRequest, GatewayError, reply_message, tools_text
from agents.gateway.sessions import Segment, Session, TurnRecord
from agents.trajectory import Trajectory
from tools.parsers import render_hermes

__all__ = ["Completion", "Gateway", "GatewayLimits", "GatewayStats"]


@dataclass(frozen=True)
class GatewayLimits:
    """Bounds on what the gateway holds and samples. ``max_total_tokens`` bounds one segment (prompt plus
    everything appended); ``default_max_tokens`` is a reply's length when the request gives none."""

    max_total_tokens: int = 4096
    default_max_tokens: int = 512
    max_sessions: int = 4096
    max_segments: int = 64
    session_ttl_s: float = 600.0


@dataclass
class GatewayStats:
    requests: int = 0
    failed_requests: int = 0
    sessions_opened: int = 0
    sessions_finished: int = 0
    sessions_expired: int = 0
    segments_opened: int = 0
    message_extensions: int = 0
    token_extensions: int = 0

    def as_metrics(self, prefix: str = "gateway/") -> dict[str, float]:
        return {prefix + k: float(v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class Completion:
    """One answered request: the reply (normalised and as OpenAI ``tool_calls``), its ids and where it went."""

    message: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    text: str
    generation: Generation
    turn: TurnRecord
    session_id: str
    prompt_tokens: int

    @property
    def finish_reason(self) -> str:
        if self.tool_calls:
            return "tool_calls"
        return "length" if self.generation.finish_reason == "length" else "stop"


class Gateway:
    """Sessions of chat requests over one token-level engine (module docstring).

    ``tokenizer`` is the served model's; ``template_kwargs`` go to its chat template. ``policy_version``
    is stamped on each sampled turn: the owner sets it when it gives the engine new weights.
    ``sampling`` (training): when set, its temperature, top-p and seed replace the request's, and a
    reply is at most its ``max_new_tokens`` long, so the recorded logprobs are those of the
    distribution the learner scores (the rollout temperature), whatever the agent asks for.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        *,
        model_name: str = "turngym",
        limits: GatewayLimits | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        create_sessions: bool = True,
        sampling: SamplingParams | None = None,
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.limits = limits or GatewayLimits()
        self.template_kwargs = dict(template_kwargs or {})
        self.create_sessions = create_sessions
        self.sampling = sampling
        self.policy_version = 0
        self.stats = GatewayStats()
        self.sessions: dict[str, Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._renderers: dict[str, tuple[ChatRenderer, bool]] = {}

    # ---------------------------------------------------------------------------------------------- sessions
    def open_session(
        self,
        session_id: str | None = None,
        *,
        group_id: str = "",
        seed: int = 0,
        task: str = "gateway",
        sampling: SamplingParams | None = None,
        policy_version: int | None = None,
    ) -> Session:
        """Open a session (a new id when none is given); raises ``GatewayError`` 409/429. ``sampling`` and
        ``policy_version`` override the gateway's for this session's requests."""
        session_id = session_id or uuid.uuid4().hex
        if session_id in self.sessions:
            raise GatewayError(409, f"session {session_id!r} is already open", kind="conflict")
        if len(self.sessions) >= self.limits.max_sessions:
            self.reap()
            if len(self.sessions) >= self.limits.max_sessions:
                raise GatewayError(
                    429, f"{len(self.sessions)} sessions are open (max_sessions); finish some", kind="rate_limit"
                )
        session = Session(
            session_id, group_id=group_id, seed=seed, task=task, sampling=sampling, policy_version=policy_version
        )
        self.sessions[session_id] = session
        self._locks[session_id] = asyncio.Lock()
        self.stats.sessions_opened += 1
        return session

    def session(self, session_id: str) -> Session:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise GatewayError(404, f"no open session {session_id!r} (finished, expired or never opened)") from None

    def finish(
        self,
        session_id: str,
        reward: float,
        turn_rewards: Sequence[float] | None = None,
        success: bool | None = None,
    ) -> list[Trajectory]:
        """Close the session and return its trajectories (rewards: :mod:`agents.gateway.sessions`)."""
        session = self.session(session_id)
        if session.busy:
            raise GatewayError(409, f"session {session_id!r} has a request in flight", kind="conflict")
        try:
            trajectories = session.trajectories(
                float(reward), None if turn_rewards is None else [float(r) for r in turn_rewards], success
            )
        except (TypeError, ValueError) as exc:
            raise GatewayError(400, f"cannot finish session {session_id!r}: {exc}") from exc
        self.discard(session_id)
        self.stats.sessions_finished += 1
        return trajectories

    def discard(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        self._locks.pop(session_id, None)

    def reap(self, now: float | None = None) -> list[str]:
        """Drop the sessions idle for ``session_ttl_s`` with no request in flight; return their ids."""
        now = time.monotonic() if now is None else now
        expired = [
            sid for sid, s in self.sessions.items() if not s.busy and now - s.last_active > self.limits.session_ttl_s
        ]
        for session_id in expired:
            self.discard(session_id)
        self.stats.sessions_expired += len(expired)
        return expired

    # ---------------------------------------------------------------------------------------------- requests
    async def complete(self, session_id: str | None, request: ChatRequest) -> Completion:
        """Answer ``request`` in ``session_id`` (``None``: a one-request session that is not kept)."""
        self.stats.requests += 1
        ephemeral = session_id is None
        try:
            if ephemeral:
                session = Session(uuid.uuid4().hex)
                return await self._complete(session, request)
            if session_id not in self.sessions:
                if not self.create_sessions:
                    raise GatewayError(404, f"no open session {session_id!r}; open it before sending requests")
                self.open_session(session_id)
            session = self.sessions[session_id]
            async with self._locks[session_id]:
                if session_id not in self.sessions:
                    raise GatewayError(404, f"session {session_id!r} was closed while the request waited")
                session.busy += 1
                try:
                    return await self._complete(session, request)
                finally:
                    session.busy -= 1
                    session.last_active = time.monotonic()
        except BaseException:
            self.stats.failed_requests += 1
            raise

    async def _complete(self, session: Session, request: ChatRequest) -> Completion:
        tools_key = json.dumps(list(request.tools), sort_keys=True)
        renderer, renders_tools = self._renderer(tools_key, request.tools)
        template_messages = self._template_messages(session, request, renderer, renders_tools)
        segment, context_ids, kind = self._place(session, request, template_messages, renderer, tools_key)
        input_ids = (segment.token_ids if segment is not None else []) + context_ids
        room = self.limits.max_total_tokens - len(input_ids)
        if room < 1:
            raise GatewayError(
                400,
                f"the conversation is {len(input_ids)} tokens; the gateway's max_total_tokens is "
                f"{self.limits.max_total_tokens}",
                param="messages",
            )
        wanted = request.max_tokens or self.limits.default_max_tokens
        forced = session.sampling or self.sampling
        if forced is None:
            temperature, top_p, seed = request.temperature, request.top_p, request.seed
        else:
            temperature, top_p = forced.temperature, forced.top_p
            seed = _request_seed(forced.seed, session.id, session.requests)
            wanted = min(wanted, forced.max_new_tokens)
        sampling = SamplingParams(
            max_new_tokens=min(wanted, room),
            temperature=temperature,
            top_p=top_p,
            stop_token_ids=renderer.stop_token_ids,
            seed=seed,
        )
        affinity = f"{session.id}/{segment.index if segment is not None else len(session.segments)}"
        try:
            generation = await self.engine.generate(input_ids, sampling, affinity_key=affinity)
        except ValueError as exc:  # a prompt the engine cannot take (context limit)
            raise GatewayError(400, f"the engine refused the prompt: {exc}", param="messages") from exc
        except (asyncio.CancelledError, GatewayError):
            raise
        except Exception as exc:
            raise GatewayError(503, f"the engine failed: {exc}", kind="server_error") from exc
        if generation.finish_reason == "abort" or not generation.output_ids:
            raise GatewayError(
                503, "the engine gave up on the request (weights changing or shutting down)", kind="server_error"
            )
        # Nothing is recorded before this point: a request that failed leaves the session as it was.
        if segment is None:
            if len(session.segments) >= self.limits.max_segments:
                raise GatewayError(
                    400, f"session {session.id!r} already has {len(session.segments)} segments (max_segments)"
                )
            segment = session.new_segment(context_ids)
            context_ids = []
            self.stats.segments_opened += 1
        elif kind == "message":
            self.stats.message_extensions += 1
        else:
            self.stats.token_extensions += 1
        version = self.policy_version if session.policy_version is None else session.policy_version
        turn = segment.record(context_ids, generation, session.requests, version)
        session.requests += 1
        text = renderer.decode_action(generation.output_ids)
        message, tool_calls = reply_message(text, parse_tools=bool(request.tools) and request.use_tools)
        session.sampled_text[_key(message)] = text
        segment.messages = [*request.messages, message]
        segment.tools_key = tools_key
        segment.template_messages = [*template_messages, {"role": "assistant", "content": text}]
        return Completion(message, tool_calls, text, generation, turn, session.id, len(input_ids))

    # ---------------------------------------------------------------------------------------------- rendering
    def _renderer(self, key: str, tools: Sequence[Mapping[str, Any]]) -> tuple[ChatRenderer, bool]:
        """The renderer for this tool list (``key``: its JSON), and whether its template renders the tools itself."""
        if key not in self._renderers:
            try:
                renderer = ChatRenderer(
                    self.tokenizer,
                    tools=tools or None,
                    template_kwargs=self.template_kwargs,
                    allow_history_rewrite=True,
                )
            except ChatTemplateError as exc:
                raise GatewayError(
                    500, f"the served model's chat template cannot be used: {exc}", kind="server_error"
                ) from exc
            renders_tools = True
            if tools:
                probe = [{"role": "user", "content": "x"}]
                bare = ChatRenderer(self.tokenizer, template_kwargs=self.template_kwargs, allow_history_rewrite=True)
                renders_tools = renderer.template_text(probe, True) != bare.template_text(probe, True)
            self._renderers[key] = (renderer, renders_tools)
        return self._renderers[key]

    def _template_messages(
        self, session: Session, request: ChatRequest, renderer: ChatRenderer, renders_tools: bool
    ) -> list[dict[str, Any]]:
        rendered: list[dict[str, Any]] = []
        for message in request.messages:
            role, content = message["role"], message["content"]
            if role == "assistant":
                sampled = session.sampled_text.get(_key(message))
                if sampled is not None:
                    content = sampled
                elif message["tool_calls"]:
                    calls = render_hermes((c["name"], c["arguments"]) for c in message["tool_calls"])
                    content = f"{content}\n{calls}" if content else calls
            elif role == "tool" and not renderer.supports_tool_messages:
                role, content = "user", f"<tool_response>\n{content}\n</tool_response>"
            rendered.append({"role": role, "content": content})
        if request.tools and not renders_tools:
            block = tools_text(request.tools)
            if rendered[0]["role"] == "system":
                rendered[0] = {"role": "system", "content": f"{rendered[0]['content']}\n\n{block}"}
            else:
                rendered.insert(0, {"role": "system", "content": block})
        return rendered

    def _place(
        self,
        session: Session,
        request: ChatRequest,
        template_messages: list[dict[str, Any]],
        renderer: ChatRenderer,
        tools_key: str,
    ) -> tuple[Segment | None, list[int], str]:
        """(segment to extend or ``None`` for a new one, the ids to append or the new prompt, how)."""
        messages = list(request.messages)
        try:
            if renderer.append_only:
                for segment in reversed(session.segments):
                    n = len(segment.messages)
                    if segment.tools_key == tools_key and len(messages) > n and messages[:n] == segment.messages:
                        last = segment.last_turn
                        assert last is not None
                        ids = renderer.continuation_ids(
                            segment.template_messages,
                            template_messages[len(segment.template_messages) :],
                            segment.last_sampled(),
                            last.finish_reason,
                        )
                        return segment, ids, "message"
            full = renderer.prompt_ids(template_messages)
        except ChatTemplateError as exc:
            raise GatewayError(
                400, f"the chat template cannot render these messages: {exc}", param="messages"
            ) from exc
        for segment in reversed(session.segments):
            recorded = segment.token_ids
            if len(full) > len(recorded) and full[: len(recorded)] == recorded:
                return segment, full[len(recorded) :], "token"
        return None, full, "new"


def _request_seed(base_seed: int | None, session_id: str, request: int) -> int | None:
    """Each request's own sampling stream (as :func:`agents.episode.turn_seed` for episodes), or ``None``."""
    if base_seed is None:
        return None
    key = f"{base_seed}|{session_id}|{request}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def _key(message: Mapping[str, Any]) -> str:
    return json.dumps(
        {"content": message["content"], "tool_calls": message.get("tool_calls") or []},
        sort_keys=True,
        ensure_ascii=False,
    )
