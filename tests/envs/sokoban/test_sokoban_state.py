"""SokobanEnv's state information (state_key, distance_to_goal) and difficulty option, by hand-derived values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.checker import check_text_env
from envs.sokoban import ACTIONS, SokobanEnv, generate_level, level_to_xsb, parse_xsb, solve
from envs.sokoban.generator import difficulty_range

CORRIDOR = "#######\n#@ $ .#\n#######"


def play(env: SokobanEnv, level: str, turns: list[str]) -> list[tuple[str, int | None]]:
    """(state_key, distance_to_goal) after the reset with ``level`` and after each turn."""
    _, info = env.reset(options={"level": level})
    states = [(info["state_key"], info["distance_to_goal"])]
    for turn in turns:
        *_, info = env.step(turn)
        states.append((info["state_key"], info["distance_to_goal"]))
    return states


# --------------------------------------------------------------------------------------------------
# Hand-built levels
# --------------------------------------------------------------------------------------------------
def test_corridor_distances_and_keys_by_hand():
    states = play(SokobanEnv(max_turns=None), CORRIDOR, ["Left", "Right", "Right", "Left", "Right || Right"])
    assert states == [
        # the player walks one cell, then pushes the box twice: 3 moves
        ("#######/#@-$-.#/#######", 3),
        ("#######/#@-$-.#/#######", 3),  # Left bumps into the wall: the same position (the move counter is no part)
        ("#######/#-@$-.#/#######", 2),
        ("#######/#--@$.#/#######", 1),  # one push left
        ("#######/#-@-$.#/#######", 2),  # walked back: a walk and a push
        ("#######/#---@*#/#######", 0),  # solved: the box on its target
    ]


def test_each_move_of_a_turn_reports_its_distance_and_where_it_was_written():
    env = SokobanEnv(max_turns=None)
    env.reset(options={"level": CORRIDOR})
    action = "Left || right ||  Right.|| Left"
    *_, info = env.step(action)
    # Left bumps into the wall (3), a walk (2), a push (1), walked back (2): the turn's distance is the last
    assert info["move_distances"] == [3, 2, 1, 2] and info["distance_to_goal"] == 2
    assert [action[a:b] for a, b in info["move_spans"]] == ["Left", "right", "Right", "Left"]
    # the box pushed into the corner: that move and every one after it have no distance
    env.reset(options={"level": "#####\n#.  #\n#@$ #\n#   #\n#####"})
    *_, info = env.step("Right || Up || Up")
    assert info["move_distances"] == [None, None, None]
    # moves the episode's end cut off are not reported; a turn with no move reports empty lists
    env.reset(options={"level": CORRIDOR})
    *_, terminated, _, info = env.step("Right || Right || Right || Left")
    assert terminated and info["move_distances"] == [2, 1, 0] and len(info["move_spans"]) == 3
    env.reset(options={"level": CORRIDOR})
    *_, info = env.step("jump")
    assert info["move_distances"] == [] and info["move_spans"] == []


def test_the_key_is_the_position_in_xsb():
    env = SokobanEnv()
    for seed in range(5):
        _, info = env.reset(seed=seed)
        rows = info["state_key"].split("/")
        assert len(rows) == env.level.rows and {len(row) for row in rows} == {env.level.cols}  # every cell
        assert parse_xsb("\n".join(rows))[0] == env.level


def test_two_boxes_by_hand():
    level = "######\n#@$.##\n#  $.#\n######"
    # start: Right pushes the top box home (1), Down walks below it (1), Right pushes the other home (1): 3.
    # after Down: Up back, then the same 3 (4), or push the bottom box first (Right, Right: 2) and walk round
    # Left, Left, Up (3) to push the top one (1): 6; so 4.
    states = play(SokobanEnv(max_turns=None), level, ["Down", "Up", "Right", "Down", "Right"])
    assert [distance for _, distance in states] == [3, 4, 3, 2, 1, 0]
    assert solve(parse_xsb(level)[0]).solution.num_moves == 3


def test_a_box_in_a_corner_has_no_distance():
    env = SokobanEnv(max_turns=None)
    states = play(env, "#######\n# $@ .#\n#     #\n#######", ["Left", "Down", "Right"])
    # start: walk round the box (Down, Left, Left, Up: 4) and push it Right three times: 7
    assert states[0][1] == 7
    assert [distance for _, distance in states[1:]] == [None, None, None]  # pushed into the top-left corner
    assert len({key for key, _ in states}) == 4 and env.oracle() is None


def test_an_unsolvable_level_from_options_has_no_distance():
    _, info = SokobanEnv().reset(options={"level": "#####\n#$  #\n# @.#\n#####"})
    assert info["distance_to_goal"] is None and info["state_key"] == "#####/#$--#/#-@.#/#####"


def test_equal_cells_in_other_rooms_give_other_keys():
    near, far = "######\n#@$. #\n######", "######\n#@$ .#\n######"  # the same player and box cells
    (near_key, near_distance), (far_key, far_distance) = (play(SokobanEnv(), level, [])[0] for level in (near, far))
    assert near_key != far_key and (near_distance, far_distance) == (1, 2)
    open_room, walled = "######\n#@$ .#\n#    #\n######", "######\n#@$ .#\n# #  #\n######"  # one wall more
    assert play(SokobanEnv(), open_room, [])[0][0] != play(SokobanEnv(), walled, [])[0][0]


def test_the_same_seed_and_actions_give_the_same_keys_in_fresh_instances():
    def states(seed: int) -> list:
        env = SokobanEnv(dim=8, num_boxes=2, max_turns=None)
        _, info = env.reset(seed=seed)
        record = [(info["state_key"], info["distance_to_goal"])]
        for action in ["Up || Left", "Down", "Right || Right", "Left || Up || Up"]:
            *_, info = env.step(action)
            record.append((info["state_key"], info["distance_to_goal"]))
        return record

    assert states(5) == states(5) and states(5)[0] != states(6)[0]


def test_the_oracle_lowers_the_distance_by_the_moves_it_makes():
    env = SokobanEnv(dim=8, num_boxes=2)
    for seed in range(10):
        _, info = env.reset(seed=seed)
        distance = info["distance_to_goal"]
        assert distance == info["optimal_moves"] == env.optimal_solution.num_moves
        while not env.episode_over:
            *_, info = env.step(env.oracle()[0])
            assert info["distance_to_goal"] == distance - len(info["actions_executed"])
            distance = info["distance_to_goal"]
        assert distance == 0 and info["success"]


def test_the_observation_shows_no_state_information():
    env = SokobanEnv()
    observation, info = env.reset(seed=0)
    assert info["state_key"] not in observation and "distance" not in observation.lower()
    assert "distance" not in env.instructions.lower()


@pytest.mark.parametrize("kwargs", [{}, {"dim": 8, "num_boxes": 2}, {"level_file": "tutorial.xsb"}])
def test_the_checker_verifies_the_state_information(kwargs):
    report = check_text_env(lambda: envs.make("sokoban", **kwargs), seeds=(0, 1, 2))
    assert report.ok and "state_info" in report.passed


# --------------------------------------------------------------------------------------------------
# Property: the distance is the solver's, and moves change it by the rules of an optimal distance
# --------------------------------------------------------------------------------------------------
_TURNS = st.lists(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=5).map(" || ".join), max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=_TURNS, seed=st.integers(0, 30), boxes=st.sampled_from([1, 2]))
def test_random_play_keeps_the_distance_exact(turns, seed, boxes):
    env = SokobanEnv(dim=7, num_boxes=boxes, max_turns=None)
    _, info = env.reset(seed=seed)
    for turn in turns:
        before, pushes_before = info["distance_to_goal"], info["pushes"]
        *_, terminated, _, info = env.step(turn)
        after, moves = info["distance_to_goal"], len(info["actions_executed"])
        assert len(info["move_distances"]) == moves and info["move_distances"][-1:] in ([], [after])
        exact = solve(env.board.snapshot()).solution
        assert after == (None if exact is None else exact.num_moves)
        assert (after == 0) == info["success"]
        if before is not None and after is not None:
            assert after >= before - moves  # no faster than one per move
            if info["pushes"] == pushes_before:
                assert after <= before + moves  # walking is reversible
        if before is None:
            assert after is None  # unsolvable stays unsolvable (no solver budget runs out in a 7x7 room)
        if terminated:
            break


# --------------------------------------------------------------------------------------------------
# The difficulty option
# --------------------------------------------------------------------------------------------------
def test_difficulty_range_of_the_move_budgets():
    assert SokobanEnv(max_turns=3).difficulty_range == (2, 15)  # the player never starts next to the box: 2 moves
    lowest, highest = SokobanEnv().difficulty_range
    # 25 moves fit 5 turns, but a 6x6 room rarely holds a one-box level of 20 moves or more
    assert lowest == 2 and 15 <= highest < 20
    assert SokobanEnv(max_moves=3).difficulty_range == (2, 3)


@pytest.mark.parametrize("kwargs", [{"max_turns": 3}, {}])
def test_every_difficulty_in_range_is_exact(kwargs):
    env = SokobanEnv(**kwargs)
    lowest, highest = env.difficulty_range
    for difficulty in range(lowest, highest + 1):
        for seed in (0, 1):
            _, info = env.reset(seed=seed, options={"difficulty": difficulty})
            assert info["optimal_moves"] == info["distance_to_goal"] == difficulty
            assert solve(env.level).solution.num_moves == difficulty


def test_difficulty_with_two_boxes():
    env = SokobanEnv(dim=8, num_boxes=2)
    lowest, highest = env.difficulty_range
    assert 3 <= lowest <= 4 and 20 <= highest <= 25
    for difficulty in (lowest, (lowest + highest) // 2, highest):
        _, info = env.reset(seed=0, options={"difficulty": difficulty})
        assert info["distance_to_goal"] == difficulty == solve(env.level).solution.num_moves


def test_the_seed_and_the_difficulty_fix_the_level():
    def level(seed: int, difficulty: int) -> str:
        env = SokobanEnv(max_turns=3)
        env.reset(seed=seed, options={"difficulty": difficulty})
        return level_to_xsb(env.level)

    assert level(3, 7) == level(3, 7)
    assert len({level(seed, 7) for seed in range(10)}) >= 8


def test_levels_without_the_option_are_the_ones_seeds_always_gave():
    # Pinned before the difficulty option existed: the generator draws the same numbers without it.
    pinned = {
        (6, 1, 0): "######\n### ##\n##   #\n#@ $ #\n# . ##\n######",
        (6, 1, 1): "######\n##@  #\n## $ #\n## # #\n##.  #\n######",
        (8, 2, 0): "########\n#  .   #\n# $ $. #\n#  # @ #\n###### #\n###### #\n########\n########",
    }
    for (dim, boxes, seed), xsb in pinned.items():
        env = SokobanEnv(dim=dim, num_boxes=boxes)
        env.reset(seed=seed)
        assert level_to_xsb(env.level) == xsb
        generated = generate_level(dim, dim, boxes, np.random.default_rng(seed), max_moves=25, min_moves=None)
        assert level_to_xsb(generated.level) == xsb


@pytest.mark.parametrize("difficulty", [1, 16, 0, -3, "5", 5.0, True])
def test_a_difficulty_out_of_range_names_the_range(difficulty):
    with pytest.raises(ValueError, match=r"difficulty must be an int in \[2, 15\] \(optimal moves; difficulty_range"):
        SokobanEnv(max_turns=3).reset(seed=0, options={"difficulty": difficulty})


def test_difficulty_needs_generated_levels():
    env = SokobanEnv(level_file="tutorial.xsb")
    assert not hasattr(env, "difficulty_range")
    with pytest.raises(AttributeError, match="level_file generates no levels"):
        _ = env.difficulty_range
    with pytest.raises(ValueError, match="needs generated levels: leave out level_file"):
        env.reset(seed=0, options={"difficulty": 3})
    with pytest.raises(ValueError, match="cannot be combined with a given level"):
        SokobanEnv().reset(options={"difficulty": 3, "level": CORRIDOR})


def test_generator_difficulty_range_bounds():
    # min_pushes=3 with one box: at least 3 pushes and a walk to the box
    lowest, highest = difficulty_range(7, 7, 1, min_pushes=3, max_moves=12)
    assert lowest >= 4 and highest <= 12
    with pytest.raises(ValueError, match="min_moves=5 exceeds max_moves=4"):
        generate_level(6, 6, 1, np.random.default_rng(0), min_moves=5, max_moves=4)
