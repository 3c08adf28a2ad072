"""RAGEN's variance filter and the SFT loss, on hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algos import Aggregation, select_groups_by_std, sft_loss


def test_the_groups_whose_returns_vary_most_are_kept_in_their_order():
    groups = [
        [1.0, 1.0, 1.0],  # std 0
        [0.0, 2.0],  # population std 1
        [0.0, 0.5, 1.0],  # population std sqrt(1/6) = 0.408
        [5.0],  # a singleton: std 0
        [-3.0, 3.0],  # std 3
    ]
    assert select_groups_by_std(groups, 1.0) == [0, 1, 2, 3, 4]
    assert select_groups_by_std(groups, 0.4) == [1, 4]  # ceil(0.4 * 5) = 2 groups: stds 3 and 1
    assert select_groups_by_std(groups, 0.5) == [1, 2, 4]  # ceil(2.5) = 3
    assert select_groups_by_std([[0.0, 0.0], [1.0, 1.0]], 0.5) == [0]  # a tie keeps the earlier group
    with pytest.raises(ValueError, match="fraction"):
        select_groups_by_std(groups, 0.0)


# No deadline: statistics.pstdev works in exact fractions, slow on subnormal floats on a loaded machine.
@settings(deadline=None)
@given(st.lists(st.lists(st.floats(-10, 10), min_size=1, max_size=4), min_size=1, max_size=12), st.floats(0.01, 1.0))
def test_the_filter_keeps_ceil_fraction_groups_none_less_spread_than_a_dropped_one(groups, fraction):
    kept = select_groups_by_std(groups, fraction)
    assert kept == sorted(set(kept)) and len(kept) == math.ceil(fraction * len(groups))
    spread = [torch.tensor(g, dtype=torch.float64).std(unbiased=False).item() if len(g) > 1 else 0.0 for g in groups]
    dropped = set(range(len(groups))) - set(kept)
    assert all(spread[k] >= spread[d] - 1e-9 for k in kept for d in dropped)


def test_sft_loss_is_the_mean_nll_of_the_target_tokens_over_the_whole_mini_batch():
    logprobs = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -7.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # token-mean over the 3 target tokens: (1 + 2 + 0.5) / 3 = 7/6; the masked -9 and -7 do not count.
    loss, stats = sft_loss(logprobs, mask, Aggregation("token-mean", 3.0, 2.0))
    assert loss.item() == pytest.approx(7 / 6)
    assert stats["nll"].item() == pytest.approx(7 / 6)
    # A micro-batch of the first row with the mini-batch's normaliser (3 tokens) gives its share, 3/3 = 1.
    part, _ = sft_loss(logprobs[:1], mask[:1], Aggregation("token-mean", 3.0, 2.0))
    assert part.item() == pytest.approx(1.0)
