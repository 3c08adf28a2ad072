"""The success rate a policy reaches without reading the board: the best fixed answer, chosen honestly.

    python benchmarks/blind_baseline.py                                  # the default run's Sokoban, 3 turns
    python benchmarks/blind_baseline.py -- env.max_moves=null            # the same overrides as trainer.run

A board-blind policy gives the same answer every turn ("Left || Up", say), whatever the board shows.
This script plays every such answer of 1 to ``--max-moves`` moves (1,364 answers for Sokoban's four moves
and 5 moves a turn) on ``--select`` training seeds (the warm-up's, ``sft.seed`` on), keeps the answer that
solves most of them, and reports that one answer's success rate on the held-out evaluation seeds
(``evaluation.seed``, ``evaluation.episodes``) with its standard error, beside the best answer chosen on
the held-out seeds themselves (an optimistic bound) and a uniformly random legal answer.

A warm-up or an RL phase whose held-out success does not exceed the chosen answer's has not shown that
it reads the board: a small model can learn the statistics of the oracle's answers (which moves, in
which order) and score that much by itself.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import random
import time
from collections.abc import Iterable, Iterator

import envs
from agents.config import env_options
from trainer.config import compose_train_config, to_train_config


def answers(moves: list[str], max_moves: int) -> list[str]:
    """Every answer of 1 to ``max_moves`` moves, joined by ``||`` as the environment reads them."""
    return [" || ".join(seq) for n in range(1, max_moves + 1) for seq in itertools.product(moves, repeat=n)]


def solves(env, turn_answers: Iterable[str]) -> bool:
    """Whether giving ``turn_answers``, one a turn (drawn lazily), to a copy of ``env`` solves the episode."""
    env = copy.deepcopy(env)
    for answer in turn_answers:
        _, _, terminated, truncated, info = env.step(answer)
        if terminated or truncated:
            return bool(info["success"])
    return False


def success_counts(started: list, candidates: list[str], turns: int) -> list[int]:
    """For each answer, on how many of the ``started`` environments (just reset) it succeeds."""
    return [sum(solves(env, itertools.repeat(answer, turns)) for env in started) for answer in candidates]


def started_envs(env_id: str, options: dict, seeds: range) -> list:
    out = []
    for seed in seeds:
        env = envs.make(env_id, **options)
        env.reset(seed=seed)
        out.append(env)
    return out


def random_success(started: list, moves: list[str], max_moves: int, turns: int, seed: int, repeats: int) -> float:
    """Success of a policy that answers 1 to ``max_moves`` uniformly random moves every turn."""
    rng = random.Random(seed)

    def random_answers() -> Iterator[str]:
        for _ in range(turns):
            yield " || ".join(rng.choice(moves) for _ in range(rng.randint(1, max_moves)))

    wins = sum(solves(env, random_answers()) for _ in range(repeats) for env in started)
    return wins / (repeats * len(started))


def rate(count: int, n: int) -> dict[str, float]:
    p = count / n
    return {"success_rate": p, "stderr": math.sqrt(p * (1 - p) / n), "solved": count, "episodes": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("--moves", default="Up,Down,Left,Right", help="comma-separated action words")
    parser.add_argument("--max-moves", type=int, default=None, help="default: env.max_actions_per_turn (or 3)")
    parser.add_argument("--select", type=int, default=256, help="training seeds the answer is chosen on")
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides, e.g. env.max_moves=3")
    args = parser.parse_args()

    config = to_train_config(compose_train_config([f"env={args.env}", *args.overrides]))
    env_id, options = config.env["id"], env_options(config)
    turns = config.rollout.max_turns or int(options.get("max_turns") or 1)
    max_moves = args.max_moves or int(options.get("max_actions_per_turn") or 3)
    moves = args.moves.split(",")
    started = time.perf_counter()
    selection = started_envs(env_id, options, range(config.sft.seed, config.sft.seed + args.select))
    held_out_seeds = range(config.evaluation.seed, config.evaluation.seed + config.evaluation.episodes)
    held_out = started_envs(env_id, options, held_out_seeds)
    candidates = answers(moves, max_moves)
    on_selection = success_counts(selection, candidates, turns)
    on_held_out = success_counts(held_out, candidates, turns)
    chosen = max(range(len(candidates)), key=lambda i: (on_selection[i], -len(candidates[i])))
    best_held_out = max(range(len(candidates)), key=lambda i: on_held_out[i])
    n = len(held_out)
    report = {
        "env": env_id,
        "overrides": args.overrides,
        "turns": turns,
        "answers_tried": len(candidates),
        "chosen_on_training_seeds": {
            "answer": candidates[chosen],
            "training": rate(on_selection[chosen], len(selection)),
            "held_out": rate(on_held_out[chosen], n),
        },
        "best_on_held_out_seeds": {"answer": candidates[best_held_out], **rate(on_held_out[best_held_out], n)},
        "random_answers": {"success_rate": random_success(held_out, moves, max_moves, turns, seed=0, repeats=20)},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
