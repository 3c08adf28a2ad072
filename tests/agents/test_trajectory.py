"""Trajectory: invariants and a lossless JSON Lines round-trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.trajectory import Trajectory, read_trajectories, write_trajectories


def valid() -> Trajectory:
    return Trajectory(
        env_id="sokoban",
        seed=3,
        group_id="step0/g1",
        prompt_ids=[5, 6, 7],
        response_ids=[10, 11, 2, 20, 21, 12, 2],
        response_mask=[1, 1, 1, 0, 0, 1, 1],
        rollout_logprobs=[-0.1, -2.5, -0.01, 0.0, 0.0, -1e-9, -30.0],
        turn_rewards=[-0.1, 10.9],
        turn_end_indices=[2, 6],
        episode_return=10.8,
        success=True,
        messages=[{"role": "system", "content": "é 😀"}, {"role": "user", "content": "\x00"}],
        timings={"total_s": 0.25},
    )


def test_valid_record_passes_and_counts():
    t = valid()
    t.validate()
    assert t.num_sampled_tokens == 5 and t.num_tokens == 10 and t.trainable


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"response_mask": [1, 1, 1, 0, 0, 1]}, "same length"),
        ({"response_mask": [1, 1, 1, 0, 2, 1, 1]}, "other than 0 and 1"),
        ({"rollout_logprobs": [-0.1, -2.5, -0.01, -0.3, 0.0, -1e-9, -30.0]}, "0.0 where response_mask is 0"),
        ({"rollout_logprobs": [-0.1, 0.5, -0.01, 0.0, 0.0, -1e-9, -30.0]}, "<= 0"),
        ({"rollout_logprobs": [-0.1, math.nan, -0.01, 0.0, 0.0, -1e-9, -30.0]}, "<= 0"),
        ({"rollout_values": [0.5, 0.4, 0.3, 0.0, 0.0, 0.2]}, "rollout_values .* one per response id"),
        ({"rollout_values": [0.5, 0.4, 0.3, 0.1, 0.0, 0.2, 0.1]}, "rollout_values must be 0.0 where"),
        ({"rollout_values": [0.5, math.inf, 0.3, 0.0, 0.0, 0.2, 0.1]}, "rollout_values must be finite"),
        ({"turn_end_indices": [3, 6]}, "sampled token"),
        ({"turn_end_indices": [6, 2]}, "increasing"),
        ({"turn_rewards": [1.0]}, "same length"),
        ({"turn_state_keys": ["a"], "turn_distances_before": [1], "turn_distances_after": [0]}, "one per turn"),
        ({"turn_state_keys": ["a", "b"]}, "one per turn"),
        ({"turn_move_end_indices": [[0, 1]], "turn_move_distances": [[2, 1]]}, "one list per turn"),
        ({"turn_move_end_indices": [[0, 1], [5]], "turn_move_distances": [[2], [0]]}, "2 move end indices but 1"),
        ({"turn_move_end_indices": [[0, 3], [5]], "turn_move_distances": [[2, 1], [0]]}, "sampled token of that"),
        ({"turn_move_end_indices": [[1], [2]], "turn_move_distances": [[2], [0]]}, "sampled token of that"),
        ({"turn_move_end_indices": [[1, 0], [5]], "turn_move_distances": [[2, 1], [0]]}, "strictly increasing"),
        ({"termination": "crashed"}, "termination"),
        ({"termination": "error"}, "error is set"),
    ],
)
def test_broken_invariants_are_named(change, message):
    t = valid()
    for key, value in change.items():
        setattr(t, key, value)
    with pytest.raises(ValueError, match=message):
        t.validate()


def test_state_info_round_trips_and_old_records_without_it_still_load():
    t = valid()
    t.turn_state_keys, t.turn_distances_before, t.turn_distances_after = ["s0", "s1"], [4, None], [None, 0]
    t.initial_distance = 4
    t.validate()
    assert t.has_state_info and Trajectory.from_json(t.to_json()) == t
    old = valid().to_dict()
    for key in ("turn_state_keys", "turn_distances_before", "turn_distances_after", "initial_distance"):
        del old[key]
    assert not Trajectory.from_dict(old).has_state_info


def test_move_info_round_trips_and_old_records_without_it_still_load():
    t = valid()
    t.turn_move_end_indices, t.turn_move_distances = [[0, 2], []], [[3, None], []]
    t.validate()
    assert Trajectory.from_json(t.to_json()) == t
    old = valid().to_dict()
    del old["turn_move_end_indices"], old["turn_move_distances"]
    assert Trajectory.from_dict(old).turn_move_distances == []


def test_engine_values_round_trip_and_old_records_without_them_still_load():
    t = valid()
    t.rollout_values = [0.5, -0.25, 3.0, 0.0, 0.0, 1e-7, -2.0]
    t.validate()
    assert Trajectory.from_json(t.to_json()) == t
    old = t.to_dict()
    del old["rollout_values"]
    assert Trajectory.from_dict(old).rollout_values == []


def test_error_trajectories_are_not_trainable():
    t = valid()
    t.termination, t.error = "error", "RuntimeError: boom"
    t.validate()
    assert not t.trainable


floats = st.floats(allow_nan=False, allow_infinity=False)
logprobs = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    mask=st.lists(st.integers(0, 1), max_size=40),
    data=st.data(),
    text=st.text(),
    reward=floats,
)
def test_json_round_trip_is_lossless(mask, data, text, reward):
    n = len(mask)
    sampled = [i for i, m in enumerate(mask) if m]
    t = Trajectory(
        env_id=text,
        seed=data.draw(st.integers(-(2**63), 2**63 - 1)),
        group_id=text[::-1],
        prompt_ids=data.draw(st.lists(st.integers(0, 2**31), max_size=10)),
        response_ids=data.draw(st.lists(st.integers(0, 2**31), min_size=n, max_size=n)),
        response_mask=mask,
        rollout_logprobs=[data.draw(logprobs) if m else 0.0 for m in mask],
        turn_rewards=[reward] * min(len(sampled), 2),
        turn_end_indices=sampled[:2],
        episode_return=reward,
        messages=[{"role": "user", "content": text}],
        metrics={"x": reward},
    )
    t.validate()
    line = t.to_json()
    assert "\n" not in line
    assert Trajectory.from_json(line) == t


def test_jsonl_file_round_trip(tmp_path):
    path = tmp_path / "runs" / "trajectories.jsonl"
    first, second = valid(), valid()
    second.seed = 4
    assert write_trajectories(path, [first]) == 1
    assert write_trajectories(path, [second]) == 1  # appends
    assert list(read_trajectories(path)) == [first, second]
    write_trajectories(path, [second], append=False)
    assert list(read_trajectories(path)) == [second]


def test_reading_a_foreign_record_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(valid().to_json() + "\n\n" + '{"env_id": "x", "seed": 1, "group_id": "", "reward": 2}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:3: .*unknown Trajectory fields \['reward'\]"):
        list(read_trajectories(path))


def test_non_finite_return_cannot_be_written():
    t = valid()
    t.episode_return = math.inf
    with pytest.raises(ValueError, match="not finite"):
        t.to_json()
