"""Chunked token logprobs and entropy (trainer.algos.chunked_token_logprobs) against the full logits' values.

* Values and gradients (hidden states, head weight and bias) equal those of ``token_logprobs`` and
  ``entropy_from_logits`` on the whole ``[N, V]`` logits, whatever the chunk size (dividing N or not),
  at any temperature; ``gradcheck`` on a tiny float64 case.
* With the head frozen (LoRA) the forward makes the hidden states' gradient vectors and the backward makes no
  logits; the gradients equal the full logits' all the same, with or without the entropy's vector made early
  (``entropy_grad``), and ``gradcheck`` holds on them.
* A hand-derived case: two equal logits give logprob -log 2 and entropy log 2.
* On the tiny Llama (one FSDP2 rank, gloo): a worker with ``logits_chunk_size`` 3 gives the logprobs,
  reference logprobs, values and updates (PPO with an entropy bonus and the value loss, then SFT) of one
  without chunking, packed rows or not, with LoRA or every weight trained (the tied head included).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.models import tiny_model_path
from trainer.algos import Aggregation, PolicyLossSpec, chunked_token_logprobs, entropy_from_logits, token_logprobs
from trainer.algos.chunked_logits import _gradients_in_forward
from trainer.batch import TrainBatch
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec, decoder_layers
from trainer.learner_worker import ModelWorker

INIT = "tcp://127.0.0.1:29883"


def case(n: int, hidden: int, vocab: int, dtype: torch.dtype, seed: int = 0, bias: bool = True):
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(n, hidden, generator=generator, dtype=dtype).requires_grad_()
    w = (torch.randn(vocab, hidden, generator=generator, dtype=dtype) * 0.5).requires_grad_()
    b = (torch.randn(vocab, generator=generator, dtype=dtype) * 0.1).requires_grad_() if bias else None
    ids = torch.randint(0, vocab, (n,), generator=generator)
    return h, w, b, ids


def reference(h, w, b, ids, temperature):
    logits = torch.nn.functional.linear(h, w, b) / temperature
    return token_logprobs(logits, ids), entropy_from_logits(logits)


def grads(outputs, inputs, weights):
    loss = sum((o * c).sum() for o, c in zip(outputs, weights, strict=True))
    return torch.autograd.grad(loss, [x for x in inputs if x is not None])


def test_two_equal_logits_give_minus_log_two_and_entropy_log_two():
    # W = [[1], [1]], h = [[0.7]]: both logits 0.7, so p = (1/2, 1/2): logprob = -log 2, H = log 2.
    h, w = torch.tensor([[0.7]]), torch.ones(2, 1)
    logprobs, entropy = chunked_token_logprobs(h, w, None, torch.tensor([1]), entropy=True)
    torch.testing.assert_close(logprobs, torch.tensor([-math.log(2)]))
    torch.testing.assert_close(entropy, torch.tensor([math.log(2)]))


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("chunk_size", [1, 3, 7, 64])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_and_gradients_equal_the_full_logits(dtype, tol, chunk_size, temperature):
    h, w, b, ids = case(7, 5, 11, dtype)
    want_lp, want_h = reference(h, w, b, ids, temperature)
    lp, ent = chunked_token_logprobs(h, w, b, ids, temperature=temperature, chunk_size=chunk_size, entropy=True)
    torch.testing.assert_close(lp, want_lp, atol=tol, rtol=tol)
    torch.testing.assert_close(ent, want_h, atol=tol, rtol=tol)
    coef = torch.linspace(-1, 2, 7, dtype=dtype), torch.linspace(0.5, -0.3, 7, dtype=dtype)
    for got, want in zip(grads((lp, ent), (h, w, b), coef), grads((want_lp, want_h), (h, w, b), coef), strict=True):
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_logprob_gradient_alone_and_frozen_head():
    # Without the entropy, and with the head frozen (LoRA): only the hidden states receive a gradient.
    h, w, b, ids = case(5, 4, 9, torch.float64, bias=False)
    w = w.detach()
    lp, ent = chunked_token_logprobs(h, w, None, ids, chunk_size=2)
    assert ent is None
    (got,) = torch.autograd.grad(lp.sum(), h)
    (want,) = torch.autograd.grad(reference(h, w, None, ids, 1.0)[0].sum(), h)
    torch.testing.assert_close(got, want)


def test_a_frozen_head_makes_the_gradients_in_the_forward_only_when_a_gradient_is_wanted():
    h, w, b, ids = case(3, 4, 9, torch.float32)
    assert not _gradients_in_forward(h, w, b)  # the head trains: its gradient needs the logits again
    assert _gradients_in_forward(h, w.detach(), b.detach())
    assert _gradients_in_forward(h, w.detach(), None)
    assert not _gradients_in_forward(h.detach(), w.detach(), None)  # nothing to differentiate
    with torch.no_grad():
        assert not _gradients_in_forward(h, w.detach(), None)  # scoring: no backward follows


@pytest.mark.parametrize("entropy_grad", [True, False], ids=["entropy-early", "entropy-recomputed"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_a_frozen_head_gives_the_full_logits_gradients(monkeypatch, entropy_grad, with_bias):
    import trainer.algos.chunked_logits as chunked

    h, w, b, ids = case(7, 5, 11, torch.float64, bias=with_bias)
    w, b = w.detach(), None if b is None else b.detach()
    logits_made = []
    scaled = chunked._scaled_logits
    monkeypatch.setattr(chunked, "_scaled_logits", lambda *a: logits_made.append(1) or scaled(*a))
    lp, ent = chunked_token_logprobs(h, w, b, ids, temperature=0.7, chunk_size=3, entropy=True, entropy_grad=True)
    forward_chunks = len(logits_made)
    assert forward_chunks == 3
    want_lp, want_h = reference(h, w, b, ids, 0.7)
    torch.testing.assert_close(lp, want_lp, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ent, want_h, atol=1e-10, rtol=1e-10)
    coef = torch.linspace(-1, 2, 7, dtype=torch.float64), torch.linspace(0.5, -0.3, 7, dtype=torch.float64)
    if not entropy_grad:  # the same call without the entropy's vector: its part of the backward recomputes
        lp, ent = chunked_token_logprobs(h, w, b, ids, temperature=0.7, chunk_size=3, entropy=True)
        forward_chunks = len(logits_made)
    (logprob_only,) = torch.autograd.grad(lp.sum(), h, retain_graph=True)  # the logprobs' vector alone
    want_only = torch.autograd.grad(want_lp.sum(), h, retain_graph=True)[0]
    torch.testing.assert_close(logprob_only, want_only, atol=1e-10, rtol=1e-10)
    (got,) = grads((lp, ent), (h,), coef)
    (want,) = grads((want_lp, want_h), (h,), coef)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)
    assert len(logits_made) - forward_chunks == (0 if entropy_grad else 3)  # logits made again in the backward


def test_a_frozen_bf16_head_gives_the_full_logits_gradients_to_bf16_rounding():
    h, w, b, ids = case(6, 8, 32, torch.float32, bias=False)
    h16, w16 = h.detach().bfloat16().requires_grad_(), w.detach().bfloat16()
    lp, ent = chunked_token_logprobs(h16, w16, None, ids, chunk_size=4, entropy=True, entropy_grad=True)
    assert lp.dtype == ent.dtype == torch.float32
    coef = torch.linspace(-1, 2, 6), torch.linspace(0.5, -0.3, 6)
    (got,) = grads((lp, ent), (h16,), coef)
    assert got.dtype == torch.bfloat16
    want_lp, want_h = reference(h16.float(), w16.float(), None, ids, 1.0)
    (want,) = torch.autograd.grad((want_lp * coef[0]).sum() + (want_h * coef[1]).sum(), h16)
    torch.testing.assert_close(got.float(), want.float(), atol=0.05, rtol=0.02)


def test_gradcheck_float64():
    h, w, b, ids = case(5, 3, 6, torch.float64)

    def fn(h, w, b):
        return chunked_token_logprobs(h, w, b, ids, temperature=1.3, chunk_size=2, entropy=True)

    assert torch.autograd.gradcheck(fn, (h, w, b))

    def frozen_head(h):  # the gradient vectors made in the forward
        return chunked_token_logprobs(
            h, w.detach(), b.detach(), ids, temperature=1.3, chunk_size=2, entropy=True, entropy_grad=True
        )

    assert torch.autograd.gradcheck(frozen_head, (h,))


def test_no_positions():
    h, w, b, ids = case(0, 4, 9, torch.float32)
    lp, ent = chunked_token_logprobs(h, w, b, ids, chunk_size=3, entropy=True)
    assert lp.shape == ent.shape == (0,)
    (grad_h,) = torch.autograd.grad(lp.sum() + ent.sum(), h, allow_unused=True)
    assert grad_h is None or grad_h.shape == (0, 4)


def test_bad_arguments_raise():
    h, w, b, ids = case(3, 4, 9, torch.float32)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_token_logprobs(h, w, b, ids, chunk_size=0)
    with pytest.raises(ValueError, match="token ids"):
        chunked_token_logprobs(h, w, b, ids + 9)
    with pytest.raises(ValueError, match="token_ids"):
        chunked_token_logprobs(h, w, b, ids[:2])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 20),
    hidden=st.integers(1, 6),
    vocab=st.integers(1, 13),
    chunk_size=st.integers(1, 25),
    temperature=st.floats(0.3, 2.0),
    seed=st.integers(0, 1000),
    frozen=st.booleans(),
    entropy_grad=st.booleans(),
)
def test_property_any_shape_and_chunk_size(n, hidden, vocab, chunk_size, temperature, seed, frozen, entropy_grad):
    h, w, b, ids = case(n, hidden, vocab, torch.float64, seed)
    if frozen:  # the gradients made in the forward
        w, b = w.detach(), b.detach()
    want_lp, want_h = reference(h, w, b, ids, temperature)
    lp, ent = chunked_token_logprobs(
        h, w, b, ids, temperature=temperature, chunk_size=chunk_size, entropy=True, entropy_grad=entropy_grad
    )
    torch.testing.assert_close(lp, want_lp, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ent, want_h, atol=1e-10, rtol=1e-10)
    if n:
        coef = torch.randn(n, dtype=torch.float64), torch.randn(n, dtype=torch.float64)
        inputs = (h,) if frozen else (h, w, b)
        got, want = grads((lp, ent), inputs, coef), grads((want_lp, want_h), inputs, coef)
        for g, e in zip(got, want, strict=True):
            torch.testing.assert_close(g, e, atol=1e-9, rtol=1e-9)


# ---------------------------------------------------------------------------------------------- the worker
def rows(shared_prefix: bool) -> TrainBatch:
    """Three rows of uneven prompts and lengths; with ``shared_prefix`` their first 20 tokens agree (packed)."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 250, (3, 32), generator=generator)
    if shared_prefix:
        ids[:, :20] = ids[0, :20]
    mask = torch.zeros(3, 32)
    mask[0, 22:30] = mask[1, 24:32] = mask[2, 22:28] = 1
    attention = torch.ones(3, 32, dtype=torch.long)
    attention[0, 30:] = attention[2, 28:] = 0
    out = TrainBatch(ids, attention, mask, torch.zeros(3, 32), torch.tensor([22, 24, 22]))
    out.old_logprobs = torch.full((3, 32), -5.5) * mask
    out.advantages = torch.randn(3, 32, generator=generator) * mask
    out.values = torch.zeros(3, 32)
    out.returns = torch.randn(3, 32, generator=generator) * mask
    return out


