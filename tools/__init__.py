"""Tools an agent can call: the Tool protocol, built-in tools and tool-call parsers.

    from tools import CalculatorTool, ToolBox, parse_hermes

    parsed = parse_hermes('<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>')
    with ToolBox([CalculatorTool()]) as box:
        [outcome] = box.run_sync(parsed.calls)       # outcome.result.content == "42"

The contract of a tool is in :mod:`tools.base`, the schema subset in :mod:`tools.schema`, the
parsing rules in :mod:`tools.parsers`.
"""

from tools.base import Stateless, Tool, ToolBox, ToolCall, ToolOutcome, ToolResult, tool_schema
from tools.calculator import CalculatorTool
from tools.dates import DateTool
from tools.lookup import LookupTool
from tools.parsers import ParsedCalls, parse_hermes, parse_openai_tool_calls, render_hermes, to_openai_tool_calls
from tools.python import PythonTool
from tools.schema import SchemaError, check_schema, validate
from tools.search import Document, SearchTool
from tools.units import UnitTool

__all__ = [
    "CalculatorTool",
    "DateTool",
    "Document",
    "LookupTool",
    "ParsedCalls",
    "PythonTool",
    "SchemaError",
    "SearchTool",
    "Stateless",
    "Tool",
    "ToolBox",
    "ToolCall",
    "ToolOutcome",
    "ToolResult",
    "UnitTool",
    "check_schema",
    "parse_hermes",
    "parse_openai_tool_calls",
    "render_hermes",
    "to_openai_tool_calls",
    "tool_schema",
    "validate",
]
