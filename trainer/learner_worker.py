"""One data-parallel rank of a learner role: a Hugging Face model sharded with FSDP2.

:class:`ModelWorker` is a plain class (tests use it directly in one process); ``trainer.learner``
runs ``world_size`` of them as Ray actors that form one ``torch.distributed`` process group (gloo on
CPU, NCCL on GPU) and shard the model with ``fully_shard``: every decoder layer is its own FSDP unit
and the root holds the embeddings and the head (tied or not). A one-rank group in float32 leaves every weight
out of FSDP (:func:`one_rank_weights`): one rank has nothing to shard.

Roles: ``actor`` (causal LM + AdamW), ``critic`` (:class:`trainer.value_model.ValueModel` + AdamW),
``reference`` (causal LM, no optimizer). Each rank receives its shard of the rows as a
:class:`trainer.batch.TrainBatch` and runs micro-batches of ``micro_batch_size`` rows.

Shared value head (``WorkerSpec.value_head``). An actor may carry the critic's value head itself: a
zero-initialised ``Linear(hidden, 1)`` reading the input of the vocabulary head (the last hidden state,
after the final norm, at the positions whose logits are computed), detached, so the value loss trains
the head alone and the policy's gradient is unchanged. The values then come with the logits of the
same forward: the update adds the clipped value loss (``PolicyLossSpec.value_clip``, token-mean) to the
policy loss at no extra forward or backward, and no critic model exists. The head is replicated on
every rank (its gradient all-reduced), with its own AdamW and clipping.

Loss normalisation. Every micro-batch's loss is aggregated with the *global* normalisers of the
mini-batch (sampled tokens and sequences of all ranks, from the driver, ``trainer.algos.Aggregation``),
so the sum of the micro-batch losses over all ranks is the mini-batch's loss whatever the micro-batch
size and the number of ranks. FSDP averages gradients over ranks; the loss is multiplied by the world
size so that the reduced gradient is that sum's gradient.

Packed rows. A micro-batch whose rows start with the same tokens (every episode's system prompt and
instructions) runs as one sequence with that prefix once (:func:`pack_rows`, ``WorkerSpec.share_prefix``):
one forward call per micro-batch either way, so FSDP's hooks and collectives are unchanged, and the
outputs and gradients are the unpacked ones up to float rounding.

A shared prefix run once. With chunked logits, the tokens every row of a call starts with (the system prompt and
instructions) run once per call: per scoring call (old logprobs, values, the reference's logprobs) and per
optimizer step of an update (RL's and the warm-up's). Each micro-batch then runs only the rest of its rows,
attending to the prefix's keys and values (:class:`SharedPrefix`, :class:`PrefixLayer`). In an update those keys
and values are leaves: every micro-batch's backward adds its gradient to them, and one backward through the
prefix's forward after the last micro-batch (:meth:`ModelWorker._shared_prefix`) gives the weights the rest, so
the step's gradient is the full rows' up to float rounding. Activation checkpointing recomputes a layer with its
cache, which stores nothing (:func:`_layers_keep_cache`). With one row a micro-batch (the default) this is the
only sharing there is. A micro-batch of several rows then runs their remaining tokens packed one after another,
each attending to the prefix's keys and values and to itself (:meth:`ModelWorker._body_inputs`), so no row is
padded to the longest; the packing above, prefix included, applies where the chunked path does not
(``logits_chunk_size=0``, a critic model).

Chunked logits (``WorkerSpec.logits_chunk_size`` > 0). The actor and the reference run the decoder alone and
apply the vocabulary head to its last hidden state at the response's positions only, a chunk of positions at a
time, forward and backward (:func:`trainer.algos.chunked_token_logprobs`): no ``[rows, tokens, vocabulary]``
logits tensor exists, and the value head reads the same hidden states. With the head frozen (LoRA) an update's
forward also makes each position's gradient vectors, so its backward makes no logits; the entropy's only where the
loss has an entropy bonus (``entropy_grad``). The decoder and the head run inside ``head_outputs``, a second
forward method of the root FSDP unit (:func:`_register_head_outputs`), so FSDP's hooks run as around
``forward``. ``0`` keeps the model's own forward (logits of every kept position).

Frozen layers from the engine (``ModelWorker.layer_inputs``, set by the colocated worker of :mod:`trainer.colocated`).
With the adapters on the last layers only, every weight below the first adapted layer ``k`` is frozen, so the
input of layer ``k`` at each position is a function of the tokens before it alone, and the colocated engine
computed it, with the same weights, while it sampled the rollout (:mod:`agents.engines.layer_inputs`). An update's
micro-batch of one row behind the call's shared prefix then runs the decoder from layer ``k``, on those inputs
(``inputs_embeds``, the layers below left out of the forward), and the frozen layers run once a step instead of
twice. Their outputs are the engine's: equal to the learner's own up to float rounding (a batched decode sums in
another order). A row the store cannot cover (a position never computed, or the store emptied) runs in full, as
does every scoring call, so the check of the engine's logprobs stays a forward of the learner's own.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.distributed.tensor import DTensor
from transformers.cache_utils import Cache, DynamicLayer

from agents.engines.layer_inputs import LayerInputs
from agents.memory import map_large_allocations, peak_resident_mib, return_free_memory
from agents.models import cache_keyword
from trainer.algos import (
    ActorTerms,
    Aggregation,
    PolicyInputs,
    PolicyLossSpec,
    actor_objective,
    chunked_token_logprobs,
    entropy_from_logits,
    sft_loss,
    token_logprobs,
    value_loss,
)
from trainer.batch import TrainBatch
from trainer.learner_specs import (
    ROLES,
    OptimizerSpec,
    StepStats,
    WorkerSpec,
    base_model_name,
    decoder_layers,
    disable_dropout,
    enable_activation_checkpointing,
    merge_lora_state_dict,
    merged_lora_weight,
    rng_state,
    set_rng_state,
    with_lora,
)

__all__ = ["ModelWorker", "shard_rows"]


class ModelWorker:
    """One rank (contract: module docstring). ``setup`` joins the process group and builds the model."""

    def __init__(self, spec: WorkerSpec, rank: int, world_size: int, init_method: str) -> None:
        if spec.role not in ROLES:
            raise ValueError(f"unknown learner role {spec.role!r}; choose one of {ROLES}")
        self.spec, self.rank, self.world_size, self.init_method = spec, rank, world_size, init_method
        self.optimizer_steps = 0
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.value_head: nn.Linear | None = None
        self._features: list[Tensor] | None = None  # the vocabulary head's inputs, while a forward captures them
        self._prefix: SharedPrefix | None = None  # the rows' common first tokens, while a call that shares them runs
        self.layer_inputs: LayerInputs | None = None  # the engine's inputs of the first trained layer (docstring)
        self._reading_layer_inputs = False  # while an update runs, micro-batches start at that layer where they can
        self._from_layer_inputs = False  # whether the last forward started there

    # ------------------------------------------------------------------------------------------ set-up
    def setup(self) -> dict[str, Any]:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if self.spec.num_threads:
            torch.set_num_threads(self.spec.num_threads)
        map_large_allocations(self.spec.mmap_threshold_mib)
        device_type = "cuda" if self.spec.device.startswith("cuda") else "cpu"
        if device_type == "cuda":
            torch.cuda.set_device(0)  # Ray shows each rank its own GPU as device 0
        if not dist.is_initialized():
            backend = "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo"
            dist.init_process_group(backend, init_method=self.init_method, rank=self.rank, world_size=self.world_size)
        self.device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
        torch.manual_seed(self.spec.seed)  # only the value head's init draws (it is zero-initialised)
        self.mesh = init_device_mesh(device_type, (self.world_size,))
        self.model = self._build_model()
        if self.spec.mixed_precision and self.spec.lora.rank > 0 and self.spec.role == "actor":
            # FSDP fixes each layer's gradient dtype at its first forward, from the parameters that need a
            # gradient then. peft's disable_adapter() (the reference pass) switches that off for the
            # adapters, so a first forward without them would leave bf16 gradients on fp32 adapters.
            with torch.no_grad():
                self.model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=self.device))
        if self.spec.optimizer is not None and self.spec.role != "reference":
            opt = self.spec.optimizer
            self.optimizer = torch.optim.AdamW(
                [p for p in self.model.parameters() if p.requires_grad],
                lr=opt.lr,
                betas=opt.betas,
                eps=opt.eps,
                weight_decay=opt.weight_decay,
            )
            self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, opt.lr_factor)
        if self.spec.value_head is not None:
            self._setup_value_head(self.spec.value_head)
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in self.model.parameters())
        return {"rank": self.rank, "parameters": int(total), "trainable_parameters": int(trainable)}

    def _setup_value_head(self, opt: OptimizerSpec) -> None:
        if self.spec.role != "actor":
            raise ValueError(f"only the actor carries a shared value head, not the {self.spec.role}")
        hidden = self.model.get_output_embeddings().in_features
        self.value_head = nn.Linear(hidden, 1, device=self.device, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
        self.value_optimizer = torch.optim.AdamW(
            self.value_head.parameters(), lr=opt.lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay
        )
        self.value_scheduler = torch.optim.lr_scheduler.LambdaLR(self.value_optimizer, opt.lr_factor)

        def capture(_module: nn.Module, args: tuple[Any, ...]) -> None:
            if self._features is not None:
                self._features.append(args[0])

        self.model.get_output_embeddings().register_forward_pre_hook(capture)

    def _build_model(self) -> nn.Module:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if self.spec.role == "critic":
            from trainer.value_model import ValueModel

            model: nn.Module = ValueModel.from_pretrained(self.spec.model)
        else:
            from agents.models import load_model

            model = load_model(self.spec.model, dtype="float32")
        if self.spec.role == "reference":
            model.requires_grad_(False)
        elif self.spec.lora.rank > 0 and self.spec.role == "critic":  # adapters on the decoder; the head trains whole
            model.backbone = with_lora(model.backbone, self.spec.lora)
        elif self.spec.lora.rank > 0:
            model = with_lora(model, self.spec.lora)
        if self.spec.gradient_checkpointing and self.spec.role != "reference":
            enable_activation_checkpointing(model, self.spec.checkpoint_layers)
        model.to(self.device)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        options = {"mesh": self.mesh}
        if self.spec.mixed_precision:
            options["mp_policy"] = policy
        elif self.world_size == 1:
            options["ignored_params"] = one_rank_weights(model)
        for layer in decoder_layers(model):
            fully_shard(layer, **options)
        fully_shard(model, **options)
        if self.spec.role != "critic":
            _register_head_outputs(model)
        model.train(self.spec.role != "reference")
        if self.spec.role != "reference":
            disable_dropout(model)
        return model

    # ------------------------------------------------------------------------------------------ forward
    def _micro_batches(self, batch: TrainBatch, micro_batch_size: int) -> Iterator[TrainBatch]:
        for start in range(0, len(batch), micro_batch_size):
            yield batch.select(range(start, min(start + micro_batch_size, len(batch))))

    def _keep(self, mb: TrainBatch) -> int:
        """How many trailing positions' outputs are needed: from the first prompt's last token on."""
        return int(mb.input_ids.shape[1] - mb.prompt_lengths.min().item() + 1)

    def _forward(self, mb: TrainBatch, keep: int) -> tuple[Tensor, Tensor | None]:
        """The model's outputs at the last ``keep`` columns of a micro-batch: logits ``[b, keep, V]`` (actor,
        reference) or values ``[b, keep]`` (critic); and, for an actor with a value head, the vocabulary
        head's inputs there, ``[b, keep, hidden]`` (else ``None``).

        When the rows start with the same tokens (the system prompt, the instructions), the micro-batch runs
        packed into one sequence: that prefix once, then each row's remaining real tokens, each attending to
        the prefix and to itself (a block mask, positions restarting after the prefix), padding dropped.
        Every output is the unpacked forward's (the same sums in another order, so equal to float rounding),
        and so is every gradient: the prefix's keys and values serve every row, so weights below them
        receive the gradient of every row. Columns past a row's end hold the output of another real
        position; callers zero them (``_response_region``).
        """
        critic = self.spec.role == "critic"
        prefix = shared_prefix_length(mb) if self.spec.share_prefix else 0
        self._features = [] if self.value_head is not None else None
        try:
            if prefix < MIN_SHARED_PREFIX:
                input_ids, attention = mb.input_ids.to(self.device), mb.attention_mask.to(self.device)
                if critic:
                    return self.model(input_ids, attention, keep=keep), None
                logits = self.model(input_ids=input_ids, attention_mask=attention, logits_to_keep=keep).logits
                return logits, self._captured(lambda features: features)
            packed = pack_rows(mb, prefix, keep)
            mask = packed.mask.to(self.device, self._mask_dtype())
            ids, positions, wanted = (t.to(self.device) for t in (packed.input_ids, packed.positions, packed.wanted))
            gather = packed.gather.to(self.device)
            if critic:
                return self.model(ids, mask, keep=wanted, position_ids=positions)[0][gather], None
            outputs = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=wanted)
            return outputs.logits[0][gather], self._captured(lambda features: features[0][gather])
        finally:
            self._features = None

    def _captured(self, arrange: Any) -> Tensor | None:
        """The vocabulary head's input of the forward that just ran, detached, float32, laid out by ``arrange``."""
        if self._features is None:
            return None
        if len(self._features) != 1:
            raise RuntimeError(f"expected one call of the vocabulary head in a forward, saw {len(self._features)}")
        return arrange(self._features[0].detach().float())

    def _mask_dtype(self) -> torch.dtype:
        return next(p for p in self.model.parameters() if p.is_floating_point()).dtype

    def _policy_outputs(
        self, mb: TrainBatch, temperature: float, with_entropy: str
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Logprobs ``[b, L]`` of each token, 0 outside each row's response; with ``with_entropy`` ``"grad"`` or
        ``"log"`` also the entropy of each position's distribution (``"log"``: without a gradient); with a
        value head the values ``[b, L]`` of the same forward (gradient to the head only), else ``None``."""
        if self.spec.logits_chunk_size > 0:
            return self._chunked_policy_outputs(mb, temperature, with_entropy)
        input_ids = mb.input_ids.to(self.device)
        keep = self._keep(mb)
        logits, features = self._forward(mb, keep)
        logits = logits[:, :-1].float() / temperature  # position i predicts token i + 1
        targets = input_ids[:, -keep + 1 :] if keep > 1 else input_ids[:, :0]
        region = _response_region(mb).to(self.device)
        logprobs = _left_pad(token_logprobs(logits, targets), mb.input_ids.shape[1]) * region
        entropy = None
        if with_entropy != "none":
            # Without an entropy bonus the entropy is only logged: no graph through a [b, k, vocab] softmax.
            with torch.set_grad_enabled(with_entropy == "grad" and torch.is_grad_enabled()):
                entropy = _left_pad(entropy_from_logits(logits), mb.input_ids.shape[1]) * region
        values = None
        if features is not None:
            head_values = self.value_head(features[:, :-1]).squeeze(-1)
            values = _left_pad(head_values, mb.input_ids.shape[1]) * region
        return logprobs, entropy, values

    def _chunked_policy_outputs(
        self, mb: TrainBatch, temperature: float, with_entropy: str
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """:meth:`_policy_outputs` from the decoder's last hidden state at the response's positions only, the
        vocabulary head applied a chunk of positions at a time (:func:`trainer.algos.chunked_token_logprobs`)."""
        rows, columns = _response_region(mb).nonzero(as_tuple=True)  # the scored tokens, [N] each
        body, hidden_index, first_layer = self._body_inputs(mb, rows, columns)
        targets = mb.input_ids[rows, columns].to(self.device)
        chunk, entropy_wanted = self.spec.logits_chunk_size, with_entropy != "none"
        logprobs, entropy, features = self.model.head_outputs(
            body,
            hidden_index,
            targets,
            temperature=temperature,
            chunk_size=chunk,
            entropy=entropy_wanted,
            entropy_grad=with_entropy == "grad",
            first_layer=first_layer,
        )
        index, shape = (rows.to(self.device), columns.to(self.device)), mb.input_ids.shape
        if entropy is not None and with_entropy != "grad":  # logged only: no gradient through it
            entropy = entropy.detach()
        values = None
        if self.value_head is not None:
            values = _scatter(self.value_head(features.detach().float()).squeeze(-1), index, shape)
        return _scatter(logprobs, index, shape), _scatter(entropy, index, shape), values

    def _body_inputs(self, mb: TrainBatch, rows: Tensor, columns: Tensor) -> tuple[dict[str, Tensor], tuple, int]:
        """The decoder's inputs for ``mb`` (packed as :meth:`_forward` packs), the index into its last hidden
        state ``[B, T, H]`` of the position that predicts each token ``(rows, columns)`` (the one before it), and
        the decoder layer the forward starts at (0, or during an update the first trained layer, whose inputs
        come from the engine: module docstring, "Frozen layers from the engine").

        Behind the call's shared prefix (its keys/values in the cache) one row runs its remaining columns as they
        are; several rows run packed, each row's remaining real tokens one after another, each attending to the
        prefix and to itself: no work is spent on the shorter rows' padding, and the forward's products have the rows'
        summed length (which pays where longer products run faster per token: a GPU; on 2 CPU cores it did not,
        docs/performance.md, "Larger micro-batches")."""
        cached = 0 if self._prefix is None else self._prefix.length  # >= MIN_SHARED_PREFIX when there is one
        prefix = cached or (shared_prefix_length(mb) if self.spec.share_prefix else 0)
        first_layer, states = 0, None
        if cached and len(mb) == 1 and self._reading_layer_inputs:
            states = self._engine_layer_inputs(mb, cached)
        self._from_layer_inputs = states is not None
        if cached and len(mb) == 1:  # only the rest runs, with the prefix's keys/values
            suffix = mb.input_ids[:, cached:]
            positions = torch.arange(cached, mb.input_ids.shape[1]).expand_as(suffix)
            body = {"input_ids": suffix, "attention_mask": mb.attention_mask, "position_ids": positions}
            if states is not None:  # the layers below the first trained one are the engine's
                del body["input_ids"]
                body["inputs_embeds"] = states
                first_layer = self.layer_inputs.layer
            index = (rows, columns - 1 - cached)
        elif prefix < MIN_SHARED_PREFIX:
            body = {"input_ids": mb.input_ids, "attention_mask": mb.attention_mask}
            index = (rows, columns - 1)
        else:  # packed behind the prefix; with the prefix cached, its tokens leave the sequence (and its mask's rows)
            keep = self._keep(mb)
            packed = pack_rows(mb, prefix, keep)
            packed_positions = packed.wanted[packed.gather] - cached  # [b, keep]: the last keep columns' positions
            first = mb.input_ids.shape[1] - keep
            mask = packed.mask[:, :, cached:].to(self._mask_dtype())
            ids, positions = packed.input_ids[:, cached:], packed.positions[:, cached:]
            body = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
            index = (torch.zeros_like(rows), packed_positions[rows, columns - 1 - first])
        body = {name: value.to(self.device) for name, value in body.items()}
        if self._prefix is not None:
            body[self._prefix.keyword] = self._prefix.cache()
        return body, tuple(i.to(self.device) for i in index), first_layer

    def _engine_layer_inputs(self, mb: TrainBatch, cached: int) -> Tensor | None:
        """The first trained layer's inputs ``[1, L - cached, H]`` at a one-row micro-batch's columns after the
        shared prefix, from the engine (``None`` when it lacks any of them). The row's last real token predicts
        nothing and the padding is masked: their inputs are zeros."""
        length = int(mb.attention_mask[0].sum())
        if length - 1 <= cached:
            return None
        states = self.layer_inputs.lookup(mb.input_ids[0, :length].numpy(), length - 1)
        if states is None:
            return None
        out = states.new_zeros(1, mb.input_ids.shape[1] - cached, states.shape[1])
        out[0, : length - 1 - cached] = states[cached:]
        return out

    def _values(self, mb: TrainBatch) -> Tensor:
        """The critic's values ``[b, L]``, or those of the actor's value head (its logits left unused)."""
        if self.spec.logits_chunk_size > 0 and self.value_head is not None:
            rows, columns = _response_region(mb).nonzero(as_tuple=True)
            body, hidden_index, first_layer = self._body_inputs(mb, rows, columns)
            _, _, features = self.model.head_outputs(body, hidden_index, None, first_layer=first_layer)
            index = (rows.to(self.device), columns.to(self.device))
            return _scatter(self.value_head(features.detach().float()).squeeze(-1), index, mb.input_ids.shape)
        keep = self._keep(mb)
        outputs, features = self._forward(mb, keep)
        values = outputs[:, :-1] if features is None else self.value_head(features[:, :-1]).squeeze(-1)
        return _left_pad(values, mb.input_ids.shape[1]) * _response_region(mb).to(self.device)

    @torch.no_grad()
    def compute_logprobs(
        self, batch: TrainBatch, temperature: float, micro_batch_size: int, base: bool = False
    ) -> Tensor:
        """Logprobs ``[n, L]`` of every token of ``batch`` at ``temperature`` (no gradient).

        ``base``: with the LoRA adapters switched off, i.e. the frozen weights the adapters were added
        to (the reference policy of a LoRA actor, with no second model in memory).
        """
        if base and self.spec.lora.rank == 0:
            raise ValueError("base logprobs need LoRA adapters to switch off (model.lora_rank > 0)")
        with self.model.disable_adapter() if base else nullcontext(), self._shared_prefix(batch):
            outputs = [
                self._policy_outputs(mb, temperature, "none")[0].cpu()
                for mb in self._micro_batches(batch, micro_batch_size)
            ]
        return_free_memory()
        return _stack_padded(outputs, batch.input_ids.shape[1])

    @torch.no_grad()
    def compute_logprobs_and_values(
        self, batch: TrainBatch, temperature: float, micro_batch_size: int
    ) -> tuple[Tensor, Tensor]:
        """Logprobs and values ``[n, L]`` of an actor with a value head, from one forward pass (no gradient)."""
        if self.value_head is None:
            raise ValueError(f"the {self.spec.role} has no value head (WorkerSpec.value_head)")
        logprobs, values = [], []
        with self._shared_prefix(batch):
            for mb in self._micro_batches(batch, micro_batch_size):
                mb_logprobs, _, mb_values = self._policy_outputs(mb, temperature, "none")
                logprobs.append(mb_logprobs.cpu())
                values.append(mb_values.cpu())
        return_free_memory()
        length = batch.input_ids.shape[1]
        return _stack_padded(logprobs, length), _stack_padded(values, length)

    @torch.no_grad()
    def compute_values(self, batch: TrainBatch, micro_batch_size: int) -> Tensor:
        """Values ``[n, L]`` of every position of ``batch`` (the critic's, or the actor's value head's)."""
        if self.spec.role != "critic" and self.value_head is None:
            raise ValueError(f"the {self.spec.role} has no value head (WorkerSpec.value_head)")
        with self._shared_prefix(batch):
            outputs = [self._values(mb).cpu() for mb in self._micro_batches(batch, micro_batch_size)]
        return_free_memory()
        return _stack_padded(outputs, batch.input_ids.shape[1])

    @contextmanager
    def _shared_prefix(self, batch: TrainBatch) -> Iterator[None]:
        """While ``batch``'s micro-batches run: the first tokens all its rows share run once, and the chunked forward
        of every micro-batch reads their keys/values (module docstring, "A shared prefix run once"). Only where the
        chunked path runs (an actor or a reference with ``logits_chunk_size`` > 0) and the prefix is long enough.

        With a gradient (an update) the micro-batches read the keys/values as leaves; their gradients, summed over
        the micro-batches, go through the prefix's forward in one backward on exit, so the weights receive what
        the full rows would have given them.
        """
        shared = 0
        if self.spec.share_prefix and self.spec.logits_chunk_size > 0 and self.spec.role != "critic":
            shared = shared_prefix_length(batch)
        if not self._on_every_rank(shared >= MIN_SHARED_PREFIX):  # a rank alone would run one forward more
            yield
            return
        training = torch.is_grad_enabled()
        with _layers_keep_cache(self.model):
            layers, hidden = self.model.prefix_keys_values(batch.input_ids[:1, :shared].to(self.device))
            read = layers  # without a gradient the micro-batches read the prefix's keys/values as they are
            if training:  # a layer below every adapter (model.lora_layers) gives its keys/values no gradient
                read = [(_leaf(keys), _leaf(values)) for keys, values in layers]
            self._prefix = SharedPrefix(shared, read, cache_keyword(self.model))
            try:
                yield
            finally:
                self._prefix = None
            if training:
                pairs = [
                    (tensor, leaf)
                    for pair, leaves in zip(layers, read, strict=True)
                    for tensor, leaf in zip(pair, leaves, strict=True)
                    if tensor.requires_grad
                ]
                produced = [tensor for tensor, _ in pairs]
                grads = [torch.zeros_like(leaf) if leaf.grad is None else leaf.grad for _, leaf in pairs]
                # the last hidden state's zero gradient takes the backward through every layer's output, in order,
                # so FSDP gathers each layer's weights before its part of this backward as it does in any other
                torch.autograd.backward([*produced, hidden], [*grads, torch.zeros_like(hidden)])

    def _on_every_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on every rank: where it decides a forward of its own (FSDP's collectives need every
        rank to run the same forwards and backwards), each rank's shard of rows may say otherwise."""
        if self.world_size == 1:
            return flag
        import torch.distributed as dist

        value = torch.tensor([int(flag)])  # on the CPU: gloo, also beside NCCL
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return bool(value.item())

    # ------------------------------------------------------------------------------------------ updates
    def update_policy(
        self, batch: TrainBatch, agg: Aggregation, loss: PolicyLossSpec, micro_batch_size: int
    ) -> StepStats:
        """One optimizer step on this rank's rows of a mini-batch: each micro-batch's forward, the actor's
        objective on its outputs (:func:`trainer.algos.actor_objective`), backward."""
        stats_sum = StepStats()
        entropy_mode = "grad" if loss.entropy_coef > 0 else "log"
        self._reading_layer_inputs = self.layer_inputs is not None
        try:
            with self._shared_prefix(batch):
                for mb in self._micro_batches(batch, micro_batch_size):
                    self._policy_micro_batch(mb, agg, loss, entropy_mode, stats_sum)
        finally:
            self._reading_layer_inputs = False
        return self._step(stats_sum)

    def _policy_micro_batch(
        self, mb: TrainBatch, agg: Aggregation, loss: PolicyLossSpec, entropy_mode: str, stats_sum: StepStats
    ) -> None:
        """One micro-batch of :meth:`update_policy`: forward, the actor's objective, backward; its stats added."""
        logprobs, entropy, values = self._policy_outputs(mb, loss.temperature, entropy_mode)
        terms = ActorTerms(
            policy=PolicyInputs(
                logprobs,
                mb.old_logprobs.to(self.device),
                mb.advantages.to(self.device),
                mb.response_mask.to(self.device),
                None if mb.is_weights is None else mb.is_weights.to(self.device),
            ),
            entropy=entropy,
            ref_logprobs=None if mb.ref_logprobs is None else mb.ref_logprobs.to(self.device),
        )
        if values is not None and mb.returns is not None:
            head = {
                "values": values,
                "old_values": mb.values.to(self.device),
                "returns": mb.returns.to(self.device),
            }
            terms = replace(terms, **head)
        total, stats, losses = actor_objective(terms, loss, agg)
        (total * self.world_size).backward()
        if self.layer_inputs is not None:  # the share of trained tokens whose frozen layers the engine ran
            stats = {**stats, "frozen_layers_from_engine": float(self._from_layer_inputs)}
        stats_sum.add(stats, float(terms.policy.mask.sum()), losses)

    def update_sft(self, batch: TrainBatch, agg: Aggregation, micro_batch_size: int) -> StepStats:
        """One optimizer step of supervised fine-tuning on this rank's rows: the NLL of the tokens where
        ``response_mask`` is 1 (:func:`trainer.algos.sft_loss`), at temperature 1."""
        stats_sum = StepStats()
        with self._shared_prefix(batch):
            for mb in self._micro_batches(batch, micro_batch_size):
                mask = mb.response_mask.to(self.device)
                logprobs, _, _ = self._policy_outputs(mb, 1.0, "none")
                loss, stats = sft_loss(logprobs, mask, agg)
                (loss * self.world_size).backward()
                stats_sum.add(stats, float(mask.sum()), {"sft_loss": loss.detach()})
        return self._step(stats_sum)

    def update_value(
        self, batch: TrainBatch, agg: Aggregation, clip_range: float | None, micro_batch_size: int
    ) -> StepStats:
        stats_sum = StepStats()
        for mb in self._micro_batches(batch, micro_batch_size):
            mask = mb.response_mask.to(self.device)
            values = self._values(mb)
            loss, stats = value_loss(
                values, mb.values.to(self.device), mb.returns.to(self.device), mask, agg, clip_range=clip_range
            )
            (loss * self.world_size).backward()
            stats_sum.add(stats, float(mask.sum()), {"value_loss": loss.detach()})
        return self._step(stats_sum)

    def _step(self, stats: StepStats) -> StepStats:
        """Clip, step the optimizer and the schedule; record the step's grad norm and lr in ``stats``."""
        assert self.optimizer is not None, "this role has no optimizer"
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.spec.optimizer.grad_clip
        stats.grad_norm, stats.lr = _clip_and_step(params, self.optimizer, self.scheduler, clip)
        if self.value_head is not None and self.value_head.weight.grad is not None:
            self._step_value_head(stats)
        self.optimizer_steps += 1
        return_free_memory()  # the roles take turns: an idle rank holds its weights, not its last peak
        return stats

    def _step_value_head(self, stats: StepStats) -> None:
        """The value head's optimizer step: its gradient summed over ranks (each rank's loss is scaled by the world
        size, as FSDP's averaged gradients expect), clipped on its own."""
        import torch.distributed as dist

        params = list(self.value_head.parameters())
        if self.world_size > 1:
            for param in params:
                dist.all_reduce(param.grad)
                param.grad /= self.world_size
        clip = self.spec.value_head.grad_clip
        grad_norm, lr = _clip_and_step(params, self.value_optimizer, self.value_scheduler, clip)
        stats.per_step["value_head.grad_norm"], stats.per_step["value_head.lr"] = grad_norm, lr

    # ------------------------------------------------------------------------------------------ weights
    def full_state_dict(self) -> dict[str, Tensor] | None:
        """The unsharded weights on rank 0 (LoRA merged into the base weights), ``None`` on the other ranks.

        A collective: every rank must call it.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.model, options=options)
        if self.rank != 0:
            return None
        if self.spec.lora.rank > 0 and self.spec.role == "actor":
            state = merge_lora_state_dict(state, self.spec.lora)
        return {name: tensor.detach().float() for name, tensor in state.items()}

    def save_checkpoint(self, directory: str) -> None:
        """Sharded model and optimizer (torch.distributed.checkpoint), the schedule and this rank's RNG.

        With LoRA only the trained weights are saved (adapters, and the critic's value head): the frozen
        weights under them are the model the run started from, which the run directory keeps once.
        """
        import torch.distributed.checkpoint as dcp

        dcp.save(self._checkpoint_state(), checkpoint_id=os.path.join(directory, "dcp"))
        extra = {"optimizer_steps": self.optimizer_steps, "rng": rng_state()}
        if self.optimizer is not None:
            extra["scheduler"] = self.scheduler.state_dict()
        if self.value_head is not None:  # replicated: every rank saves the same head
            extra["value_head"] = {
                "weights": self.value_head.state_dict(),
                "optimizer": self.value_optimizer.state_dict(),
                "scheduler": self.value_scheduler.state_dict(),
            }
        torch.save(extra, os.path.join(directory, f"rank{self.rank}.pt"))

    def load_checkpoint(self, directory: str) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        state = self._checkpoint_state()
        dcp.load(state, checkpoint_id=os.path.join(directory, "dcp"))
        set_state_dict(
            self.model,
            self.optimizer or [],
            model_state_dict=state["model"],
            optim_state_dict=state.get("optim", {}),
            options=StateDictOptions(strict=self.spec.lora.rank == 0),
        )
        extra = torch.load(os.path.join(directory, f"rank{self.rank}.pt"), weights_only=False)
        self.optimizer_steps = extra["optimizer_steps"]
        if self.optimizer is not None:
            self.scheduler.load_state_dict(extra["scheduler"])
        if self.value_head is not None:
            if "value_head" not in extra:
                raise ValueError(f"{directory} holds no value head: it was saved by an actor without one")
            self.value_head.load_state_dict(extra["value_head"]["weights"])
            self.value_optimizer.load_state_dict(extra["value_head"]["optimizer"])
            self.value_scheduler.load_state_dict(extra["value_head"]["scheduler"])
        set_rng_state(extra["rng"])

    def _checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds: the model's state (its trained weights only, with LoRA) and the optimizer's."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(self.model, self.optimizer or [])
        if self.spec.lora.rank > 0:
            trained = {name for name, p in self.model.named_parameters() if p.requires_grad}
            model_state = {name: t for name, t in model_state.items() if name in trained}
        state = {"model": model_state}
        if self.optimizer is not None:
            state["optim"] = optim_state
        return state

    def save_pretrained(self, directory: str, source: str) -> None:
        """Write the policy in Hugging Face format (``from_pretrained`` loads it) with ``source``'s tokenizer.

        The weights of :meth:`full_state_dict`, bit for bit, but unsharded, merged and written one at a time
        (:func:`trainer.export.save_hf_checkpoint_streamed`): no merged copy of the model exists at any moment, which
        for a LoRA actor was its peak at every checkpoint. A collective: every rank calls it.
        """
        weights = self._export_weights()
        tensors = (make() for _, _, make in weights)
        if self.rank == 0:
            from trainer.export import save_hf_checkpoint_streamed

            layout = [(name, shape) for name, shape, _ in weights]
            save_hf_checkpoint_streamed(layout, tensors, Path(directory), Path(source))
        else:
            for _ in tensors:  # each unsharding is a collective the other ranks join
                pass

    def _export_weights(self) -> list[tuple[str, tuple[int, ...], Callable[[], Tensor]]]:
        """Each weight of the exported model, in the model's order: its Hugging Face name, its shape, and how to
        make it (unsharded, float32, its LoRA adapter merged in by :func:`merged_lora_weight`, as
        :func:`merge_lora_state_dict` merges it). The head tied to the embeddings and the adapters are left out."""
        state = self.model.state_dict()
        tied = bool(getattr(self.model.config, "tie_word_embeddings", False))
        lora = self.spec.lora.rank > 0 and self.spec.role == "actor"

        def unsharded(key: str) -> Tensor:
            tensor = state[key]
            return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor

        def make(name: str) -> Callable[[], Tensor]:
            def weight() -> Tensor:
                tensor = unsharded(name)
                if lora:
                    tensor = merged_lora_weight(name, tensor, unsharded, self.spec.lora)
                return tensor.detach().float()

            return weight

        weights = []
        for name, tensor in state.items():
            exported = base_model_name(name)
            if exported is None or (tied and exported == "lm_head.weight"):
                continue
            weights.append((exported, tuple(tensor.shape), make(name)))
        return weights

    def ping(self) -> int:
        return self.rank

    def phase_peak_mib(self) -> float | None:
        """This rank's peak resident memory (MiB) since the last call, which starts a new peak
        (:func:`agents.memory.peak_resident_mib`); ``None`` where the system does not say."""
        return peak_resident_mib()

    def peak_memory(self) -> dict[str, float]:
        """This rank's peak resident memory (MiB) and, on CUDA, peak allocated device memory (MiB)."""
        import resource

        peak = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        if self.device.type == "cuda":
            peak["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
        return peak


# ---------------------------------------------------------------------------------------------- helpers


# Rows with fewer common leading tokens run unpacked: the saving would not pay for the block mask's attention.
MIN_SHARED_PREFIX = 16


@dataclass(frozen=True)
class PackedRows:
    """A micro-batch as one sequence (:func:`pack_rows`): ``input_ids`` and ``positions`` ``[1, T]``, the
    additive block mask ``[1, 1, T, T]``, ``wanted`` the packed positions whose outputs are read, and
    ``gather`` ``[b, keep]`` the index into those outputs of each row's last ``keep`` columns."""

    input_ids: Tensor
    positions: Tensor
    mask: Tensor
    wanted: Tensor
    gather: Tensor


def pack_rows(mb: TrainBatch, prefix: int, keep: int) -> PackedRows:
    """Pack ``mb``'s rows behind their common first ``prefix`` tokens (layout: :class:`PackedRows`).

    Row ``r``'s column ``c >= prefix`` sits at packed position ``start_r + c - prefix``; a column past the
    row's last real token reads the row's last real position instead (its output is never used).
    """
    lengths = mb.attention_mask.sum(dim=1).tolist()
    pieces, positions, segment = (
        [mb.input_ids[0, :prefix]],
        [torch.arange(prefix)],
        [torch.zeros(prefix, dtype=torch.long)],
    )
    starts = []
    total = prefix
    for row, length in enumerate(lengths):
        starts.append(total)
        pieces.append(mb.input_ids[row, prefix:length])
        positions.append(torch.arange(prefix, length))
        segment.append(torch.full((length - prefix,), row + 1, dtype=torch.long))
        total += length - prefix
    seg = torch.cat(segment)
    causal = torch.ones(total, total, dtype=torch.bool).tril()
    visible = causal & ((seg[:, None] == seg[None, :]) | (seg[None, :] == 0))
    mask = torch.zeros(total, total).masked_fill_(~visible, torch.finfo(torch.float32).min)
    first = mb.input_ids.shape[1] - keep
    columns = torch.arange(first, mb.input_ids.shape[1])
    rows = [
        torch.tensor(start) + torch.clamp(columns, max=length - 1) - prefix
        for start, length in zip(starts, lengths, strict=True)
    ]
    packed_index = torch.stack(rows)  # [b, keep] packed positions
    wanted, gather = torch.unique(packed_index, return_inverse=True)
    return PackedRows(torch.cat(pieces)[None], torch.cat(positions)[None], mask[None, None], wanted, gather)


class CaptureLayer(DynamicLayer):
    """One decoder layer's keys/values of a forward without a past: ``update`` keeps the latest it is given (a
    recomputed forward gives the same again) and returns them unchanged."""

    def update(self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        self.keys, self.values, self.is_initialized = key_states, value_states, True
        return key_states, value_states


class PrefixLayer(DynamicLayer):
    """One decoder layer's keys/values of a prefix that every row of a forward continues (``[1, heads, P, dim]``).

    ``update`` returns the prefix (broadcast over the forward's rows) followed by the new keys/values and stores
    nothing, so the layer can serve any number of forwards, a recomputed one included.
    """

    def __init__(self, keys: Tensor, values: Tensor):
        super().__init__()
        self.keys, self.values, self.is_initialized = keys, values, True

    def update(self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        rows = key_states.shape[0]
        keys = torch.cat([self.keys.expand(rows, -1, -1, -1), key_states], dim=-2)
        return keys, torch.cat([self.values.expand(rows, -1, -1, -1), value_states], dim=-2)

    def get_seq_length(self) -> int:
        return self.keys.shape[-2]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.keys.shape[-2] + query_length, 0


@dataclass(frozen=True)
class SharedPrefix:
    """The first ``length`` tokens of every scored row, and each decoder layer's ``(keys, values)`` of them."""

    length: int
    layers: list[tuple[Tensor, Tensor]]
    keyword: str  # the decoder's name for a cache argument (agents.models.cache_keyword)

    def cache(self) -> Cache:
        """A transformers cache that puts the prefix before the tokens of a forward (:class:`PrefixLayer`)."""
        return Cache(layers=[PrefixLayer(keys, values) for keys, values in self.layers])


def shared_prefix_length(mb: TrainBatch) -> int:
    """How many leading tokens every row of ``mb`` has in common, up to the shortest prompt's last token
    (excluded: outputs are read from there on); 0 for a single row."""
    if len(mb) < 2:
        return 0
    limit = int(mb.prompt_lengths.min().item()) - 1
    if limit <= 0:
        return 0
    ids = mb.input_ids[:, :limit]
    differs = (ids != ids[:1]).any(dim=0).nonzero()
    return int(differs[0].item()) if len(differs) else limit


def _response_region(mb: TrainBatch) -> Tensor:
    """``[b, L]`` 1 from each row's first response token to its last real token: outputs elsewhere are set to 0,
    so a row's answer does not depend on the other rows of its micro-batch."""
    columns = torch.arange(mb.input_ids.shape[1])[None, :]
    return ((columns >= mb.prompt_lengths[:, None]) & (mb.attention_mask > 0)).float()


def _register_head_outputs(model: nn.Module) -> None:
    """Give the FSDP-wrapped causal LM ``model`` a second forward method, ``head_outputs``, that runs the decoder
    and then the vocabulary head in chunks (:func:`trainer.algos.chunked_token_logprobs`).

    ``register_fsdp_forward_method`` runs the root unit's hooks around it, as around ``forward``: the root's
    weights (embeddings, final norm, head) are gathered before it and its backward, and their gradient is
    reduced at the end of the backward. Calling the decoder or the head from outside would skip those hooks.
    """
    from torch.distributed.fsdp import register_fsdp_forward_method

    model.head_outputs = functools.partial(_head_outputs, model)
    register_fsdp_forward_method(model, "head_outputs")
    model.prefix_keys_values = functools.partial(_prefix_keys_values, model)
    register_fsdp_forward_method(model, "prefix_keys_values")


def _prefix_keys_values(model: nn.Module, input_ids: Tensor) -> tuple[list[tuple[Tensor, Tensor]], Tensor]:
    """Each decoder layer's ``(keys, values)`` ``[1, heads, P, dim]`` of ``input_ids`` ``[1, P]``, and the decoder's
    last hidden state ``[1, P, H]`` (the decoder alone; :class:`CaptureLayer`)."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = causal_lm.get_decoder()
    cache = Cache(layers=[CaptureLayer() for _ in decoder_layers(model)])
    # use_cache=False: the cache passed is used all the same, and transformers does not warn under checkpointing
    hidden = decoder(input_ids=input_ids, use_cache=False, **{cache_keyword(causal_lm): cache}).last_hidden_state
    # clones, not the attention's views of them: FSDP hooks the backward of what a forward method returns
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers], hidden


@contextmanager
def _layers_keep_cache(model: nn.Module) -> Iterator[None]:
    """Let ``model``'s decoder layers keep their cache argument under activation checkpointing, which transformers
    drops because a layer that writes a cache would write it again when recomputed. :class:`CaptureLayer` and
    :class:`PrefixLayer` give a recomputed forward what the first one got."""
    layers = decoder_layers(model)
    before = [layer.__dict__.get("_can_checkpoint_with_cache") for layer in layers]
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer, value in zip(layers, before, strict=True):
            if value is None:
                del layer._can_checkpoint_with_cache
            else:
                layer._can_checkpoint_with_cache = value


def _head_outputs(
    model: nn.Module,
    body: dict[str, Tensor],
    hidden_index: tuple[Tensor, ...],
    targets: Tensor | None,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    entropy: bool = False,
    entropy_grad: bool = False,
    first_layer: int = 0,
) -> tuple[Tensor | None, Tensor | None, Tensor]:
    """The decoder on ``body``; at its last hidden state's positions ``hidden_index`` (``features`` ``[N, H]``) the
    logprobs of ``targets`` ``[N]`` and the entropy (``None`` without ``targets`` or ``entropy``; ``entropy_grad``:
    the loss differentiates it). ``first_layer`` > 0: ``body["inputs_embeds"]`` is that decoder layer's input, and
    the layers below it do not run."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the LM
    decoder = causal_lm.get_decoder()
    with _layers_from(decoder, first_layer):
        hidden = decoder(**body, use_cache=False).last_hidden_state  # [B, T, H], after the final norm
    features = hidden[hidden_index]  # [N, H]
    if targets is None:
        return None, None, features
    head = model.get_output_embeddings()
    logprobs, entropies = chunked_token_logprobs(
        features,
        head.weight,
        head.bias,
        targets,
        temperature=temperature,
        chunk_size=chunk_size,
        entropy=entropy,
        entropy_grad=entropy_grad,
    )
    return logprobs, entropies, features


@contextmanager
def _layers_from(decoder: nn.Module, first: int) -> Iterator[None]:
    """While it runs, ``decoder``'s forward applies its layers from ``first`` on (the decoder loops over its
    ``layers``; each attention layer keeps its own index into the cache, so the cache's layers stay as they are)."""
    if first == 0:
        yield
        return
    layers = decoder.layers
    decoder.layers = layers[first:]
    try:
        yield
    finally:
        decoder.layers = layers


def _scatter(values: Tensor | None, index: tuple[Tensor, Tensor], shape: torch.Size) -> Tensor | None:
    """Per-token outputs ``[N]`` placed at ``index`` (rows, columns) of a zero ``[b, L]`` tensor."""
    if values is None:
        return None
    return values.new_zeros(shape).index_put(index, values)


def _left_pad(values: Tensor, length: int) -> Tensor:
    """Place per-position outputs ``[b, k]`` at the last ``k`` columns of ``[b, length]``."""
    out = values.new_zeros(values.shape[0], length)
    if values.shape[1]:
        out[:, length - values.shape[1] :] = values
    return out


def _leaf(tensor: Tensor) -> Tensor:
    """``tensor`` detached, a leaf that collects its gradient where ``tensor`` has one to pass on."""
    return tensor.detach().requires_grad_(tensor.requires_grad)


def _stack_padded(chunks: list[Tensor], length: int) -> Tensor:
    rows = [torch.nn.functional.pad(c, (0, length - c.shape[1])) for c in chunks]
    return torch.cat(rows) if rows else torch.zeros(0, length)


def one_rank_weights(model: nn.Module) -> set[nn.Parameter]:
    """Every parameter of ``model``, for ``fully_shard``'s ``ignored_params`` on a one-rank group in float32.

    One rank shards nothing, yet FSDP2 would still copy each weight it holds into an all-gather buffer and out
    again before every forward and every backward of its layer, and each trained weight's gradient through a
    reduce-scatter after every backward. For SmolLM2 that was 11% of a profiled LoRA update's CPU time (the frozen
    base, the 113 MB embedding copied twice a call), and the warm-up, which trains every weight, ran its optimizer
    steps 1.5x slower with FSDP holding them (``benchmarks/one_rank_fsdp.py``). Left out, the layers compute with
    the loaded tensors in place and autograd accumulates the gradients into them: the same sums, so the same
    weights bit for bit. Not with mixed precision, where FSDP's cast to bf16 is the point; several ranks shard
    as before.
    """
    return set(model.parameters())


def shard_rows(batch: TrainBatch, world_size: int) -> list[TrainBatch]:
    """Contiguous, equally sized shards (the short ones padded with :meth:`TrainBatch.pad_rows`)."""
    per_rank = math.ceil(len(batch) / world_size)
    shards = []
    for rank in range(world_size):
        rows = list(range(rank * per_rank, min((rank + 1) * per_rank, len(batch))))
        if rows:
            shard = batch.select(rows)
        else:  # more ranks than rows: one row that contributes nothing
            shard = batch.select([0])
            shard = replace(shard, response_mask=torch.zeros_like(shard.response_mask))
        shards.append(shard.pad_rows(per_rank - len(shard)))
    return shards


def _clip_and_step(params: list[Tensor], optimizer, scheduler, grad_clip: float) -> tuple[float, float]:
    """Clip ``params``' gradient norm to ``grad_clip``, step ``optimizer`` and ``scheduler``, clear the gradients;
    return the norm before clipping and the lr the step used."""
    grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip)
    grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(grad_norm), lr
