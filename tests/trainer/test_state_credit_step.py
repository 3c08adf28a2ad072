"""The training step's state-based credit (trainer.train_step.estimate_advantages) on a hand-built batch.

Two episodes of one seed, two turns each. Layout of every row: prompt [1, 2] (columns 0-1), turn 0's
sampled tokens at columns 2-3, an observation at columns 4-5, turn 1's sampled token at column 6.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from agents.trajectory import Trajectory
from trainer.batch import build_batch
from trainer.config import AlgoConfig, MoveCreditConfig, ShapingConfig, StepGroupsConfig
from trainer.train_step import estimate_advantages


def episode(rewards, keys, before, after, success, group="g"):
    t = Trajectory(
        env_id="sokoban",
        seed=0,
        group_id=group,
        prompt_ids=[1, 2],
        response_ids=[5, 6, 7, 8, 9],
        response_mask=[1, 1, 0, 0, 1],
        rollout_logprobs=[-0.5, -0.5, 0.0, 0.0, -0.5],
        turn_rewards=list(rewards),
        turn_end_indices=[1, 4],
        episode_return=sum(rewards),
        success=success,
        turn_state_keys=list(keys),
        turn_distances_before=list(before),
        turn_distances_after=list(after),
        initial_distance=before[0],
    )
    t.validate()
    return t


TRAJECTORIES = [
    episode([0.0, 1.0], ["s0", "s1"], [2, 1], [1, 0], success=True),
    episode([0.0, 0.0], ["s0", "s2"], [2, 2], [2, 3], success=False),
]
TURN0, TURN1 = [2, 3], [6]


def group_algo(advantage: str, **terms) -> AlgoConfig:
    """A critic-free algorithm over groups of 2 without std division (Dr.GRPO's), plus ``terms``."""
    return AlgoConfig(name=advantage, advantage=advantage, critic=False, group_size=2, normalize_std=False, **terms)


def advantages(algo):
    batch = build_batch(TRAJECTORIES, pad_id=0)
    metrics = estimate_advantages(batch, TRAJECTORIES, algo)
    return batch.advantages, metrics


def test_gigpo_adds_the_step_level_advantage_of_each_turns_anchor_state():
    adv, metrics = advantages(group_algo("gigpo", step_groups=StepGroupsConfig(weight=1.0, gamma=0.95)))
    # episode level (Dr.GRPO-style, no std): returns 1 and 0, mean 0.5 -> +0.5, -0.5 on every sampled token
    # step level, gamma 0.95: episode 1's turn returns are [0 + 0.95 * 1, 1] = [0.95, 1], episode 2's [0, 0].
    # Anchor s0 holds both turn 0s: {0.95, 0}, mean 0.475 -> +0.475, -0.475; s1 and s2 hold one turn each -> 0.
    assert adv[0, TURN0].tolist() == pytest.approx([0.975, 0.975])
    assert adv[0, TURN1].tolist() == pytest.approx([0.5])
    assert adv[1, TURN0].tolist() == pytest.approx([-0.975, -0.975])
    assert adv[1, TURN1].tolist() == pytest.approx([-0.5])
    assert adv[:, [0, 1, 4, 5]].abs().sum() == 0  # nothing on the prompt or the observation
    assert metrics["credit/step_grouped_turn_fraction"] == 0.5  # 2 of 4 turns share an anchor
    assert metrics["credit/step_signal_turn_fraction"] == 0.5
    assert metrics["credit/no_success_group_fraction"] == 0.0
    # progress: 2->1 and 1->0 made progress; 2->2 did not; 2->3 went back
    assert metrics["credit/progress_turn_fraction"] == 0.5
    assert metrics["credit/regress_turn_fraction"] == 0.25


def test_progress_shaping_changes_the_training_scores_not_the_trajectories():
    adv, metrics = advantages(group_algo("grpo", shaping=ShapingConfig(coef=0.1, unsolvable_distance=20.0)))
    # shaping: episode 1 goes 2 -> 1 -> 0: +0.1, +0.1; episode 2 goes 2 -> 2 -> 3: 0, -0.1
    # shaped scores 1.2 and -0.1, mean 0.55 -> +0.65 and -0.65
    assert adv[0, TURN0 + TURN1].tolist() == pytest.approx([0.65] * 3)
    assert adv[1, TURN0 + TURN1].tolist() == pytest.approx([-0.65] * 3)
    assert metrics["shaping/return_mean"] == pytest.approx((0.2 - 0.1) / 2)
    assert [t.episode_return for t in TRAJECTORIES] == [1.0, 0.0]  # the env's own returns stay
    assert "advantage/step_abs_mean" not in metrics


def test_shaping_with_a_zero_end_leaves_the_episode_level_scores_as_they_were():
    adv, metrics = advantages(group_algo("grpo", shaping=ShapingConfig(coef=0.1, end="zero")))
    # episode 1: 2 -> 1 pays +0.1, its last turn 1 -> (end) pays 0.1 * (0 - (-1)) = +0.1: 0.2 in all;
    # episode 2: 2 -> 2 pays 0, its last turn 2 -> (end) pays 0.1 * (0 - (-2)) = +0.2: 0.2 in all.
    # Both episodes of the level gain 0.1 * distance(start), so GRPO's scores stay the env's: +-0.5
    assert adv[0, TURN0 + TURN1].tolist() == pytest.approx([0.5] * 3)
    assert adv[1, TURN0 + TURN1].tolist() == pytest.approx([-0.5] * 3)
    assert metrics["shaping/return_mean"] == pytest.approx(0.2)


def test_a_fading_shaping_coefficient_falls_linearly_to_zero_after_fade_steps():
    shaping = ShapingConfig(coef=0.5, fade_steps=4)
    # (N + 1 - step) / N with N = 4: 4/4, 3/4, 2/4, 1/4, then 0
    assert [shaping.coef_at(step) for step in range(1, 7)] == [0.5, 0.375, 0.25, 0.125, 0.0, 0.0]
    assert ShapingConfig(coef=0.5).coef_at(100) == 0.5  # no fading: the same every step


def test_a_faded_coefficient_shapes_the_scores_at_that_steps_value():
    algo = group_algo("grpo", shaping=ShapingConfig(coef=0.2, fade_steps=2))
    batch = build_batch(TRAJECTORIES, pad_id=0)
    metrics = estimate_advantages(batch, TRAJECTORIES, algo, step=2)
    # step 2 of 2: coef 0.2 * 1/2 = 0.1, the hand-computed batch above: +-0.65
    assert metrics["shaping/coef"] == pytest.approx(0.1)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.65] * 3)
    batch = build_batch(TRAJECTORIES, pad_id=0)
    metrics = estimate_advantages(batch, TRAJECTORIES, algo, step=3)
    # faded out: the env's returns 1 and 0 alone, +-0.5, and no shaping return
    assert metrics["shaping/coef"] == 0.0
    assert metrics["shaping/return_mean"] == 0.0
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([-0.5] * 3)


