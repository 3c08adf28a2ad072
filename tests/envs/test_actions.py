"""The shared lenient action parser (envs/actions.py)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.actions import WordActions, extract_answer, parse_actions

MOVES = ("Up", "Down", "Left", "Right")


@pytest.mark.parametrize(
    ("text", "actions", "error"),
    [
        ("Up", ("Up",), ""),
        ("<answer>Up || Left</answer>", ("Up", "Left"), ""),
        ("<think>maybe Down?</think><answer>right</answer>", ("Right",), ""),
        ("<ANSWER> up | DOWN, left; right </Answer>", ("Up", "Down", "Left", "Right"), ""),
        ("Up.\nLeft!", ("Up", "Left"), ""),
        ("<answer>Down || Up</answer> and later <answer>Left</answer>", ("Left",), ""),  # the last block counts
        ("<answer>Down || Le", ("Down",), "'Le' is not an action"),  # cut off mid-answer
        ("<answer>Up || Jump || Left</answer>", ("Up",), "'Jump' is not an action"),  # stops at the first bad token
        ("", (), "no action found"),
        ("<answer></answer>", (), "no action found"),
        ("<think>Up</think>", (), "no action found"),
        ("I will go up", (), "'I will go up' is not an action"),
        ("<answer>Up Left  down</answer>", ("Up", "Left", "Down"), ""),  # space-separated moves
        ("Up || go left", ("Up",), "'go left' is not an action"),
    ],
)
def test_parse_actions(text, actions, error):
    parsed = parse_actions(text, MOVES, max_actions=5)
    assert (parsed.actions, parsed.error, parsed.is_valid) == (actions, error, not error)


def test_actions_beyond_the_cap_are_dropped_and_counted():
    parsed = parse_actions("Up || Up || Down || Down", MOVES, max_actions=2)
    assert (parsed.actions, parsed.over_cap, parsed.is_valid) == (("Up", "Up"), True, True)
    parsed = parse_actions("Up Down Left", MOVES, max_actions=2)
    assert (parsed.actions, parsed.over_cap) == (("Up", "Down"), True)
    assert not parse_actions("Up || Down", MOVES, max_actions=2).over_cap


def test_required_tag_and_aliases():
    assert parse_actions("Up", MOVES, max_actions=5, require_tag=True).error == "no <answer>...</answer> block found"
    assert parse_actions("<answer>Up</answer>", MOVES, max_actions=5, require_tag=True).actions == ("Up",)
    assert parse_actions("north || W", MOVES, max_actions=5, aliases={"north": "Up", "w": "Left"}).actions == (
        "Up",
        "Left",
    )
    with pytest.raises(ValueError, match="max_actions"):
        parse_actions("Up", MOVES, max_actions=0)


def test_long_invalid_tokens_are_shortened_in_the_error():
    parsed = parse_actions("x" * 10_000, MOVES, max_actions=5)
    assert parsed.error == f"'{'x' * 37}...' is not an action"


@pytest.mark.parametrize("text", ["<answer>" * 1_000_000, "||" * 2_000_000, "<think>" * 1_000_000, "Up " * 2_000_000])
def test_megabytes_of_text_are_parsed_in_linear_time(text):
    start = time.perf_counter()
    parsed = parse_actions(text, MOVES, max_actions=5)
    assert not parsed.actions or parsed.error
    assert time.perf_counter() - start < 5.0  # a quadratic scan of these inputs takes hours


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises_and_only_yields_vocabulary_words(text):
    parsed = parse_actions(text, MOVES, max_actions=3)
    assert set(parsed.actions) <= set(MOVES)
    assert len(parsed.actions) <= 3
    assert parsed.is_valid == (parsed.error == "")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(MOVES), min_size=1, max_size=8),
    st.sampled_from([" || ", "||", " | ", ", ", "\n"]),
    st.booleans(),
    st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30),
)
def test_well_formed_answers_round_trip(moves, separator, wrapped, thought):
    text = separator.join(m.lower() if i % 2 else m.upper() for i, m in enumerate(moves))
    if wrapped:
        text = f"<think>{thought}</think><answer>{text}</answer>"
    parsed = parse_actions(text, MOVES, max_actions=5)
    assert parsed.actions == tuple(moves[:5])
    assert parsed.over_cap == (len(moves) > 5)
    assert parsed.is_valid


@given(st.text(alphabet=st.characters(blacklist_characters="<>")))
def test_text_inside_answer_tags_is_extracted_verbatim(inner):
    assert extract_answer(f"noise <answer>{inner}</answer> tail") == inner


def test_word_actions_describe_parse_and_pack_one_format():
    fmt = WordActions(MOVES, max_actions_per_turn=2, require_answer_tag=True, example=("Up", "Left", "Down"))
    assert fmt.describe() == (
        "Answer with Up, Down, Left or Right (up to 2, separated by ||) inside <answer></answer>, "
        "e.g. <answer>Up || Left</answer>"
    )
    assert fmt.turns(["Up", "Up", "Left", "Down", "Right"]) == [
        "<answer>Up || Up</answer>",
        "<answer>Left || Down</answer>",
        "<answer>Right</answer>",
    ]
    assert [fmt.parse(turn).actions for turn in fmt.turns(["Up", "Left", "Down"])] == [("Up", "Left"), ("Down",)]
    assert fmt.rules() == [
        "- You may send up to 2 moves per turn; they are made in order.",
        "- You may think first inside <think></think>; only the <answer> block is read.",
    ]
    assert fmt.feedback(fmt.parse("<answer>Up</answer>"), executed=1) == []
    assert fmt.feedback(fmt.parse("<answer>Up || Up || Up</answer>"), executed=2) == [
        "Only the first 2 actions of a turn count; the others were ignored."
    ]
    assert fmt.feedback(fmt.parse("Up"), executed=0) == [
        f"Invalid action: no <answer>...</answer> block found. Nothing happened. {fmt.describe()}."
    ]
    single = WordActions(("Go",), max_actions_per_turn=1, require_answer_tag=False, example=("Go",))
    assert single.describe() == "Answer with Go, e.g. Go" and single.rules() == []
    with pytest.raises(ValueError, match="max_actions_per_turn"):
        WordActions(MOVES, max_actions_per_turn=0, require_answer_tag=False, example=("Up",))


def test_each_action_comes_with_the_span_of_the_word_that_named_it():
    text = '<think>Up? || no</think><answer> "up." || Left Down ||right</answer>'
    parsed = parse_actions(text, MOVES, max_actions=3)
    assert parsed.actions == ("Up", "Left", "Down") and parsed.over_cap
    # the spans skip the quotes and the full stop; "Left Down" is two words, two spans
    assert [text[a:b] for a, b in parsed.spans] == ["up", "Left", "Down"]
    assert parsed.spans[0] == (text.index("up."), text.index("up.") + 2)
    # without a tag, the think block is blanked, not removed: positions stay those of the text
    untagged = "<think>Left</think> Right | up"
    assert [untagged[a:b] for a, b in parse_actions(untagged, MOVES, max_actions=5).spans] == ["Right", "up"]
    # an invalid token stops the spans with the actions
    stopped = parse_actions("Up || go left || Down", MOVES, max_actions=5)
    assert stopped.actions == ("Up",) and stopped.spans == ((0, 2),)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(MOVES), min_size=1, max_size=8),
    st.lists(st.sampled_from([" || ", "||", " | ", ", ", "\n", " ", ";  "]), min_size=8, max_size=8),
    st.sampled_from(["", '"', ".", "*", "("]),
    st.booleans(),
    st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30),
)
def test_spans_point_at_the_words_in_order_and_apart(moves, separators, decoration, wrapped, thought):
    words = [f"{decoration}{m.lower() if i % 2 else m}{decoration}" for i, m in enumerate(moves)]
    text = "".join(w + s for w, s in zip(words, separators, strict=False))
    if wrapped:
        text = f"<think>{thought}</think><answer>{text}</answer>"
    parsed = parse_actions(text, MOVES, max_actions=5)
    assert parsed.actions == tuple(moves[:5])
    assert len(parsed.spans) == len(parsed.actions)
    assert [text[a:b].lower() for a, b in parsed.spans] == [m.lower() for m in parsed.actions]
    assert all(b <= c for (_, b), (c, _) in zip(parsed.spans, parsed.spans[1:], strict=False))
