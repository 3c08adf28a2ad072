"""OpenAI chat requests in, OpenAI chat responses out: validation, normalisation and the reply's shape.

A request is checked once, before any token is rendered, and every problem is a
:class:`GatewayError` carrying the HTTP status and OpenAI's error shape. Supported: ``messages``
(roles ``system``, ``developer`` (read as ``system``), ``user``, ``assistant``, ``tool``; contents as
strings, ``None`` or lists of text parts), ``tools`` (function tools), ``tool_choice`` ``auto`` or
``none``, ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``seed``,
``logprobs``, ``stream`` and ``stream_options.include_usage``, ``n = 1``. Refused with a 400 that
names the field: ``stop`` strings (cutting text after sampling would record tokens the reply does
not contain), ``n > 1``, images and other non-text parts, ``tool_choice`` naming a function.
``model`` is not checked: an agent written for another model keeps working, and replies carry the
served model's name.

Messages are compared in their *normalised* form (:func:`normalise_messages`): contents as strings,
tool calls as ``(name, arguments)`` with arguments parsed from JSON, call ids dropped. That is how the
gateway recognises its own earlier replies when an agent sends the conversation back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.parsers import parse_hermes, parse_openai_tool_calls, to_openai_tool_calls

__all__ = ["ChatRequest", "GatewayError", "normalise_messages", "parse_request", "reply_message"]

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


class GatewayError(Exception):
    """A request the gateway refuses: ``status`` is the HTTP status, ``kind`` OpenAI's error ``type``."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}


@dataclass(frozen=True)
class ChatRequest:
    """A validated ``/v1/chat/completions`` body; ``messages`` are normalised (module docstring)."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    use_tools: bool = True  # False for tool_choice="none": the schemas are shown, calls are not parsed
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    seed: int | None = None
    logprobs: bool = False
    stream: bool = False
    include_usage: bool = False


def parse_request(body: Any) -> ChatRequest:
    """Validate an OpenAI chat-completions body; raise :class:`GatewayError` (400) naming the bad field."""
    if not isinstance(body, Mapping):
        raise GatewayError(400, "the request body must be a JSON object")
    if body.get("n", 1) not in (1, None):
        raise GatewayError(400, "n must be 1: each request samples one reply", param="n")
    if body.get("stop") not in (None, [], ""):
        raise GatewayError(
            400,
            "stop strings are not supported: the gateway records exactly the tokens it returns, and cutting a "
            "reply's text after sampling would break that; end turns with the model's own stop token",
            param="stop",
        )
    tool_choice = body.get("tool_choice", "auto")
    if tool_choice not in ("auto", "none", None):
        raise GatewayError(400, "tool_choice must be 'auto' or 'none'", param="tool_choice")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, Mapping):
        raise GatewayError(400, "stream_options must be an object", param="stream_options")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return ChatRequest(
        messages=tuple(normalise_messages(body.get("messages"))),
        tools=tuple(_tools(body.get("tools"))),
        use_tools=tool_choice != "none",
        temperature=_number(body, "temperature", 1.0, low=0.0, high=2.0),
        top_p=_number(body, "top_p", 1.0, low=0.0, high=1.0, open_low=True),
        max_tokens=None if max_tokens is None else _positive_int(max_tokens, "max_tokens"),
        seed=None if body.get("seed") is None else _integer(body.get("seed"), "seed"),
        logprobs=bool(body.get("logprobs", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(stream_options.get("include_usage", False)),
    )


def normalise_messages(messages: Any) -> list[dict[str, Any]]:
    """Messages as ``{"role", "content": str}`` plus ``tool_calls`` (assistant, may be empty) and
    ``tool_call_id`` (tool); raises :class:`GatewayError` for anything else."""
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "messages must be a non-empty list", param="messages")
    normalised = []
    for index, message in enumerate(messages):
        param = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise GatewayError(400, f"{param} must be an object", param=param)
        role = _ROLES.get(message.get("role"))  # type: ignore[arg-type]
        if role is None:
            raise GatewayError(400, f"{param}.role must be one of {sorted(_ROLES)}", param=f"{param}.role")
        entry: dict[str, Any] = {"role": role, "content": _content(message.get("content"), f"{param}.content")}
        if role == "assistant":
            entry["tool_calls"] = _calls(message.get("tool_calls"), f"{param}.tool_calls")
        if role == "tool":
            call_id = message.get("tool_call_id")
            entry["tool_call_id"] = call_id if isinstance(call_id, str) else ""
        normalised.append(entry)
    return normalised


def reply_message(text: str, parse_tools: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The assistant message for a sampled ``text`` (normalised form) and its OpenAI ``tool_calls``.

    With ``parse_tools``, Hermes ``<tool_call>`` blocks become tool calls and the content is the text
    outside them; a reply with a malformed block keeps its whole text as content and calls nothing,
    so the agent sees what the model wrote.
    """
    if parse_tools:
        parsed = parse_hermes(text)
        if parsed.calls and not any(call.error for call in parsed.calls):
            calls = [{"name": c.name, "arguments": dict(c.arguments)} for c in parsed.calls]
            return {"role": "assistant", "content": parsed.content, "tool_calls": calls}, to_openai_tool_calls(
                parsed.calls
            )
    return {"role": "assistant", "content": text, "tool_calls": []}, []


def completion_id() -> str:
    return f"chatcmpl-{time.time_ns():x}"


# ---------------------------------------------------------------------------------------------- helpers
def _content(content: Any, param: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise GatewayError(400, f"{param}: only text parts are supported", param=param)
            texts.append(part["text"])
        return "".join(texts)
    raise GatewayError(400, f"{param} must be a string, null or a list of text parts", param=param)


def _calls(tool_calls: Any, param: str) -> list[dict[str, Any]]:
    if tool_calls in (None, []):
        return []
    if not isinstance(tool_calls, list):
        raise GatewayError(400, f"{param} must be a list", param=param)
    calls = parse_openai_tool_calls(tool_calls)
    for call in calls:
        if call.error:
            raise GatewayError(400, f"{param}: {call.error}", param=param)
    return [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools in (None, []):
        return []
    if not isinstance(tools, list):
        raise GatewayError(400, "tools must be a list", param="tools")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise GatewayError(400, f"tools[{index}] must be a function tool with a name", param=f"tools[{index}]")
    return [json.loads(json.dumps(tool)) for tool in tools]


def _number(body: Mapping[str, Any], key: str, default: float, *, low: float, high: float, open_low: bool = False):
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GatewayError(400, f"{key} must be a number", param=key)
    if not (low < value <= high if open_low else low <= value <= high):
        interval = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
        raise GatewayError(400, f"{key} must lie in {interval}, got {value}", param=key)
    return float(value)


def _integer(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise GatewayError(400, f"{key} must be an integer", param=key)
    return value


def _positive_int(value: Any, key: str) -> int:
    value = _integer(value, key)
    if value < 1:
        raise GatewayError(400, f"{key} must be >= 1, got {value}", param=key)
    return value


def tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tool list for a chat template that does not render ``tools`` itself (Hermes wording)."""
    lines = "\n".join(json.dumps(tool, ensure_ascii=False, sort_keys=True) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions. Write each call as JSON between <tool_call> and "
        '</tool_call>: <tool_call>{"name": <function name>, "arguments": <object>}</tool_call>. '
        f"The functions, one JSON schema per line:\n<tools>\n{lines}\n</tools>"
    )
