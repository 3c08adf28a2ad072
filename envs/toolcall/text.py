"""The tool-calling environment's texts: the system prompt and the rendered episode."""

from __future__ import annotations

from collections.abc import Sequence

from tools.base import Tool

__all__ = ["instructions", "render_episode"]

_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def _tool_line(tool: Tool) -> str:
    properties = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    arguments = ", ".join(name if name in required else f"{name}?" for name in properties)
    return f"- {tool.name}({arguments}): {tool.description}"


def instructions(tools: Sequence[Tool], max_calls_per_turn: int) -> str:
    """The system prompt: the job, the tools in one line each, the call and answer formats."""
    lines = [
        "You answer questions about a fictional world, and carry out small jobs in it, by calling tools.",
        "Nothing about this world is known outside the tools: look facts up, do not guess.",
        "",
        "Tools (arguments marked ? are optional):",
        *(_tool_line(tool) for tool in tools),
        "",
        "To call tools, write one block per call (several per message are fine, up to "
        f"{max_calls_per_turn}; they run in order):",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2 * (3 + 4)"}}</tool_call>',
        "The results come back in the next message. Calls inside <think></think> are not run.",
        "When you are done, reply with the final answer alone: <answer>42</answer>.",
        "Give numbers without units and rounded as asked; for jobs (transfers, stock changes) answer "
        "<answer>done</answer> once they are carried out. Your first answer is final.",
    ]
    return "\n".join(lines)


def render_episode(log: Sequence[str], turn: int, max_turns: int | None, *, color: bool = False) -> str:
    """The task and what happened so far, one block per turn."""
    limit = "no limit" if max_turns is None else f"{max_turns}"
    header = f"Turn {turn} of {limit}"
    if color:
        header = f"{_BOLD}{header}{_RESET}"
    lines = [header, log[0] if log else ""]
    for index, entry in enumerate(log[1:], start=1):
        prefix = f"[{index}] "
        lines.append(f"{_DIM}{prefix}{_RESET}{entry}" if color else prefix + entry)
    return "\n".join(lines)