def test_step_groups_with_ppo_are_added_to_the_critics_advantages():
    def gae(weight):
        steps = StepGroupsConfig(weight=weight)
        algo = AlgoConfig(advantage="gae", critic=True, group_size=1, normalize_std=False, step_groups=steps)
        batch = build_batch(TRAJECTORIES, pad_id=0)
        batch.values = torch.zeros(batch.response_mask.shape)
        estimate_advantages(batch, TRAJECTORIES, algo)
        return batch

    plain, stepped = gae(0.0), gae(2.0)
    # the step term x 2 (gamma 0.95): +-0.475 x 2 = +-0.95 on the turn 0 tokens; turn 1's anchors are singletons
    added = stepped.advantages - plain.advantages
    assert added[0, TURN0].tolist() == pytest.approx([0.95, 0.95])
    assert added[1, TURN0].tolist() == pytest.approx([-0.95, -0.95])
    assert added[:, TURN1].abs().sum() == 0
    assert torch.equal(stepped.returns, plain.returns)  # the critic's targets are GAE's alone


def test_episodes_without_state_info_get_no_step_term_and_no_shaping():
    plain = [
        Trajectory(**{**t.to_dict(), "turn_state_keys": [], "turn_distances_before": [], "turn_distances_after": []})
        for t in TRAJECTORIES
    ]
    algo = group_algo("gigpo", shaping=ShapingConfig(coef=1.0), step_groups=StepGroupsConfig(weight=1.0))
    batch = build_batch(plain, pad_id=0)
    metrics = estimate_advantages(batch, plain, algo)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.5] * 3)
    assert metrics["shaping/return_mean"] == 0.0
    assert metrics["credit/step_signal_turn_fraction"] == 0.0
    assert "credit/progress_turn_fraction" not in metrics


