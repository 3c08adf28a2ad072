"""Built-in tools (units, dates, lookup, search, python) and the ToolBox that validates and runs calls."""

from __future__ import annotations

import asyncio
import json

import pytest

from sandbox import Limits
from tools import (
    CalculatorTool,
    DateTool,
    Document,
    LookupTool,
    PythonTool,
    SearchTool,
    Tool,
    ToolBox,
    ToolCall,
    ToolResult,
    UnitTool,
    tool_schema,
)
from tools.schema import SchemaError
from tools.units import UnitError, convert, known_units


def _call(tool: Tool, state=None, **arguments) -> ToolResult:
    return asyncio.run(tool.call(arguments, state))


# --------------------------------------------------------------------------------------------------
# Units
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1, "mi", "km", 1.609344),  # 5280 ft x 0.3048 m
        (1, "kg", "lb", 2.20462262185),  # 1 / 0.45359237, to 12 significant digits
        (212, "F", "C", 100.0),
        (32, "°F", "celsius", 0.0),
        (0, "K", "C", -273.15),
        (1, "gal", "l", 3.785411784),  # 231 in^3
        (1, "acre", "ha", 0.40468564224),
        (90, "km/h", "m/s", 25.0),
        (2, "weeks", "days", 14.0),
        (3, "Feet", "inches", 36.0),
    ],
)
def test_unit_conversions(value, source, target, expected):
    assert convert(value, source, target) == expected


def test_unit_errors_name_the_problem():
    with pytest.raises(UnitError, match=r"cannot convert length \(km\) to mass \(kg\)"):
        convert(1, "km", "kg")
    with pytest.raises(UnitError, match="unknown unit 'furlong'; known units are length: m, km"):
        convert(1, "furlong", "m")
    assert set(known_units()) == {"length", "mass", "time", "volume", "area", "speed", "temperature"}
    assert _call(UnitTool(), value=3, from_unit="km", to_unit="m").content == "3000 m"
    assert _call(UnitTool(), value=1e308, from_unit="km", to_unit="mm").content.startswith("Error: the result is too")


# --------------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"operation": "add_days", "date": "2024-02-28", "days": 2}, "2024-03-01"),  # 2024 is a leap year
        ({"operation": "add_days", "date": "2024-01-10", "days": -10}, "2023-12-31"),
        ({"operation": "add_months", "date": "2024-01-31", "months": 1}, "2024-02-29"),  # clamped
        ({"operation": "add_months", "date": "2024-03-15", "months": -15}, "2022-12-15"),
        ({"operation": "days_between", "date": "2024-01-01", "other_date": "2024-03-01"}, "60"),  # 31 + 29
        ({"operation": "days_between", "date": "2024-03-01", "other_date": "2024-01-01"}, "-60"),
        ({"operation": "years_between", "date": "1990-06-15", "other_date": "2020-06-14"}, "29"),
        ({"operation": "years_between", "date": "1990-06-15", "other_date": "2020-06-15"}, "30"),
        ({"operation": "years_between", "date": "2000-02-29", "other_date": "2001-02-28"}, "0"),
        ({"operation": "years_between", "date": "2000-02-29", "other_date": "2001-03-01"}, "1"),
        ({"operation": "weekday", "date": "2024-03-15"}, "Friday"),
    ],
)
def test_date_operations(arguments, expected):
    assert _call(DateTool(), **arguments).content == expected


def test_date_errors():
    assert _call(DateTool(), operation="weekday", date="15/03/2024").content == (
        "Error: date must be a date written YYYY-MM-DD, e.g. 2024-03-15, got '15/03/2024'"
    )
    assert _call(DateTool(), operation="add_days", date="2024-01-01").content == (
        "Error: add_days needs the argument(s) days"
    )
    result = _call(DateTool(), operation="add_days", date="9999-12-31", days=1)
    assert result.content == "Error: the date is out of range (years 1 to 9999)"


# --------------------------------------------------------------------------------------------------
# Lookup and search
# --------------------------------------------------------------------------------------------------
TABLES = {
    "cities": [{"name": "Bramholt", "population": 120000}, {"name": "Velmere", "population": 5000}],
    "people": [{"id": "p1", "name": "Ada"}],
}


def test_lookup_records_and_fields():
    tool = LookupTool(TABLES, key_fields={"people": "id"})
    assert json.loads(_call(tool, table="cities", key="  bramHOLT ").content) == TABLES["cities"][0]
    assert _call(tool, table="cities", key="Velmere", field="population").content == "5000"
    assert _call(tool, table="people", key="P1", field="name").content == "Ada"
    assert _call(tool, table="cities", key="Bramhold").content == (
        "Error: no record 'Bramhold' in table 'cities'; did you mean 'Bramholt'?"
    )
    assert _call(tool, table="cities", key="Velmere", field="area").content == (
        "Error: records of 'cities' have no field 'area'; fields: name, population"
    )
    assert tool.parameters["properties"]["table"]["enum"] == ["cities", "people"]


def test_lookup_rejects_duplicate_keys():
    with pytest.raises(ValueError, match="table 't' has two records with the key 'A'"):
        LookupTool({"t": [{"name": "a"}, {"name": "A"}]})


