"""The colocated engine: the ``hf`` engine inside the actor's learner process, on the actor's own weights.

With ``engine.placement=colocated`` (the default for a LoRA actor on one learner rank, :func:`colocates`) no
engine actor exists. The actor's single :class:`ColocatedWorker` rank is both a
:class:`~trainer.learner_worker.ModelWorker` and an engine host: after ``setup`` it builds an
:class:`~agents.engines.hf.HfEngine` on :func:`shared_weights_model`, a second module tree whose every
parameter and buffer is a view of the learner's (FSDP2 with one rank keeps each whole parameter in its local
shard), so

* no second copy of the weights exists: the engine costs only its keys/values and prefix cache, and gives
  them back when a rollout ends (``drop_prefix_cache``), before the learner scores and trains in the same process;
* the engine computes with the LoRA adapters as they are: an optimizer step changes what it samples, and a weight
  sync is only the new policy version and an emptied prefix cache (``weight_sync="shared"``), no state dict;
* it samples with the adapters merged into the shared base weights (``engine.merge_adapters``, on by default: one
  product per layer instead of three, :mod:`agents.engines.merged_lora`), and every learner call that reads or
  writes the weights first takes them back, unmerged bit for bit, under the lock the engine holds around each
  forward; so the learner never sees merged weights and the adapters never change while merged;
* with the critic's value head on the actor (PPO's default with LoRA) the engine applies that head too, to the
  hidden state each sampled token came from (``Generation.values``, dynamic decode only), so an on-policy step
  takes the old logprobs and the values from the rollout and skips the scoring forward
  (:func:`trainer.train_step.score_batch`);
* with the adapters on the last layers only (``model.lora_layers``) the engine keeps the input of the first adapted
  layer at every position it computes (:mod:`agents.engines.layer_inputs`, ``engine.share_frozen_layers``), and the
  update's forward starts there instead of running the frozen layers below again
  (:mod:`trainer.learner_worker`, "Frozen layers from the engine"); a weight sync empties that store.

Rollouts and updates alternate: the training loop awaits a step's rollout before it updates, and the engine
holds its running sequences back while an update of the version is queued (:mod:`agents.engines.hf`), so
no generation mixes two policies. One-step off-policy training overlaps them and is refused with this
placement (:mod:`trainer.config`).

Environment actors reach the engine through :class:`ColocatedEngineClient`, the
:class:`~trainer.engine_actor.EngineClient` of the same handle: ``generate`` and the other engine calls are
async methods of the worker, served concurrently by its event loop while no learner call runs.

Faults: the colocated actor is the learner. Ray does not restart it, because the restarted process would hold
neither the trained weights nor the optimizer's state. ``trainer.run`` does, up to ``engine.max_restarts`` times:
when Ray says the actor died (in a rollout, the scoring, the update, the weight sync or a checkpoint's save), a
new learner and engine start from the run's last checkpoint, as ``trainer.resume=true`` would load it (the
initial policy before the first checkpoint), the environment actors are started again on the new engine, and
the steps after the checkpoint are played again (:func:`trainer.components.restart_colocated`,
:meth:`trainer.faults.FaultWatch.colocated_died`). With no restart left the run stops with one line naming
``trainer.resume=true``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from agents.engines.base import WeightSync
from agents.engines.layer_inputs import LayerInputs
from agents.engines.merged_lora import lora_layers
from trainer.engine_actor import EngineClient, EngineHost
from trainer.learner_specs import PEFT_DEPRECATION_MESSAGE, decoder_layers, first_trained_layer
from trainer.learner_worker import ModelWorker

__all__ = ["ColocatedEngineClient", "ColocatedWorker", "EngineOptions", "shared_weights_model"]


def shared_weights_model(model: nn.Module) -> nn.Module:
    """A module tree like ``model`` (a causal LM, LoRA-wrapped or not, sharded by FSDP2 on ONE rank) whose
    parameters and buffers are views of ``model``'s: no weight is copied, and in-place changes of either show
    in both. The copy is a plain module (no FSDP hooks), in eval mode, without gradients.

    Built on the meta device from ``model``'s config and LoRA settings, then every parameter and buffer slot is
    pointed at the tensor in the same slot of ``model`` (tied weights stay tied). Raises ``ValueError`` for a
    parameter that is not whole on this rank (FSDP2 over several ranks) or a slot ``model`` does not have.
    """
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    with torch.device("meta"):
        copy = AutoModelForCausalLM.from_config(base.config)
        if hasattr(model, "peft_config"):
            from peft import get_peft_model

            with warnings.catch_warnings():  # as in with_lora: transformers' note to peft's authors
                warnings.filterwarnings("ignore", message=PEFT_DEPRECATION_MESSAGE, category=FutureWarning)
                copy = get_peft_model(copy, model.peft_config["default"])
    copy.generation_config = base.generation_config
    views: dict[int, nn.Parameter] = {}  # one view per tensor, so tied weights stay one parameter
    for name, module in model.named_modules():
        target = copy.get_submodule(name)
        for slot, param in module._parameters.items():
            if param is None:
                continue
            if id(param) not in views:
                views[id(param)] = nn.Parameter(_whole(param, f"{name}.{slot}"), requires_grad=False)
            _check_shape(target, slot, views[id(param)], f"{name}.{slot}")
            target._parameters[slot] = views[id(param)]
        for slot, buffer in module._buffers.items():
            if buffer is not None:
                target._buffers[slot] = buffer
    left = [n for n, t in [*copy.named_parameters(), *copy.named_buffers()] if t.is_meta]
    if left:
        raise ValueError(f"the shared-weights copy has tensors {left[:5]} the learner's model lacks")
    return copy.eval()


def _whole(param: torch.Tensor, name: str) -> torch.Tensor:
    """The whole tensor behind ``param`` (an FSDP2 DTensor's local shard on one rank), detached, same storage."""
    local = param.to_local() if hasattr(param, "to_local") else param
    if tuple(local.shape) != tuple(param.shape):
        raise ValueError(
            f"{name} is sharded ({tuple(local.shape)} of {tuple(param.shape)} here): the colocated engine needs "
            "the actor on one learner rank (trainer.cpu_ranks=1 or trainer.n_gpus=1), or engine.placement=separate"
        )
    return local.detach()


def _check_shape(module: nn.Module, slot: str, view: torch.Tensor, name: str) -> None:
    expected = module._parameters.get(slot)
    if expected is None or tuple(expected.shape) != tuple(view.shape):
        shape = None if expected is None else tuple(expected.shape)
        raise ValueError(f"{name}: the learner's {tuple(view.shape)} does not fit the copy's slot {shape}")


def _learner_call(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of :class:`ModelWorker`, run with the weights unmerged (``ColocatedWorker._learner_weights``)."""

    @functools.wraps(method)
    def call(self: ColocatedWorker, *args: Any, **kwargs: Any) -> Any:
        with self._learner_weights():
            return method(self, *args, **kwargs)

    return call


class EngineOptions:
    """What the colocated engine takes from the run's engine spec (picklable)."""

    def __init__(
        self,
        max_batch_size: int,
        max_context: int | None,
        seed: int | None,
        cuda_graphs: bool | None = None,
        merge_adapters: bool = True,
        share_frozen_layers: bool = True,
    ) -> None:
        self.max_batch_size, self.max_context, self.seed = max_batch_size, max_context, seed
        self.cuda_graphs = cuda_graphs  # the hf engine's option (None: its default, off)
        self.merge_adapters = merge_adapters  # sample with LoRA adapters merged (when the actor has them)
        # the engine keeps the first trained layer's inputs for the update (when the layers below it are frozen)
        self.share_frozen_layers = share_frozen_layers


class ColocatedWorker(ModelWorker, EngineHost):
    """The actor's one rank with the engine in its process (module docstring); Ray runs it as an async actor.

    The engine calls are :class:`~trainer.engine_actor.EngineHost`'s, on the engine :meth:`start_engine` builds
    (``EngineHost.__init__``, which builds an engine from a factory, is not used). Tests use it directly:
    ``setup()``, then ``start_engine(options)``, then the engine calls.
    """

    engine_name = "hf"  # the engine start_engine builds (HfEngine.name), known before it is built

    def start_engine(self, options: EngineOptions, after_setup: object = None) -> str:
        """Build the engine on the shared weights (after ``setup``); returns the engine's name.

        ``after_setup``: given the object reference of this rank's ``setup`` call, Ray runs this call only once
        that one has finished (an async actor may otherwise start it while ``setup`` still runs)."""
        import uuid

        from agents.engines.hf import HfEngine
        from agents.engines.hf_graphs import decode_mode

        if self.model is None:
            raise RuntimeError("start_engine needs the model: call setup() first")
        _, static = decode_mode(torch.device(self.device), options.cuda_graphs, None)
        shared = shared_weights_model(self.model)
        first = first_trained_layer(self.model)
        share = options.share_frozen_layers and not static and not self.spec.mixed_precision
        self.layer_inputs = LayerInputs(first) if share and 0 < first < len(decoder_layers(self.model)) else None
        self.engine = HfEngine(
            shared,
            device=str(self.device),
            max_batch_size=options.max_batch_size,
            max_context=options.max_context,
            seed=options.seed,
            cuda_graphs=options.cuda_graphs,
            value_head=None if static else self.value_head,  # the learner's own head, as it trains
            merge_adapters=options.merge_adapters and bool(lora_layers(shared)),
            layer_inputs=self.layer_inputs,
        )
        self.instance_id = uuid.uuid4().hex
        return self.engine.name

    async def close(self) -> None:
        """Close the engine; a run stopped during its start-up may close this rank before it has built one."""
        if getattr(self, "engine", None) is not None:
            await self.engine.close()

    async def update_weights(self, state_dict: Mapping[str, Any] | None, policy_version: int) -> None:
        """The weights changed in place (they are the learner's): drop the prefix cache, take the new version.

        ``state_dict`` is ignored (``weight_sync="shared"``). The engine's own ``update_weights`` is given its
        own state, which it checks and loads onto itself, a copy of each tensor onto its own storage: the
        only way its public contract offers to take a version and drop the cache at once.
        """
        await self.engine.update_weights(self.engine.model.state_dict(), policy_version)

    @contextmanager
    def _learner_weights(self) -> Iterator[None]:
        """The weights as the learner has them (adapters unmerged) for the whole of a learner call."""
        adapters = getattr(getattr(self, "engine", None), "adapters", None)
        if adapters is None:
            yield
            return
        with adapters.unmerged():
            yield

    # Every learner call that reads or writes the weights runs with them unmerged (module docstring).
    compute_logprobs = _learner_call(ModelWorker.compute_logprobs)
    compute_logprobs_and_values = _learner_call(ModelWorker.compute_logprobs_and_values)
    compute_values = _learner_call(ModelWorker.compute_values)
    update_policy = _learner_call(ModelWorker.update_policy)
    update_sft = _learner_call(ModelWorker.update_sft)
    update_value = _learner_call(ModelWorker.update_value)
    full_state_dict = _learner_call(ModelWorker.full_state_dict)
    save_checkpoint = _learner_call(ModelWorker.save_checkpoint)
    save_pretrained = _learner_call(ModelWorker.save_pretrained)

    def load_checkpoint(self, directory: str) -> None:
        """:meth:`ModelWorker.load_checkpoint` with the weights unmerged; the engine's layer inputs are dropped, since
        they came from the weights before."""
        if self.layer_inputs is not None:
            self.layer_inputs.clear()
        with self._learner_weights():
            ModelWorker.load_checkpoint(self, directory)


class ColocatedEngineClient(EngineClient):
    """The engine protocol over the colocated worker's handle: ``weight_sync="shared"`` (no state dict travels).

    ``close`` closes the engine only; the worker, being the learner, is closed with the learner.
    """

    weight_sync: WeightSync = "shared"
