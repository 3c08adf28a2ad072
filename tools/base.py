"""The tool contract: what a tool is, what a call returns, and how one trajectory's calls are run.

A tool is anything with a ``name``, a ``description``, a JSON schema of its arguments
(``parameters``, an ``"object"`` schema in the subset :mod:`tools.schema` checks) and four methods:

* ``create_state(**options)``: the tool's per-trajectory state (a bank's accounts, a warm sandbox),
  or ``None`` for a stateless tool. Called once when a trajectory starts.
* ``async call(arguments, state) -> ToolResult``: run one call whose arguments already passed the
  schema. It does not raise because of the arguments' values (a division by zero, an unknown city):
  such problems are results with ``ok=False`` and a message a model can act on. It raises only on
  programming or infrastructure errors.
* ``release_state(state)``: free what ``create_state`` made. Called once at the end, also after errors.

Tools that keep no state mix in :class:`Stateless`. :class:`ToolBox` holds a trajectory's tools and
their states, validates calls against the schemas and runs them; a problem with a call (unknown tool,
malformed text, arguments that break the schema) becomes an ``ok=False`` result marked ``valid=False``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tools.schema import check_schema, validate

__all__ = ["Stateless", "Tool", "ToolBox", "ToolCall", "ToolOutcome", "ToolResult", "tool_schema"]


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returns: ``content`` (text for the model), ``ok`` and numeric ``metrics``.

    ``ok=False`` means the call ran but failed (the content then explains why and what to do).
    """

    content: str
    ok: bool = True
    metrics: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **metrics: float) -> ToolResult:
        return cls(content=f"Error: {message}", ok=False, metrics=metrics)


@dataclass(frozen=True)
class ToolCall:
    """A tool call read from model output.

    ``error`` is empty for a well-formed call; otherwise it says what is wrong with the text (then
    ``name`` and ``arguments`` hold whatever could be read). ``id`` is the OpenAI call id, if any.
    ``raw`` is the call's source text (for messages), shortened to at most 200 characters.
    """

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None
    error: str = ""
    raw: str = ""

    @property
    def is_well_formed(self) -> bool:
        return not self.error


@runtime_checkable
class Tool(Protocol):
    """A callable tool (the guarantees are in this module's docstring)."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def create_state(self, **options: Any) -> Any: ...

    async def call(self, arguments: Mapping[str, Any], state: Any) -> ToolResult: ...

    def release_state(self, state: Any) -> None: ...


class Stateless:
    """Mix-in for tools without per-trajectory state."""

    def create_state(self, **options: Any) -> None:
        if options:
            raise TypeError(f"{type(self).__name__} keeps no state and takes no options, got {sorted(options)}")
        return None

    def release_state(self, state: Any) -> None:
        return None


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The tool in the OpenAI function format that chat templates take as ``tools=``."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
    }


@dataclass(frozen=True)
class ToolOutcome:
    """One call's fate: the call, its result, and whether the call itself was valid.

    ``valid`` is False when the call never ran: malformed text, an unknown tool, arguments that break
    the schema, or a call over the per-turn limit. A valid call may still fail (``result.ok`` False).
    """

    call: ToolCall
    result: ToolResult
    valid: bool

    @property
    def name(self) -> str:
        return self.call.name or "invalid_call"


class ToolBox:
    """A trajectory's tools and their states: validates and runs calls, releases states at the end.

    Use as ``with ToolBox(tools, options) as box: outcomes = box.run_sync(calls)``, or call
    :meth:`close` yourself. ``state_options`` maps a tool name to the options of its ``create_state``.
    """

    def __init__(self, tools: Iterable[Tool], state_options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
            check_schema(tool.parameters, where=f"tool {tool.name!r} parameters")
            self.tools[tool.name] = tool
        unknown = sorted(set(state_options or {}) - set(self.tools))
        if unknown:
            raise ValueError(f"state options for unknown tools {unknown}; tools: {sorted(self.tools)}")
        self.states: dict[str, Any] = {}
        try:
            for name, tool in self.tools.items():
                self.states[name] = tool.create_state(**dict((state_options or {}).get(name, {})))
        except BaseException:
            self.close()
            raise
        self._closed = False

    def schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(tool) for tool in self.tools.values()]

    def check(self, call: ToolCall) -> str:
        """Why ``call`` cannot run ("" when it can): malformed, unknown tool or arguments against the schema."""
        if call.error:
            return call.error
        tool = self.tools.get(call.name)
        if tool is None:
            return f"unknown tool {call.name!r}; available tools: {', '.join(sorted(self.tools))}"
        problems = validate(call.arguments, tool.parameters)
        if problems:
            return f"invalid arguments for {call.name}: " + "; ".join(problems)
        return ""

    async def run(self, calls: Sequence[ToolCall], *, max_calls: int | None = None) -> list[ToolOutcome]:
        """Run calls in order (one after another: stateful tools see earlier calls' effects)."""
        if self._closed:
            raise RuntimeError("ToolBox.run after close(); make a new ToolBox for a new trajectory")
        outcomes = []
        for index, call in enumerate(calls):
            if max_calls is not None and index >= max_calls:
                message = f"not run: at most {max_calls} tool calls per turn; call again next turn"
                outcomes.append(ToolOutcome(call, ToolResult.error(message), valid=False))
                continue
            problem = self.check(call)
            if problem:
                outcomes.append(ToolOutcome(call, ToolResult.error(problem), valid=False))
                continue
            result = await self.tools[call.name].call(call.arguments, self.states[call.name])
            outcomes.append(ToolOutcome(call, result, valid=True))
        return outcomes

    def run_sync(self, calls: Sequence[ToolCall], *, max_calls: int | None = None) -> list[ToolOutcome]:
        """:meth:`run` from synchronous code such as ``Env.step``.

        Inside a running event loop (an async episode loop calling ``step``) the calls run on a fresh
        loop in a helper thread, since a loop cannot be re-entered; the caller's loop blocks meanwhile.
        """
        coroutine = self.run(calls, max_calls=max_calls)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine)
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coroutine).result()

    def close(self) -> None:
        """Release every state created so far (idempotent)."""
        for name in list(self.states):
            self.tools[name].release_state(self.states.pop(name))
        self._closed = True

    def __enter__(self) -> ToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
