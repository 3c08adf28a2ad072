"""``HfEngine``: the embedded transformers engine (CPU or CUDA), continuous batching with prefix caching.

One worker thread owns the model and runs the batching loop; ``generate`` may be awaited from any number of
tasks on any number of event loops and threads (Ray async actors included): each call queues a request and
awaits its future. Each loop iteration

1. applies a pending weight update when allowed (below);
2. admits queued requests while the batch has room, up to ``prefill_batch_size`` per forward: for each, the
   longest prefix found in the prefix cache is copied and only the remaining tokens are prefilled; the group
   runs as one forward (layout: :class:`~agents.engines.hf_kv.PrefillLayout`, each row's cached prefix and new
   tokens right-aligned, holes masked, explicit positions, so rows with different cached lengths share it),
   their first tokens are sampled together, and each prompt's keys/values go into the prefix cache. A queued
   request that shares a longer prefix with a request already in the group than with the prefix cache waits
   for the next forward of the same iteration, when that request's prompt is cached: so concurrent
   conversations share a system prompt, and ``cached_tokens`` is what one-at-a-time admission gives
   (``prefill_batch_size=1``, the behaviour before batched prefill);
3. runs one decode step for every running sequence together and retires finished ones, storing their
   keys/values (prompt + output except the last sampled token, whose keys/values were never computed)
   in the prefix cache.

Prefix reuse, exactly: a request's ``cached_tokens`` is the longest common prefix with a cached sequence,
capped at ``len(input_ids) - 1`` (the last input token is always run to get the next-token logits). For
turn ``k + 1`` of a conversation whose input starts with turn ``k``'s input and output, that is
``len(input_k) + len(output_k) - 1``: every token but the last sampled one.

Batched prefill computes the same quantities as one request at a time; only float summation order may differ
(one batched matrix product over the group, masked hole columns in the attention): on CPU float32 it left every
greedy and seeded token unchanged and moved logprobs by at most 1e-6 on the tiny test model and
1.1e-5 on SmolLM2 (tests/agents/engines/test_hf_batched_prefill.py, SmolLM2 in its slow tests).

Weight updates (``update_weights``): by default the update waits for the running sequences to finish with
the old weights (queued requests are not admitted meanwhile), then loads the state dict in place, clears the
prefix cache and sets the version; every ``Generation`` therefore comes from exactly one policy version,
and requests admitted after the update use the new one. With ``abort_in_flight=True`` running sequences
end at once with ``finish_reason == "abort"`` and the tokens sampled so far.

Sampling: the whole batch's next tokens in one set of tensor ops on the model's device, each request drawing
from its own noise source (:mod:`agents.engines.hf_sampling`): ``sampling_noise="generator"`` (the default) gives
each request a torch generator on the device, one noise launch per sampled row and step; ``"counter"`` gives each
request a counter stream of its seed, the whole batch's noise in one computation, and the same draws on CPU and
CUDA for a seed. Both keep exact per-request seeds; they draw different tokens for the same seed. On an H100 with
the graphed decode step the generators were the faster (their launches overlap the step): docs/gpu.md.

Static decode (``static_decode``, ``cuda_graphs``): the decode step runs over fixed-capacity key/value buffers
and row-count buckets (:mod:`agents.engines.hf_graphs`), captured in CUDA graphs and replayed on CUDA (the default
there), eager on CPU only when asked (as fast as the dynamic step there, within noise: docs/gpu.md). The
context is then also capped by ``decode_capacity`` (default 4096 tokens): ``max_context`` becomes
``min(max_context, decode_capacity)``, so a longer prompt raises and a generation reaching the buffers' end stops
with ``"length"``; the buffers take ``max_batch_size x decode_capacity x layers x 2 x kv_heads x head_dim``
elements (SmolLM2, 16 rows, bf16: 1.5 GB). Prefill, sampling, prefix reuse and weight updates are unchanged; on
CPU float32 the static step left every greedy and seeded token of the dynamic one unchanged and moved logprobs by
at most 1e-5 (tests/agents/engines/test_hf_static_decode.py).

Values (``value_head``): given the learner's value head (a module from the vocabulary head's input, the last
hidden state, to one number; the colocated engine of :mod:`trainer.colocated` passes the actor's), the engine
applies it to the same hidden state that gives each sampled token's logits, and ``Generation.values[i]`` is the
value of the state before ``output_ids[i]``: what the learner's scoring forward computes for that token, so
an on-policy step need not run that forward (:func:`trainer.train_step.score_batch`). Dynamic decode only: a
captured graph would not run the hook that reads the hidden state, so static decode with a value head is refused.

Merged adapters (``merge_adapters``): a model with peft LoRA layers samples with each adapter merged into its base
weight, one product per layer instead of three (:class:`~agents.engines.merged_lora.MergedLora`); the colocated
engine, which shares those base weights with the learner, holds ``adapters.lock`` around every forward and the
learner takes the weights back, unmerged bit for bit, with ``adapters.unmerged()``. Logprobs move by float
rounding only (the same products, summed in another order).

Layer inputs (``layer_inputs``, a :class:`~agents.engines.layer_inputs.LayerInputs` of layer ``k``): the engine keeps
the input of decoder layer ``k`` at every position it computes, prefill and decode, and when a request finishes
stores it under the tokens it ran (its prompt and output but the last sampled token). A learner whose layers below
``k`` are frozen starts its update's forward there (:mod:`trainer.learner_worker`). A weight update with a state
dict empties the store, and so does ``drop_prefix_cache`` unless asked to keep it (``keep_layer_inputs``: the
colocated engine frees its prefix cache when a rollout ends, and the update that follows reads the store). Dynamic
decode only, as with values.

Stop tokens: the model's ``generation_config.eos_token_id`` (int or list) plus ``SamplingParams.stop_token_ids``.
Context: ``max_context`` (default: the model's ``max_position_embeddings``) bounds prompt plus output; a
prompt of ``max_context`` tokens or more raises ``ValueError``; a generation that reaches it ends with
``"length"``. Full-attention decoder models only (sliding-window layers are refused).

Why not transformers' ``ContinuousBatchingManager``: measured on this workload shape (benchmarks/hf_engine.py)
it served about half the tokens per second on CPU, and it cannot keep this contract as is: sampling versus
greedy is one switch for the whole manager, there is no per-request seed, its logprobs are taken after top-k/top-p
renormalisation, and prefixes are shared in whole pages only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from agents.engines.base import EngineStats, FinishReason, Generation, SamplingParams, WeightSync
from agents.engines.hf_graphs import DEFAULT_DECODE_CAPACITY, StaticDecoder, decode_mode
from agents.engines.hf_kv import PrefillLayout, PrefixCache, RunningBatch, SequenceKV, common_prefix_len
from agents.engines.hf_sampling import CounterStream, sample_next_tokens
from agents.engines.layer_inputs import LayerInputs
from agents.engines.merged_lora import MergedLora
from agents.memory import return_free_memory
from agents.models import cache_keyword, quiet_progress_bars

if TYPE_CHECKING:
    from agents.engines.registry import EngineSpec

__all__ = ["HfEngine", "build_hf_engine"]


@dataclass
class _Request:
    input_ids: np.ndarray
    sampling: SamplingParams
    stop_ids: frozenset[int]
    max_new_tokens: int  # sampling.max_new_tokens capped by the context
    generator: torch.Generator | CounterStream  # the request's noise source
    future: concurrent.futures.Future
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cached_tokens: int = 0
    kv_tokens: int = 0  # tokens whose keys/values are computed: input + output[:-1] once running
    values: list[float] | None = None  # with the engine's value head: one per output id
    layer_states: list[torch.Tensor] | None = None  # with layer_inputs: the layer's input at each computed position

    def finish_reason(self) -> FinishReason | None:
        if self.output_ids and self.output_ids[-1] in self.stop_ids:
            return "stop"
        return "length" if len(self.output_ids) >= self.max_new_tokens else None

    def resolve(self, reason: FinishReason) -> None:
        generation = Generation(
            output_ids=tuple(self.output_ids),
            logprobs=tuple(self.logprobs),
            finish_reason=reason,
            prompt_tokens=len(self.input_ids),
            cached_tokens=self.cached_tokens,
            values=None if self.values is None else tuple(self.values),
        )
        if not self.future.done():
            self.future.set_result(generation)


@dataclass
class _Update:
    state_dict: Mapping[str, Any] | None  # None: only drop the prefix cache (the weights and version stay)
    policy_version: int
    abort_in_flight: bool
    future: concurrent.futures.Future
    keep_layer_inputs: bool = False  # a prefix-cache drop that leaves the layer inputs for the update


class HfEngine:
    """Continuous batching over a transformers causal LM with prefix caching (contract: module docstring).

    ``model_or_path`` is a loaded ``PreTrainedModel`` (used as is, moved to ``device``/``dtype`` when given)
    or a directory for ``AutoModelForCausalLM.from_pretrained``. ``max_batch_size`` sequences are decoded
    together; ``prefill_batch_size`` queued requests at most are prefilled in one forward (default
    ``max_batch_size``; 1: one at a time); ``max_cached_tokens`` bounds the prefix cache; ``seed`` seeds requests
    without their own seed.

    ``cuda_graphs`` (default: on for CUDA, off elsewhere) replays the decode step from CUDA graphs;
    ``static_decode`` (default: ``cuda_graphs``) runs it with static shapes, eagerly when graphs are off (CPU tests),
    over buffers of ``decode_capacity`` tokens per row (default ``DEFAULT_DECODE_CAPACITY``; see the module docstring).
    ``sampling_noise`` (``"generator"`` or ``"counter"``) is each request's noise source (module docstring).
    ``value_head`` (a module from ``[rows, hidden]`` float32 to ``[rows, 1]``): each generation's ``values`` as well
    (module docstring; dynamic decode only). ``merge_adapters``: sample with the model's LoRA adapters merged
    into their base weights (``adapters``, a :class:`~agents.engines.merged_lora.MergedLora`; module docstring).
    ``layer_inputs``: keep a decoder layer's inputs there (module docstring; dynamic decode only).
    """

    name = "hf"
    weight_sync: WeightSync = "state_dict"

    def __init__(
        self,
        model_or_path: Any,
        *,
        device: str = "cpu",
        dtype: torch.dtype | None = None,
        max_batch_size: int = 16,
        prefill_batch_size: int | None = None,
        max_context: int | None = None,
        max_cached_tokens: int = 32768,
        seed: int | None = None,
        cuda_graphs: bool | None = None,
        static_decode: bool | None = None,
        decode_capacity: int | None = None,
        sampling_noise: str = "generator",
        value_head: torch.nn.Module | None = None,
        merge_adapters: bool = False,
        layer_inputs: LayerInputs | None = None,
    ):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if prefill_batch_size is not None and prefill_batch_size < 1:
            raise ValueError(f"prefill_batch_size must be >= 1 (or None: max_batch_size), got {prefill_batch_size}")
        self.cuda_graphs, self.static_decode = decode_mode(torch.device(device), cuda_graphs, static_decode)
        if sampling_noise not in ("generator", "counter"):
            raise ValueError(f"sampling_noise must be generator or counter, got {sampling_noise!r}")
        self.sampling_noise = sampling_noise
        if decode_capacity is not None and decode_capacity < 2:
            raise ValueError(f"decode_capacity must be >= 2 tokens (a prompt and a new token), got {decode_capacity}")
        if value_head is not None and self.static_decode:
            raise ValueError(
                "value_head needs the dynamic decode step (a captured graph does not run the hook that reads the "
                "hidden state): pass cuda_graphs=False, or no value head"
            )
        self.model = _load_model(model_or_path, device, dtype)
        self._value_head = value_head
        self._features: torch.Tensor | None = None  # the vocabulary head's input at each row's last position
        self._hooks: list[Any] = []  # on the model it was given, which may serve again: removed at close
        if value_head is not None:
            self._hooks.append(self.model.get_output_embeddings().register_forward_pre_hook(self._capture_features))
        self.adapters = MergedLora(self.model) if merge_adapters else None
        self.layer_inputs = layer_inputs
        self._layer_input: torch.Tensor | None = None  # the kept layer's input in the forward that just ran
        if layer_inputs is not None:
            self._watch_layer_input(layer_inputs.layer)
        self._cache_keyword = cache_keyword(self.model)
        config = self.model.config
        model_limit = getattr(config, "max_position_embeddings", None) or 2**31
        self.max_context = min(max_context or model_limit, model_limit)
        if self.static_decode:
            self.max_context = min(self.max_context, decode_capacity or DEFAULT_DECODE_CAPACITY)
        self.max_batch_size = max_batch_size
        self.prefill_batch_size = prefill_batch_size or max_batch_size
        self.vocab_size = int(config.vocab_size)
        self.device = torch.device(device)
        self.eos_ids = _eos_ids(self.model)
        self._num_layers = int(config.num_hidden_layers)
        self._prefix = PrefixCache(max_cached_tokens)
        self._batch = self._new_batch()
        self._running: list[_Request] = []
        self._waiting: deque[_Request] = deque()
        self._admitting: list[_Request] = []  # taken from the queue for a prefill, not yet joined or resolved
        self._updates: deque[_Update] = deque()
        self._condition = threading.Condition()
        # The batching loop reads and writes the prefix cache; forget_prefix, from the caller's thread, too.
        self._prefix_lock = threading.Lock()
        self._closing = False
        self._failure: BaseException | None = None
        self._stats = EngineStats()
        self._counters = {"decode_steps": 0, "decode_rows": 0, "max_decode_batch_size": 0, "prefill_forwards": 0}
        # wall time of the prefill and decode forwards, sampling included (the rest of busy time is the loop's own)
        self._seconds = {"prefill": 0.0, "decode": 0.0}
        self._seed_source = torch.Generator().manual_seed(seed if seed is not None else int(time.time_ns() % 2**63))
        self._thread = threading.Thread(target=self._loop, name="hf-engine", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- public, any thread or event loop
    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        """Sample one response to ``input_ids`` (``affinity_key`` is unused: one replica holds every prefix)."""
        request = self._make_request(input_ids, sampling)
        with self._condition:
            self._check_open()
            self._waiting.append(request)
            self._condition.notify()
        return await asyncio.wrap_future(request.future)

    async def update_weights(
        self, state_dict: Mapping[str, Any], policy_version: int, *, abort_in_flight: bool = False
    ) -> None:
        """Load a full state dict in place, drop the prefix cache and set the version (semantics: module docstring)."""
        await self._queue_update(_Update(state_dict, policy_version, abort_in_flight, concurrent.futures.Future()))

    async def drop_prefix_cache(self, keep_layer_inputs: bool = False) -> None:
        """Forget every cached prefix and give its memory back, with the decode batch's buffers; the weights and the
        policy version stay. Like a weight update it waits for the running sequences (an evaluation's prefixes are
        no use to training). The layer inputs go too, unless ``keep_layer_inputs``."""
        await self._queue_update(_Update(None, -1, False, concurrent.futures.Future(), keep_layer_inputs))

    async def forget_prefix(self, token_ids: Sequence[int]) -> None:
        """Drop the cached prefixes that ``token_ids`` covers, a finished episode's own (``ForgetsPrefixes``), now.
        An LRU bound alone would keep them until the cache is full, so an evaluation of many episodes would hold
        every finished one's keys and values. Their memory goes back to the heap at once (the caller's thread
        drops the last reference)."""
        tokens = np.asarray(list(token_ids), dtype=np.int64)
        with self._condition:
            self._check_open()
        with self._prefix_lock:
            self._prefix.forget(tokens)

    async def _queue_update(self, update: _Update) -> None:
        with self._condition:
            self._check_open()
            self._updates.append(update)
            self._condition.notify()
        await asyncio.wrap_future(update.future)

    def stats(self) -> EngineStats:
        with self._condition:
            steps = self._counters["decode_steps"]
            extra = {
                "decode_steps": float(steps),
                "mean_decode_batch_size": self._counters["decode_rows"] / steps if steps else 0.0,
                "max_decode_batch_size": float(self._counters["max_decode_batch_size"]),
                "prefill_forwards": float(self._counters["prefill_forwards"]),
                "prefill_seconds": self._seconds["prefill"],
                "decode_seconds": self._seconds["decode"],
                "prefix_cache_tokens": float(self._prefix.stored_tokens),
                "decode_buffer_columns": float(self._batch.capacity if self._batch.kv is not None else 0),
            }
            return EngineStats(**{**self._stats.__dict__, "extra": extra})

    async def stats_async(self) -> EngineStats:
        return self.stats()  # a lock held for microseconds: no need to leave the event loop

    async def instance_async(self) -> str:
        return f"hf-{id(self):x}"  # lives as long as this object, and its weights with it

    async def close(self) -> None:
        """Stop the loop: running and queued requests end with ``"abort"``; later calls raise ``RuntimeError``."""
        with self._condition:
            self._closing = True
            self._condition.notify()
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        with self._prefix_lock:  # a forget_prefix must not put back what the clear drops
            self._prefix.clear()
        self._batch = self._new_batch()

    def _capture_features(self, module: Any, args: tuple) -> None:
        self._features = args[0][:, -1]

    def _watch_layer_input(self, layer: int) -> None:
        if self.static_decode:
            raise ValueError(
                "layer_inputs needs the dynamic decode step (a captured graph does not run the hook that reads the "
                "layer's input): pass cuda_graphs=False, or no layer_inputs"
            )
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        layers = base.get_decoder().layers
        if not 0 < layer < len(layers):
            raise ValueError(f"layer_inputs.layer must lie in [1, {len(layers)}), the decoder's layers; got {layer}")

        def capture(_module: Any, args: tuple, kwargs: dict) -> None:
            self._layer_input = args[0] if args else kwargs["hidden_states"]

        self._hooks.append(layers[layer].register_forward_pre_hook(capture, with_kwargs=True))

    def _keep_layer_inputs(self, request: _Request, tokens: np.ndarray) -> None:
        """Store a finished request's layer inputs under ``tokens``, the tokens it computed (nothing without a store:
        its requests keep no states)."""
        if request.layer_states:
            states, request.layer_states = torch.cat(request.layer_states), []
            self.layer_inputs.add(tokens, request.cached_tokens, states)

    def _new_batch(self) -> RunningBatch | StaticDecoder:
        if not self.static_decode:
            return RunningBatch(self.max_batch_size)
        return StaticDecoder(
            self.model,
            self._cache_keyword,
            self.device,
            self.max_batch_size,
            self.max_context,
            graphs=self.cuda_graphs,
        )

    # ----------------------------------------------------------------- request validation
    def _make_request(self, input_ids: Sequence[int], sampling: SamplingParams) -> _Request:
        ids = np.asarray(list(input_ids), dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError("input_ids must be a non-empty flat sequence of token ids")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"input_ids must lie in [0, {self.vocab_size}), the model's vocabulary")
        if len(ids) >= self.max_context:
            raise ValueError(
                f"prompt of {len(ids)} tokens does not fit max_context={self.max_context} (prompt plus at least one "
                "new token); shorten the conversation or raise max_context"
                + (
                    " and decode_capacity, the static decode's tokens per row (or turn it off: cuda_graphs=False, "
                    "engine.cuda_graphs=false)"
                    if self.static_decode
                    else ""
                )
            )
        if sampling.seed is not None:
            seed = sampling.seed
        else:
            with self._condition:
                seed = int(torch.randint(2**62, (1,), generator=self._seed_source))
        # a generator on the model's device (sampling draws there), or a counter stream (hf_sampling's docstring)
        generator = (
            CounterStream(seed) if self.sampling_noise == "counter" else torch.Generator(self.device).manual_seed(seed)
        )
        return _Request(
            input_ids=ids,
            sampling=sampling,
            stop_ids=frozenset(self.eos_ids) | frozenset(sampling.stop_token_ids),
            max_new_tokens=min(sampling.max_new_tokens, self.max_context - len(ids)),
            generator=generator,
            future=concurrent.futures.Future(),
            values=None if self._value_head is None else [],
            layer_states=None if self.layer_inputs is None else [],
        )

    def _check_open(self) -> None:
        if self._failure is not None:
            raise RuntimeError(f"HfEngine's batching loop failed earlier: {self._failure!r}; create a new engine")
        if self._closing:
            raise RuntimeError("HfEngine is closed; create a new engine")

    # ----------------------------------------------------------------- the batching loop (worker thread)
    def _loop(self) -> None:
        try:
            with torch.no_grad():
                while self._wait_for_work():
                    started = time.perf_counter()
                    with self._holding_weights():
                        self._apply_update_if_ready()
                        self._admit_waiting()
                        if self._running:
                            self._decode_step()
                    with self._condition:
                        self._stats.busy_seconds += time.perf_counter() - started
                self._abort_all()
        except BaseException as error:  # every waiter must hear about it, or it hangs forever
            self._fail_all(error)
        finally:
            if self.adapters is not None:
                self.adapters.unmerge()  # whoever shares the weights gets them back as loaded

    def _holding_weights(self) -> Any:
        """The adapters' lock while a loop iteration runs (nothing to hold without merged adapters)."""
        return contextlib.nullcontext() if self.adapters is None else self.adapters.lock

    def _forward_weights(self) -> None:
        """Merge the adapters before a forward, if this engine merges them and they are not merged yet."""
        if self.adapters is not None:
            self.adapters.merge()

    def _wait_for_work(self) -> bool:
        """Block until there is something to do; False once the engine is closing."""
        with self._condition:
            while not (self._closing or self._running or self._waiting or self._updates):
                self._condition.wait()
            return not self._closing

    def _apply_update_if_ready(self) -> None:
        with self._condition:
            if not self._updates:
                return
            update = self._updates[0]
        if update.abort_in_flight:
            self._retire_all("abort")
        if self._running:
            return  # wait for the running sequences to finish with the old weights
        if update.state_dict is not None:
            try:
                state_dict = _checked_state_dict(self.model, update.state_dict)
            except ValueError as error:  # the caller's mistake, found before any weight changed: the loop goes on
                with self._condition:
                    self._updates.popleft()
                update.future.set_exception(error)
                return
            if self.adapters is not None:
                self.adapters.unmerge()  # the state dict holds the base weights as loaded and new adapters
            self.model.load_state_dict(state_dict, strict=False)
        if isinstance(self._batch, StaticDecoder):
            self._batch.check_weights()  # load_state_dict copies in place: the captured graphs normally stay
        with self._prefix_lock:  # a forget_prefix must not put back what the clear drops
            self._prefix.clear()
        if self.layer_inputs is not None and not update.keep_layer_inputs:
            self.layer_inputs.clear()
        if isinstance(self._batch, RunningBatch):  # a StaticDecoder keeps its buffers: its graphs read them
            self._batch.release()  # no row runs: the decode buffers are allocated again by the next admission
        return_free_memory()  # the cleared prefix cache's keys and values; the learner trains next
        with self._condition:
            self._updates.popleft()
            if update.state_dict is not None:
                self._stats.policy_version = update.policy_version
        update.future.set_result(None)

    def _admit_waiting(self) -> None:
        while len(self._running) < self.max_batch_size:
            group = self._take_prefill_group(self.max_batch_size - len(self._running))
            if not group:
                return
            self._prefill(group)
            self._admitting = []

    def _take_prefill_group(self, room: int) -> list[tuple[_Request, SequenceKV | None, int]]:
        """Queued requests to prefill together, each with its cached prefix and that prefix's length."""
        group: list[tuple[_Request, SequenceKV | None, int]] = []
        while len(group) < min(room, self.prefill_batch_size):
            with self._condition:
                if self._updates or not self._waiting:
                    break
                request = self._waiting.popleft()
            if request.future.cancelled():
                continue
            self._admitting.append(request)  # a failure before it joins must still reach its caller
            limit = len(request.input_ids) - 1
            with self._prefix_lock:
                prefix, cached = self._prefix.match(request.input_ids, limit=limit)
            shared = max((common_prefix_len(request.input_ids, other.input_ids) for other, _, _ in group), default=0)
            if min(shared, limit) > cached:  # once that member's prompt is cached, it serves this one better
                with self._condition:
                    self._waiting.appendleft(request)
                self._admitting.pop()
                break
            group.append((request, prefix, cached))
        return group

    def _prefill(self, group: list[tuple[_Request, SequenceKV | None, int]]) -> None:
        """Prefill what the prefix cache lacks in one forward, sample the first tokens, then retire or join."""
        started = time.perf_counter()
        requests = [request for request, _, _ in group]
        layout = PrefillLayout(tuple(cached for *_, cached in group), tuple(len(r.input_ids) for r in requests))
        cache = layout.cache([prefix for _, prefix, _ in group], self._num_layers)
        input_ids, positions = layout.inputs([r.input_ids for r in requests])
        mask = layout.attention_mask().to(self.device) if layout.padded else None
        self._forward_weights()
        logits = self.model(
            input_ids=input_ids.to(self.device),
            position_ids=positions.to(self.device),
            attention_mask=mask,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_keyword: cache},
        ).logits[:, -1]
        kvs = [layout.row_kv(cache, row) for row in range(len(requests))]
        if self.layer_inputs is not None:  # each row's new tokens, right-aligned in the forward's queries
            hidden, self._layer_input = self._layer_input, None
            for row, request in enumerate(requests):
                new = layout.lengths[row] - layout.cached[row]
                request.layer_states.append(hidden[row, layout.queries - new :].clone())
        for request, kv, cached in zip(requests, kvs, layout.cached, strict=True):
            with self._prefix_lock:
                self._prefix.insert(request.input_ids, kv)
            request.cached_tokens, request.kv_tokens = cached, len(request.input_ids)
        with self._condition:
            self._stats.requests += len(requests)
            self._stats.prompt_tokens += sum(layout.lengths)
            self._stats.cached_prompt_tokens += sum(layout.cached)
            self._counters["prefill_forwards"] += 1
        self._record_samples(requests, logits)
        self._seconds["prefill"] += time.perf_counter() - started
        for request, kv in zip(requests, kvs, strict=True):
            reason = request.finish_reason()
            if reason is not None:
                self._keep_layer_inputs(request, request.input_ids)
                request.resolve(reason)
                continue
            self._batch.add(kv)
            self._running.append(request)

    def _decode_step(self) -> None:
        started = time.perf_counter()
        requests = self._running
        self._forward_weights()
        if isinstance(self._batch, StaticDecoder):
            logits = self._batch.step([r.output_ids[-1] for r in requests])
        else:
            logits = self._dynamic_decode_logits(requests)
            if self.layer_inputs is not None:
                hidden, self._layer_input = self._layer_input, None
                for row, request in enumerate(requests):
                    request.layer_states.append(hidden[row])
        for request in requests:
            request.kv_tokens += 1
        with self._condition:
            self._counters["decode_steps"] += 1
            self._counters["decode_rows"] += len(requests)
            self._counters["max_decode_batch_size"] = max(self._counters["max_decode_batch_size"], len(requests))
        self._record_samples(requests, logits)
        self._seconds["decode"] += time.perf_counter() - started
        for row in reversed(range(len(requests))):
            request = requests[row]
            reason = request.finish_reason()
            if reason is None and request.future.cancelled():
                reason = "abort"
            if reason is not None:
                self._retire(row, reason)

    def _dynamic_decode_logits(self, requests: list[_Request]) -> torch.Tensor:
        input_ids = torch.tensor([[r.output_ids[-1]] for r in requests], device=self.device)
        positions = torch.tensor([[r.kv_tokens] for r in requests], device=self.device)
        cache, attention_mask = self._batch.step_inputs()
        logits = self.model(
            input_ids=input_ids,
            position_ids=positions,
            attention_mask=attention_mask.to(self.device),
            use_cache=True,
            **{self._cache_keyword: cache},
        ).logits[:, -1]
        self._batch.advance()
        return logits

    def _record_samples(self, requests: list[_Request], logits: torch.Tensor) -> None:
        tokens, logprobs = sample_next_tokens(logits, [r.sampling for r in requests], [r.generator for r in requests])
        for request, token, logprob in zip(requests, tokens, logprobs, strict=True):
            request.output_ids.append(token)
            request.logprobs.append(logprob)
        if self._value_head is not None:
            features, self._features = self._features, None
            values = self._value_head(features.float()).squeeze(-1).tolist()
            for request, value in zip(requests, values, strict=True):
                request.values.append(float(value))
        with self._condition:
            self._stats.generated_tokens += len(tokens)

    def _retire(self, row: int, reason: FinishReason) -> None:
        """Finish the request in ``row``: cache its keys/values, resolve it, and drop it from the batch."""
        request = self._running[row]
        tokens = np.concatenate([request.input_ids, np.asarray(request.output_ids[:-1], dtype=np.int64)])
        kv = self._batch.extract(row)
        with self._prefix_lock:
            self._prefix.insert(tokens, kv)
        self._keep_layer_inputs(request, tokens)
        self._batch.remove(row)
        self._running[row] = self._running[-1]
        self._running.pop()
        request.resolve(reason)

    def _retire_all(self, reason: FinishReason) -> None:
        for row in reversed(range(len(self._running))):
            self._retire(row, reason)

    def _abort_all(self) -> None:
        self._retire_all("abort")
        with self._condition:
            waiting, self._waiting = list(self._waiting), deque()
            updates, self._updates = list(self._updates), deque()
        for request in waiting:
            request.resolve("abort")
        for update in updates:
            update.future.set_exception(RuntimeError("HfEngine closed before the weight update was applied"))

    def _fail_all(self, error: BaseException) -> None:
        with self._condition:
            self._failure = error
            pending = [r.future for r in (*self._admitting, *self._running, *self._waiting)]
            pending += [u.future for u in self._updates]
            self._running, self._waiting, self._updates, self._admitting = [], deque(), deque(), []
        failure = RuntimeError(f"HfEngine's batching loop failed: {error!r}")
        failure.__cause__ = error
        for future in pending:
            if not future.done():
                future.set_exception(failure)


