"""What a policy knows of an environment's oracle: teacher-forced accuracy on held-out oracle episodes.

    python benchmarks/warmup_probe.py --model runs/x/warmup/policy                 # Sokoban, 3 turns
    python benchmarks/warmup_probe.py --model smollm2 --model runs/x/warmup/policy -- env.board=grid

The oracle plays ``--episodes`` held-out seeds (from ``--seed``, the evaluation seeds by default) through
the episode loop, exactly as the warm-up's data is made; each model then reads those token sequences
once (no sampling) and is scored on the oracle's tokens: the mean negative log-likelihood per token,
and, on the tokens that are action words (``--actions``, Sokoban's four moves by default), how often
the model's most likely token is the oracle's and the NLL on those tokens alone. Chance on a choice of
four is 25% accuracy and ln 4 = 1.386 nats. A warm-up whose action accuracy stays near chance learned
the format and not the game; a held-out success rate alone cannot tell the two apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math

import torch

from agents.chat import ChatRenderer
from agents.config import env_options
from agents.episode import EpisodeLimits
from agents.models import load_model, load_tokenizer
from trainer.config import compose_train_config, to_train_config
from trainer.sft_data import oracle_trajectories


def action_token_ids(tokenizer, words: list[str]) -> set[int]:
    """Ids of the first token of each word, with and without a leading space (as it follows ``||``)."""
    ids = set()
    for word in words:
        for text in (word, " " + word):
            ids.add(tokenizer.encode(text, add_special_tokens=False)[0])
    return ids


@torch.no_grad()
def score(model, trajectories, actions: set[int]) -> dict[str, float]:
    action_ids = torch.tensor(sorted(actions))
    nll = tokens = action_nll = action_tokens = action_hits = 0.0
    for trajectory in trajectories:
        ids = torch.tensor([list(trajectory.prompt_ids) + list(trajectory.response_ids)])
        logits = model(ids).logits[0, :-1].float()
        targets = ids[0, 1:]
        token_nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
        start = len(trajectory.prompt_ids) - 1
        mask = torch.zeros_like(targets, dtype=torch.bool)
        mask[start:] = torch.tensor(trajectory.response_mask, dtype=torch.bool)
        is_action = mask & torch.isin(targets, action_ids)
        nll += token_nll[mask].sum().item()
        tokens += mask.sum().item()
        action_nll += token_nll[is_action].sum().item()
        action_tokens += is_action.sum().item()
        action_hits += (logits.argmax(-1)[is_action] == targets[is_action]).sum().item()
    accuracy = action_hits / max(action_tokens, 1)
    return {
        "nll_per_token": nll / max(tokens, 1),
        "action_tokens": int(action_tokens),
        "action_accuracy": accuracy,
        "action_accuracy_stderr": math.sqrt(accuracy * (1 - accuracy) / max(action_tokens, 1)),
        "action_nll": action_nll / max(action_tokens, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="smollm2, tiny or a model dir (repeatable)")
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: evaluation.seed)")
    parser.add_argument("--actions", default="Up,Down,Left,Right", help="comma-separated action words")
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides, e.g. env.board=grid")
    args = parser.parse_args()

    config = to_train_config(compose_train_config([f"env={args.env}", *args.overrides]))
    seed = config.evaluation.seed if args.seed is None else args.seed
    tokenizer = load_tokenizer(args.model[0])
    rollout = config.rollout
    limits = EpisodeLimits(rollout.max_turns, rollout.max_new_tokens, rollout.max_total_tokens)
    trajectories, dropped = asyncio.run(
        oracle_trajectories(
            config.env["id"], env_options(config), range(seed, seed + args.episodes), ChatRenderer(tokenizer), limits
        )
    )
    actions = action_token_ids(tokenizer, args.actions.split(","))
    report = {"env": config.env["id"], "episodes": len(trajectories), "dropped": dropped, "models": {}}
    for name in args.model:
        model = load_model(name).eval()
        report["models"][name] = score(model, trajectories, actions)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
