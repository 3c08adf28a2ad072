"""RL algorithms as pure tensor functions: advantage estimators, losses, off-policy correction.

No models, configs or processes here: tensors in, tensors out, shapes documented on every function
(``B`` trajectories, ``T`` token positions, ``mask`` 1 exactly on sampled tokens). Conventions and
their sources are in :mod:`trainer.algos.advantages`, :mod:`trainer.algos.losses` and
:mod:`trainer.algos.off_policy`.
"""

from trainer.algos.advantages import (
    broadcast_to_tokens,
    group_advantages,
    group_statistics,
    place_turn_rewards,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
    sign_weighted,
    success_signal,
)
from trainer.algos.chunked_logits import chunked_token_logprobs
from trainer.algos.filtering import select_groups_by_std
from trainer.algos.losses import (
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    Aggregation,
    aggregate,
    apply_kl_penalty,
    entropy_from_logits,
    explained_variance,
    kl_estimate,
    ppo_policy_loss,
    sft_loss,
    token_logprobs,
    value_loss,
)
from trainer.algos.masked import masked_mean, masked_sum, masked_var, masked_whiten
from trainer.algos.multiturn import discounted_returns, gae_advantages, rewards_on_sampled_tokens
from trainer.algos.objective import ActorTerms, actor_objective
from trainer.algos.off_policy import (
    IS_LEVELS,
    IS_MODES,
    TIS_LEVELS,
    logprob_mismatch,
    tis_level_for_step,
    truncated_is_weights,
)
from trainer.algos.policy_losses import (
    POLICY_LOSSES,
    PolicyInputs,
    PolicyLoss,
    PolicyLossSpec,
    cispo_policy_loss,
    gspo_policy_loss,
)

__all__ = [
    "IS_LEVELS",
    "IS_MODES",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "TIS_LEVELS",
    "ActorTerms",
    "Aggregation",
    "PolicyInputs",
    "PolicyLoss",
    "PolicyLossSpec",
    "actor_objective",
    "aggregate",
    "apply_kl_penalty",
    "broadcast_to_tokens",
    "chunked_token_logprobs",
    "cispo_policy_loss",
    "discounted_returns",
    "entropy_from_logits",
    "explained_variance",
    "gae_advantages",
    "group_advantages",
    "group_statistics",
    "gspo_policy_loss",
    "kl_estimate",
    "logprob_mismatch",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "place_turn_rewards",
    "ppo_policy_loss",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "rewards_on_sampled_tokens",
    "rloo_advantages",
    "select_groups_by_std",
    "sft_loss",
    "sign_weighted",
    "success_signal",
    "tis_level_for_step",
    "token_logprobs",
    "truncated_is_weights",
    "value_loss",
]
