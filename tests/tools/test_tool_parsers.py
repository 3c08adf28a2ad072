"""Tool-call parsers: Hermes/Qwen text and OpenAI tool_calls, hand cases and property tests."""

from __future__ import annotations

import json
import time

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tools.base import ToolCall
from tools.parsers import parse_hermes, parse_openai_tool_calls, render_hermes, to_openai_tool_calls


def _names(text: str) -> list[str]:
    return [call.name for call in parse_hermes(text).calls]


def test_one_call_and_the_text_around_it():
    parsed = parse_hermes('Let me look.\n<tool_call>\n{"name": "lookup", "arguments": {"key": "Bo"}}\n</tool_call>')
    assert parsed.calls == (ToolCall("lookup", {"key": "Bo"}, raw='{"name": "lookup", "arguments": {"key": "Bo"}}'),)
    assert parsed.content == "Let me look."


def test_several_calls_keep_their_order_and_a_malformed_one_gets_its_own_error():
    text = (
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {"x": 1,}}</tool_call>'
        '<TOOL_CALL >{"name": "c"}</tool_call >'
    )
    calls = parse_hermes(text).calls
    assert [c.name for c in calls] == ["a", "", "c"]
    assert calls[0].is_well_formed and calls[2].is_well_formed and calls[2].arguments == {}
    # the bad body is '{"name": "b", "arguments": {"x": 1,}}'; json stops at the '}' after the comma (character 36)
    assert calls[1].error.startswith("invalid JSON: Expecting property name enclosed in double quotes at character 36")
    assert '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>' in calls[1].error


def test_calls_inside_reasoning_are_ignored():
    text = '<think>maybe <tool_call>{"name": "a"}</tool_call></think><tool_call>{"name": "b"}</tool_call>'
    assert _names(text) == ["b"]
    # a thought cut off by the length limit runs to the end
    assert _names('<tool_call>{"name": "a"}</tool_call><think>then <tool_call>{"name": "b"}</tool_call>') == ["a"]
    # the template opened the think block in the prompt: everything before the first </think> is reasoning
    assert _names('plan <tool_call>{"name": "a"}</tool_call></think><tool_call>{"name": "b"}</tool_call>') == ["b"]
    assert parse_hermes("<think>x</think>  <answer>4</answer>").content == "<answer>4</answer>"


def test_argument_forms():
    assert parse_hermes('<tool_call>{"name": "f", "arguments": "{\\"q\\": 2}"}</tool_call>').calls[0].arguments == {
        "q": 2
    }
    assert parse_hermes('<tool_call>{"name": "f", "parameters": {"q": 3}}</tool_call>').calls[0].arguments == {"q": 3}
    nested = '<tool_call>{"function": {"name": "f", "arguments": {"q": 4}}}</tool_call>'
    assert parse_hermes(nested).calls[0].arguments == {"q": 4}
    assert parse_hermes('<tool_call>{"name": "f", "arguments": null}</tool_call>').calls[0].arguments == {}
    bad = parse_hermes('<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>').calls[0]
    assert bad.error == '"arguments" must be a JSON object of argument names to values, got list'
    bad = parse_hermes('<tool_call>{"name": "f", "arguments": "{oops"}</tool_call>').calls[0]
    assert bad.error.startswith('"arguments" is a string that is not valid JSON')


def test_malformed_blocks_say_what_is_wrong():
    def error(text: str) -> str:
        [call] = parse_hermes(text).calls
        return call.error

    assert error('<tool_call>["f"]</tool_call>').startswith("a tool call must be a JSON object, got list")
    assert error('<tool_call>{"arguments": {}}</tool_call>').startswith('the call has no "name"')
    assert error('<tool_call>{"name": ""}</tool_call>').startswith('the call has no "name"')
    assert error('<tool_call>{"name": "f"} and more</tool_call>').startswith("unexpected text after the JSON object")
    assert error('<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>').startswith("invalid JSON")
    assert error('<tool_call>{"name": "f", "arguments": {"x": ').startswith("invalid JSON")
    assert error("<tool_call>" + "[" * 100_000) == "the JSON is nested too deeply"


def test_unclosed_blocks_with_complete_json_are_calls():
    # engines that stop on "</tool_call>" drop the tag; a forgotten tag before the next call is tolerated
    assert _names('<tool_call>{"name": "a"}') == ["a"]
    assert _names('<tool_call>{"name": "a"}\n<tool_call>{"name": "b"}</tool_call>') == ["a", "b"]
    parsed = parse_hermes('<tool_call>{"name": "a"} <answer>5</answer>')
    assert [c.name for c in parsed.calls] == ["a"] and parsed.content == "<answer>5</answer>"


def test_a_closing_tag_inside_a_json_string_does_not_end_the_block():
    text = '<tool_call>{"name": "echo", "arguments": {"s": "</tool_call><tool_call>"}}</tool_call>'
    [call] = parse_hermes(text).calls
    assert call.arguments == {"s": "</tool_call><tool_call>"}


