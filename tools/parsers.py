"""Reading tool calls from model output, and writing them (Hermes/Qwen text and OpenAI ``tool_calls``).

Hermes/Qwen text format, read leniently::

    [<think> ... </think>] text <tool_call>{"name": "f", "arguments": {...}}</tool_call> ... text

Rules of :func:`parse_hermes`:

* Every ``<tool_call>`` block is one call, in order; a turn may hold several. Tags are
  case-insensitive and may carry spaces before ``>``.
* Reasoning is not acted on: calls inside ``<think> ... </think>`` are ignored, an unclosed
  ``<think>`` runs to the end of the text (a cut-off thought), and when a ``</think>`` comes before
  any ``<think>`` (templates that open the think block in the prompt), everything before that first
  ``</think>`` is reasoning, calls included. Tags inside a call's JSON strings are not tags.
* The block's body is one JSON object ``{"name": str, "arguments": object}``. ``"arguments"`` may
  also be given as a JSON string holding an object, or under the key ``"parameters"``; a missing one
  means ``{}``. ``{"function": {"name": ..., "arguments": ...}}`` is read too. The object is decoded
  first, so a ``</tool_call>`` inside a JSON string does not end the block.
* A block whose JSON object is complete but not followed by ``</tool_call>`` (an engine that stops
  on the closing tag, a cut-off, a forgotten tag before the next ``<tool_call>``) is a call, and the
  text after the object is read as usual. Text between the object and its ``</tool_call>`` is an
  error; an unreadable body runs to the next ``</tool_call>`` (or the end). A stray
  ``</tool_call>`` is ignored.
* A malformed block becomes a :class:`~tools.base.ToolCall` with ``error`` set (invalid JSON, not an
  object, no name, arguments not an object, text after the object): each bad call gets its own
  readable error and never hides the other calls of the turn. ``NaN`` and ``Infinity`` are not JSON.
* ``content`` is the text outside calls and reasoning, stripped (where an ``<answer>`` would be).

The scan is linear in the text length, so megabytes of hostile text cost milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.base import ToolCall

__all__ = ["ParsedCalls", "parse_hermes", "parse_openai_tool_calls", "render_hermes", "to_openai_tool_calls"]

_TAG = re.compile(r"<(/?)(tool_call|think)\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_CALL_CLOSE = re.compile(r"\s*</tool_call\s*>", re.IGNORECASE)
_CALL_CLOSE_ANYWHERE = re.compile(r"</tool_call\s*>", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s*")
_FORMAT_HINT = 'write <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>'
_RAW_LIMIT = 200


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (use a number or a string)")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass(frozen=True)
class ParsedCalls:
    """The tool calls of one turn, in order, and the text around them (``content``)."""

    calls: tuple[ToolCall, ...]
    content: str

    @property
    def well_formed(self) -> tuple[ToolCall, ...]:
        return tuple(call for call in self.calls if call.is_well_formed)


def parse_hermes(text: str) -> ParsedCalls:
    """The ``<tool_call>`` blocks of ``text`` (rules in the module docstring)."""
    scanner = _Scanner(text)
    pos = 0
    calls: list[ToolCall] = []
    outside: list[str] = []
    opened_think = closed_think = False
    while True:
        tag = _TAG.search(text, pos)
        if tag is None:
            outside.append(text[pos:])
            break
        outside.append(text[pos : tag.start()])
        closing, kind = tag.group(1), tag.group(2).lower()
        if closing and kind == "think" and not (opened_think or closed_think):
            # A first </think> with no <think> before it: the template opened the block in the
            # prompt, so everything so far was reasoning.
            calls, outside = [], []
            closed_think = True
            pos = tag.end()
        elif closing:  # a stray closing tag
            pos = tag.end()
        elif kind == "think":
            opened_think = True
            end = _THINK_CLOSE.search(text, tag.end())
            pos = len(text) if end is None else end.end()
        else:
            call, pos = scanner.read_block(tag.end())
            calls.append(call)
    return ParsedCalls(tuple(calls), "".join(outside).strip())


class _Scanner:
    """Reads ``<tool_call>`` bodies; remembers the next closing tag so that many blocks stay linear."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._close: re.Match[str] | None = None
        self._no_close_from = len(text) + 1  # no closing tag starts at or after this position

    def next_close(self, pos: int) -> re.Match[str] | None:
        if pos >= self._no_close_from:
            return None
        if self._close is None or self._close.start() < pos:
            self._close = _CALL_CLOSE_ANYWHERE.search(self.text, pos)
            if self._close is None:
                self._no_close_from = pos
        return self._close

    def read_block(self, start: int) -> tuple[ToolCall, int]:
        """The call whose body starts at ``start`` (just after ``<tool_call>``) and where scanning resumes."""
        text = self.text
        body = _WHITESPACE.match(text, start).end()
        try:
            value, end = _DECODER.raw_decode(text, body)
        except (ValueError, RecursionError) as exc:
            close = self.next_close(start)
            if close is None:
                return _malformed(text[start:], _json_problem(exc, text, body)), len(text)
            return _malformed(text[start : close.start()], _json_problem(exc, text, body)), close.end()
        close = _CALL_CLOSE.match(text, end)
        if close is not None:
            return _call_from_value(value, text[start:end]), close.end()
        later = self.next_close(end)
        following = _TAG.search(text, end, later.start()) if later is not None else None
        if later is None or following is not None:
            # The object is complete and no closing tag belongs to it (cut off, or the engine
            # stopped on the closing tag): accept it; the text after it is read as usual.
            return _call_from_value(value, text[start:end]), end
        problem = f"unexpected text after the JSON object, before </tool_call>; {_FORMAT_HINT}"
        return _malformed(text[start : later.start()], problem), later.end()


