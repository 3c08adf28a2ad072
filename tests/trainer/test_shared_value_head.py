"""The critic as a value head on the actor (``WorkerSpec.value_head``, ``algo.critic_model=shared``), one FSDP2 rank.

* The values are the head applied to the actor's last hidden state (after the final norm) at the
  position before each response token, as the separate critic aligns them; packed or not.
* The value loss trains the head alone: the actor's weights after an update are those of an actor
  without a head, and the loss of a zero head is 0.5 * mean(returns^2), by hand.
* A checkpoint restores the head, its optimizer and its schedule.
"""

from __future__ import annotations

import pytest
import torch
from test_learner_worker import INIT, batch

from agents.models import tiny_model_path
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.learner_worker import ModelWorker

LORA = LoraSpec(rank=4, alpha=8.0)


def rank(spec: WorkerSpec) -> ModelWorker:
    """One rank in this process, set up."""
    w = ModelWorker(spec, 0, 1, INIT)
    w.setup()
    return w


def actor(value_head: bool = True) -> ModelWorker:
    head = OptimizerSpec(lr=1e-2, warmup_steps=2, total_steps=10) if value_head else None
    return rank(WorkerSpec("actor", str(tiny_model_path()), OptimizerSpec(lr=1e-2), LORA, value_head=head))


