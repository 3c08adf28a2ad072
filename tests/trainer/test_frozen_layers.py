"""Frozen layers from the engine (trainer/learner_worker.py, agents/engines/layer_inputs.py, trainer/colocated.py).

* :class:`LayerInputs` assembles a row from the entries that share its tokens up to each position, and says
  ``None`` when a position was never computed (hand-built entries).
* The colocated engine, with the adapters on the tiny model's last layer, keeps the input of that layer at every
  position it computed: equal to the learner's own forward's (a hook on the learner's layer), for two-turn
  conversations whose second turn and whose shared prompt came from the prefix cache.
* An update that starts its forward at the first adapted layer, on the engine's inputs, gives the weights (adapters
  and value head) of an update that runs every layer, to float rounding; it reports that every trained token's
  frozen layers came from the engine; a sync empties the store, and then the update runs every layer again.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
import torch

from agents.engines.base import SamplingParams
from agents.engines.layer_inputs import LayerInputs
from agents.models import tiny_model_path
from agents.trajectory import Trajectory
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch, build_batch
from trainer.colocated import ColocatedWorker, EngineOptions
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec, decoder_layers, first_trained_layer

INIT = "tcp://127.0.0.1:29877"  # the process group of the other one-rank learner tests
PROMPT = [5, 17, 42, 99, 7, 63, 120, 11, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312]  # 20 tokens


# ------------------------------------------------------------------------------------------------ the store
def states(start: int, end: int) -> torch.Tensor:
    """Hand-made states: position p's row is [p, p] (so where each came from shows in its value)."""
    return torch.arange(start, end, dtype=torch.float32)[:, None].repeat(1, 2)


def test_a_row_is_assembled_from_every_entry_that_shares_its_tokens_up_to_each_position():
    store = LayerInputs(layer=1)
    first = np.array([1, 2, 3, 4, 5])  # an episode's first turn, run from position 0
    other = np.array([1, 2, 3, 9, 9, 9])  # another episode: its first 3 tokens came from the prefix cache
    second = np.array([1, 2, 3, 4, 5, 6, 7, 8])  # the first episode's second turn: 5 tokens from the cache
    store.add(first, 0, states(0, 5))
    store.add(other, 3, states(3, 6) + 100)
    store.add(second, 5, states(5, 8))
    row = store.lookup(np.array([1, 2, 3, 4, 5, 6, 7, 8, 0]), 8)
    torch.testing.assert_close(row, states(0, 8))  # positions 0-4 from `first`, 5-7 from `second`
    # the other episode: 0-2 from `first` (same tokens up to there), 3-5 its own
    torch.testing.assert_close(store.lookup(other, 6), torch.cat([states(0, 3), states(3, 6) + 100]))
    # position 3 of [1, 2, 3, 7]: no entry shares the tokens up to it
    assert store.lookup(np.array([1, 2, 3, 7, 7]), 4) is None
    assert store.lookup(np.array([1, 2, 3, 7, 7]), 3) is not None  # its first three are known
    assert store.stored_tokens == 11
    store.clear()
    assert store.lookup(first, 5) is None and store.stored_tokens == 0


def test_the_store_drops_its_oldest_entries_past_its_bound_and_refuses_a_wrong_shape():
    store = LayerInputs(layer=1, max_tokens=6)
    store.add(np.array([1, 2, 3, 4]), 0, states(0, 4))
    store.add(np.array([7, 8, 9, 10]), 0, states(0, 4))  # 8 states > 6: the first entry goes
    assert store.stored_tokens == 4
    assert store.lookup(np.array([1, 2, 3, 4]), 4) is None
    assert store.lookup(np.array([7, 8, 9, 10]), 4) is not None
    with pytest.raises(ValueError, match=r"expected 3 states for positions 1\.\.3"):
        store.add(np.array([1, 2, 3, 4]), 1, states(0, 4))
    with pytest.raises(ValueError, match="layer must be >= 1"):
        LayerInputs(layer=0)