def build(chunk: int, lora_rank: int, value_head: bool) -> ModelWorker:
    # eps 1: AdamW's step is about lr * gradient (lr * sign(gradient) with the usual eps would turn the rounding
    # of a near-zero gradient into a full step), so equal gradients give equal weights to float tolerance.
    optimizer = OptimizerSpec(lr=1.0, eps=1.0)
    lora = LoraSpec(rank=lora_rank, alpha=8.0)
    head = optimizer if value_head else None
    spec = WorkerSpec("actor", str(tiny_model_path()), optimizer, lora, value_head=head, logits_chunk_size=chunk)
    w = ModelWorker(spec, 0, 1, INIT)
    w.setup()
    return w


def trained(w: ModelWorker) -> dict[str, torch.Tensor]:
    # The root unit's weights stay unsharded after a forward without backward (FSDP2 keeps the root gathered).
    full = {n: p.full_tensor() if hasattr(p, "full_tensor") else p for n, p in w.model.named_parameters()}
    params = {n: p.detach().clone() for n, p in full.items() if p.requires_grad}
    if w.value_head is not None:
        params.update({f"value_head.{n}": p.detach().clone() for n, p in w.value_head.named_parameters()})
    return params


def assert_same_weights(chunked: ModelWorker, plain: ModelWorker, before: dict[str, torch.Tensor]) -> None:
    after, plain_after = trained(chunked), trained(plain)
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-3  # the update moved something
    for name, tensor in plain_after.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize("value_head", [False, True], ids=["no-head", "value-head"])
