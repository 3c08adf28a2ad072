"""How much of a LoRA actor's policy change a bf16 forward shows: the learner's view against the weights' own.

    python benchmarks/lora_precision.py                              # SmolLM2, LoRA 32, lr 1e-4, CPU
    python benchmarks/lora_precision.py --model runs/x/warmup/policy --steps 8
    python benchmarks/lora_precision.py --device cuda                # the same on a GPU

The oracle plays ``--episodes`` Sokoban seeds through the episode loop (the warm-up's data: real prompts,
observations and answers). A float32 LoRA actor (:class:`trainer.learner_worker.ModelWorker`, one gloo or
NCCL rank) takes ``--steps`` PPO optimizer steps on those rows with random advantages: Adam moves every
adapter weight by about the learning rate a step whatever the advantages, so the size of the change is a
real RL step's. Then the logprobs of the answer tokens are computed four ways:

* the truth: the trained weights (base plus ``B @ A * alpha / rank``) in float32;
* the learner's view in bf16: the same adapters, unmerged, bf16 compute (``trainer.precision=bf16-mixed``);
* the engine's view in bf16: the merged weights cast to bf16 (what a bf16 engine receives at a sync);
* the float32 learner, which must equal the truth.

Figures: the true change (mean |truth - base| per answer token), and for each bf16 view its mean distance
from the truth and the share of the true change it shows (the least-squares slope of its change, against
its own precision's base, on the true change; 1 is all of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import replace

import torch

from agents.chat import ChatRenderer
from agents.config import env_options
from agents.episode import EpisodeLimits
from agents.models import load_model, load_tokenizer, resolve_model
from trainer.algos import Aggregation, PolicyLossSpec, token_logprobs
from trainer.batch import build_batch
from trainer.config import compose_train_config, to_train_config
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.learner_worker import ModelWorker
from trainer.sft_data import oracle_trajectories


def oracle_batch(model: str, episodes: int, seed: int):
    config = to_train_config(compose_train_config(["env=sokoban"]))
    tokenizer = load_tokenizer(model)
    rollout = config.rollout
    limits = EpisodeLimits(rollout.max_turns, rollout.max_new_tokens, rollout.max_total_tokens)
    seeds = range(seed, seed + episodes)
    trajectories, _ = asyncio.run(
        oracle_trajectories("sokoban", env_options(config), seeds, ChatRenderer(tokenizer), limits)
    )
    return build_batch(trajectories, tokenizer.pad_token_id or 0)


@torch.no_grad()
def plain_logprobs(model, batch, device: str) -> torch.Tensor:
    """Each row's logprobs on its own (no packing, no padding), zero outside the answers."""
    out = torch.zeros_like(batch.response_mask)
    for i in range(len(batch)):
        n = int(batch.attention_mask[i].sum())
        ids = batch.input_ids[i : i + 1, :n].to(device)
        out[i, 1:n] = token_logprobs(model(input_ids=ids).logits[0, :-1], ids[0, 1:]).cpu()
    return out * batch.response_mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or a model directory")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--alpha", type=float, default=64.0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps (the default PPO step takes 4)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    path = resolve_model(args.model)
    batch = oracle_batch(path, args.episodes, args.seed)
    lora = LoraSpec(rank=args.rank, alpha=args.alpha)
    init = "tcp://127.0.0.1:29655"
    spec = WorkerSpec("actor", path, OptimizerSpec(lr=args.lr), lora=lora, device=args.device)
    learner = ModelWorker(spec, 0, 1, init)
    learner.setup()
    batch.old_logprobs = learner.compute_logprobs(batch, 1.0, 2)
    batch.advantages = torch.randn(batch.response_mask.shape) * batch.response_mask
    agg = Aggregation("seq-mean-token-mean", float(batch.response_mask.sum()), float(len(batch)))
    for _ in range(args.steps):
        learner.update_policy(batch, agg, PolicyLossSpec(), 2)
    mask = batch.response_mask

    def views(worker: ModelWorker) -> tuple[torch.Tensor, torch.Tensor]:
        return worker.compute_logprobs(batch, 1.0, 2), worker.compute_logprobs(batch, 1.0, 2, base=True)

    learner32, base32 = views(learner)
    merged = learner.full_state_dict()  # the base weights with the adapters merged in, float32
    truth_model = load_model(path, device=args.device)
    truth_model.load_state_dict(merged)
    truth = plain_logprobs(truth_model, batch, args.device)
    engine16 = plain_logprobs(truth_model.to(torch.bfloat16), batch, args.device)
    base16 = plain_logprobs(load_model(path, dtype="bfloat16", device=args.device), batch, args.device)
    # the learner's bf16 view: the same float32 weights, bf16 compute (a second worker, its adapters copied)
    mixed = ModelWorker(replace(spec, mixed_precision=True), 0, 1, init)
    mixed.setup()
    trained = dict(learner.model.named_parameters())
    with torch.no_grad():
        for name, param in mixed.model.named_parameters():
            if param.requires_grad:
                # FSDP holds the mixed worker's weights; the float32 learner's are plain tensors
                param.detach().to_local().copy_(trained[name].detach())
    learner16, learner16_base = views(mixed)

    change = (truth - base32) * mask

    def mean(x: torch.Tensor) -> float:
        return float((x.abs() * mask).sum() / mask.sum())

    def share(view: torch.Tensor, base: torch.Tensor) -> float:
        shown = ((view - base) * mask).flatten()
        return float(shown @ change.flatten() / (change.flatten() @ change.flatten()))

    report = {
        "model": args.model,
        "device": args.device,
        "answer_tokens": int(mask.sum()),
        "lora": {"rank": args.rank, "alpha": args.alpha, "lr": args.lr, "steps": args.steps},
        "true_change": mean(change),
        "float32_learner_vs_truth": mean(learner32 - truth),
        "bf16_learner": {"vs_truth": mean(learner16 - truth), "share_of_change": share(learner16, learner16_base)},
        "bf16_engine_merged": {"vs_truth": mean(engine16 - truth), "share_of_change": share(engine16, base16)},
        "bf16_rounding_of_the_base": mean(base16 - base32),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
