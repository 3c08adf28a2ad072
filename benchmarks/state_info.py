"""The cost of Sokoban's state information and of levels of an exact difficulty.

    python benchmarks/state_info.py                  # about a minute on 2 cores
    python benchmarks/state_info.py --steps 2000 --seeds 20

1. Per step: ``info["state_key"]`` and ``info["distance_to_goal"]`` (the exact solver, cached along optimal
   solutions, see envs/sokoban/plans.py) after random single moves, timed around ``SokobanEnv._state_info``
   (which builds the whole info, so this is an upper bound), with the whole ``step`` beside it. Episodes
   start from a new seed every ``--episode-steps`` moves or when they end.
2. Per difficulty: ``generate_level(..., min_moves=d, max_moves=d)`` (what ``reset(options={"difficulty":
   d})`` runs, with its attempt budget of 10 x ``max_attempts``) for every ``d`` the move budget allows,
   ``--seeds`` seeds each: time and attempts, failures, and whether ``difficulty_range`` advertises ``d``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOMS = [(6, 6, 1), (8, 8, 2)]
DIFFICULTY_SETTINGS = [(3, 5), (5, 5)]  # (max_turns, max_actions_per_turn) on 6x6 rooms with one box


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500, help="random moves timed per room")
    parser.add_argument("--episode-steps", type=int, default=25, help="moves before the next seed's level")
    parser.add_argument("--seeds", type=int, default=10, help="levels per difficulty")
    return parser.parse_args()


def measure_steps(rows: int, cols: int, boxes: int, steps: int, episode_steps: int) -> dict[str, float]:
    import numpy as np

    from envs.sokoban import ACTIONS, SokobanEnv

    class TimedSokoban(SokobanEnv):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.state_info_s: list[float] = []

        def _state_info(self):
            start = time.perf_counter()
            info = super()._state_info()
            self.state_info_s.append(time.perf_counter() - start)
            return info

    env = TimedSokoban(dim=[rows, cols], num_boxes=boxes, max_turns=None, max_steps=10**6)
    rng = np.random.default_rng(0)
    seed, in_episode, step_s, no_distance = 0, 0, [], 0
    env.reset(seed=seed)
    env.state_info_s.clear()
    for _ in range(steps):
        if env.episode_over or in_episode == episode_steps:
            seed, in_episode = seed + 1, 0
            env.reset(seed=seed)
            env.state_info_s.pop()  # the reset's own (the level comes solved)
        start = time.perf_counter()
        *_, info = env.step(ACTIONS[int(rng.integers(4))])
        step_s.append(time.perf_counter() - start)
        no_distance += info["distance_to_goal"] is None
        in_episode += 1
    info_s = env.state_info_s
    return {
        "state info median us": 1e6 * statistics.median(info_s),
        "state info p99 us": 1e6 * sorted(info_s)[int(0.99 * len(info_s))],
        "state info worst ms": 1e3 * max(info_s),
        "step median us": 1e6 * statistics.median(step_s),
        "share without a distance": no_distance / steps,
    }


def measure_difficulties(max_turns: int, actions: int, seeds: int) -> list[tuple]:
    import numpy as np

    from envs.sokoban import GenerationError, SokobanEnv, generate_level

    env = SokobanEnv(max_turns=max_turns, max_actions_per_turn=actions)
    start = time.perf_counter()
    lowest, highest = env.difficulty_range
    range_s = time.perf_counter() - start
    rows = []
    for difficulty in range(max(env.min_pushes, env.num_boxes) + 1, env.max_moves + 1):
        seconds, attempts, failures = [], [], 0
        for seed in range(seeds):
            start = time.perf_counter()
            try:
                generated = generate_level(
                    6, 6, 1, np.random.default_rng(seed), min_moves=difficulty, max_moves=difficulty,
                    max_attempts=10 * env.max_attempts,
                )  # fmt: skip
                attempts.append(generated.attempts)
            except GenerationError:
                failures += 1
            seconds.append(time.perf_counter() - start)
        rows.append((difficulty, lowest <= difficulty <= highest, seconds, attempts, failures))
    print(f"\n6x6/1, {max_turns} turns x {actions} moves: difficulty_range {(lowest, highest)} ({range_s:.2f} s)")
    return rows


def print_difficulty_table(rows: list[tuple]) -> None:
    print(
        f"{'d':>3} {'advertised':>10} {'median ms':>9} {'worst ms':>9} {'attempts':>9} {'max att.':>8} {'failed':>6}"
    )
    for difficulty, advertised, seconds, attempts, failures in rows:
        median_attempts = f"{statistics.median(attempts):.1f}" if attempts else "-"
        print(
            f"{difficulty:>3} {'yes' if advertised else 'no':>10} {1e3 * statistics.median(seconds):>9.1f} "
            f"{1e3 * max(seconds):>9.1f} {median_attempts:>9} {max(attempts, default=0):>8} "
            f"{failures:>3}/{len(seconds)}"
        )


def main() -> int:
    args = parse_args()
    sys.path.insert(0, str(REPO))
    print(f"state information per random move ({args.steps} moves, a new seed every {args.episode_steps})")
    for rows, cols, boxes in ROOMS:
        result = measure_steps(rows, cols, boxes, args.steps, args.episode_steps)
        print(f"{rows}x{cols}/{boxes}: " + ", ".join(f"{name} {value:.3g}" for name, value in result.items()))
    for max_turns, actions in DIFFICULTY_SETTINGS:
        print_difficulty_table(measure_difficulties(max_turns, actions, args.seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