@pytest.mark.parametrize("lora_rank", [4, 0], ids=["lora", "full"])
def test_a_chunked_worker_gives_the_outputs_and_updates_of_the_plain_one(lora_rank, value_head):
    chunked, plain = build(3, lora_rank, value_head), build(0, lora_rank, value_head)
    loss = PolicyLossSpec(temperature=0.7, entropy_coef=0.01, value_clip=0.5 if value_head else None)
    for shared_prefix in (False, True):
        batch = rows(shared_prefix)
        agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
        for base in (False, True) if lora_rank else (False,):
            got = chunked.compute_logprobs(batch, 0.7, 2, base=base)
            torch.testing.assert_close(got, plain.compute_logprobs(batch, 0.7, 2, base=base), atol=1e-5, rtol=0)
            assert torch.all(got[batch.response_mask > 0] < 0) and torch.all(got[batch.attention_mask == 0] == 0)
        before = trained(chunked)
        stats, plain_stats = chunked.update_policy(batch, agg, loss, 2), plain.update_policy(batch, agg, loss, 2)
        assert stats.grad_norm == pytest.approx(plain_stats.grad_norm, rel=1e-4) and stats.grad_norm > 0
        for name, value in plain_stats.token_weighted.items():
            assert stats.token_weighted[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
        assert_same_weights(chunked, plain, before)
        if value_head:
            torch.testing.assert_close(
                chunked.compute_values(batch, 2), plain.compute_values(batch, 2), atol=1e-5, rtol=0
            )
        before = trained(chunked)
        chunked.update_sft(batch, agg, 2)
        plain.update_sft(batch, agg, 2)
        assert_same_weights(chunked, plain, before)


def test_activation_checkpointing_gives_the_warm_ups_weights_bit_for_bit():
    """The warm-up checkpoints by default (``sft.gradient_checkpointing``): every weight trained, packed rows, two
    optimizer steps; recomputing the forward in the backward repeats the same arithmetic, so the weights are equal."""
    workers = []
    for checkpointing in (False, True):
        full, model = LoraSpec(rank=0), str(tiny_model_path())
        spec = WorkerSpec("actor", model, OptimizerSpec(lr=1e-2), full, gradient_checkpointing=checkpointing)
        workers.append(ModelWorker(spec, 0, 1, INIT))
        workers[-1].setup()
    plain, checkpointed = workers
    assert checkpointed.model.is_activation_checkpointing and not plain.model.is_activation_checkpointing
    before = trained(plain)
    batch = rows(shared_prefix=True)
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    for _ in range(2):
        stats, checkpointed_stats = plain.update_sft(batch, agg, 2), checkpointed.update_sft(batch, agg, 2)
        assert checkpointed_stats.grad_norm == stats.grad_norm > 0
    after, checkpointed_after = trained(plain), trained(checkpointed)
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-3
    for name, tensor in after.items():
        assert torch.equal(checkpointed_after[name], tensor), name


def test_the_warm_up_checkpoints_on_its_own_switch_not_rls():
    from trainer.config import compose_train_config, to_train_config
    from trainer.sft import _sft_worker_spec

    def spec(*overrides: str) -> WorkerSpec:
        return _sft_worker_spec(to_train_config(compose_train_config(["env=sokoban", *overrides])), "m", 4)

    assert spec().gradient_checkpointing is True
    rl_only = spec("model.gradient_checkpointing=true", "sft.gradient_checkpointing=false")
    assert rl_only.gradient_checkpointing is False


def test_checkpointing_the_first_layers_only_keeps_the_update_and_flags_those_layers():
    """``model.checkpoint_layers=1``: the first of the tiny model's two decoder layers recomputes, the second keeps
    its activations; the update (LoRA and the value head) is the plain one's, bit for bit."""
    workers = []
    for checkpointing, layers in ((False, None), (True, 1)):
        lora, model = LoraSpec(rank=4, alpha=8.0), str(tiny_model_path())
        spec = WorkerSpec(
            "actor",
            model,
            OptimizerSpec(lr=1e-2),
            lora,
            gradient_checkpointing=checkpointing,
            checkpoint_layers=layers,
            value_head=OptimizerSpec(lr=1e-2),
        )
        workers.append(ModelWorker(spec, 0, 1, INIT))
        workers[-1].setup()
    plain, partial = workers
    flags = [m.gradient_checkpointing for m in partial.model.modules() if hasattr(m, "self_attn")]
    assert flags == [True, False]
    # fully_shard gave every layer a class of its own (FSDPLlamaDecoderLayer): the layers are still found
    sharded = decoder_layers(partial.model)
    assert [type(m).__name__ for m in sharded] == ["FSDPLlamaDecoderLayer"] * 2
    assert [m.gradient_checkpointing for m in sharded] == [True, False]
    assert not any(m.gradient_checkpointing for m in plain.model.modules() if hasattr(m, "self_attn"))
    batch = rows(shared_prefix=True)
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    loss = PolicyLossSpec(temperature=0.7, value_clip=0.5)
    before = trained(plain)
    for _ in range(2):
        stats, partial_stats = plain.update_policy(batch, agg, loss, 2), partial.update_policy(batch, agg, loss, 2)
        assert partial_stats.grad_norm == stats.grad_norm > 0
    after, partial_after = trained(plain), trained(partial)
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-3
    for name, tensor in after.items():
        assert torch.equal(partial_after[name], tensor), name