def test_stray_closing_tags_and_plain_text_give_no_calls():
    parsed = parse_hermes("no calls </tool_call> here")
    assert parsed.calls == () and parsed.content == "no calls  here"


def test_hostile_inputs_parse_in_linear_time():
    # Each hostile pattern at n and 4n repeats: linear parsing takes about 4x as long, quadratic 16x. Compared
    # with each other on the same machine (the fastest of 3 tries), not against a wall-clock bound that a
    # loaded machine misses; the 50 ms absolute slack covers patterns that parse in well under a millisecond.
    patterns = [
        lambda n: "<tool_call>" * (4 * n),
        lambda n: '<tool_call>{"name": "x"}' * (2 * n),
        lambda n: "<think>" * (4 * n),
        lambda n: '<tool_call>"' + 'x</tool_call><tool_call>"' * (2 * n),
        lambda n: "<tool_call>" + "[" * (8 * n),
        lambda n: "A" * (80 * n),
    ]

    def fastest(text: str) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            parse_hermes(text)
            times.append(time.perf_counter() - start)
        return min(times)

    for pattern in patterns:
        small, large = pattern(6_250), pattern(25_000)  # the largest as before: 100,000 tags, 2,000,000 characters
        assert fastest(large) < 8 * fastest(small) + 0.05, large[:40]


def test_openai_tool_calls():
    entries = [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": {"b": 2}}},
        {"id": "call_3", "type": "function", "function": {"name": "h", "arguments": "{bad"}},
        {"id": "call_4", "type": "retrieval", "function": {"name": "r"}},
        {"id": "call_5"},
        {"type": "function", "function": {"arguments": "{}"}},
    ]
    calls = parse_openai_tool_calls(entries)
    assert [(c.name, dict(c.arguments), c.id) for c in calls[:2]] == [
        ("f", {"a": 1}, "call_1"),
        ("g", {"b": 2}, "call_2"),
    ]
    assert calls[2].error.startswith('"arguments" is a string that is not valid JSON') and calls[2].name == "h"
    assert calls[3].error == "unsupported tool call type 'retrieval'"
    assert calls[4].error.startswith('a tool call needs a "function" object')
    assert calls[5].error == 'the call has no "name"'
    assert parse_openai_tool_calls(None) == () and parse_openai_tool_calls([]) == ()


def test_render_formats():
    text = render_hermes([("f", {"x": 1}), ToolCall("g", {})])
    expected = [
        '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>',
        '<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>',
    ]
    assert text == "\n".join(expected)
    assert to_openai_tool_calls([("f", {"x": 1})]) == [
        {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]


# --------------------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------------------
_TRICKY = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "<answer>", "{", '"', "\\", "\n"])
_STRINGS = st.text(max_size=20) | st.lists(_TRICKY | st.text(max_size=5), max_size=6).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _STRINGS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_STRINGS, children, max_size=4),
    max_leaves=8,
)
_NAMES = st.text(alphabet="abcXYZ_.-019", min_size=1, max_size=12).filter(lambda name: name.strip())
_CALLS = st.lists(st.tuples(_NAMES, st.dictionaries(_STRINGS, _JSON, max_size=5)), max_size=5)
_PROSE = st.text(max_size=40).filter(lambda t: "<" not in t)


@settings(max_examples=100, deadline=None)
@given(calls=_CALLS, before=_PROSE, after=_PROSE)
def test_rendered_hermes_calls_parse_back_exactly(calls, before, after):
    parsed = parse_hermes(before + render_hermes(calls) + after)
    assert [(c.name, c.arguments) for c in parsed.calls] == [(name, args) for name, args in calls]
    assert all(c.is_well_formed for c in parsed.calls)


@settings(max_examples=100, deadline=None)
@given(calls=_CALLS)
def test_openai_tool_calls_round_trip(calls):
    entries = json.loads(json.dumps(to_openai_tool_calls(calls)))  # through the wire
    parsed = parse_openai_tool_calls(entries)
    assert [(c.name, c.arguments) for c in parsed] == [(name, args) for name, args in calls]
    assert [c.id for c in parsed] == [f"call_{i}" for i in range(len(calls))]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_TRICKY | st.text(max_size=8), max_size=30).map("".join))
def test_any_text_parses_without_raising(text):
    parsed = parse_hermes(text)
    assert len(parsed.calls) <= text.lower().count("<tool_call")
    for call in parsed.calls:
        assert call.is_well_formed == (call.error == "")
        assert isinstance(call.arguments, dict) and len(call.raw) <= 200


@settings(max_examples=50, deadline=None)
@given(calls=_CALLS, reasoning=st.text(max_size=30).filter(lambda t: "<" not in t))
def test_calls_in_a_think_block_are_never_run(calls, reasoning):
    rendered = render_hermes(calls)
    assume("</think" not in rendered.lower())  # reasoning is not JSON-parsed: its first </think> ends it
    text = f"<think>{reasoning}{rendered}</think>"
    assert parse_hermes(text).calls == ()
