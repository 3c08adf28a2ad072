"""The actor's objective as one pure function: policy loss, entropy bonus, KL term and the shared value head's loss.

The learner's worker computes the tensors of a micro-batch (one forward), calls :func:`actor_objective` and
runs ``backward`` on the total it returns; everything between the model's outputs and the scalar it
minimises is here, testable on hand-derived values without a model or a process group::

    total = policy_loss                                   (the row algo.policy_loss names, trainer.algos.policy_losses)
          - entropy_coef * aggregate(entropy)             (when entropy_coef > 0)
          + kl_coef * aggregate(kl(logp, ref_logp))       (when kl_coef > 0 and reference logprobs are given)
          + value_loss(values, old_values, returns)       (a shared value head: token-mean, its own clip)

Every term is aggregated with the mini-batch's global normalisers (:class:`trainer.algos.Aggregation`), so
the micro-batches' totals sum to the mini-batch's. The value head's term is always a token mean whatever
``loss_agg_mode`` says (as the separate critic's); its features are detached by the worker, so its gradient
reaches the head alone and the policy's gradient is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from trainer.algos.losses import Aggregation, aggregate, kl_estimate, value_loss
from trainer.algos.masked import masked_mean
from trainer.algos.policy_losses import POLICY_LOSSES, PolicyInputs, PolicyLossSpec

__all__ = ["ActorTerms", "actor_objective"]


@dataclass(frozen=True)
class ActorTerms:
    """One micro-batch's tensors for the objective, all ``[B, T]`` on one device.

    ``policy``: what the policy loss reads (logprobs with gradient, old logprobs, advantages, mask, IS
    weights). ``entropy``: each position's entropy (with gradient when there is an entropy bonus; ``None``
    when not computed). ``ref_logprobs``: the reference policy's (``None``: no KL term or statistic).
    ``values``/``old_values``/``returns``: the shared value head's outputs, the rollout's values and the
    returns (all three or none).
    """

    policy: PolicyInputs
    entropy: Tensor | None = None
    ref_logprobs: Tensor | None = None
    values: Tensor | None = None
    old_values: Tensor | None = None
    returns: Tensor | None = None


def actor_objective(
    terms: ActorTerms, spec: PolicyLossSpec, agg: Aggregation
) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """The actor's loss on one micro-batch: ``(total, stats, losses)``.

    ``total`` carries the gradient. ``stats``: the policy loss's statistics, ``entropy`` (when given),
    ``kl_ref`` (when reference logprobs are given, whether or not the KL joins the loss) and the value head's
    statistics prefixed ``value_head.`` (detached token means over this micro-batch's sampled tokens).
    ``losses`` (detached): ``policy_loss``, ``loss`` (the actor's total without the value head's term) and
    ``value_head.value_loss`` when there is a value head.
    """
    if spec.policy_loss not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {spec.policy_loss!r}; the table has {', '.join(POLICY_LOSSES)}")
    mask = terms.policy.mask
    policy_loss, policy_stats = POLICY_LOSSES[spec.policy_loss].compute(terms.policy, agg, spec)
    stats = dict(policy_stats)
    total = policy_loss
    if terms.entropy is not None:
        if spec.entropy_coef > 0:
            total = total - spec.entropy_coef * aggregate(terms.entropy, mask, agg)
        stats["entropy"] = masked_mean(terms.entropy.detach(), mask)
    elif spec.entropy_coef > 0:
        raise ValueError("entropy_coef > 0 needs the entropy of each position (ActorTerms.entropy)")
    if terms.ref_logprobs is not None:
        kl = kl_estimate(terms.policy.logprobs, terms.ref_logprobs, spec.kl_estimator)
        if spec.kl_coef > 0:
            total = total + spec.kl_coef * aggregate(kl, mask, agg)
        stats["kl_ref"] = masked_mean(kl.detach(), mask)
    losses = {"policy_loss": policy_loss.detach(), "loss": total.detach()}
    if terms.values is not None:
        if terms.old_values is None or terms.returns is None:
            raise ValueError("a value head's loss needs old_values and returns with the values")
        value_agg = Aggregation("token-mean", agg.num_tokens, agg.num_sequences, agg.norm_length)
        head_loss, head_stats = value_loss(
            terms.values, terms.old_values, terms.returns, mask, value_agg, clip_range=spec.value_clip
        )
        total = total + head_loss
        stats.update({f"value_head.{name}": value for name, value in head_stats.items()})
        losses["value_head.value_loss"] = head_loss.detach()
    return total, stats, losses
