"""Sokoban rules and rewards on hand-made rooms, with the expected rewards derived in comments.

Rewards (gym-sokoban's): -0.1 per move, +1 per box that lands on a target, -1 per box that leaves one,
+10 when every box is on a target; an invalid turn also loses the format penalty (0.1 by default).
"""

from __future__ import annotations

import re

import pytest

from envs.sokoban import ACTIONS, Board, SokobanEnv, parse_xsb
from envs.sokoban.room import BLOCKED, PUSHED, WALKED, render_level

# One corridor: player, box, floor, target, floor.
CORRIDOR = """
#######
#@$ . #
#######
"""
# Two boxes in a row and two targets behind them.
TWO_IN_A_ROW = """
#######
#@$$..#
#######
"""
# A box on a target with an empty target behind it.
ON_TARGET = """
#######
#@*.$ #
#######
"""
# Two boxes; the first is one push from its target.
TWO_BOXES = """
#######
#@$.  #
#  .$ #
#######
"""
# One push from solved.
ONE_PUSH = """
#####
#@$.#
#####
"""
# An open room: the player at (2,2) with walls all around at distance 2.
OPEN = """
######
#    #
# @  #
#  $.#
######
"""


def play(level: str, **kwargs) -> SokobanEnv:
    env = SokobanEnv(**{"max_turns": None, **kwargs})
    env.reset(seed=0, options={"level": level})
    return env


# --------------------------------------------------------------------------------------------------
# The move rule (Board)
# --------------------------------------------------------------------------------------------------
def test_board_walks_pushes_and_blocks():
    board = Board(parse_xsb(CORRIDOR)[0])
    assert board.move("Up") == BLOCKED and board.player == 8  # a wall above: nothing moves
    assert board.move("Left") == BLOCKED
    assert board.move("Right") == PUSHED and board.player == 9 and board.boxes == {10}
    assert board.move("Left") == WALKED and board.player == 8 and board.boxes == {10}  # no pulls


def test_board_counts_boxes_on_targets():
    board = Board(parse_xsb(ON_TARGET)[0])
    assert board.boxes_on_target == 1
    board.move("Right")  # the box moves from one target to the other
    assert board.boxes_on_target == 1 and not board.solved


def test_board_render_uses_ragen_symbols():
    board = Board(parse_xsb(ON_TARGET)[0])
    assert board.render() == "#######\n#P√OX_#\n#######"
    board.move("Right")  # the player now stands on the first target
    assert board.render() == "#######\n#_S√X_#\n#######"


def test_render_level_draws_a_position_without_a_board():
    level = parse_xsb(ON_TARGET)[0]
    assert render_level(level) == Board(level).render()
    coloured = render_level(level, color=True)
    assert "\x1b[" in coloured and re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render_level(level)


def test_player_on_target_is_drawn_as_s():
    board = Board(parse_xsb("#####\n#+$ #\n# $.#\n#####")[0])
    assert board.render().splitlines()[1:3] == ["#SX_#", "#_XO#"]


# --------------------------------------------------------------------------------------------------
# Rewards of single moves
# --------------------------------------------------------------------------------------------------
def test_push_into_wall_is_a_move_that_costs_the_step_penalty():
    env = play("######\n#@ $ #\n#.   #\n######")
    env.step("Right || Right")  # walk, then push the box against the right wall
    observation, reward, terminated, truncated, info = env.step("Right")
    assert reward == -0.1  # the move happens (and costs), the box stays
    assert env.board.boxes == {10} and env.board.player == 9
    assert info["steps"] == 3 and info["pushes"] == 1
    assert "Right (blocked)" in observation
    assert not terminated and not truncated


def test_push_into_box_is_blocked():
    env = play(TWO_IN_A_ROW)
    _, reward, _, _, info = env.step("Right")
    assert reward == -0.1 and info["pushes"] == 0
    assert env.board.player == 8 and env.board.boxes == {9, 10}


def test_walking_into_a_wall_costs_the_step_penalty():
    env = play(CORRIDOR)
    _, reward, _, _, info = env.step("Up")
    assert reward == -0.1 and info["steps"] == 1 and info["action_is_valid"]


def test_push_onto_and_off_a_target():
    env = play(TWO_BOXES)
    _, reward, terminated, _, info = env.step("Right")
    assert reward == 0.9  # -0.1 + 1: a box lands on a target; the other box is still off its target
    assert info["boxes_on_target"] == 1 and not terminated
    _, reward, _, _, info = env.step("Right")
    assert reward == -1.1  # -0.1 - 1: the same box leaves the target
    assert info["boxes_on_target"] == 0


