"""Chunked token logprobs and entropy (trainer.algos.chunked_token_logprobs) against the full logits' values.

* Values and gradients (hidden states, head weight and bias) equal those of ``token_logprobs`` and
  ``entropy_from_logits`` on the whole ``[N, V]`` logits, whatever the chunk size (dividing N or not),
  at any temperature; ``gradcheck`` on a tiny float64 case.
* A hand-derived case: two equal logits give logprob -log 2 and entropy log 2.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algos import chunked_token_logprobs, entropy_from_logits, token_logprobs


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


def test_gradcheck_float64():
    h, w, b, ids = case(5, 3, 6, torch.float64)

    def fn(h, w, b):
        return chunked_token_logprobs(h, w, b, ids, temperature=1.3, chunk_size=2, entropy=True)

    assert torch.autograd.gradcheck(fn, (h, w, b))


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
)
def test_property_any_shape_and_chunk_size(n, hidden, vocab, chunk_size, temperature, seed):
    h, w, b, ids = case(n, hidden, vocab, torch.float64, seed)
    want_lp, want_h = reference(h, w, b, ids, temperature)
    lp, ent = chunked_token_logprobs(h, w, b, ids, temperature=temperature, chunk_size=chunk_size, entropy=True)
    torch.testing.assert_close(lp, want_lp, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ent, want_h, atol=1e-10, rtol=1e-10)
    if n:
        coef = torch.randn(n, dtype=torch.float64), torch.randn(n, dtype=torch.float64)
        got, want = grads((lp, ent), (h, w, b), coef), grads((want_lp, want_h), (h, w, b), coef)
        for g, e in zip(got, want, strict=True):
            torch.testing.assert_close(g, e, atol=1e-9, rtol=1e-9)
