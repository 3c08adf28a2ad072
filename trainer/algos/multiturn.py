"""Token-level recursions over multi-turn trajectories: discounted returns and GAE.

A multi-turn trajectory lays its turns out in one row of ``T`` positions: the model's sampled tokens
(``mask`` 1) alternate with observation gaps (``mask`` 0: the environment's reply rendered by the chat
template), and the row ends in padding (``mask`` 0). Both recursions run backwards over the *sampled*
tokens only, as if the gaps were cut out of the row: a gap position is not a time step (no discount,
no value, no TD error) and does not reset what is carried back to the earlier turns. Cutting the gaps
out and running the single-turn recursion gives the same numbers (a property the tests check).

Rewards on mask-0 positions (the integrator normally places none there) count as received on the
nearest sampled token *before* them, undiscounted: an outcome reward written on the last position of
a row whose last turn is an observation still reaches the last sampled token. Rewards before the
first sampled token of a row (in the prompt) have no token to credit and are dropped.

Both loops are vectorised over ``B`` and run a Python loop over ``T``; the results are detached.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.algos.masked import masked_whiten

__all__ = ["discounted_returns", "gae_advantages", "rewards_on_sampled_tokens"]


def _check_bt(name: str, x: Tensor, mask: Tensor) -> None:
    if x.dim() != 2 or x.shape != mask.shape:
        shapes = f"{tuple(x.shape)} and {tuple(mask.shape)}"
        raise ValueError(f"expected {name} and mask of the same shape [B, T], got {shapes}")


def _float_dtype(*tensors: Tensor) -> torch.dtype:
    dtype = torch.get_default_dtype()
    for tensor in tensors:
        if tensor.is_floating_point():
            dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype


def rewards_on_sampled_tokens(token_rewards: Tensor, mask: Tensor) -> Tensor:
    """``[B, T]`` rewards moved off mask-0 positions onto the nearest sampled token before them.

    Rewards already on sampled tokens stay; a reward before the first sampled token of its row is
    dropped. The result is 0 wherever ``mask`` is 0.
    """
    _check_bt("token_rewards", token_rewards, mask)
    rewards = token_rewards.detach().to(_float_dtype(token_rewards))
    sampled = mask.to(device=rewards.device) != 0
    pending = rewards.new_zeros(rewards.shape[0])  # [B] gap rewards waiting for the previous sampled token
    columns = []
    for t in reversed(range(rewards.shape[1])):
        here = sampled[:, t]
        columns.append(torch.where(here, rewards[:, t] + pending, 0.0))
        pending = torch.where(here, 0.0, pending + rewards[:, t])
    return torch.stack(columns[::-1], dim=1) if columns else rewards.clone()


def discounted_returns(token_rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Reward-to-go over sampled tokens ``[B, T]``: ``G_t = r_t + gamma * G_{t'}``, ``t'`` the next sampled token.

    ``token_rewards`` ``[B, T]``, ``mask`` ``[B, T]``. Walking backwards, the return is carried across
    observation gaps: a mask-0 position neither resets it nor counts as a discount step (verl's
    REINFORCE++ resets it at every mask-0 token, cutting each turn off from later turns' rewards).
    ``G`` is 0 after the last sampled token and at every mask-0 position. Rewards on mask-0 positions:
    see the module docstring (credited to the sampled token before them).
    """
    rewards = rewards_on_sampled_tokens(token_rewards, mask)
    sampled = mask.to(device=rewards.device) != 0
    running = rewards.new_zeros(rewards.shape[0])  # [B] return from the next sampled token on
    columns = []
    for t in reversed(range(rewards.shape[1])):
        here = sampled[:, t]
        running = torch.where(here, rewards[:, t] + gamma * running, running)
        columns.append(torch.where(here, running, 0.0))
    return torch.stack(columns[::-1], dim=1) if columns else rewards.clone()


def gae_advantages(
    token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0, whiten: bool = True
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over multi-turn trajectories: ``(advantages, returns)``, both ``[B, T]``.

    Schulman et al. 2016 ("High-Dimensional Continuous Control Using GAE"), eq. 16, with the time
    steps being the sampled tokens of a row (``mask`` 1), the gaps stepped over:

        delta_t = r_t + gamma * V_{t'} - V_t        t' = the next sampled token; V_{t'} = 0 after the last
        A_t     = delta_t + gamma * lam * A_{t'}    A_{t'} = 0 after the last

    ``returns = A + V`` (unwhitened ``A``: the value-loss target); then, with ``whiten``, ``A`` is
    whitened over all sampled tokens of the batch (masked mean, unbiased masked variance, eps 1e-8).
    Both results are 0 at mask-0 positions. The last sampled token bootstraps from 0, which is right
    for terminated episodes; a truncated one would need the value of the state it stopped in.
    ``token_rewards``, ``values``: ``[B, T]``; ``values`` at mask-0 positions are never read.
    """
    _check_bt("values", values, mask)
    rewards = rewards_on_sampled_tokens(token_rewards, mask)
    values = values.detach().to(_float_dtype(token_rewards, values))
    rewards = rewards.to(values.dtype)
    sampled = mask.to(device=values.device) != 0
    next_value = values.new_zeros(values.shape[0])  # [B] V of the next sampled token
    next_advantage = values.new_zeros(values.shape[0])  # [B] A of the next sampled token
    columns = []
    for t in reversed(range(values.shape[1])):
        here = sampled[:, t]
        value = torch.where(here, values[:, t], 0.0)  # a NaN in a gap must not leak into the arithmetic
        advantage = rewards[:, t] + gamma * next_value - value + gamma * lam * next_advantage
        next_value = torch.where(here, value, next_value)
        next_advantage = torch.where(here, advantage, next_advantage)
        columns.append(torch.where(here, advantage, 0.0))
    advantages = torch.stack(columns[::-1], dim=1) if columns else values.clone()
    returns = torch.where(sampled, advantages + values, 0.0)
    if whiten:
        advantages = masked_whiten(advantages, mask)
    return advantages, returns