# ------------------------------------------------------------------------------------------------ the engine
def worker_with_top_layer_adapters(share: bool = True) -> ColocatedWorker:
    optimizer = OptimizerSpec(lr=5e-2, warmup_steps=0, total_steps=10, schedule="constant")
    spec = WorkerSpec(
        "actor", str(tiny_model_path()), optimizer, lora=LoraSpec(rank=4, alpha=8.0, layers=1), value_head=optimizer
    )
    worker = ColocatedWorker(spec, 0, 1, INIT)
    worker.setup()
    with torch.no_grad():  # a value head that is not zero, so its update shows
        worker.value_head.weight.normal_(std=0.5, generator=torch.Generator().manual_seed(2))
    worker.start_engine(EngineOptions(max_batch_size=4, max_context=None, seed=0, share_frozen_layers=share))
    return worker


async def two_turn_trajectory(worker: ColocatedWorker, seed: int) -> Trajectory:
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=seed)
    first = await worker.generate(PROMPT, sampling)
    observation = [31, 32, 33, 34]
    second = await worker.generate(PROMPT + list(first.output_ids) + observation, sampling)
    sampled = (len(first.output_ids), len(observation), len(second.output_ids))
    return Trajectory(
        env_id="x",
        seed=seed,
        group_id=f"g{seed}",
        prompt_ids=list(PROMPT),
        response_ids=[*first.output_ids, *observation, *second.output_ids],
        response_mask=[1] * sampled[0] + [0] * sampled[1] + [1] * sampled[2],
        rollout_logprobs=[*first.logprobs, *[0.0] * sampled[1], *second.logprobs],
        rollout_values=[*first.values, *[0.0] * sampled[1], *second.values],
    )


async def rollout(worker: ColocatedWorker) -> TrainBatch:
    trajectories = [await two_turn_trajectory(worker, seed) for seed in (1, 2, 3)]
    await worker.drop_prefix_cache(keep_layer_inputs=True)  # as the colocated step does when its rollout ends
    b = build_batch(trajectories, pad_id=0)
    generator = torch.Generator().manual_seed(4)
    b.old_logprobs = b.rollout_logprobs.clone()
    b.values = b.rollout_values.clone()
    b.advantages = torch.randn(b.response_mask.shape, generator=generator) * b.response_mask
    b.returns = b.response_mask * 2.0
    return b


def learner_layer_inputs(worker: ColocatedWorker, b: TrainBatch) -> list[torch.Tensor]:
    """Each row's input of the first adapted layer in the learner's own forward (all real positions)."""
    captured: list[torch.Tensor] = []
    layer = decoder_layers(worker.model)[worker.layer_inputs.layer]

    def capture(_module, args, kwargs) -> None:
        captured.append(args[0] if args else kwargs["hidden_states"])

    handle = layer.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        with torch.no_grad(), worker._learner_weights():
            for row in range(len(b)):
                length = int(b.attention_mask[row].sum())
                worker.model(input_ids=b.input_ids[row : row + 1, :length])
    finally:
        handle.remove()
    return [c[0] for c in captured]


def test_the_engine_keeps_the_first_adapted_layers_inputs_as_the_learner_computes_them():
    worker = worker_with_top_layer_adapters()
    assert first_trained_layer(worker.model) == 1 and worker.layer_inputs.layer == 1

    async def scenario() -> TrainBatch:
        try:
            return await rollout(worker)
        finally:
            await worker.close()

    b = asyncio.run(scenario())
    assert worker.engine.stats().cached_prompt_tokens >= 2 * len(PROMPT)  # the prompt and first turns were cached
    # the closed engine leaves no hook on the model it was given, as with its value head's
    hooks = decoder_layers(worker.engine.model)[worker.layer_inputs.layer]._forward_pre_hooks.values()
    assert not [hook for hook in hooks if hook.__qualname__.startswith("HfEngine.")], "the engine's hook outlived it"
    for row, own in enumerate(learner_layer_inputs(worker, b)):
        length = int(b.attention_mask[row].sum())
        kept = worker.layer_inputs.lookup(b.input_ids[row, :length].numpy(), length - 1)
        assert kept is not None, f"row {row} has positions the engine never computed"
        torch.testing.assert_close(kept, own[: length - 1], atol=1e-5, rtol=1e-5)


