"""Progress shaping and GiGPO's step-level groups (trainer.algos.credit), on hand-derived values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from trainer.algos.credit import (
    move_advantages,
    move_values_to_tokens,
    progress_potential,
    progress_shaping,
    step_group_advantages,
    stop_advantage,
    turn_returns,
    turn_values_to_tokens,
)


def test_shaping_pays_progress_and_charges_a_lost_level():
    # coef 0.5, gamma 1: F = 0.5 * (d_before - d_after); 3 -> 2 pays 0.5, 2 -> 2 nothing, 2 -> 0 pays 1.0
    assert progress_shaping([3, 2, 2], [2, 2, 0], coef=0.5, unsolvable_distance=10) == [0.5, 0.0, 1.0]
    # a box pushed into a corner: Phi goes from -2 to -10, F = 1 * (-10 - (-2)) = -8
    assert progress_shaping([2], [None], coef=1.0, unsolvable_distance=10) == [-8.0]
    # gamma 0.9: 0.9 * (-2) - (-3) = 1.2
    assert progress_shaping([3], [2], coef=1.0, gamma=0.9, unsolvable_distance=10) == pytest.approx([1.2])
    assert progress_potential(None, 7) == -7.0 and progress_potential(4, 7) == -4.0
    with pytest.raises(ValueError, match="distances"):
        progress_shaping([1, 2], [1], coef=1.0, unsolvable_distance=5)


def test_a_zero_end_gives_the_last_position_potential_zero():
    # coef 0.5: 3 -> 2 pays 0.5 as before; the last turn 2 -> 2 ends the episode: 0.5 * (0 - (-2)) = 1.0
    assert progress_shaping([3, 2], [2, 2], coef=0.5, unsolvable_distance=10, zero_end=True) == [0.5, 1.0]
    # ending lost costs nothing more than ending anywhere else: 2 -> unsolvable, last turn, 1 * (0 - (-2)) = 2
    assert progress_shaping([2], [None], coef=1.0, unsolvable_distance=10, zero_end=True) == [2.0]
    # gamma 0.9 at the end: 0.9 * 0 - (-3) = 3
    assert progress_shaping([3], [2], coef=1.0, gamma=0.9, unsolvable_distance=10, zero_end=True) == [3.0]
    assert progress_shaping([], [], coef=1.0, unsolvable_distance=10, zero_end=True) == []


distances = st.one_of(st.none(), st.integers(min_value=0, max_value=30))


@given(st.lists(distances, min_size=1, max_size=8), st.floats(min_value=0.0, max_value=2.0))
def test_undiscounted_shaping_telescopes_to_the_first_and_last_potential(path, coef):
    # a path of positions d_0, d_1, ..., d_n: turn k goes from d_k to d_{k+1}
    before, after = path[:-1], path[1:]
    terms = progress_shaping(before, after, coef=coef, unsolvable_distance=20)
    expected = coef * (progress_potential(path[-1], 20) - progress_potential(path[0], 20)) if terms else 0.0
    assert math.isclose(sum(terms), expected, abs_tol=1e-9)


def test_turn_returns_discount_later_turns():
    # R_2 = 10; R_1 = -0.2 + 0.5 * 10 = 4.8; R_0 = -0.1 + 0.5 * 4.8 = 2.3
    assert turn_returns([-0.1, -0.2, 10.0], 0.5) == pytest.approx([2.3, 4.8, 10.0])
    assert turn_returns([], 0.9) == []


def test_step_groups_compare_turns_from_the_same_position_only():
    returns = torch.tensor([1.0, 3.0, 5.0, 7.0, 2.0], dtype=torch.float64)
    keys = ["a", "a", "b", None, "a"]
    # group a = {1, 3, 2}: mean 2 -> -1, +1, 0; b and None are groups of one -> 0
    centred = step_group_advantages(returns, keys, normalize_std=False)
    assert centred.tolist() == [-1.0, 1.0, 0.0, 0.0, 0.0]
    # unbiased std of {1, 3, 2} is 1, so the normalised values are the same up to eps
    normalised = step_group_advantages(returns, keys, normalize_std=True)
    assert normalised.tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0, 0.0], abs=1e-5)
    # two None keys are never one group, even with different returns
    assert step_group_advantages(torch.tensor([0.0, 1.0]), [None, None]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="state keys"):
        step_group_advantages(torch.tensor([1.0]), ["a", "b"])


def test_turn_values_land_on_each_turns_sampled_tokens():
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 0], [0, 0, 1, 0, 1, 0, 0, 0]], dtype=torch.float32)
    # row 0: turn 0 ends at column 2, turn 1 at 6; row 1: one turn ending at 2, a sampled token at 4 owned by no turn
    out = turn_values_to_tokens([[2.0, -1.0], [0.5]], [[2, 6], [2]], mask)
    assert out.tolist() == [[0, 2, 2, 0, 0, -1, -1, 0], [0, 0, 0.5, 0, 0, 0, 0, 0]]
    with pytest.raises(ValueError, match="turn ends"):
        turn_values_to_tokens([[1.0]], [[1, 2]], mask[:1])


@given(st.lists(distances, min_size=2, max_size=8), st.floats(min_value=0.0, max_value=2.0))
def test_a_zero_end_makes_every_episode_of_a_level_earn_the_same_shaping(path, coef):
    # whatever the path, the total is -coef * Phi(first): a function of the level alone (Ng et al.'s invariance)
    terms = progress_shaping(path[:-1], path[1:], coef=coef, unsolvable_distance=20, zero_end=True)
    assert math.isclose(sum(terms), -coef * progress_potential(path[0], 20), abs_tol=1e-9)


def test_a_moves_optimal_advantage_is_zero_for_an_optimal_move_and_charges_the_rest():
    # from 5: to 4 is optimal (5 - 4 - 1 = 0); into a wall 4 -> 4 (-1); a step away 4 -> 5 (-2); a push that
    # loses the level, 5 -> lost counting 20 (5 - 20 - 1 = -16); every move from the lost position 0
    assert move_advantages(5, [4, 4, 5, None, None], unsolvable_distance=20) == [0.0, -1.0, -2.0, -16.0, 0.0]
    assert move_advantages(None, [None, 3], unsolvable_distance=20) == [0.0, 0.0]  # a turn that starts lost
    assert move_advantages(2, [], unsolvable_distance=20) == []
    # a level lost from further than unsolvable_distance still costs what a step away does: 18 -> (19) -> -2
    assert move_advantages(18, [None], unsolvable_distance=16) == [-2.0]


@given(st.integers(1, 15), st.lists(st.sampled_from([-1, 0, 1, 2, None]), max_size=6), st.floats(16, 40))
def test_move_advantages_are_never_positive_and_sum_to_the_turns_regret(start, changes, lost):
    # distances an exact solver can give: one move lowers the distance by at most one (or loses the level)
    after, distance = [], start
    for change in changes:
        distance = None if change is None or distance is None else max(distance + change, 0)
        after.append(distance)
    advantages = move_advantages(start, after, unsolvable_distance=lost)
    assert len(advantages) == len(after) and all(a <= 0 for a in advantages)
    # the move that loses the level costs at least what a step away does
    steps = zip(advantages, [start, *after], after, strict=False)
    assert all(a <= -2 for a, before, now in steps if before is not None and now is None)
    # along the moves until the first lost position, the advantages telescope: d(start) - d(last) - moves
    alive = after if None not in after else after[: after.index(None)]
    if alive:
        assert sum(advantages[: len(alive)]) == pytest.approx(start - alive[-1] - len(alive))


def test_move_values_land_on_the_tokens_that_wrote_each_move():
    # row 0: turn 0 samples columns 2-6 (moves end at 3 and 5; column 6 is the stop token), an observation at
    # 7-8, turn 1 samples 9-10 (one move ending at 10); row 1: one turn at columns 1-3, no move placed
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1], [0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]])
    out = move_values_to_tokens([[[-1.0, -2.0], [-3.0]], [[]]], [[[3, 5], [10]], [[]]], [[2, 9], [1]], mask)
    assert out[0].tolist() == [0, 0, -1, -1, -2, -2, 0, 0, 0, -3, -3]
    assert out[1].abs().sum() == 0
    with pytest.raises(ValueError, match="move values"):
        move_values_to_tokens([[[-1.0]]], [[[3, 5]]], [[2]], mask[:1])


def test_a_turn_that_stops_short_is_charged_the_progress_it_gave_up():
    # 5 moves allowed: 2 made, 4 from the goal -> the 3 unmade moves would have reached 1: -3; 1 from the goal: -1
    assert stop_advantage(2, 4, 5) == -3.0 and stop_advantage(2, 1, 5) == -1.0
    # a full turn, a solved level, a lost position: nothing to charge
    assert (
        stop_advantage(5, 4, 5)
        == stop_advantage(7, 4, 5)
        == stop_advantage(2, 0, 5)
        == stop_advantage(2, None, 5)
        == 0
    )


@given(st.integers(1, 15), st.integers(0, 5), st.integers(1, 5))
def test_optimal_moves_and_their_stop_sum_to_the_turns_shortfall(start, made, limit):
    # a turn of optimal moves (each lowers the distance by one) that stops after `made` of `limit`
    made = min(made, limit, start)
    after = [start - i - 1 for i in range(made)]
    end = after[-1] if after else start
    total = sum(move_advantages(start, after, unsolvable_distance=20)) + stop_advantage(made, end, limit)
    assert total == -(min(limit, start) - (start - end))


def test_a_charged_stop_lands_on_the_turns_tokens_after_its_last_move():
    # the row of the test above: turn 0's stop (column 6, after the move ending at 5) charged -2, up to its last
    # column 6; turn 1 ends on its move (column 10): a stop there owns no column
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1]])
    stops = [[(-2.0, 6), (-4.0, 10)]]
    out = move_values_to_tokens([[[-1.0, -2.0], [-3.0]]], [[[3, 5], [10]]], [[2, 9]], mask, stops)
    assert out[0].tolist() == [0, 0, -1, -1, -2, -2, -2, 0, 0, -3, -3]
    with pytest.raises(ValueError, match="stops"):
        move_values_to_tokens([[[-1.0, -2.0], [-3.0]]], [[[3, 5], [10]]], [[2, 9]], mask, [[(-2.0, 6)]])