def test_moving_a_box_from_target_to_target_is_neutral():
    env = play(ON_TARGET)
    _, reward, _, _, info = env.step("Right")
    assert reward == -0.1 and info["boxes_on_target"] == 1 and info["pushes"] == 1


def test_completing_the_level_gives_ten_and_terminates():
    env = play(ONE_PUSH)
    observation, reward, terminated, truncated, info = env.step("Right")
    assert reward == 10.9  # -0.1 + 1 + 10
    assert terminated and not truncated and info["success"]
    assert "solved" in observation
    with pytest.raises(RuntimeError):
        env.step("Left")


# --------------------------------------------------------------------------------------------------
# Turns with several actions, limits
# --------------------------------------------------------------------------------------------------
def test_reward_of_a_turn_with_three_moves_is_exact():
    env = play(OPEN)
    _, reward, _, _, info = env.step("Up || Left || Down")
    assert reward == -0.3  # three walking moves; the sum is rounded, so no -0.30000000000000004
    assert info["actions_executed"] == ["Up", "Left", "Down"] and info["steps"] == 3


def test_execution_stops_when_the_level_is_solved_mid_turn():
    env = play(ONE_PUSH)
    observation, reward, terminated, _, info = env.step("Right || Left || Left")
    assert reward == 10.9 and terminated
    assert info["actions_executed"] == ["Right"] and info["actions_not_executed"] == 2
    assert "ended before your last 2" in observation


def test_step_limit_truncates():
    env = play(OPEN, max_steps=4)
    _, reward, terminated, truncated, info = env.step("Up || Left || Down || Right || Up")
    assert reward == -0.4 and truncated and not terminated
    assert info["actions_executed"] == ["Up", "Left", "Down", "Right"] and info["actions_not_executed"] == 1
    assert info["steps"] == 4 and not info["success"]


def test_solving_with_the_last_allowed_move_terminates_rather_than_truncates():
    env = play(ONE_PUSH, max_steps=1)
    _, _, terminated, truncated, _ = env.step("Right")
    assert terminated and not truncated


def test_turn_limit_truncates():
    env = play(OPEN, max_turns=2)
    assert env.step("Up")[3] is False
    _, _, terminated, truncated, _ = env.step("Down")
    assert truncated and not terminated


def test_action_cap_ignores_extra_actions_and_reports_them():
    env = play(OPEN, max_actions_per_turn=2)
    observation, reward, _, _, info = env.step("Up || Left || Down || Right")
    assert info["actions_executed"] == ["Up", "Left"] and info["actions_over_cap"]
    assert info["action_is_valid"] and reward == -0.2
    assert "Only the first 2 actions" in observation


# --------------------------------------------------------------------------------------------------
# Invalid turns
# --------------------------------------------------------------------------------------------------
def test_invalid_turn_costs_the_format_penalty_and_moves_nothing():
    env = play(OPEN, format_penalty=0.25)
    observation, reward, terminated, truncated, info = env.step("Jump over the box")
    assert reward == -0.25 and not info["action_is_valid"]
    assert info["steps"] == 0 and info["actions_executed"] == []
    assert "is not an action" in info["invalid_reason"]
    assert "Invalid action" in observation and "Answer with Up, Down, Left or Right" in observation
    assert not terminated and not truncated


def test_empty_turn_is_invalid():
    env = play(OPEN)
    _, reward, _, _, info = env.step("   ")
    assert reward == -1.0 and info["invalid_reason"] == "no action found"  # the default format penalty


def test_partially_invalid_turn_executes_the_actions_before_the_bad_token():
    env = play(OPEN)
    _, reward, _, _, info = env.step("Up || Jump || Right")
    assert info["actions_executed"] == ["Up"] and not info["action_is_valid"]
    assert reward == pytest.approx(-1.1)  # one move (-0.1) and the default format penalty (-1.0)


def test_require_answer_tag():
    env = play(OPEN, require_answer_tag=True)
    _, reward, _, _, info = env.step("Up")
    assert not info["action_is_valid"] and info["steps"] == 0 and reward == -1.0
    _, reward, _, _, info = env.step("<think>Left is a wall? No.</think><answer>Left || Down</answer>")
    assert info["action_is_valid"] and info["actions_executed"] == ["Left", "Down"] and reward == -0.2
    assert env.valid_actions() == [f"<answer>{a}</answer>" for a in ACTIONS]


def test_long_model_text_is_not_echoed():
    env = play(OPEN)
    observation, *_ = env.step("Up || " + "x" * 100_000)
    assert len(observation) < 1_000 and "x" * 50 not in observation
