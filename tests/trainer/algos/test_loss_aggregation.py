"""Loss aggregation (trainer/algos/losses.py): each mode by hand; micro-batch splits with global normalisers."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algos import LOSS_AGG_MODES, Aggregation, aggregate, ppo_policy_loss

VALUES = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
MASK = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]])  # row 2 has no sampled token


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        (Aggregation("token-mean"), 24 / 5),  # (1 + 2 + 6 + 7 + 8) / 5 sampled tokens
        (Aggregation("token-mean", num_tokens=10), 2.4),  # global count from other micro-batches
        (Aggregation("seq-mean-token-sum"), 8.0),  # (3 + 21 + 0) / 3 rows
        (Aggregation("seq-mean-token-sum", num_sequences=6), 4.0),
        (Aggregation("seq-mean-token-mean"), (1.5 + 7.0 + 0.0) / 3),  # the empty row adds 0, counts in S
        (Aggregation("seq-mean-token-sum-norm"), 2.0),  # 24 / (3 rows * T = 4)
        (Aggregation("seq-mean-token-sum-norm", num_sequences=3, norm_length=8), 1.0),  # 24 / (3 * 8)
    ],
)
def test_each_mode_by_hand(agg, expected):
    assert aggregate(VALUES, MASK, agg).item() == pytest.approx(expected)


def test_modes_and_normalisers_are_validated():
    with pytest.raises(
        ValueError, match="token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm"
    ):
        Aggregation("mean")
    with pytest.raises(ValueError, match="num_tokens must be >= 0"):
        Aggregation(num_tokens=-1)
    with pytest.raises(ValueError, match="norm_length must be > 0"):
        Aggregation("seq-mean-token-sum-norm", norm_length=0)
    with pytest.raises(ValueError, match="pass the count over the whole mini-batch"):
        aggregate(VALUES, MASK, Aggregation(num_tokens=0))
    with pytest.raises(ValueError, match=r"per-token values \[B, T\]"):
        aggregate(VALUES[0], MASK[0], Aggregation())


def test_an_empty_batch_gives_zero_with_a_gradient_path():
    empty = torch.zeros(2, 3)
    for mode in LOSS_AGG_MODES:
        for agg in (Aggregation(mode), Aggregation(mode, num_tokens=0, num_sequences=0)):
            values = torch.ones(2, 3, requires_grad=True)
            loss = aggregate(values, empty, agg)
            assert loss.item() == 0.0
            loss.backward()
            assert values.grad is not None and values.grad.eq(0).all()


def split_points(draw, batch: int) -> list[int]:
    cuts = draw(st.lists(st.integers(1, max(batch - 1, 1)), max_size=3, unique=True)) if batch > 1 else []
    return [0, *sorted(cuts), batch]


@st.composite
def batches(draw):
    batch, length = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    values = draw(st.lists(st.floats(-10, 10, allow_nan=False), min_size=batch * length, max_size=batch * length))
    mask = draw(st.lists(st.booleans(), min_size=batch * length, max_size=batch * length))
    bounds = split_points(draw, batch)
    return (
        torch.tensor(values, dtype=torch.float64).reshape(batch, length),
        torch.tensor(mask).reshape(batch, length),
        bounds,
    )


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@settings(max_examples=60, deadline=None)
@given(batch=batches(), norm_length=st.sampled_from([None, 16.0]))
def test_micro_batches_with_global_normalisers_add_up_to_the_whole(mode, batch, norm_length):
    values, mask, bounds = batch
    length = values.shape[1]
    # the normalisers of the whole mini-batch, as the learner counts them across micro-batches and ranks
    full = Aggregation(mode, float(mask.sum()), float(values.shape[0]), norm_length or float(length))
    whole = aggregate(values, mask, Aggregation(mode, norm_length=norm_length))  # its own counts
    parts = sum(aggregate(values[a:b], mask[a:b], full).item() for a, b in itertools.pairwise(bounds))
    assert parts == pytest.approx(whole.item(), abs=1e-9)
    assert aggregate(values, mask, full).item() == pytest.approx(whole.item(), abs=1e-9)


def test_ppo_gradients_do_not_depend_on_the_micro_batch_size():
    generator = torch.Generator().manual_seed(0)
    logprobs = -torch.rand(6, 5, generator=generator, dtype=torch.float64)
    old = logprobs + 0.3 * torch.randn(6, 5, generator=generator, dtype=torch.float64)
    advantages = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    mask = torch.rand(6, 5, generator=generator) > 0.4
    for mode in LOSS_AGG_MODES:
        agg = Aggregation(mode, num_tokens=float(mask.sum()), num_sequences=6.0, norm_length=5.0)
        grads = []
        for size in (6, 4, 1):
            current = logprobs.clone().requires_grad_(True)
            for start in range(0, 6, size):
                rows = slice(start, start + size)
                loss, _ = ppo_policy_loss(current[rows], old[rows], advantages[rows], mask[rows], agg)
                loss.backward()  # accumulates, as gradient accumulation over micro-batches does
            grads.append(current.grad)
        assert torch.allclose(grads[0], grads[1]) and torch.allclose(grads[0], grads[2])
        assert grads[0].abs().sum() > 0
