"""One FSDP2 rank in this process (gloo, world size 1): LoRA, Hugging Face export, checkpoints, the schedule.

* With LoRA only the adapters train, and the weights sent to the engine are the base weights with
  ``B @ A * alpha / rank`` merged in: a plain Hugging Face model loaded with them gives the same
  logits as peft's own merge of the trained adapter.
* ``save_pretrained`` writes a directory ``from_pretrained`` loads, with the trained weights.
* A checkpoint restores weights, optimizer moments and schedule: the step after loading equals the
  step the saved worker takes.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.distributed.tensor import DTensor

from agents.models import tiny_model_path
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.learner_worker import ModelWorker

INIT = "tcp://127.0.0.1:29877"


def batch() -> TrainBatch:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 250, (3, 16), generator=generator)
    mask = torch.zeros(3, 16)
    mask[:, 6:10] = 1
    mask[:, 12:15] = 1
    out = TrainBatch(ids, torch.ones(3, 16, dtype=torch.long), mask, torch.zeros(3, 16), torch.tensor([6, 5, 6]))
    out.old_logprobs = torch.full((3, 16), -7.6) * mask
    out.advantages = torch.randn(3, 16, generator=generator) * mask
    return out


def worker(role: str = "actor", **spec) -> ModelWorker:
    optimizer = (
        OptimizerSpec(lr=1e-2, warmup_steps=2, total_steps=10, schedule="cosine") if role != "reference" else None
    )
    w = ModelWorker(WorkerSpec(role, str(tiny_model_path()), optimizer, **spec), 0, 1, INIT)
    w.setup()
    return w


def update(w: ModelWorker):
    b = batch()
    return w.update_policy(b, Aggregation("token-mean", float(b.response_mask.sum()), 3.0), PolicyLossSpec(), 2)


def test_lora_trains_adapters_and_exports_merged_weights():
    w = worker(lora=LoraSpec(rank=4, alpha=8.0))
    trainable = {n for n, p in w.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    for _ in range(2):
        update(w)
    merged = w.full_state_dict()
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    assert set(merged) >= set(plain.state_dict()) - {"lm_head.weight"}
    plain.load_state_dict(merged, strict=False)
    # peft's own merge of the same adapter, from the worker's unsharded copy.
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(w.model, options=StateDictOptions(full_state_dict=True))
    from peft import LoraConfig, get_peft_model

    reference = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_path()),
        LoraConfig(r=4, lora_alpha=8.0, target_modules="all-linear"),
    )
    reference.load_state_dict({k: v.float() for k, v in full.items()})
    reference = reference.merge_and_unload()
    ids = batch().input_ids
    torch.testing.assert_close(plain(ids).logits, reference(ids).logits, atol=1e-5, rtol=0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    assert (plain(ids).logits - base(ids).logits).abs().max() > 1e-3  # the adapters did change the model


def test_lora_on_the_last_layers_trains_and_exports_only_them():
    """The tiny model has 2 decoder layers: adapters on the last one leave the first one's weights as loaded."""
    from transformers import AutoModelForCausalLM

    w = worker(lora=LoraSpec(rank=4, alpha=8.0, layers=1))
    trainable = {n for n, p in w.model.named_parameters() if p.requires_grad}
    assert len(trainable) == 14 and all(".layers.1." in n and "lora_" in n for n in trainable)  # 7 linears x A, B
    for _ in range(2):
        update(w)
    assert all(p.grad is None or p.grad.abs().sum() > 0 for n, p in w.model.named_parameters() if n in trainable)
    merged = w.full_state_dict()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
    changed = {n for n, t in merged.items() if n in base and not torch.equal(t, base[n])}
    assert changed and all(".layers.1." in n for n in changed)  # the first layer exports bit for bit as loaded
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    plain.load_state_dict(merged, strict=False)
    ids = batch().input_ids
    with torch.no_grad():
        torch.testing.assert_close(plain(ids).logits, w.model(ids).logits, atol=1e-5, rtol=0)
    # As many layers as the model has, or more: every layer, as with no count.
    every = {n for n, p in worker(lora=LoraSpec(rank=4, alpha=8.0)).model.named_parameters() if p.requires_grad}
    more = worker(lora=LoraSpec(rank=4, alpha=8.0, layers=5)).model.named_parameters()
    assert {n for n, p in more if p.requires_grad} == every and len(every) == 28
    with pytest.raises(ValueError, match="at least 1"):
        worker(lora=LoraSpec(rank=4, alpha=8.0, layers=0))