def shared_prefix_batch() -> TrainBatch:
    """Three rows whose first 20 tokens agree (they run packed) and whose prompts end at 22, 24 and 22."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 250, (3, 32), generator=generator)
    ids[:, :20] = ids[0, :20]
    mask = torch.zeros(3, 32)
    mask[0, 22:30] = mask[1, 24:32] = mask[2, 22:28] = 1
    attention = torch.ones(3, 32, dtype=torch.long)
    attention[0, 30:] = attention[2, 28:] = 0
    out = TrainBatch(ids, attention, mask, torch.zeros(3, 32), torch.tensor([22, 24, 22]))
    out.old_logprobs = torch.full((3, 32), -7.6) * mask
    out.advantages = torch.randn(3, 32, generator=generator) * mask
    return out


def with_returns(b: TrainBatch) -> TrainBatch:
    b.values = torch.zeros_like(b.response_mask)
    b.returns = torch.arange(b.input_ids.shape[1], dtype=torch.float32)[None, :].expand_as(b.response_mask) / 8
    b.returns = b.returns * b.response_mask
    return b


def agg(b: TrainBatch) -> Aggregation:
    return Aggregation("token-mean", float(b.response_mask.sum()), float(len(b)))


@pytest.mark.parametrize("make_batch", [batch, shared_prefix_batch], ids=["unpacked", "packed"])
def test_values_are_the_head_on_the_last_hidden_state_before_each_response_token(make_batch):
    w = actor()
    head = w.value_head
    with torch.no_grad():
        head.weight.normal_(generator=torch.Generator().manual_seed(2))
        head.bias.fill_(0.25)
    b = make_batch()
    values = w.compute_values(b, 2)
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_path())  # the adapters start as the identity
    with torch.no_grad():
        hidden = plain.model(input_ids=b.input_ids, attention_mask=b.attention_mask).last_hidden_state
        by_position = head(hidden).squeeze(-1)  # [B, L]: the value of the state after each token
    expected = torch.zeros_like(values)
    for row in range(len(b)):
        for column in range(int(b.prompt_lengths[row]), int(b.attention_mask[row].sum())):
            expected[row, column] = by_position[row, column - 1]
    torch.testing.assert_close(values, expected, atol=1e-5, rtol=0)
    assert (expected != 0).sum() > 0


def test_one_forward_gives_the_logprobs_and_the_values():
    w = actor()
    with torch.no_grad():
        w.value_head.weight.normal_(generator=torch.Generator().manual_seed(3))
    b = shared_prefix_batch()
    logprobs, values = w.compute_logprobs_and_values(b, 0.7, 2)
    torch.testing.assert_close(logprobs, w.compute_logprobs(b, 0.7, 2), atol=0, rtol=0)
    torch.testing.assert_close(values, w.compute_values(b, 2), atol=0, rtol=0)
    assert values.abs().max() > 0 and logprobs.min() < 0


def test_the_value_loss_trains_the_head_alone_and_is_half_the_mean_squared_return_at_zero():
    shared, plain = actor(), actor(value_head=False)
    b = with_returns(batch())
    stats = shared.update_policy(b, agg(b), PolicyLossSpec(value_clip=0.5), 2)
    plain_stats = plain.update_policy(b, agg(b), PolicyLossSpec(), 2)
    # A zero head: V = old V = 0, so the clipped and plain errors agree: 0.5 * token-mean(R^2).
    by_hand = 0.5 * float((b.returns**2).sum() / b.response_mask.sum())
    assert stats.losses["value_head.value_loss"] == pytest.approx(by_hand, rel=1e-5)
    assert stats.losses["policy_loss"] == pytest.approx(plain_stats.losses["policy_loss"], rel=1e-6)
    assert stats.grad_norm == pytest.approx(plain_stats.grad_norm, rel=1e-6)
    assert stats.per_step["value_head.lr"] == pytest.approx(5e-3)  # the head's own schedule: warm-up step 1 of 2
    shared_weights, plain_weights = shared.full_state_dict(), plain.full_state_dict()
    assert set(shared_weights) == set(plain_weights)  # the engine gets the policy alone
    for name, tensor in shared_weights.items():
        torch.testing.assert_close(tensor, plain_weights[name], atol=0, rtol=0, msg=name)
    assert shared.value_head.weight.abs().max() > 0


def test_the_head_fits_the_returns_over_updates():
    w = actor()
    b = with_returns(shared_prefix_batch())
    losses = []
    for _ in range(12):
        losses.append(w.update_policy(b, agg(b), PolicyLossSpec(value_clip=None), 3).losses["value_head.value_loss"])
        b.values = w.compute_values(b, 3)
    assert losses[-1] < 0.3 * losses[0]


def test_a_checkpoint_restores_the_head_its_optimizer_and_schedule(tmp_path):
    w = actor()
    b = with_returns(batch())
    w.update_policy(b, agg(b), PolicyLossSpec(), 2)
    w.save_checkpoint(str(tmp_path / "actor"))
    head = {k: v.clone() for k, v in w.value_head.state_dict().items()}
    after_saved = w.update_policy(b, agg(b), PolicyLossSpec(), 2)
    continued = {k: v.clone() for k, v in w.value_head.state_dict().items()}
    w.load_checkpoint(str(tmp_path / "actor"))
    for name, tensor in w.value_head.state_dict().items():
        torch.testing.assert_close(tensor, head[name], atol=0, rtol=0)
    after_loaded = w.update_policy(b, agg(b), PolicyLossSpec(), 2)
    assert after_loaded.per_step == pytest.approx(after_saved.per_step)
    for name, tensor in w.value_head.state_dict().items():  # Adam's moments came back too
        torch.testing.assert_close(tensor, continued[name], atol=1e-7, rtol=0)
    actor(value_head=False).save_checkpoint(str(tmp_path / "plain"))
    with pytest.raises(ValueError, match="no value head"):
        actor().load_checkpoint(str(tmp_path / "plain"))


def test_only_an_actor_carries_the_head_and_only_a_critic_or_a_head_gives_values():
    with pytest.raises(ValueError, match="only the actor"):
        rank(WorkerSpec("critic", str(tiny_model_path()), OptimizerSpec(), value_head=OptimizerSpec()))
    plain = actor(value_head=False)
    for call in (lambda: plain.compute_values(batch(), 2), lambda: plain.compute_logprobs_and_values(batch(), 1.0, 2)):
        with pytest.raises(ValueError, match="no value head"):
            call()