def distance_groups(end: str) -> AlgoConfig:
    return group_algo(
        "grpo",
        shaping=ShapingConfig(coef=0.5, end=end),
        step_groups=StepGroupsConfig(weight=1.0, gamma=0.0, key="distance"),
    )


def test_distance_groups_compare_each_turns_progress_with_the_turns_from_the_same_distance():
    adv, metrics = advantages(distance_groups("keep"))
    # progress-form rewards (coef 0.5): episode 1: 0 + 0.5 * (2 - 1) = 0.5, 1 + 0.5 * (1 - 0) = 1.5;
    # episode 2: 0 + 0.5 * (2 - 2) = 0, 0 + 0.5 * (2 - 3) = -0.5. Gamma 0: each turn's return is its reward.
    # Distance 2 holds three turns {0.5, 0, -0.5}, mean 0 -> +0.5, 0, -0.5; distance 1 one turn -> 0.
    # Episode level (no std): shaped scores 2.0 and -0.5, mean 0.75 -> +1.25, -1.25.
    assert adv[0, TURN0].tolist() == pytest.approx([1.75, 1.75])
    assert adv[0, TURN1].tolist() == pytest.approx([1.25])
    assert adv[1, TURN0].tolist() == pytest.approx([-1.25, -1.25])
    assert adv[1, TURN1].tolist() == pytest.approx([-1.75])
    assert metrics["credit/step_grouped_turn_fraction"] == 0.75
    assert metrics["credit/step_signal_turn_fraction"] == 0.5


def test_distance_groups_judge_a_last_turn_by_its_progress_whatever_the_shapings_end():
    adv, _ = advantages(distance_groups("zero"))
    # episode level with end=zero: shaping 0.5 + 0.5 and 0 + 1.0 (every episode 0.5 x the start's distance 2),
    # scores 2.0 and 1.0, mean 1.5 -> +0.5, -0.5. The distance term as above: +0.5, 0, -0.5 on the three turns
    # from distance 2. (End-zero rewards would have given episode 2's last turn, 2 -> 3, +0.5 over its peers.)
    assert adv[0, TURN0].tolist() == pytest.approx([1.0, 1.0])
    assert adv[0, TURN1].tolist() == pytest.approx([0.5])
    assert adv[1, TURN0].tolist() == pytest.approx([-0.5, -0.5])
    assert adv[1, TURN1].tolist() == pytest.approx([-1.0])


def with_moves(t: Trajectory, ends: list[list[int]], distances: list[list[int | None]]) -> Trajectory:
    moved = Trajectory(**{**t.to_dict(), "turn_move_end_indices": ends, "turn_move_distances": distances})
    moved.validate()
    return moved