def test_export_and_checkpoint_round_trip(tmp_path):
    w = worker()
    update(w)
    w.save_pretrained(str(tmp_path / "policy"), str(tiny_model_path()))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    state = w.full_state_dict()
    for name, tensor in exported.state_dict().items():
        torch.testing.assert_close(tensor, state.get(name, state["model.embed_tokens.weight"]), msg=name)
    assert AutoTokenizer.from_pretrained(tmp_path / "policy").chat_template

    w.save_checkpoint(str(tmp_path / "actor"))
    saved = copy.deepcopy(w.full_state_dict())
    after_saved = update(w)
    continued = w.full_state_dict()
    w.load_checkpoint(str(tmp_path / "actor"))
    for name, tensor in w.full_state_dict().items():
        torch.testing.assert_close(tensor, saved[name], atol=0, rtol=0)
    after_loaded = update(w)
    assert after_loaded.lr == pytest.approx(after_saved.lr)  # the schedule was restored (warm-up step 2)
    for name, tensor in w.full_state_dict().items():
        torch.testing.assert_close(tensor, continued[name], atol=1e-6, rtol=0)


def test_a_lora_checkpoint_holds_only_the_trained_weights_and_restores_them(tmp_path):
    w = worker(lora=LoraSpec(rank=4, alpha=8.0))
    before = w.compute_logprobs(batch(), 1.0, 2)
    update(w)
    w.save_checkpoint(str(tmp_path / "actor"))
    saved = copy.deepcopy(w.full_state_dict())
    after_saved = update(w)
    import torch.distributed.checkpoint as dcp

    reader = dcp.FileSystemReader(str(tmp_path / "actor" / "dcp"))
    model_keys = [k for k in reader.read_metadata().state_dict_metadata if k.startswith("model.")]
    assert model_keys and all("lora_" in k for k in model_keys)  # the frozen base is not in it
    w.load_checkpoint(str(tmp_path / "actor"))
    for name, tensor in w.full_state_dict().items():
        torch.testing.assert_close(tensor, saved[name], atol=0, rtol=0)
    assert update(w).losses["policy_loss"] == pytest.approx(after_saved.losses["policy_loss"], rel=1e-5)
    # The reference of a LoRA actor is the actor with its adapters off: the weights before any update.
    torch.testing.assert_close(w.compute_logprobs(batch(), 1.0, 2, base=True), before, atol=1e-6, rtol=0)
    assert (w.compute_logprobs(batch(), 1.0, 2) - before).abs().max() > 1e-4
    with pytest.raises(ValueError, match="lora_rank"):
        worker().compute_logprobs(batch(), 1.0, 2, base=True)


def test_bf16_mixed_precision_lora_actor_trains_fp32_adapters_when_the_reference_pass_comes_first():
    # A PPO step scores the reference (adapters off) before the first update. FSDP fixes a layer's
    # gradient dtype at its first forward from the parameters that need a gradient then, so without
    # care the adapters would be handed bf16 gradients and the update would fail.
    lora = LoraSpec(rank=4, alpha=8.0)
    mixed, plain = worker(lora=lora, mixed_precision=True), worker(lora=lora)
    b = batch()
    reference = mixed.compute_logprobs(b, 1.0, 2, base=True)
    exact = plain.compute_logprobs(b, 1.0, 2, base=True)
    assert 0 < (reference - exact).abs().max() < 0.1  # bf16 compute: close to, not equal to, float32
    before = {n: p.detach().full_tensor().clone() for n, p in mixed.model.named_parameters() if p.requires_grad}
    stats, plain_stats = update(mixed), update(plain)
    assert stats.grad_norm == pytest.approx(plain_stats.grad_norm, rel=0.05)
    for name, param in mixed.model.named_parameters():
        if param.requires_grad:
            assert param.dtype == torch.float32, name  # the master weights stay float32
            assert (param.detach().full_tensor() - before[name]).abs().max() > 0, name


