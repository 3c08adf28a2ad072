"""The actor's objective (trainer/algos/objective.py): each term's share of the total, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algos import POLICY_LOSSES, ActorTerms, Aggregation, PolicyInputs, PolicyLossSpec, actor_objective

MASK = torch.tensor([[1.0, 1.0, 0.0]])
LOGP = torch.tensor([[math.log(0.5), math.log(0.25), 0.0]], dtype=torch.float64)


def _terms(**extra) -> tuple[ActorTerms, torch.Tensor]:
    logprobs = LOGP.clone().requires_grad_(True)
    policy = PolicyInputs(logprobs, LOGP.clone(), torch.ones(1, 3, dtype=torch.float64), MASK)
    return ActorTerms(policy=policy, **extra), logprobs


def test_the_total_is_policy_minus_entropy_plus_kl_plus_value_head_by_hand():
    # On policy (ratio 1), A = 1: PPO's loss is -1 (token mean of -A r). Entropy (0.5, 1.5), coefficient 0.1:
    # -0.1 * 1.0. KL k1 = logp - ref_logp = (0.2, 0.4), coefficient 0.5: +0.5 * 0.3. Value head (clip off):
    # 0.5 * mean((1 - 0)^2, (2 - 0)^2) = 1.25. Total -1 - 0.1 + 0.15 + 1.25 = 0.3; "loss" leaves the head out.
    entropy = torch.tensor([[0.5, 1.5, 9.0]], dtype=torch.float64, requires_grad=True)
    values = torch.tensor([[1.0, 2.0, 7.0]], dtype=torch.float64, requires_grad=True)
    terms, logprobs = _terms(
        entropy=entropy,
        ref_logprobs=LOGP - torch.tensor([[0.2, 0.4, 3.0]], dtype=torch.float64),
        values=values,
        old_values=values.detach().clone(),
        returns=torch.zeros(1, 3, dtype=torch.float64),
    )
    spec = PolicyLossSpec(entropy_coef=0.1, kl_coef=0.5, kl_estimator="k1", value_clip=None)
    total, stats, losses = actor_objective(terms, spec, Aggregation("token-mean"))
    assert total.item() == pytest.approx(0.3)
    assert losses["policy_loss"].item() == pytest.approx(-1.0)
    assert losses["loss"].item() == pytest.approx(-0.95)
    assert losses["value_head.value_loss"].item() == pytest.approx(1.25)
    assert stats["entropy"].item() == pytest.approx(1.0) and stats["kl_ref"].item() == pytest.approx(0.3)
    assert stats["value_head.value_mean"].item() == pytest.approx(1.5)
    total.backward()
    # d/d logp: PPO -A r / 2 = -0.5, KL 0.5 / 2 = +0.25; the entropy's -0.1 / 2; the head's (V - R) / 2.
    assert logprobs.grad[0].tolist() == pytest.approx([-0.25, -0.25, 0.0])
    assert entropy.grad[0].tolist() == pytest.approx([-0.05, -0.05, 0.0])
    assert values.grad[0].tolist() == pytest.approx([0.5, 1.0, 0.0])


def test_statistics_without_a_term_in_the_loss():
    # Coefficients 0: entropy and KL are reported but do not move the total.
    terms, _ = _terms(
        entropy=torch.tensor([[0.5, 1.5, 0.0]], dtype=torch.float64),
        ref_logprobs=LOGP - torch.tensor([[0.2, 0.4, 0.0]], dtype=torch.float64),
    )
    total, stats, losses = actor_objective(terms, PolicyLossSpec(kl_estimator="k1"), Aggregation("token-mean"))
    assert total.item() == pytest.approx(-1.0) == losses["loss"].item()
    assert stats["kl_ref"].item() == pytest.approx(0.3) and stats["entropy"].item() == pytest.approx(1.0)
    assert "value_head.value_loss" not in losses
    bare, _ = _terms()
    _, stats, _ = actor_objective(bare, PolicyLossSpec(), Aggregation("token-mean"))
    assert "entropy" not in stats and "kl_ref" not in stats


def test_the_value_head_is_a_token_mean_whatever_the_policys_aggregation():
    # Two rows of 1 and 3 sampled tokens, squared errors (4) and (0, 0, 0): halved, the token mean is 0.5 * 4 / 4;
    # the policy's sequence mean would give 0.5 * (4 + 0) / 2 = 1.0.
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    zeros = torch.zeros(2, 3, dtype=torch.float64)
    values = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    terms = ActorTerms(
        policy=PolicyInputs(zeros.clone().requires_grad_(True), zeros, zeros, mask),
        values=values,
        old_values=values,
        returns=zeros,
    )
    _, _, losses = actor_objective(terms, PolicyLossSpec(value_clip=None), Aggregation("seq-mean-token-mean"))
    assert losses["value_head.value_loss"].item() == pytest.approx(0.5 * 4 / 4)


def test_the_objective_calls_the_row_its_spec_names():
    terms, _ = _terms()
    agg = Aggregation("seq-mean-token-mean")
    for name, row in POLICY_LOSSES.items():
        spec = PolicyLossSpec(policy_loss=name, clip_low=0.1, clip_high=0.1)
        total, _, losses = actor_objective(terms, spec, agg)
        assert total.item() == pytest.approx(row.compute(terms.policy, agg, spec)[0].item())
        assert losses["policy_loss"].item() == pytest.approx(total.item())


def test_missing_inputs_and_unknown_losses_are_clear_errors():
    terms, _ = _terms()
    with pytest.raises(ValueError, match="unknown policy loss 'gpso'"):
        actor_objective(terms, PolicyLossSpec(policy_loss="gpso"), Aggregation())
    with pytest.raises(ValueError, match="entropy_coef > 0 needs the entropy"):
        actor_objective(terms, PolicyLossSpec(entropy_coef=0.1), Aggregation())
    values = torch.zeros(1, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="old_values and returns"):
        actor_objective(ActorTerms(policy=terms.policy, values=values), PolicyLossSpec(), Aggregation())
