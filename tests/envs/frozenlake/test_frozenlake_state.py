"""FrozenLakeEnv's state information (state_key, distance_to_goal) and the difficulty option."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.checker import check_text_env
from envs.frozenlake import FrozenLakeEnv
from envs.frozenlake.maps import distance_range, distances_to_goal, generate_map_at_distance

GYMNASIUM_4X4 = ["SFFF", "FHFH", "FFFH", "HFFG"]


def states(env: FrozenLakeEnv, turns: list[str], **reset) -> list[tuple[str, int | None]]:
    _, info = env.reset(**reset)
    record = [(info["state_key"], info["distance_to_goal"])]
    for turn in turns:
        *_, info = env.step(turn)
        record.append((info["state_key"], info["distance_to_goal"]))
    return record


def test_distances_and_keys_on_gymnasiums_map_by_hand():
    env = FrozenLakeEnv(desc=GYMNASIUM_4X4)
    record = states(env, ["Up", "Right", "Right || Down || Down", "Down || Right"])
    assert record == [
        # (0,0) to (3,3) around the holes at (1,1), (1,3), (2,3), (3,0): 3 down and 3 right, 6 moves
        ("SFFF/FHFH/FFFH/HFFG@0,0", 6),
        ("SFFF/FHFH/FFFH/HFFG@0,0", 6),  # into the border: the same state
        ("SFFF/FHFH/FFFH/HFFG@0,1", 5),
        ("SFFF/FHFH/FFFH/HFFG@2,2", 2),
        ("SFFF/FHFH/FFFH/HFFG@3,3", 0),
    ]
    assert env.episode_over


def test_a_hole_has_no_distance():
    env = FrozenLakeEnv(desc=GYMNASIUM_4X4)
    record = states(env, ["Right || Down"])
    assert record[-1] == ("SFFF/FHFH/FFFH/HFFG@1,1", None) and env.episode_over


def test_each_move_of_a_turn_reports_its_distance_and_where_it_was_written():
    env = FrozenLakeEnv(desc=GYMNASIUM_4X4)
    env.reset(seed=0)
    action = "Up || right ||  Right.|| Down"
    *_, info = env.step(action)
    # into the border (6), right (5), right (4), down to (1, 2) (3)
    assert info["move_distances"] == [6, 5, 4, 3] and info["distance_to_goal"] == 3
    assert [action[a:b] for a, b in info["move_spans"]] == ["Up", "right", "Right", "Down"]
    env.reset(seed=0)
    *_, info = env.step("Right || Down || Left")  # into the hole at (1, 1): the turn ends there
    assert info["move_distances"] == [5, None] and info["move_spans"] == [[0, 5], [9, 13]]


def test_a_map_without_a_path_has_no_distance():
    env = FrozenLakeEnv(desc=["SH", "HG"])
    assert states(env, []) == [("SH/HG@0,0", None)] and env.oracle() is None


def test_equal_positions_on_other_maps_give_other_keys():
    first = states(FrozenLakeEnv(desc=["SFF", "FFF", "FFG"]), [])[0]
    second = states(FrozenLakeEnv(desc=["SFF", "FHF", "FFG"]), [])[0]
    assert first[0] != second[0] and first[1] == second[1] == 4


def test_the_same_seed_and_actions_give_the_same_keys_in_fresh_instances():
    turns = ["Down || Right", "Right", "Up || Left || Down"]
    for slippery in (False, True):
        first = states(FrozenLakeEnv(size=6, is_slippery=slippery), turns, seed=3)
        assert first == states(FrozenLakeEnv(size=6, is_slippery=slippery), turns, seed=3)


def test_slippery_distance_is_the_shortest_path_from_where_the_player_is():
    env = FrozenLakeEnv(size=6, frozen_ratio=0.7, is_slippery=True, max_turns=None)
    for seed in range(20):
        env.reset(seed=seed)
        distance = distances_to_goal(env.lake)
        while not env.episode_over:
            *_, info = env.step(env.oracle()[0])
            expected = int(distance[env.position])
            assert info["distance_to_goal"] == (expected if expected >= 0 else None)
            assert info["state_key"].endswith(f"@{env.position[0]},{env.position[1]}")


def test_the_observation_shows_no_state_information():
    env = FrozenLakeEnv()
    observation, info = env.reset(seed=0)
    assert info["state_key"] not in observation and "distance" not in (observation + env.instructions).lower()


@pytest.mark.parametrize("kwargs", [{}, {"size": 8, "frozen_ratio": 0.6}, {"is_slippery": True}])
def test_the_checker_verifies_the_state_information(kwargs):
    report = check_text_env(lambda: envs.make("frozenlake", **kwargs), seeds=(0, 1, 2), raise_on_failure=False)
    assert "state_info" in report.passed, report.failures.get("state_info")
    assert FrozenLakeEnv(**kwargs).stochastic_dynamics == kwargs.get("is_slippery", False)


_TURNS = st.lists(
    st.lists(st.sampled_from(["Up", "Down", "Left", "Right"]), min_size=1, max_size=5).map(" || ".join), max_size=10
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=_TURNS, seed=st.integers(0, 50), slippery=st.booleans())
def test_a_move_changes_the_distance_by_at_most_one(turns, seed, slippery):
    # Tiles are reversible (every move, slipped or not, goes to a neighbour or stays), so |change| <= moves.
    env = FrozenLakeEnv(size=5, frozen_ratio=0.7, is_slippery=slippery, max_turns=None)
    _, info = env.reset(seed=seed)
    for turn in turns:
        before = info["distance_to_goal"]
        *_, terminated, truncated, info = env.step(turn)
        after, moves = info["distance_to_goal"], len(info["actions_executed"])
        assert (after == 0) == info["success"]
        assert after is None or abs(after - before) <= moves
        if after is None:
            assert env.lake.is_hole(env.position)  # generated maps are solvable: only a hole has no distance
        if terminated or truncated:
            break


# --------------------------------------------------------------------------------------------------
# The difficulty option
# --------------------------------------------------------------------------------------------------
def test_difficulty_range():
    assert FrozenLakeEnv().difficulty_range == (1, 6)  # opposite corners of a 4x4 map
    assert FrozenLakeEnv(size=[3, 5], frozen_ratio=0.3).difficulty_range == (1, 4)  # 5 tiles without holes
    assert distance_range((10, 10), 50) == (1, 18)


@pytest.mark.parametrize("kwargs", [{}, {"size": 8, "frozen_ratio": 0.6}, {"size": [3, 5], "frozen_ratio": 0.3}])
def test_every_difficulty_in_range_is_exact(kwargs):
    env = FrozenLakeEnv(**kwargs)
    lowest, highest = env.difficulty_range
    for difficulty in range(lowest, highest + 1):
        for seed in range(3):
            _, info = env.reset(seed=seed, options={"difficulty": difficulty})
            assert info["distance_to_goal"] == difficulty == distances_to_goal(env.lake)[env.lake.start]
            assert env.lake.num_holes() == env.num_holes


def test_the_seed_and_the_difficulty_fix_the_map():
    def lake(seed: int, difficulty: int) -> tuple[str, ...]:
        env = FrozenLakeEnv(size=6)
        env.reset(seed=seed, options={"difficulty": difficulty})
        return env.lake.rows

    assert lake(2, 5) == lake(2, 5) and len({lake(seed, 5) for seed in range(10)}) == 10


def test_the_carving_fallback_keeps_the_distance():
    for seed in range(20):
        lake = generate_map_at_distance(np.random.default_rng(seed), (6, 6), 25, 8, attempts=0)
        assert distances_to_goal(lake)[lake.start] == 8 and lake.num_holes() == 25


def test_maps_without_the_option_are_the_ones_seeds_always_gave():
    # Pinned before the difficulty option existed.
    assert FrozenLakeEnv().reset(seed=0)[1]["map"] == ["HFSH", "FFFF", "FFHG", "FFFF"]
    assert FrozenLakeEnv().reset(seed=1)[1]["map"] == ["FSFF", "FFFH", "FFHF", "GFHF"]


@pytest.mark.parametrize("difficulty", [0, 7, "3", 2.0, False])
def test_a_difficulty_out_of_range_names_the_range(difficulty):
    with pytest.raises(ValueError, match=r"difficulty must be an int in \[1, 6\] \(shortest path moves"):
        FrozenLakeEnv().reset(seed=0, options={"difficulty": difficulty})


def test_difficulty_needs_generated_maps():
    env = FrozenLakeEnv(desc=GYMNASIUM_4X4)
    assert not hasattr(env, "difficulty_range")
    with pytest.raises(ValueError, match="cannot be combined with a map given by desc"):
        env.reset(options={"difficulty": 2})
    with pytest.raises(ValueError, match="cannot be combined with a map given by desc"):
        FrozenLakeEnv().reset(options={"difficulty": 2, "desc": GYMNASIUM_4X4})
