"""The policy-loss table (trainer/algos/policy_losses.py): GSPO and CISPO against hand-derived values and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import (
    POLICY_LOSSES,
    Aggregation,
    PolicyInputs,
    PolicyLossSpec,
    cispo_policy_loss,
    gspo_policy_loss,
    ppo_policy_loss,
)

SEQ = Aggregation("seq-mean-token-mean")
TOK = Aggregation("token-mean")


def _logs(*probs: float) -> torch.Tensor:
    return torch.tensor([[math.log(p) for p in probs]], dtype=torch.float64)


def _gspo(new, old, advantages, mask, **clips):
    logprobs = new.clone().requires_grad_(True)
    loss, stats = gspo_policy_loss(logprobs, old, advantages, mask, SEQ, **clips)
    loss.backward()
    return loss.item(), logprobs.grad[0].tolist(), stats


def test_gspo_sequence_ratio_is_the_geometric_mean_of_the_token_ratios():
    # Token ratios 0.5/0.4 = 1.25 and 0.2/0.25 = 0.8: s = sqrt(1.25 * 0.8) = 1. A = 1 on both tokens:
    # l_t = -A s = -1, the sequence's mean -1. Gradient of each token: -A s / |y| = -0.5. The padded third
    # position (mask 0) has wild logprobs and counts for nothing.
    new, old = _logs(0.5, 0.2, 1e-9), _logs(0.4, 0.25, 0.9)
    loss, grad, stats = _gspo(new, old, torch.ones(1, 3, dtype=torch.float64), torch.tensor([[1.0, 1.0, 0.0]]))
    assert loss == pytest.approx(-1.0)
    assert grad == pytest.approx([-0.5, -0.5, 0.0])
    assert stats["ratio_mean"].item() == pytest.approx(1.0) and stats["clipfrac"].item() == 0.0
    assert stats["approx_kl"].item() == pytest.approx(-(math.log(1.25) + math.log(0.8)) / 2)


def test_gspo_clips_whole_responses_where_ppo_clips_tokens():
    # Ratios 1.5 and 1/1.5: s = 1, inside any range. PPO (clip 0.2) with A = 1 clips the first token (its
    # gradient 0) and keeps the second; GSPO gives both tokens -A s / 2 = -0.5.
    new, old = _logs(0.6, 0.4), _logs(0.4, 0.6)
    advantages, mask = torch.ones(1, 2, dtype=torch.float64), torch.ones(1, 2)
    _, grad, _ = _gspo(new, old, advantages, mask, clip_low=0.2, clip_high=0.2)
    assert grad == pytest.approx([-0.5, -0.5])
    logprobs = new.clone().requires_grad_(True)
    ppo_loss, _ = ppo_policy_loss(logprobs, old, advantages, mask, SEQ, clip_low=0.2, clip_high=0.2)
    ppo_loss.backward()
    assert logprobs.grad[0].tolist() == pytest.approx([0.0, -(1 / 1.5) / 2])


@pytest.mark.parametrize(
    ("advantage", "loss_value", "token_grad", "clipfrac"),
    [
        # s = 2 (both token ratios 2), clip 0.2: A = +1 -> max(-2, -1.2) = -1.2, clipped, no gradient.
        (1.0, -1.2, 0.0, 1.0),
        # A = -1 -> max(2, 1.2) = 2, unclipped: gradient -A s / 2 = +1 per token.
        (-1.0, 2.0, 1.0, 0.0),
    ],
)
def test_gspo_clipped_and_unclipped_sequence_by_hand(advantage, loss_value, token_grad, clipfrac):
    new, old = _logs(0.5, 0.4), _logs(0.25, 0.2)
    advantages = torch.full((1, 2), advantage, dtype=torch.float64)
    loss, grad, stats = _gspo(new, old, advantages, torch.ones(1, 2), clip_low=0.2, clip_high=0.2)
    assert loss == pytest.approx(loss_value)
    assert grad == pytest.approx([token_grad, token_grad])
    assert stats["clipfrac"].item() == clipfrac and stats["ratio_max"].item() == pytest.approx(2.0)


def test_gspo_token_advantages_weight_each_tokens_term():
    # Turn-level credit: A = (2, 0) with s = 1: losses (-2, 0), mean -1; gradient (-2/2, 0).
    new = _logs(0.3, 0.7)
    loss, grad, _ = _gspo(new, new.clone(), torch.tensor([[2.0, 0.0]], dtype=torch.float64), torch.ones(1, 2))
    assert loss == pytest.approx(-1.0) and grad == pytest.approx([-1.0, 0.0])


def test_gspo_on_policy_gradient_equals_ppo_at_sequence_mean():
    # At ratio 1 every clip is inactive and d s / d logp_t = 1 = d r_t / d logp_t: the same gradient.
    torch.manual_seed(0)
    logp = torch.randn(3, 5, dtype=torch.float64) - 2
    advantages = torch.randn(3, 5, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1]], dtype=torch.float64)
    grads = []
    for fn in (gspo_policy_loss, ppo_policy_loss):
        x = logp.clone().requires_grad_(True)
        fn(x, logp, advantages, mask, SEQ)[0].backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])


def _cispo(new, old, advantages, **clips):
    logprobs = new.clone().requires_grad_(True)
    loss, stats = cispo_policy_loss(logprobs, old, advantages, torch.ones_like(new), TOK, **clips)
    loss.backward()
    return loss.item(), logprobs.grad[0].tolist(), stats


def test_cispo_keeps_the_gradient_of_tokens_past_the_clip():
    # Token 1: r = 0.5/0.25 = 2, A = +1, weight capped at 1.28: l = -1.28 * log 0.5, gradient -1.28 / 2
    # (PPO's clip would give 0). Token 2: r = 0.25/0.5 = 0.5, A = -1, no lower bound (clip_low 1): weight 0.5,
    # l = 0.5 * log 0.25, gradient +0.5 / 2. Token mean over 2 tokens.
    new, old = _logs(0.5, 0.25), _logs(0.25, 0.5)
    advantages = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    loss, grad, stats = _cispo(new, old, advantages, clip_low=1.0, clip_high=0.28)
    assert loss == pytest.approx((-1.28 * math.log(0.5) + 0.5 * math.log(0.25)) / 2)
    assert grad == pytest.approx([-0.64, 0.25])
    assert stats["clipfrac"].item() == 0.5 and stats["clipfrac_lower"].item() == 0.0
    # With a lower bound of 0.8 the second token's weight is 0.8: gradient 0.4, and it counts as clipped below.
    _, grad, stats = _cispo(new, old, advantages, clip_low=0.2, clip_high=0.28)
    assert grad == pytest.approx([-0.64, 0.4]) and stats["clipfrac_lower"].item() == 0.5


def test_cispo_on_policy_gradient_is_reinforce():
    # At ratio 1 the weight is 1: the gradient is -A / N per token, the plain policy gradient.
    logp = _logs(0.3, 0.6, 0.1)
    advantages = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    _, grad, _ = _cispo(logp, logp.clone(), advantages)
    assert grad == pytest.approx([-1 / 3, 2 / 3, -0.5 / 3])


def test_the_losses_reject_bad_clip_ranges_and_shapes():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="clip_low"):
        gspo_policy_loss(x, x, x, x, TOK, clip_low=1.0)
    with pytest.raises(ValueError, match="clip_low"):
        cispo_policy_loss(x, x, x, x, TOK, clip_low=1.5)
    with pytest.raises(ValueError, match="advantages has shape"):
        cispo_policy_loss(x, x, torch.zeros(1, 3), x, TOK)


def test_every_row_reports_the_same_statistics_and_reads_its_clip_range_from_the_spec():
    torch.manual_seed(1)
    logp = torch.randn(2, 4, dtype=torch.float64)
    old = logp + 0.3 * torch.randn(2, 4, dtype=torch.float64)
    inputs = PolicyInputs(logp, old, torch.randn(2, 4), torch.ones(2, 4))
    keys = {"clipfrac", "clipfrac_lower", "approx_kl", "ratio_mean", "ratio_max"}
    assert set(POLICY_LOSSES) == {"ppo", "gspo", "cispo"}
    for name, row in POLICY_LOSSES.items():
        assert row.name == name and "et al." in row.source  # each row cites its paper
        loss, stats = row.compute(inputs, TOK, PolicyLossSpec(policy_loss=name, clip_low=0.1, clip_high=0.1))
        assert set(stats) == keys and loss.dim() == 0
    spec = PolicyLossSpec(clip_low=0.1, clip_high=0.3, dual_clip=None)
    direct, _ = ppo_policy_loss(*inputs.tensors(), TOK, clip_low=0.1, clip_high=0.3, dual_clip=None)
    assert POLICY_LOSSES["ppo"].compute(inputs, TOK, spec)[0].item() == pytest.approx(direct.item())