def test_move_credit_adds_each_moves_optimal_advantage_to_its_own_tokens():
    moved = [
        # episode 1, turn 0 from distance 2: moves ending at response indices 0 and 1 (columns 2, 3) reach 2, 1;
        # turn 1 from 1: one move to 0
        with_moves(TRAJECTORIES[0], [[0, 1], [4]], [[2, 1], [0]]),
        # episode 2, turn 0 from 2: one move written by both tokens (to 2); turn 1 from 2: the move loses the level
        with_moves(TRAJECTORIES[1], [[1], [4]], [[2], [None]]),
    ]
    algo = group_algo("grpo", move_credit=MoveCreditConfig(weight=0.5), shaping=ShapingConfig(unsolvable_distance=20))
    batch = build_batch(moved, pad_id=0)
    metrics = estimate_advantages(batch, moved, algo)
    # episode level +-0.5 (returns 1 and 0). Moves: 2 -> 2 (-1), 2 -> 1 (0), 1 -> 0 (0); 2 -> 2 (-1); 2 -> lost
    # (2 - 20 - 1 = -19). Times 0.5: -0.5, 0, 0; -0.5 on both tokens of episode 2's turn 0; -9.5
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.0, 0.5, 0.5])
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([-1.0, -1.0, -10.0])
    assert batch.advantages[:, [0, 1, 4, 5]].abs().sum() == 0
    assert metrics["credit/move_placed_turn_fraction"] == 1.0
    assert metrics["credit/move_optimal_fraction"] == pytest.approx(2 / 5)
    assert metrics["credit/move_lost_fraction"] == pytest.approx(1 / 5)
    # episodes without per-move information get no move term
    batch = build_batch(TRAJECTORIES, pad_id=0)
    metrics = estimate_advantages(batch, TRAJECTORIES, algo)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.5] * 3)
    assert metrics["credit/move_placed_turn_fraction"] == 0.0 and metrics["advantage/move_abs_mean"] == 0.0


def test_centred_move_credit_subtracts_the_steps_mean_move_advantage():
    moved = [
        with_moves(TRAJECTORIES[0], [[0, 1], [4]], [[2, 1], [0]]),
        with_moves(TRAJECTORIES[1], [[1], [4]], [[2], [None]]),
    ]
    moves = MoveCreditConfig(weight=0.5, center=True)
    algo = group_algo("grpo", move_credit=moves, shaping=ShapingConfig(unsolvable_distance=20))
    batch = build_batch(moved, pad_id=0)
    estimate_advantages(batch, moved, algo)
    # the five moves' A* (above): -1, 0, 0, -1, -19, mean -4.2; centred: 3.2, 4.2, 4.2, 3.2, -14.8; times 0.5 plus
    # the episode level's +-0.5
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([2.1, 2.6, 2.6])
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([1.1, 1.1, -7.9])


def test_sign_weights_scale_the_final_advantages_by_their_sign():
    moved = [
        with_moves(TRAJECTORIES[0], [[0, 1], [4]], [[2, 1], [0]]),
        with_moves(TRAJECTORIES[1], [[1], [4]], [[2], [None]]),
    ]
    moves = MoveCreditConfig(weight=0.5)
    shaping = ShapingConfig(unsolvable_distance=20)
    # without the weights (the move credit's test above): [0, 0.5, 0.5] and [-1, -1, -10]; |A| sums to 13, of
    # which 12 is negative
    algo = group_algo("grpo", move_credit=moves, shaping=shaping, negative_weight=0.0)
    batch = build_batch(moved, pad_id=0)
    metrics = estimate_advantages(batch, moved, algo)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.0, 0.5, 0.5])
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert metrics["advantage/negative_share"] == pytest.approx(12 / 13)
    algo = group_algo("grpo", move_credit=moves, shaping=shaping, positive_weight=0.0, negative_weight=0.1)
    batch = build_batch(moved, pad_id=0)
    estimate_advantages(batch, moved, algo)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([-0.1, -0.1, -1.0])
    # at 1 and 1 nothing changes and nothing is logged
    batch = build_batch(moved, pad_id=0)
    metrics = estimate_advantages(batch, moved, group_algo("grpo", move_credit=moves, shaping=shaping))
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([-1.0, -1.0, -10.0])
    assert "advantage/negative_share" not in metrics