def _json_problem(exc: BaseException, text: str, body: int) -> str:
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        column = exc.pos - body + 1
        return f"invalid JSON: {exc.msg} at character {column} of the call; {_FORMAT_HINT}"
    return f"invalid JSON: {exc}"


def _malformed(raw: str, error: str) -> ToolCall:
    return ToolCall(name="", arguments={}, error=error, raw=_shorten(raw))


def _call_from_value(value: Any, raw: str) -> ToolCall:
    """A call from a decoded JSON value, or a malformed call saying what is missing."""
    raw = _shorten(raw)
    if not isinstance(value, dict):
        return _malformed(raw, f"a tool call must be a JSON object, got {type(value).__name__}; {_FORMAT_HINT}")
    if "name" not in value and isinstance(value.get("function"), dict):
        value = {**value["function"], "id": value.get("id")}
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return _malformed(raw, f'the call has no "name" (a non-empty string); {_FORMAT_HINT}')
    arguments = value.get("arguments", value.get("parameters"))
    arguments, problem = _decode_arguments(arguments)
    call_id = value.get("id") if isinstance(value.get("id"), str) else None
    return ToolCall(name=name.strip(), arguments=arguments, id=call_id, error=problem, raw=raw)


def _decode_arguments(arguments: Any) -> tuple[dict[str, Any], str]:
    """Arguments as a dict ("" problem), or ``{}`` and a message saying why they are not usable."""
    if arguments is None:
        return {}, ""
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}, ""
        try:
            arguments = _DECODER.decode(arguments)
        except (ValueError, RecursionError) as exc:
            return {}, f'"arguments" is a string that is not valid JSON ({exc}); give an object'
    if not isinstance(arguments, dict):
        return {}, f'"arguments" must be a JSON object of argument names to values, got {type(arguments).__name__}'
    return arguments, ""


def _shorten(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _RAW_LIMIT else text[: _RAW_LIMIT - 3] + "..."


def parse_openai_tool_calls(tool_calls: Sequence[Mapping[str, Any]] | None) -> tuple[ToolCall, ...]:
    """Calls from an OpenAI assistant message's ``tool_calls``.

    Each entry is ``{"id": str, "type": "function", "function": {"name": str, "arguments": str}}``,
    ``arguments`` a JSON string holding an object (a dict is accepted too). A bad entry becomes a
    call with ``error`` set; ``None`` or ``[]`` gives no calls.
    """
    calls = []
    for entry in tool_calls or ():
        raw = _shorten(json.dumps(entry, default=str))
        if not isinstance(entry, Mapping) or not isinstance(entry.get("function"), Mapping):
            calls.append(_malformed(raw, 'a tool call needs a "function" object with "name" and "arguments"'))
            continue
        call_type = entry.get("type", "function")
        call_id = entry.get("id") if isinstance(entry.get("id"), str) else None
        if call_type != "function":
            calls.append(ToolCall("", {}, id=call_id, error=f"unsupported tool call type {call_type!r}", raw=raw))
            continue
        function = entry["function"]
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            calls.append(ToolCall("", {}, id=call_id, error='the call has no "name"', raw=raw))
            continue
        arguments, problem = _decode_arguments(function.get("arguments"))
        calls.append(ToolCall(name=name.strip(), arguments=arguments, id=call_id, error=problem, raw=raw))
    return tuple(calls)


def render_hermes(calls: Iterable[ToolCall | tuple[str, Mapping[str, Any]]]) -> str:
    """Calls as Hermes/Qwen text: one ``<tool_call>`` block per call, separated by new lines."""
    blocks = []
    for call in calls:
        name, arguments = (call.name, call.arguments) if isinstance(call, ToolCall) else call
        body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False, allow_nan=False)
        blocks.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(blocks)


def to_openai_tool_calls(calls: Iterable[ToolCall | tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Calls in the OpenAI ``tool_calls`` format (ids ``call_0``, ``call_1``, ... where a call has none)."""
    entries = []
    for index, call in enumerate(calls):
        if isinstance(call, ToolCall):
            name, arguments, call_id = call.name, call.arguments, call.id
        else:
            (name, arguments), call_id = call, None
        payload = json.dumps(dict(arguments), ensure_ascii=False, allow_nan=False)
        function = {"name": name, "arguments": payload}
        entries.append({"id": call_id or f"call_{index}", "type": "function", "function": function})
    return entries