def test_one_rank_computes_and_trains_with_every_weight_in_place():
    # One rank shards nothing: FSDP would copy each weight into an all-gather buffer and out again around every
    # forward and backward, and each gradient through a reduce-scatter. Left out of FSDP, every layer computes
    # with the loaded tensor itself and the optimizer steps it there.
    w = worker(lora=LoraSpec(rank=4, alpha=8.0))
    frozen = {name: p for name, p in w.model.named_parameters() if not p.requires_grad}
    trained = {name: p for name, p in w.model.named_parameters() if p.requires_grad}
    assert frozen and trained and not any(isinstance(p, DTensor) for p in w.model.parameters())
    projection = next(m for name, m in w.model.named_modules() if name.endswith("q_proj.base_layer"))
    adapter = next(m for name, m in w.model.named_modules() if name.endswith("q_proj.lora_B.default"))
    loaded, adapter_storage = projection.weight.data_ptr(), adapter.weight.data_ptr()
    used: list[int] = []
    projection.register_forward_pre_hook(lambda module, _args: used.append(module.weight.data_ptr()))
    adapter.register_forward_pre_hook(lambda module, _args: used.append(module.weight.data_ptr()))
    before = {name: p.detach().clone() for name, p in w.model.named_parameters()}
    update(w)
    assert used and set(used) == {loaded, adapter_storage}
    assert all(torch.equal(p, before[name]) for name, p in frozen.items())  # the frozen stay frozen
    assert all(not torch.equal(p, before[name]) for name, p in trained.items() if "lora_B" in name)  # stepped in place
    assert all(p.grad is None for p in trained.values())  # the step cleared the gradients
    # with mixed precision FSDP's cast of the weights to bf16 is wanted: they stay its own
    mixed = worker(lora=LoraSpec(rank=4, alpha=8.0), mixed_precision=True)
    mixed.model.reshard()  # the root's weights stay gathered after set-up's forward
    assert all(isinstance(p, DTensor) for p in mixed.model.parameters())


@pytest.mark.parametrize("lora", [None, LoraSpec(rank=4, alpha=8.0)], ids=["every weight", "lora"])
def test_a_checkpoint_written_with_fsdp_holding_the_trained_weights_resumes_on_one_plain_rank(
    tmp_path, monkeypatch, lora
):
    # Runs checkpointed before every weight of a one-rank learner left FSDP hold DTensors in their files: they
    # resume into plain tensors, and the next update is the one the run would have made.
    import trainer.learner_worker as learner_worker

    spec = {"lora": lora} if lora else {}
    plain = learner_worker.one_rank_weights
    with monkeypatch.context() as patch:
        patch.setattr(learner_worker, "one_rank_weights", lambda m: {p for p in plain(m) if not p.requires_grad})
        old = worker(**spec)
    assert any(isinstance(p, DTensor) for p in old.model.parameters())
    update(old)
    old.save_checkpoint(str(tmp_path / "actor"))
    expected = update(old)
    resumed = worker(**spec)
    assert not any(isinstance(p, DTensor) for p in resumed.model.parameters())
    resumed.load_checkpoint(str(tmp_path / "actor"))
    stats = update(resumed)
    assert stats.losses["policy_loss"] == expected.losses["policy_loss"] and stats.grad_norm == expected.grad_norm
    want, got = old.full_state_dict(), resumed.full_state_dict()
    assert set(want) == set(got) and all(torch.equal(got[name], want[name]) for name in want)


def test_learning_rate_schedule_by_hand():
    spec = OptimizerSpec(lr=1.0, warmup_steps=2, total_steps=6, schedule="cosine", min_lr_ratio=0.1)
    # warm-up: (k+1)/2 for k = 0, 1; then cosine from 1 down to 0.1 over the 4 remaining steps:
    # 0.1 + 0.9 * 0.5 * (1 + cos(pi * p)) with p = (k - 2) / 4.
    expected = [
        0.5,
        1.0,
        1.0,
        0.1 + 0.45 * (1 + math.cos(math.pi / 4)),
        0.55,
        0.1 + 0.45 * (1 + math.cos(3 * math.pi / 4)),
    ]
    assert [spec.lr_factor(k) for k in range(6)] == pytest.approx(expected)
    assert spec.lr_factor(100) == pytest.approx(0.1)
    assert OptimizerSpec(warmup_steps=0).lr_factor(5) == 1.0


def agreement(lora: torch.Tensor, base: torch.Tensor, true_change: torch.Tensor) -> float:
    """The correlation of the change the logprobs ``lora`` show over ``base`` with ``true_change``."""
    return float(torch.corrcoef(torch.stack([(lora - base).flatten(), true_change.flatten()]))[0, 1])


