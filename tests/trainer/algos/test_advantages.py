"""Outcome-level advantage estimators (trainer/algos/advantages.py): GRPO, Dr.GRPO, RLOO, REINFORCE++ baseline."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import (
    broadcast_to_tokens,
    group_advantages,
    group_statistics,
    place_turn_rewards,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
    sign_weighted,
    success_signal,
)

# Groups (ids need not be contiguous): 7 = {1, 0, 1, 0.5}, 2 = {2} (singleton), 5 = {0.1, 0.1, 0.1}
# (all equal; 0.1 is not exact in binary, so the group mean carries rounding), 9 = {0, 1}.
SCORES = torch.tensor([1.0, 0.0, 1.0, 0.5, 2.0, 0.1, 0.1, 0.1, 0.0, 1.0])
GROUPS = torch.tensor([7, 7, 7, 7, 2, 5, 5, 5, 9, 9])

# Group 7: mean 0.625, deviations (0.375, -0.625, 0.375, -0.125), squares sum 0.6875,
# unbiased std sqrt(0.6875 / 3). Group 9: mean 0.5, deviations (-0.5, 0.5), std sqrt(0.5).
STD_7 = math.sqrt(0.6875 / 3)
STD_9 = math.sqrt(0.5)
DEV_7 = [0.375, -0.625, 0.375, -0.125]


def test_grpo_by_hand_with_singleton_and_equal_groups():
    advantages = group_advantages(SCORES, GROUPS)
    expected = [d / (STD_7 + 1e-6) for d in DEV_7] + [0.0] * 4 + [-0.5 / (STD_9 + 1e-6), 0.5 / (STD_9 + 1e-6)]
    assert advantages.tolist() == pytest.approx(expected, rel=1e-6)
    # singleton and all-equal groups: exactly zero, not a rounding residue divided by eps
    assert advantages[4:8].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert not advantages.isnan().any()
    assert advantages.dtype == torch.float32


def test_dr_grpo_is_the_centred_score():
    advantages = group_advantages(SCORES, GROUPS, normalize_std=False)
    assert advantages.tolist() == pytest.approx([*DEV_7, 0.0, 0.0, 0.0, 0.0, -0.5, 0.5])
    assert advantages[4:8].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_rloo_by_hand():
    # group 7: S_i - mean of the other three, e.g. 1 - (0 + 1 + 0.5)/3 = 0.5, 0 - 2.5/3, 0.5 - 2/3;
    # equivalently 4/3 * (S_i - mean_g). Group 9: 0 - 1, 1 - 0.
    expected = [0.5, -2.5 / 3, 0.5, 0.5 - 2 / 3, 0.0, 0.0, 0.0, 0.0, -1.0, 1.0]
    advantages = rloo_advantages(SCORES, GROUPS)
    assert advantages.tolist() == pytest.approx(expected, rel=1e-6)
    assert advantages[4:8].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert advantages[:4].tolist() == pytest.approx([4 / 3 * d for d in DEV_7], rel=1e-6)


def test_all_singletons_give_zero_and_integer_scores_work():
    scores = torch.tensor([3, 1, 4])  # integer scores (e.g. success counts) give float advantages
    groups = torch.tensor([0, 1, 2])
    for advantages in (group_advantages(scores, groups), rloo_advantages(scores, groups)):
        assert advantages.tolist() == [0.0, 0.0, 0.0]
        assert advantages.is_floating_point()


def test_group_inputs_are_validated():
    with pytest.raises(ValueError, match="integer group ids"):
        group_advantages(SCORES, GROUPS.float())
    with pytest.raises(ValueError, match=r"scores \[B\] and group_index \[B\]"):
        rloo_advantages(SCORES, GROUPS[:3])


def test_group_statistics():
    stats = group_statistics(SCORES, GROUPS)
    assert stats["num_groups"] == 4
    assert stats["mean_group_size"] == 2.5
    assert stats["singleton_group_fraction"] == 0.25
    assert stats["degenerate_group_fraction"] == 0.5  # group 2 (singleton) and group 5 (all equal)
    # groups of two or more: 7, 5 (std 0) and 9
    assert stats["mean_group_std"] == pytest.approx((STD_7 + 0.0 + STD_9) / 3)
    assert all(isinstance(v, float) for v in stats.values())


def test_success_signal_by_hand():
    # groups: 7 = {success, fail, fail} (mixed), 2 = {success} (singleton), 5 = {fail, fail}, 9 = {success, success}
    success = torch.tensor([True, False, False, True, False, False, True, True])
    groups = torch.tensor([7, 7, 7, 2, 5, 5, 9, 9])
    mass = torch.tensor([2.0, 1.0, 1.0, 0.0, 3.0, 3.0, 0.0, 0.0])
    signal = success_signal(success, groups, mass)
    assert signal["mixed_success_group_fraction"] == pytest.approx(1 / 3)  # 7 of {7, 5, 9}
    assert signal["advantage_share_without_success"] == pytest.approx(6 / 10)  # group 5's 3 + 3 of 10
    assert signal["no_success_group_fraction"] == pytest.approx(1 / 4)  # group 5 of {7, 2, 5, 9}
    nothing = success_signal(torch.tensor([False, False]), torch.tensor([0, 0]), torch.zeros(2))
    assert nothing == {
        "mixed_success_group_fraction": 0.0,
        "no_success_group_fraction": 1.0,
        "advantage_share_without_success": 0.0,
    }


def test_place_turn_rewards_adds_at_shared_positions():
    rewards = place_turn_rewards([[0.5, 1.0], [2.0, -1.0, 0.25]], [[2, 6], [3, 3, 0]], (2, 8))
    assert rewards.tolist() == [
        [0, 0, 0.5, 0, 0, 0, 1.0, 0],
        [0.25, 0, 0, 1.0, 0, 0, 0, 0],  # 2.0 - 1.0 on column 3
    ]


@pytest.mark.parametrize(
    ("rewards", "positions", "message"),
    [
        ([[1.0]], [[0]], "expected 2 trajectories"),
        ([[1.0], [1.0, 2.0]], [[0], [1]], "2 turn rewards but 1 positions"),
        ([[1.0], [1.0]], [[0], [4]], r"position 4 is outside \[0, 4\)"),
        ([[1.0], [1.0]], [[-1], [0]], r"position -1 is outside"),
    ],
)
def test_place_turn_rewards_validates(rewards, positions, message):
    with pytest.raises(ValueError, match=message):
        place_turn_rewards(rewards, positions, (2, 4))


def test_broadcast_to_tokens():
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]], dtype=torch.bool)
    assert broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask).tolist() == [[0, 2, 2, 0], [-1, 0, 0, -1]]
    with pytest.raises(ValueError, match=r"per_sequence \[B\] and mask \[B, T\]"):
        broadcast_to_tokens(torch.tensor([1.0]), mask)


def test_reinforce_pp_baseline_by_hand():
    # groups {1, 0} -> centred (0.5, -0.5); {5} is a singleton -> 0 before whitening.
    scores = torch.tensor([1.0, 0.0, 5.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
    # token values 0.5, 0.5, -0.5, 0, 0, 0: mean 1/12; deviations (5, 5, -7, -1, -1, -1)/12,
    # squares sum 102/144, unbiased var 102/144/5.
    std = math.sqrt(102 / 144 / 5 + 1e-8)
    expected = [[5 / 12 / std, 5 / 12 / std, 0.0], [-7 / 12 / std, 0.0, 0.0], [-1 / 12 / std] * 3]
    advantages = reinforce_pp_baseline_advantages(scores, torch.tensor([0, 0, 1]), mask)
    for row, want in zip(advantages.tolist(), expected, strict=True):
        assert row == pytest.approx(want, rel=1e-5)


def test_sign_weights_scale_each_advantage_by_its_own_sign():
    advantages = torch.tensor([[1.5, -2.0, 0.0], [-0.25, 4.0, -1.0]])
    assert sign_weighted(advantages, 1.0, 0.0).tolist() == [[1.5, 0.0, 0.0], [0.0, 4.0, 0.0]]
    assert sign_weighted(advantages, 0.0, 1.0).tolist() == [[0.0, -2.0, 0.0], [-0.25, 0.0, -1.0]]
    weighted = sign_weighted(advantages, 0.1, 1.0)
    assert weighted.flatten().tolist() == pytest.approx([0.15, -2.0, 0.0, -0.25, 0.4, -1.0])
    assert torch.equal(sign_weighted(advantages, 1.0, 1.0), advantages)
