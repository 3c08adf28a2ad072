"""Truncated importance sampling between engine and learner logprobs (trainer/algos/off_policy.py)."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import IS_LEVELS, IS_MODES, logprob_mismatch, tis_level_for_step, truncated_is_weights

# old - rollout per position (the learner's log ratio against the engine), cap C = 2 (kept range [0.5, 2]):
#   row 0: tokens 0..2 with w = 3, 1.5, 0.25; position 3 is padding holding junk (50)
#   row 1: prompt (junk -40), tokens 1..2 with w = 0.8, 1.2, padding
#   row 2: tokens 0..1 with w = 1.8, 1.8 (each inside the range, the product 3.24 is not)
LN = math.log
DIFF = torch.tensor(
    [[LN(3), LN(1.5), LN(0.25), 50.0], [-40.0, LN(0.8), LN(1.2), 0.0], [LN(1.8), LN(1.8), 0.0, 0.0]],
    dtype=torch.float64,
)
MASK = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 0], [1, 1, 0, 0]])
ROLLOUT = torch.full((3, 4), -2.0, dtype=torch.float64)
OLD = ROLLOUT + DIFF


def weights_of(level: str, mode: str, cap: float = 2.0) -> tuple[list[list[float]], dict[str, float]]:
    weights, stats = truncated_is_weights(OLD, ROLLOUT, MASK, level=level, mode=mode, cap=cap)
    return [[round(v, 9) for v in row] for row in weights.tolist()], {k: v.item() for k, v in stats.items()}


def test_token_clamp():
    weights, stats = weights_of("token", "clamp")
    assert weights == [[2.0, 1.5, 0.25, 0], [0, 0.8, 1.2, 0], [1.8, 1.8, 0, 0]]
    assert stats["is_clipped_fraction"] == pytest.approx(1 / 7)  # only w = 3
    assert stats["is_weight_mean"] == pytest.approx((2 + 1.5 + 0.25 + 0.8 + 1.2 + 1.8 + 1.8) / 7)


def test_token_mask():
    weights, stats = weights_of("token", "mask")
    assert weights == [[0, 1.5, 0, 0], [0, 0.8, 1.2, 0], [1.8, 1.8, 0, 0]]  # 3 > 2 and 0.25 < 1/2 dropped
    assert stats["is_masked_fraction"] == pytest.approx(2 / 7)
    assert stats["is_weight_mean"] == pytest.approx((1.5 + 0.8 + 1.2 + 1.8 + 1.8) / 7)


def test_sequence_clamp():
    # row products: 3 * 1.5 * 0.25 = 1.125, 0.8 * 1.2 = 0.96, 1.8 * 1.8 = 3.24 -> min(3.24, 2) = 2
    weights, stats = weights_of("sequence", "clamp")
    assert weights == [[1.125, 1.125, 1.125, 0], [0, 0.96, 0.96, 0], [2.0, 2.0, 0, 0]]
    assert stats["is_clipped_fraction"] == pytest.approx(1 / 3)  # one row of three
    assert stats["is_weight_mean"] == pytest.approx((3 * 1.125 + 2 * 0.96 + 2 * 2.0) / 7)


def test_sequence_mask():
    weights, stats = weights_of("sequence", "mask")
    assert weights == [[1.125, 1.125, 1.125, 0], [0, 0.96, 0.96, 0], [0, 0, 0, 0]]
    assert stats["is_masked_fraction"] == pytest.approx(1 / 3)


def test_log_ratios_are_clamped_to_20():
    old = torch.tensor([[30.0, 0.0], [15.0, 10.0]])
    rollout = torch.zeros(2, 2)
    mask = torch.ones(2, 2)
    weights, _ = truncated_is_weights(old, rollout, mask, level="token", cap=1e10)
    assert weights[0].tolist() == pytest.approx([math.exp(20), 1.0])  # 30 -> 20
    weights, _ = truncated_is_weights(old, rollout, mask, level="sequence", cap=1e10)
    assert weights[1].tolist() == pytest.approx([math.exp(20)] * 2)  # sum 25 -> 20


def test_mismatch_statistic_and_detached_weights():
    # |diff| over sampled tokens: ln3, ln1.5, ln4, ln1.25, ln1.2, ln1.8, ln1.8
    expected = (LN(3) + LN(1.5) + LN(4) + LN(1.25) + LN(1.2) + 2 * LN(1.8)) / 7
    assert logprob_mismatch(OLD, ROLLOUT, MASK).item() == pytest.approx(expected)
    old = OLD.clone().requires_grad_(True)
    weights, stats = truncated_is_weights(old, ROLLOUT, MASK)
    assert stats["logprob_mismatch"].item() == pytest.approx(expected)
    assert not weights.requires_grad


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": "turn"}, "token, sequence"),
        ({"mode": "drop"}, "clamp, mask"),
        ({"cap": 0.5}, "cap must be >= 1"),
    ],
)
def test_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        truncated_is_weights(OLD, ROLLOUT, MASK, **kwargs)
    with pytest.raises(ValueError, match=r"share one shape \[B, T\]"):
        truncated_is_weights(OLD, ROLLOUT[:, :2], MASK)
    assert IS_LEVELS == ("token", "sequence") and IS_MODES == ("clamp", "mask")


@pytest.mark.parametrize(
    ("level", "mismatch", "expected"),
    [
        ("auto", 2.7e-5, "none"),  # the CPU engine in float32 against the learner: trains as if on-policy
        ("auto", 1e-3, "none"),  # at the threshold: not above it
        ("auto", 0.035, "token"),  # bf16 engine kernels on a GPU: reweighted
        ("none", 0.5, "none"),  # a level set by hand is kept whatever the mismatch
        ("token", 0.0, "token"),
        ("sequence", 0.0, "sequence"),
    ],
)
def test_auto_corrects_only_the_steps_whose_mismatch_exceeds_the_threshold(level, mismatch, expected):
    assert tis_level_for_step(level, mismatch, min_mismatch=1e-3) == expected


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match=r"unknown importance-sampling level 'tok'.*auto"):
        tis_level_for_step("tok", 0.0, 1e-3)
