"""Policy, value and KL losses, logprobs and entropy (trainer/algos/losses.py), against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import (
    Aggregation,
    apply_kl_penalty,
    entropy_from_logits,
    explained_variance,
    kl_estimate,
    ppo_policy_loss,
    token_logprobs,
    value_loss,
)

# PPO cases, clip 0.2 (range [0.8, 1.2]), dual clip 3: (advantage, ratio, per-token loss, d loss / d logp).
#   l1 = -A r, l2 = -A clamp(r, 0.8, 1.2), l = max(l1, l2), for A < 0: min(l, 3 |A|).
#   The gradient w.r.t. logp is d(-A r)/d logp = -A r where l1 is the active branch, else 0.
PPO_CASES = [
    (1.0, 1.1, -1.1, -1.1),  # A > 0, inside: l1 = l2 = -1.1
    (1.0, 1.5, -1.2, 0.0),  # A > 0, above: l1 = -1.5 < l2 = -1.2 -> clipped (counts in clipfrac)
    (1.0, 0.5, -0.5, -0.5),  # A > 0, below: l1 = -0.5 > l2 = -0.8 -> unclipped
    (-1.0, 1.1, 1.1, 1.1),  # A < 0, inside
    (-1.0, 1.5, 1.5, 1.5),  # A < 0, above: l1 = 1.5 > l2 = 1.2 -> unclipped, below the dual bound 3
    (-1.0, 0.5, 0.8, 0.0),  # A < 0, below: l1 = 0.5 < l2 = 0.8 -> clipped (counts in clipfrac)
    (-1.0, 4.0, 3.0, 0.0),  # A < 0, far above: l1 = 4 > l2 = 1.2, dual clip min(4, 3) = 3 (clipfrac_lower)
    (2.0, 0.7, -1.4, -1.4),  # A = 2, below: l1 = -1.4 > l2 = -1.6
]
ADVANTAGES = torch.tensor([[c[0] for c in PPO_CASES]], dtype=torch.float64)
OLD = torch.full((1, len(PPO_CASES)), -1.0, dtype=torch.float64)
NEW = OLD + torch.tensor([[math.log(c[1]) for c in PPO_CASES]], dtype=torch.float64)
ONES = torch.ones(1, len(PPO_CASES))


def test_ppo_per_token_losses_and_gradients_by_hand():
    for j, (_, _, loss_j, grad_j) in enumerate(PPO_CASES):
        only_j = torch.zeros(1, len(PPO_CASES))
        only_j[0, j] = 1
        logprobs = NEW.clone().requires_grad_(True)
        loss, _ = ppo_policy_loss(logprobs, OLD, ADVANTAGES, only_j, Aggregation())
        loss.backward()
        assert loss.item() == pytest.approx(loss_j), f"case {j}"
        assert logprobs.grad[0, j].item() == pytest.approx(grad_j), f"case {j}"
        assert logprobs.grad.sum().item() == pytest.approx(grad_j)  # other tokens are masked out


def test_ppo_token_mean_and_statistics():
    loss, stats = ppo_policy_loss(NEW, OLD, ADVANTAGES, ONES, Aggregation())
    # (-1.1 - 1.2 - 0.5 + 1.1 + 1.5 + 0.8 + 3.0 - 1.4) / 8 = 2.2 / 8
    assert loss.item() == pytest.approx(2.2 / 8)
    assert stats["clipfrac"].item() == 2 / 8  # cases 1 and 5
    assert stats["clipfrac_lower"].item() == 1 / 8  # case 6
    assert stats["approx_kl"].item() == pytest.approx(-sum(math.log(c[1]) for c in PPO_CASES) / 8)
    assert stats["ratio_mean"].item() == pytest.approx(10.9 / 8)  # 1.1 + 1.5 + 0.5 + 1.1 + 1.5 + 0.5 + 4 + 0.7
    assert stats["ratio_max"].item() == pytest.approx(4.0)
    assert all(s.dim() == 0 and not s.requires_grad for s in stats.values())


def test_ppo_without_dual_clip_asymmetric_clip_and_is_weights():
    loss, stats = ppo_policy_loss(NEW, OLD, ADVANTAGES, ONES, Aggregation("seq-mean-token-sum"), dual_clip=None)
    assert loss.item() == pytest.approx(2.2 + 1.0)  # case 6 keeps l1 = 4 instead of 3
    assert stats["clipfrac_lower"].item() == 0.0
    # clip-higher: range [0.8, 1.6] lets case 1 (r = 1.5) through: -1.5 instead of -1.2
    loss, stats = ppo_policy_loss(NEW, OLD, ADVANTAGES, ONES, Aggregation("seq-mean-token-sum"), clip_high=0.6)
    assert loss.item() == pytest.approx(2.2 - 0.3)
    assert stats["clipfrac"].item() == 1 / 8
    # importance weights scale each token's loss and receive no gradient
    weights = torch.tensor([[2.0, 1, 1, 1, 1, 1, 0.5, 1]], dtype=torch.float64, requires_grad=True)
    logprobs = NEW.clone().requires_grad_(True)
    loss, _ = ppo_policy_loss(logprobs, OLD, ADVANTAGES, ONES, Aggregation("seq-mean-token-sum"), is_weights=weights)
    assert loss.item() == pytest.approx(2.2 - 1.1 - 1.5)  # token 0: -1.1 -> -2.2, token 6: 3 -> 1.5
    loss.backward()
    assert weights.grad is None
    assert logprobs.grad[0, 0].item() == pytest.approx(2 * -1.1)  # the weight scales the gradient too


def test_ppo_ratio_is_clamped_and_masked_positions_are_ignored():
    logprobs = torch.tensor([[0.0, -1.0, 5.0]])
    old = torch.tensor([[-50.0, -1.0, -100.0]])  # log ratio 50 -> clamped to 20; the last token is masked out
    mask = torch.tensor([[1, 1, 0]])
    loss, stats = ppo_policy_loss(logprobs, old, torch.tensor([[-1.0, 1.0, 1.0]]), mask, Aggregation(), dual_clip=None)
    # token 0: A = -1, r = e^20, l = e^20; token 1: r = 1, l = -1
    assert loss.item() == pytest.approx((math.exp(20) - 1) / 2)
    assert stats["ratio_max"].item() == pytest.approx(math.exp(20))
    assert stats["approx_kl"].item() == pytest.approx(-20 / 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"clip_low": 1.0}, "clip_low"), ({"clip_high": -0.1}, "clip_high"), ({"dual_clip": 1.0}, "dual_clip")],
)
def test_ppo_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ppo_policy_loss(NEW, OLD, ADVANTAGES, ONES, Aggregation(), **kwargs)
    with pytest.raises(ValueError, match="advantages has shape"):
        ppo_policy_loss(NEW, OLD, ADVANTAGES[:, :3], ONES, Aggregation())


def test_value_loss_by_hand():
    values = torch.tensor([[1.0, 2.0, 2.0, 0.0, 7.0]], requires_grad=True)
    old = torch.tensor([[0.8, 1.0, 1.0, 0.0, 0.0]])
    returns = torch.tensor([[1.5, 1.0, 2.5, 3.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    # vclip = old + clamp(V - old, -0.5, 0.5) = 1.0, 1.5, 1.5, 0.0
    # (V - R)^2 = 0.25, 1, 0.25, 9;  (vclip - R)^2 = 0.25, 0.25, 1, 9;  max = 0.25, 1, 1, 9
    loss, stats = value_loss(values, old, returns, mask, Aggregation())
    assert loss.item() == pytest.approx(0.5 * 11.25 / 4)
    assert stats["vf_clipfrac"].item() == 0.25  # token 2 only
    assert stats["value_mean"].item() == pytest.approx(5.0 / 4)
    # R = 1.5, 1, 2.5, 3: mean 2, var 2.5/3; R - V = 0.5, -1, 0.5, 3: mean 0.75, var 8.25/3
    assert explained_variance(values, returns, mask).item() == pytest.approx(1 - 8.25 / 2.5)
    loss.backward()
    # d/dV of 0.5 * (1/4) * max(...) is (V - R) / 4 through whichever branch is active. Tokens 0 and 3:
    # the clip is inactive (vclip == V), both branches agree: -0.5 / 4 and -3 / 4. Token 1: the unclipped
    # branch, (2 - 1) / 4. Token 2: the clipped branch is the larger, its clamp has no gradient: 0.
    # Token 4 is masked out: 0.
    assert values.grad[0].tolist() == pytest.approx([-0.125, 0.25, 0.0, -0.75, 0.0])
    unclipped, _ = value_loss(values, old, returns, mask, Aggregation(), clip_range=None)
    assert unclipped.item() == pytest.approx(0.5 * (0.25 + 1 + 0.25 + 9) / 4)


def test_explained_variance_is_nan_for_constant_returns():
    values = torch.tensor([[1.0, 2.0, 5.0]])
    assert math.isnan(explained_variance(values, torch.ones(1, 3), torch.ones(1, 3)).item())
    assert explained_variance(values, values, torch.tensor([[1, 1, 0]])).item() == 1.0  # perfect on sampled tokens


def test_kl_estimators_by_hand_with_clamping():
    logprobs = torch.tensor([-1.0, -2.0, -0.5, 0.0, -30.0], dtype=torch.float64)
    ref = torch.tensor([-1.5, -1.0, -0.5, -25.0, 0.0], dtype=torch.float64)
    delta = [0.5, -1.0, 0.0, 25.0, -30.0]
    assert kl_estimate(logprobs, ref, "k1").tolist() == delta
    assert kl_estimate(logprobs, ref, "abs").tolist() == [0.5, 1.0, 0.0, 25.0, 30.0]
    assert kl_estimate(logprobs, ref, "k2").tolist() == [0.125, 0.5, 0.0, 312.5, 450.0]
    # k3 = exp(-Δ) + Δ - 1: e^-0.5 - 0.5, e^1 - 2, 0; Δ = 25 -> clamped to 20: e^-20 + 19 -> result clamped to 10;
    # Δ = -30 -> clamped to -20: e^20 - 21 -> 10 (without the clamps: 24 and e^30 - 31)
    expected = [math.exp(-0.5) - 0.5, math.e - 2, 0.0, 10.0, 10.0]
    assert kl_estimate(logprobs, ref, "k3").tolist() == pytest.approx(expected)
    with pytest.raises(ValueError, match="k1, abs, k2, k3"):
        kl_estimate(logprobs, ref, "low_var_kl")


def test_kl_penalty_applies_on_sampled_tokens_only():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 2.0]])
    kl = torch.tensor([[0.1, 0.2, 0.3, 0.4]], requires_grad=True)
    penalised = apply_kl_penalty(rewards, kl, torch.tensor([[1, 1, 1, 0]]), beta=0.5)
    assert penalised[0].tolist() == pytest.approx([-0.05, -0.1, 0.85, 2.0])
    assert not penalised.requires_grad


def test_token_logprobs_by_hand_and_validation():
    # logits log(1), log(2), log(5): logsumexp = log 8
    logits = torch.log(torch.tensor([[[1.0, 2.0, 5.0], [4.0, 2.0, 2.0]]]))
    logprobs = token_logprobs(logits, torch.tensor([[2, 0]]))
    assert logprobs[0].tolist() == pytest.approx([math.log(5 / 8), math.log(4 / 8)])
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
        token_logprobs(logits, torch.tensor([[3, 0]]))
    with pytest.raises(ValueError, match=r"logits \[..., V\] and token_ids"):
        token_logprobs(logits, torch.tensor([[1]]))


def test_half_precision_logits_are_upcast_in_chunks():
    generator = torch.Generator().manual_seed(0)
    logits = (4 * torch.randn(3, 700, 11, generator=generator)).to(torch.bfloat16)  # 2100 rows: three chunks
    ids = torch.randint(0, 11, (3, 700), generator=generator)
    reference = torch.log_softmax(logits.double(), dim=-1).gather(-1, ids[..., None]).squeeze(-1)
    logprobs = token_logprobs(logits, ids)
    assert logprobs.dtype == torch.float32
    assert torch.allclose(logprobs.double(), reference, atol=1e-5)
    entropy = entropy_from_logits(logits)
    probs = torch.softmax(logits.double(), dim=-1)
    assert torch.allclose(entropy.double(), -(probs * probs.log()).sum(-1), atol=1e-5)


def test_entropy_by_hand():
    # p = (1/4, 1/4, 1/2): H = 2 * (1/4) ln 4 + (1/2) ln 2 = 1.5 ln 2
    assert entropy_from_logits(torch.log(torch.tensor([1.0, 1.0, 2.0]))).item() == pytest.approx(1.5 * math.log(2))
    # a banned token (-inf logit) adds nothing instead of 0 * -inf = NaN: two equal tokens, ln 2
    assert entropy_from_logits(torch.tensor([[0.0, 0.0, -math.inf]])).tolist() == pytest.approx([math.log(2)])
