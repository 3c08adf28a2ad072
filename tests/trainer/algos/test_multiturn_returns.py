"""Token-level recursions over multi-turn trajectories (trainer/algos/multiturn.py): returns, REINFORCE++, GAE."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algos import (
    discounted_returns,
    gae_advantages,
    place_turn_rewards,
    reinforce_pp_advantages,
    rewards_on_sampled_tokens,
)

NAN = math.nan

# Three trajectories of different lengths, positions 0..7:
#   row 0: prompt | turn 1 (1, 2) | observation (3, 4) | turn 2 (5, 6) | pad (7); rewards 0.5 @2, 1.0 @6
#   row 1: prompt | one turn (1, 2, 3) | pad;                                        reward 2.0 @3
#   row 2: prompt (0, 1) | turn 1 (2) | observation (3) | turn 2 (4, 5) | pad;       rewards -1 @2, 1 @5
MASK = torch.tensor(
    [[0, 1, 1, 0, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 0, 1, 1, 0, 0]], dtype=torch.float64
)
REWARDS = place_turn_rewards([[0.5, 1.0], [2.0], [-1.0, 1.0]], [[2, 6], [3], [2, 5]], (3, 8)).double()
# Values on sampled tokens; gaps hold junk (9, NaN) that must never be read.
VALUES = torch.tensor(
    [[9, 0.2, 0.4, NAN, 9, 0.6, 0.8, 9], [9, 1.0, 1.5, 1.0, 9, 9, 9, 9], [9, 9, 0.5, NAN, 0.0, 0.5, 9, 9]],
    dtype=torch.float64,
)


def rows(t: torch.Tensor) -> list[list[float]]:
    return [[round(v, 10) for v in row] for row in t.tolist()]


def test_discounted_returns_gamma_one_carry_across_the_gap():
    # row 0: G6 = 1, G5 = 0 + G6 = 1, then the gap is skipped: G2 = 0.5 + G5 = 1.5, G1 = 1.5.
    # row 2: G5 = 1, G4 = 1, G2 = -1 + G4 = 0.
    assert rows(discounted_returns(REWARDS, MASK, 1.0)) == [
        [0, 1.5, 1.5, 0, 0, 1.0, 1.0, 0],
        [0, 2.0, 2.0, 2.0, 0, 0, 0, 0],
        [0, 0, 0.0, 0, 1.0, 1.0, 0, 0],
    ]


def test_discounted_returns_gamma_09_gap_is_not_a_discount_step():
    # row 0: G6 = 1, G5 = 0.9, G2 = 0.5 + 0.9 * 0.9 = 1.31 (one step from 2 to 5, not three), G1 = 1.179.
    # row 1: 2, 1.8, 1.62. row 2: G5 = 1, G4 = 0.9, G2 = -1 + 0.81 = -0.19.
    assert rows(discounted_returns(REWARDS, MASK, 0.9)) == [
        [0, 1.179, 1.31, 0, 0, 0.9, 1.0, 0],
        [0, 1.62, 1.8, 2.0, 0, 0, 0, 0],
        [0, 0, -0.19, 0, 0.9, 1.0, 0, 0],
    ]


def test_reinforce_pp_does_not_reset_at_observations():
    advantages, returns = reinforce_pp_advantages(REWARDS, MASK, gamma=1.0)
    # verl resets the return at each mask-0 token, which would leave turn 1 of row 0 with 0.5 and
    # turn 1 of row 2 with -1; the return of the later turn must reach the earlier one.
    assert returns[0, 1].item() == 1.5 and returns[0, 1].item() != 0.5
    assert returns[2, 2].item() == 0.0 and returns[2, 2].item() != -1.0
    # whitening: returns on the 10 sampled tokens 1.5 1.5 1 1 | 2 2 2 | 0 1 1: mean 1.3,
    # squared deviations sum 3.6, unbiased var 0.4.
    expected = (returns - 1.3) / math.sqrt(0.4 + 1e-8) * MASK
    assert torch.allclose(advantages, expected)
    assert advantages[MASK == 0].eq(0).all()


def test_gae_gamma_lam_one_is_return_minus_value():
    # With gamma = lam = 1 the recursion telescopes: A_t = G_t - V_t over sampled tokens.
    # row 0: 1.5-0.2, 1.5-0.4, 1-0.6, 1-0.8; row 1: 2-1, 2-1.5, 2-1; row 2: 0-0.5, 1-0, 1-0.5.
    advantages, returns = gae_advantages(REWARDS, VALUES, MASK, gamma=1.0, lam=1.0, whiten=False)
    assert rows(advantages) == [
        [0, 1.3, 1.1, 0, 0, 0.4, 0.2, 0],
        [0, 1.0, 0.5, 1.0, 0, 0, 0, 0],
        [0, 0, -0.5, 0, 1.0, 0.5, 0, 0],
    ]
    assert rows(returns) == rows(discounted_returns(REWARDS, MASK, 1.0))
    # whitened: the 10 advantages sum to 6.5 (mean 0.65), squared deviations sum 2.625, var 2.625/9
    whitened, _ = gae_advantages(REWARDS, VALUES, MASK, gamma=1.0, lam=1.0)
    assert torch.allclose(whitened, (advantages - 0.65) / math.sqrt(2.625 / 9 + 1e-8) * MASK)


def test_gae_gamma_09_lam_08_by_hand():
    # gamma * lam = 0.72. Row 0, walking back over 6, 5, 2, 1 (next value = next sampled token's):
    #   d6 = 1 - 0.8 = 0.2                 A6 = 0.2
    #   d5 = 0.9 * 0.8 - 0.6 = 0.12        A5 = 0.12 + 0.72 * 0.2 = 0.264
    #   d2 = 0.5 + 0.9 * 0.6 - 0.4 = 0.64  A2 = 0.64 + 0.72 * 0.264 = 0.83008
    #   d1 = 0.9 * 0.4 - 0.2 = 0.16        A1 = 0.16 + 0.72 * 0.83008 = 0.7576576
    # Row 1: d3 = 2 - 1 = 1, A3 = 1; d2 = 0.9 - 1.5 = -0.6, A2 = 0.12; d1 = 1.35 - 1 = 0.35, A1 = 0.4364.
    # Row 2: d5 = 0.5, A5 = 0.5; d4 = 0.45, A4 = 0.81; d2 = -1 + 0 - 0.5, A2 = -1.5 + 0.5832 = -0.9168.
    advantages, returns = gae_advantages(REWARDS, VALUES, MASK, gamma=0.9, lam=0.8, whiten=False)
    assert rows(advantages) == [
        [0, 0.7576576, 0.83008, 0, 0, 0.264, 0.2, 0],
        [0, 0.4364, 0.12, 1.0, 0, 0, 0, 0],
        [0, 0, -0.9168, 0, 0.81, 0.5, 0, 0],
    ]
    # returns = A + V on sampled tokens, 0 elsewhere
    assert rows(returns) == [
        [0, 0.9576576, 1.23008, 0, 0, 0.864, 1.0, 0],
        [0, 1.4364, 1.62, 2.0, 0, 0, 0, 0],
        [0, 0, -0.4168, 0, 0.81, 1.0, 0, 0],
    ]
    assert not advantages.isnan().any() and not returns.isnan().any()


def test_rewards_on_gaps_move_to_the_previous_sampled_token():
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0, 0]])
    # 3 on the prompt (dropped), 0.5 on the first gap (to column 2), 1 on the trailing observation (to column 5)
    rewards = torch.tensor([[3.0, 0, 0, 0.5, 0, 0, 1.0, 0]])
    assert rewards_on_sampled_tokens(rewards, mask).tolist() == [[0, 0, 0.5, 0, 0, 1.0, 0, 0]]
    assert discounted_returns(rewards, mask, 1.0).tolist() == [[0, 1.5, 1.5, 0, 0, 1.0, 0, 0]]


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"same shape \[B, T\]"):
        gae_advantages(REWARDS, VALUES[:, :4], MASK)
    with pytest.raises(ValueError, match=r"same shape \[B, T\]"):
        discounted_returns(REWARDS[0], MASK[0], 1.0)


# ---- property: cutting the gaps out and running plain single-turn recursions gives the same numbers


def plain_gae(rewards: list[float], values: list[float], gamma: float, lam: float) -> list[float]:
    """Textbook GAE over a contiguous sequence (no mask), bootstrapping from 0 at the end."""
    advantages, last = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        last = rewards[t] + gamma * next_value - values[t] + gamma * lam * last
        advantages[t] = last
    return advantages


@st.composite
def masked_rows(draw):
    batch, length = draw(st.integers(1, 4)), draw(st.integers(1, 12))
    floats = st.floats(-5, 5, allow_nan=False, width=32)
    mask = draw(st.lists(st.lists(st.booleans(), min_size=length, max_size=length), min_size=batch, max_size=batch))
    rewards = draw(st.lists(st.lists(floats, min_size=length, max_size=length), min_size=batch, max_size=batch))
    values = draw(st.lists(st.lists(floats, min_size=length, max_size=length), min_size=batch, max_size=batch))
    mask_t = torch.tensor(mask, dtype=torch.float64)
    # rewards only on sampled tokens, as the integrator places them
    return torch.tensor(rewards, dtype=torch.float64) * mask_t, torch.tensor(values, dtype=torch.float64), mask_t


@settings(max_examples=60, deadline=None)
@given(masked_rows(), st.floats(0, 1), st.floats(0, 1))
def test_gae_equals_single_turn_gae_on_the_compacted_rows(batch, gamma, lam):
    rewards, values, mask = batch
    advantages, returns = gae_advantages(rewards, values, mask, gamma=gamma, lam=lam, whiten=False)
    discounted = discounted_returns(rewards, mask, gamma)
    for b in range(mask.shape[0]):
        keep = mask[b] != 0
        expected = plain_gae(rewards[b][keep].tolist(), values[b][keep].tolist(), gamma, lam)
        assert advantages[b][keep].tolist() == pytest.approx(expected, abs=1e-9)
        assert returns[b][keep].tolist() == pytest.approx(
            [a + v for a, v in zip(expected, values[b][keep].tolist(), strict=True)], abs=1e-9
        )
        # discounted returns are GAE with zero values and lam = 1
        assert discounted[b][keep].tolist() == pytest.approx(
            plain_gae(rewards[b][keep].tolist(), [0.0] * int(keep.sum()), gamma, 1.0), abs=1e-9
        )
        assert advantages[b][~keep].eq(0).all() and returns[b][~keep].eq(0).all() and discounted[b][~keep].eq(0).all()
