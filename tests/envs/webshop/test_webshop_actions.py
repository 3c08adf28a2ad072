"""The action grammar: search[...] / click[...] read leniently, never raising (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.webshop.text import ParsedAction, parse_action

ARGUMENT = st.text(alphabet=st.characters(blacklist_characters="[]\n<>\r\x1c\x1d\x1e\x85\u2028\u2029"), max_size=40)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("search[Red Shoes]", ParsedAction("search", "red shoes")),
        ("Action: click[ Buy Now ]", ParsedAction("click", "buy now")),
        ("CLICK [< Prev]", ParsedAction("click", "< prev")),
        ("Thought: try search[a] first. Action: search[b]", ParsedAction("search", "b")),
        ("<think>click[x]</think>click[y]", ParsedAction("click", "y")),
        ("<answer>click[next >]</answer>", ParsedAction("click", "next >")),
        ("search[]", ParsedAction("search", "")),
        ("click[a\nb]", ParsedAction(error="no action found; write search[keywords] or click[value]")),
        ("reclick[x]", ParsedAction(error="no action found; write search[keywords] or click[value]")),
    ],
)
def test_examples(text, expected):
    assert parse_action(text) == expected


def test_answer_tag_required():
    assert parse_action("click[x]", require_answer_tag=True).error == "no <answer>...</answer> block found"
    assert parse_action("<answer>click[x]</answer>", require_answer_tag=True) == ParsedAction("click", "x")


@given(st.text(max_size=300))
def test_any_text_parses_without_raising(text):
    parsed = parse_action(text)
    assert (parsed.name in ("search", "click")) != bool(parsed.error)


@given(st.sampled_from(["search", "click", "Search", "CLICK"]), ARGUMENT, st.text(alphabet="ab .:", max_size=10))
def test_a_well_formed_action_reads_back(name, argument, prefix):
    parsed = parse_action(f"{prefix} {name}[{argument}]")
    assert parsed == ParsedAction(name.lower(), argument.strip().lower())