@pytest.mark.parametrize(("b_scale", "lowest", "highest"), [(1e-5, -0.3, 0.3), (1e-2, 0.99, 1.0)])
def test_a_bf16_forward_hides_a_small_lora_change(b_scale, lowest, highest):
    # Why trainer.precision=auto keeps LoRA in float32: each adapted layer adds the adapter's output to the
    # base output, which is already on the bf16 grid, and rounds the sum back to it; a contribution under half
    # a grid step vanishes. Early in RL every contribution is that small.
    lora = LoraSpec(rank=4, alpha=8.0)
    mixed, plain = worker(lora=lora, mixed_precision=True), worker(lora=lora)
    for w in (mixed, plain):  # the same adapters in both
        generator = torch.Generator().manual_seed(1)
        for name, param in w.model.named_parameters():
            if "lora_B" in name:
                local = param.detach().to_local() if isinstance(param, DTensor) else param.detach()
                local.copy_(b_scale * torch.randn(param.shape, generator=generator))
    ids = torch.randint(5, 250, (8, 32), generator=torch.Generator().manual_seed(0))
    every = torch.ones(8, 32)
    every[:, 0] = 0
    rows = TrainBatch(ids, torch.ones(8, 32, dtype=torch.long), every, torch.zeros(8, 32), torch.ones(8).long())
    true_change = plain.compute_logprobs(rows, 1.0, 8) - plain.compute_logprobs(rows, 1.0, 8, base=True)
    assert true_change.abs().mean() > 0.1 * b_scale  # float32 sees the adapters
    shown = mixed.compute_logprobs(rows, 1.0, 8), mixed.compute_logprobs(rows, 1.0, 8, base=True)
    seen = agreement(*shown, true_change)
    assert lowest < seen <= highest


@pytest.mark.parametrize("lora", [None, LoraSpec(rank=4, alpha=8.0)], ids=["every weight", "lora"])
def test_the_streamed_export_writes_the_full_state_dicts_weights_bit_for_bit(tmp_path, lora):
    """``save_pretrained`` unshards, merges and writes one weight at a time; the file holds exactly what
    :func:`trainer.export.save_hf_checkpoint` writes from :meth:`full_state_dict` (the tied head left out)."""
    from safetensors.torch import load_file

    from trainer.export import save_hf_checkpoint

    w = worker(**({"lora": lora} if lora else {}))
    for _ in range(2):
        update(w)
    w.save_pretrained(str(tmp_path / "streamed"), str(tiny_model_path()))
    save_hf_checkpoint(w.full_state_dict(), tmp_path / "whole", tiny_model_path())
    streamed, whole = (load_file(tmp_path / name / "model.safetensors") for name in ("streamed", "whole"))
    assert list(streamed) and set(streamed) == set(whole)
    for name, tensor in whole.items():
        assert streamed[name].dtype == torch.float32 and torch.equal(streamed[name], tensor), name
    assert (tmp_path / "streamed" / "config.json").is_file() and (tmp_path / "streamed" / "tokenizer.json").is_file()


def test_write_safetensors_refuses_a_tensor_that_does_not_match_its_layout(tmp_path):
    from safetensors.torch import load_file

    from trainer.export import write_safetensors

    layout = [("a", (2, 3)), ("b", (4,))]
    tensors = [torch.arange(6.0).reshape(2, 3), torch.tensor([1.0, -2.0, 3.5, 0.0])]
    write_safetensors(tmp_path / "ok.safetensors", layout, iter(tensors), metadata={"format": "pt"})
    loaded = load_file(tmp_path / "ok.safetensors")
    assert torch.equal(loaded["a"], tensors[0]) and torch.equal(loaded["b"], tensors[1])
    with pytest.raises(ValueError, match=r"b: expected float32 \(4,\), got torch.float64"):
        write_safetensors(tmp_path / "dtype.safetensors", layout, [tensors[0], tensors[1].double()])
    with pytest.raises(ValueError, match=r"a: expected float32 \(2, 3\), got torch.float32 \(3, 2\)"):
        write_safetensors(tmp_path / "shape.safetensors", layout, [tensors[0].T.contiguous(), tensors[1]])
    with pytest.raises(ValueError):  # one tensor short
        write_safetensors(tmp_path / "short.safetensors", layout, [tensors[0]])
