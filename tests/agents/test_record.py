"""EpisodeRecord: lossless JSON round-trip, derived fields checked on reading, JSONL append."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.record import TERMINATION_REASONS, EpisodeRecord, append_jsonl, read_jsonl


def make_record(**changes) -> EpisodeRecord:
    fields = dict(
        env_id="sokoban",
        env_options={"dim": 6, "num_boxes": 1, "level_file": None, "size": [4, 5]},
        seed=3,
        agent="human",
        messages=[
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "#P_#"},
            {"role": "assistant", "content": "Right"},
            {"role": "user", "content": "#_P#"},
        ],
        actions=["Right"],
        rewards=[-0.1],
        action_is_valid=[True],
        success=False,
        terminated=False,
        truncated=True,
        termination_reason="truncated",
        metrics={"boxes_on_target": 0.0},
    )
    fields.update(changes)
    return EpisodeRecord(**fields)


def test_to_json_is_one_line_with_derived_fields():
    # A lone surrogate is what a terminal's undecodable byte becomes; it must survive too.
    record = make_record(actions=["a", "b\nc \udcff é"], rewards=[0.1, 0.2], action_is_valid=[True, False])
    line = record.to_json()
    assert "\n" not in line
    data = json.loads(line)
    assert data["num_turns"] == 2
    assert data["return"] == pytest.approx(0.3)
    assert data["termination_reason"] == "truncated"
    assert EpisodeRecord.from_json(line) == record


def test_from_json_rejects_inconsistent_or_unknown_fields():
    data = json.loads(make_record().to_json())
    with pytest.raises(ValueError, match="num_turns"):
        EpisodeRecord.from_json(json.dumps({**data, "num_turns": 5}))
    with pytest.raises(ValueError, match="return"):
        EpisodeRecord.from_json(json.dumps({**data, "return": 7.0}))
    with pytest.raises(ValueError, match="unknown"):
        EpisodeRecord.from_json(json.dumps({**data, "colour": "red"}))
    with pytest.raises(ValueError, match="one entry per turn"):
        make_record(rewards=[])
    with pytest.raises(ValueError, match="termination_reason"):
        make_record(termination_reason="bored")


def test_append_and_read_jsonl(tmp_path):
    path = tmp_path / "deep" / "folder" / "episodes.jsonl"
    first, second = make_record(), make_record(seed=4, termination_reason="abandoned", truncated=False)
    append_jsonl(path, first)
    append_jsonl(path, second)
    assert read_jsonl(path) == [first, second]
    assert not second.finished and first.finished


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3),
    max_leaves=8,
)


@st.composite
def records(draw) -> EpisodeRecord:
    turns = draw(st.integers(0, 6))
    finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
    return EpisodeRecord(
        env_id=draw(st.text(min_size=1)),
        env_options=draw(st.dictionaries(st.text(), json_values, max_size=4)),
        seed=draw(st.integers(0, 2**63)),
        agent=draw(st.sampled_from(["human", "oracle", "random"])),
        messages=draw(
            st.lists(
                st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text()})
            )
        ),
        actions=draw(st.lists(st.text(), min_size=turns, max_size=turns)),
        rewards=draw(st.lists(st.floats(-1e6, 1e6), min_size=turns, max_size=turns)),
        action_is_valid=draw(st.lists(st.booleans(), min_size=turns, max_size=turns)),
        success=draw(st.booleans()),
        terminated=draw(st.booleans()),
        truncated=draw(st.booleans()),
        termination_reason=draw(st.sampled_from(TERMINATION_REASONS)),
        metrics=draw(st.dictionaries(st.text(), finite, max_size=3)),
    )


@settings(max_examples=150, deadline=None)
@given(records())
def test_round_trip_is_lossless(record):
    line = record.to_json()
    assert "\n" not in line
    assert EpisodeRecord.from_json(line) == record