DOCS = [
    Document("Bramholt landmarks", "The tallest building in Bramholt is the Opal Tower, 312 metres tall."),
    Document("Velmere landmarks", "The river Sarn flows through Velmere; it is 410 km long."),
    Document("History of Kesdar Works", "Kesdar Works was founded by Ilsa Vantrell in Bramholt."),
]


def test_search_ranks_by_bm25_and_reports_no_match():
    tool = SearchTool(DOCS)
    hits = tool.search("tallest building Bramholt", k=3)
    # "tallest" and "building" occur only in the first document; "bramholt" also in the third
    assert [doc.title for doc, _ in hits] == ["Bramholt landmarks", "History of Kesdar Works"]
    assert hits[0][1] > hits[1][1] > 0
    result = _call(tool, query="river Velmere", k=1)
    assert result.content == "[1] Velmere landmarks\nThe river Sarn flows through Velmere; it is 410 km long."
    assert _call(tool, query="zebra the").content == "No document matches 'zebra the'; try other keywords."


# --------------------------------------------------------------------------------------------------
# ToolBox
# --------------------------------------------------------------------------------------------------
class CounterTool:
    """A stateful tool: counts its calls per trajectory and records released states."""

    name = "counter"
    description = "Counts"

    def __init__(self) -> None:
        self.parameters = {
            "type": "object",
            "properties": {"by": {"type": "integer", "minimum": 1}},
            "required": ["by"],
        }
        self.released: list[dict] = []

    def create_state(self, start: int = 0) -> dict:
        return {"count": start}

    async def call(self, arguments, state) -> ToolResult:
        state["count"] += arguments["by"]
        return ToolResult(str(state["count"]))

    def release_state(self, state) -> None:
        self.released.append(state)


def test_toolbox_validates_runs_in_order_and_keeps_state_per_trajectory():
    counter = CounterTool()
    assert isinstance(counter, Tool) and isinstance(CalculatorTool(), Tool)
    calls = [
        ToolCall("counter", {"by": 2}),
        ToolCall("counter", {"by": 0}),
        ToolCall("nope", {}),
        ToolCall("", {}, error="invalid JSON: ..."),
        ToolCall("counter", {"by": 3}),
    ]
    with ToolBox([counter, CalculatorTool()], {"counter": {"start": 10}}) as box:
        outcomes = box.run_sync(calls)
        assert [o.result.content for o in outcomes] == [
            "12",
            "Error: invalid arguments for counter: arguments.by must be >= 1, got 0",
            "Error: unknown tool 'nope'; available tools: calculator, counter",
            "Error: invalid JSON: ...",
            "15",
        ]
        assert [o.valid for o in outcomes] == [True, False, False, False, True]
        assert [o.name for o in outcomes][2:4] == ["nope", "invalid_call"]
    with ToolBox([counter]) as other:
        assert other.run_sync([ToolCall("counter", {"by": 1})])[0].result.content == "1"  # a fresh state
    assert counter.released == [{"count": 15}, {"count": 1}]


def test_toolbox_limits_calls_and_refuses_bad_setups():
    with ToolBox([CalculatorTool()]) as box:
        outcomes = box.run_sync([ToolCall("calculator", {"expression": "1"})] * 3, max_calls=2)
        assert outcomes[2].result.content == "Error: not run: at most 2 tool calls per turn; call again next turn"
    with pytest.raises(RuntimeError, match="after close"):
        box.run_sync([])
    with pytest.raises(ValueError, match="two tools are named 'calculator'"):
        ToolBox([CalculatorTool(), CalculatorTool()])
    with pytest.raises(ValueError, match=r"state options for unknown tools \['x'\]"):
        ToolBox([CalculatorTool()], {"x": {}})
    bad = CounterTool()
    bad.parameters = {"type": "object", "anyOf": []}
    with pytest.raises(SchemaError, match="tool 'counter' parameters uses unsupported keywords"):
        ToolBox([bad])


async def test_run_sync_works_inside_a_running_event_loop():
    # an async episode loop may call env.step, which calls run_sync
    with ToolBox([CalculatorTool()]) as box:
        assert box.run_sync([ToolCall("calculator", {"expression": "2*3"})])[0].result.content == "6"


def test_tool_schema_is_the_openai_function_format():
    schema = tool_schema(CalculatorTool())
    assert schema["type"] == "function" and schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"]["required"] == ["expression"]


# --------------------------------------------------------------------------------------------------
# Python through the sandbox (the process backend: the code here is the test's own, hence trusted)
# --------------------------------------------------------------------------------------------------
def test_python_tool_output_errors_and_limits():
    tool = PythonTool("process", limits=Limits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256))
    try:
        with ToolBox([tool]) as box:
            ok, error, hang = box.run_sync(
                [
                    ToolCall("python", {"code": "print(sum(range(10)))"}),
                    ToolCall("python", {"code": "1/0"}),
                    ToolCall("python", {"code": "while True: pass"}),
                ]
            )
        assert (ok.result.ok, ok.result.content) == (True, "45\n")
        assert not error.result.ok and error.result.content.startswith(
            "Error: the program ended with status runtime_error (exit code 1)."
        )
        assert "ZeroDivisionError: division by zero" in error.result.content
        assert hang.result.content == "Error: the program ended with status timeout (exit code None)."
    finally:
        tool.close()
