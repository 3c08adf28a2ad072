"""Masked statistics (trainer/algos/masked.py): hand-computed sums, means, variances, whitening."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import masked_mean, masked_sum, masked_var, masked_whiten

# Selected entries 1, 2, 6, 7, 8 (the inf/nan sit on masked-out positions and must not matter).
X = torch.tensor([[1.0, 2.0, math.inf, 4.0], [5.0, 6.0, 7.0, 8.0], [math.nan, 10.0, 11.0, 12.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)


def test_sum_and_mean_over_all_and_per_row():
    assert masked_sum(X, MASK).item() == 24.0  # 1 + 2 + 6 + 7 + 8
    assert masked_mean(X, MASK).item() == pytest.approx(24 / 5)
    assert masked_sum(X, MASK, dim=1).tolist() == [3.0, 21.0, 0.0]
    # per row: 3/2, 21/3, and an empty row gives 0 (not 0/0)
    assert masked_mean(X, MASK, dim=1).tolist() == [1.5, 7.0, 0.0]


def test_variance_unbiased_and_biased():
    # mean 4.8; squared deviations 14.44 + 7.84 + 1.44 + 4.84 + 10.24 = 38.8
    assert masked_var(X, MASK, unbiased=True).item() == pytest.approx(38.8 / 4)
    assert masked_var(X, MASK, unbiased=False).item() == pytest.approx(38.8 / 5)


def test_fewer_than_two_entries_give_zero_variance_and_zero_whitening():
    one = torch.tensor([[0.0, 3.0, 0.0]])
    only_middle = torch.tensor([[0, 1, 0]])
    assert masked_var(one, only_middle).item() == 0.0
    assert masked_var(one, torch.zeros(1, 3)).item() == 0.0
    assert masked_mean(one, torch.zeros(1, 3)).item() == 0.0
    assert masked_whiten(one, only_middle).tolist() == [[0.0, 0.0, 0.0]]


def test_whiten_by_hand_and_zero_outside_the_mask():
    # entries 1, 2, 6, 7, 8: mean 4.8, unbiased var 9.7
    expected = [(v - 4.8) / math.sqrt(9.7 + 1e-8) for v in (1, 2, 6, 7, 8)]
    whitened = masked_whiten(X, MASK)
    assert whitened[MASK].tolist() == pytest.approx(expected)
    assert whitened[~MASK].eq(0).all()
    assert masked_mean(whitened, MASK).item() == pytest.approx(0.0, abs=1e-12)
    assert masked_var(whitened, MASK).item() == pytest.approx(1.0, rel=1e-6)
    # shift_mean=False adds the mean back (verl/TRL convention)
    kept = masked_whiten(X, MASK, shift_mean=False)
    assert kept[MASK].tolist() == pytest.approx([e + 4.8 for e in expected])
    assert kept[~MASK].eq(0).all()


def test_mask_shape_must_match():
    with pytest.raises(ValueError, match="make them match"):
        masked_mean(X, MASK[:, :2])