def update_once(worker: ColocatedWorker, b: TrainBatch) -> dict[str, float]:
    agg = Aggregation("seq-mean-token-mean", float(b.response_mask.sum()), float(len(b)))
    stats = worker.update_policy(b, agg, PolicyLossSpec(value_clip=0.5), 1)  # one row a micro-batch, prefix shared
    return {name: value / max(stats.tokens, 1.0) for name, value in stats.token_weighted.items()}


def trained(worker: ColocatedWorker) -> dict[str, torch.Tensor]:
    out = {n: p.detach().clone() for n, p in worker.model.named_parameters() if p.requires_grad}
    out.update({f"value_head.{n}": p.detach().clone() for n, p in worker.value_head.named_parameters()})
    return out


def test_an_update_on_the_engines_layer_inputs_is_the_update_that_runs_every_layer():
    shared, full = worker_with_top_layer_adapters(), worker_with_top_layer_adapters(share=False)
    assert full.layer_inputs is None
    before = trained(shared)
    for name, value in trained(full).items():
        assert torch.equal(value, before[name]), name  # the same start

    async def scenario() -> None:
        ours, theirs = await rollout(shared), await rollout(full)
        assert torch.equal(ours.input_ids, theirs.input_ids)  # the same policy sampled the same tokens
        assert shared.layer_inputs.stored_tokens > 0  # the rollout's end freed the prefix cache, not the store
        ours_stats, theirs_stats = update_once(shared, ours), update_once(full, theirs)
        assert ours_stats.pop("frozen_layers_from_engine") == 1.0 and "frozen_layers_from_engine" not in theirs_stats
        for name in ("entropy", "value_head.value_mean"):  # the forwards' own figures: equal to rounding
            assert math.isclose(ours_stats[name], theirs_stats[name], rel_tol=1e-5, abs_tol=1e-6), name
        after, reference = trained(shared), trained(full)
        moved = max(float((after[n] - before[n]).abs().max()) for n in after)
        assert moved > 1e-3  # the step changed the adapters and the head
        # Each weight's move, to float rounding of the move: Adam divides every gradient element by its own running
        # magnitude, so layer inputs equal to rounding (the test above) give moves that differ by up to about 1e-4 of
        # their size where an element's gradients nearly cancel between optimizer steps (the CPU's kernels decide
        # which). The forward's own figures above are the sensitive check: one response position's input 0.1% off
        # moves the mean value past its tolerance.
        for name, value in reference.items():
            step, expected = after[name] - before[name], value - before[name]
            torch.testing.assert_close(step, expected, atol=2e-6, rtol=1e-3, msg=name)

        # a sync empties the store: the next update has nothing to read and runs every layer
        await shared.update_weights(None, 1)
        assert shared.layer_inputs.stored_tokens == 0
        assert update_once(shared, ours)["frozen_layers_from_engine"] == 0.0
        # and a drop of the prefix cache alone (after an evaluation) empties it too
        await two_turn_trajectory(shared, seed=5)
        assert shared.layer_inputs.stored_tokens > 0
        await shared.drop_prefix_cache()
        assert shared.layer_inputs.stored_tokens == 0

    async def run() -> None:
        try:
            await scenario()
        finally:
            await shared.close()
            await full.close()

    asyncio.run(run())


def test_nothing_is_kept_where_the_first_layer_trains():
    optimizer = OptimizerSpec(lr=5e-2, warmup_steps=0, total_steps=10, schedule="constant")
    spec = WorkerSpec("actor", str(tiny_model_path()), optimizer, lora=LoraSpec(rank=4, alpha=8.0))
    worker = ColocatedWorker(spec, 0, 1, INIT)
    worker.setup()
    assert first_trained_layer(worker.model) == 0
    worker.start_engine(EngineOptions(max_batch_size=4, max_context=None, seed=0))
    try:
        assert worker.layer_inputs is None and worker.engine.layer_inputs is None
    finally:
        asyncio.run(worker.close())