def test_the_episode_weight_scales_the_estimators_advantage_and_leaves_the_state_terms_and_the_returns():
    moved = [
        with_moves(TRAJECTORIES[0], [[0, 1], [4]], [[2, 1], [0]]),
        with_moves(TRAJECTORIES[1], [[1], [4]], [[2], [None]]),
    ]
    moves, shaping = MoveCreditConfig(weight=0.5), ShapingConfig(unsolvable_distance=20)
    # the move credit's test above: episode level +-0.5, moves x 0.5 [-0.5, 0, 0] and [-0.5, -0.5, -9.5]
    for weight, first, second in [
        (0.0, [-0.5, 0.0, 0.0], [-0.5, -0.5, -9.5]),  # the move credit alone
        (0.5, [-0.25, 0.25, 0.25], [-0.75, -0.75, -9.75]),  # +-0.25 from the episode level
    ]:
        batch = build_batch(moved, pad_id=0)
        metrics = estimate_advantages(batch, moved, group_algo("grpo", move_credit=moves, shaping=shaping,
                                                               episode_weight=weight))  # fmt: skip
        assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx(first)
        assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx(second)
        assert metrics["advantage/episode_abs_mean"] == pytest.approx(0.5 * weight)  # as weighted
    # with a critic: the advantages scale, its targets do not
    algo = AlgoConfig(advantage="gae", critic=True, group_size=1, normalize_std=False)
    batches = []
    for weight in (1.0, 0.5):
        batch = build_batch(TRAJECTORIES, pad_id=0)
        batch.values = torch.zeros(batch.response_mask.shape)
        estimate_advantages(batch, TRAJECTORIES, replace(algo, episode_weight=weight))
        batches.append(batch)
    assert torch.allclose(batches[1].advantages, 0.5 * batches[0].advantages)
    assert batches[0].advantages.abs().sum() > 0 and torch.equal(batches[1].returns, batches[0].returns)


def test_a_charged_stop_costs_a_turn_the_moves_it_did_not_make():
    moved = [
        # episode 1, turn 0 from 2: one move (column 2) to 1, then it stops (column 3) with a move left: -min(1, 1);
        # turn 1: one move to 0, solved: no charge
        with_moves(TRAJECTORIES[0], [[0], [4]], [[1], [0]]),
        # episode 2, turn 0 from 2: one move to 2 (column 2, -1), stops at 2 with a move left: -min(1, 2) = -1;
        # turn 1: the move loses the level (-19): a lost position is not charged for stopping
        with_moves(TRAJECTORIES[1], [[0], [4]], [[2], [None]]),
    ]
    moves = MoveCreditConfig(weight=0.5, stop=True)
    algo = group_algo("grpo", move_credit=moves, shaping=ShapingConfig(unsolvable_distance=20))
    batch = build_batch(moved, pad_id=0)
    metrics = estimate_advantages(batch, moved, algo, moves_per_turn=2)
    # episode level +-0.5 plus 0.5 x the move and stop values
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.5, 0.0, 0.5])
    assert batch.advantages[1, TURN0 + TURN1].tolist() == pytest.approx([-1.0, -1.0, -10.0])
    assert metrics["credit/move_stop_charged_turn_fraction"] == pytest.approx(2 / 4)
    # one move a turn allowed: every turn is full, nothing charged (the stop tokens as without the charge)
    batch = build_batch(moved, pad_id=0)
    metrics = estimate_advantages(batch, moved, algo, moves_per_turn=1)
    assert batch.advantages[0, TURN0 + TURN1].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert metrics["credit/move_stop_charged_turn_fraction"] == 0.0
    with pytest.raises(ValueError, match="pass moves_per_turn"):
        estimate_advantages(build_batch(moved, pad_id=0), moved, algo)