def _load_model(model_or_path: Any, device: str, dtype: torch.dtype | None) -> Any:
    if isinstance(model_or_path, str | Path):
        from transformers import AutoModelForCausalLM

        with quiet_progress_bars():
            model = AutoModelForCausalLM.from_pretrained(str(model_or_path), dtype=dtype or torch.float32)
    else:
        model = model_or_path
    model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
    layer_types = getattr(model.config, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types):
        raise ValueError(f"HfEngine supports full-attention models only; this one has layer types {set(layer_types)}")
    return model.eval()


def _checked_state_dict(model: Any, state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """``state_dict`` if it covers every weight of ``model`` with the right shapes, else ``ValueError``.

    Tied weights (one tensor under several names, e.g. embeddings and output head) need only one of their names.
    """
    names_of: dict[int, list[str]] = {}
    for name, tensor in [
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    ]:
        names_of.setdefault(id(tensor), []).append(name)
    expected = model.state_dict()
    unexpected = sorted(set(state_dict) - set(expected))
    missing = [names[0] for names in names_of.values() if names[0] in expected and not set(names) & set(state_dict)]
    wrong = [k for k, v in state_dict.items() if k in expected and tuple(v.shape) != tuple(expected[k].shape)]
    if unexpected or missing or wrong:
        raise ValueError(
            f"state dict does not match the served model: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"wrong shapes {wrong[:5]}; send the full state dict of the same architecture"
        )
    return dict(state_dict)


def _eos_ids(model: Any) -> tuple[int, ...]:
    generation_config = getattr(model, "generation_config", None)
    eos = getattr(generation_config, "eos_token_id", None)
    if eos is None:
        return ()
    return tuple(int(i) for i in eos) if isinstance(eos, list | tuple) else (int(eos),)


def build_hf_engine(spec: EngineSpec) -> HfEngine:
    """The ``hf`` row of :mod:`agents.engines.registry`: load ``spec.model`` and serve it."""
    from agents.models import load_model

    return HfEngine(
        load_model(spec.model, dtype=spec.dtype, device=spec.device),
        device=spec.device,
        max_batch_size=spec.max_batch_size,
        max_context=spec.max_context,
        seed=spec.seed,
        cuda_graphs=spec.cuda_graphs,
    )
