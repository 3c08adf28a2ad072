"""Sokoban step latency: in-process against through an OpenEnv server, in one run.

    python benchmarks/openenv_step.py [--steps 2000] [--port 8765]

Starts ``python -m envs.serve sokoban`` in a subprocess (on 127.0.0.1), then times the same actions
(``Up``, ``Right``, ``Down``, ``Left`` in turn; a finished episode is reset, resets not timed), in
rounds of 100 steps taken in turn, on:

* ``envs.make("sokoban")`` in this process;
* OpenEnv's own ``GenericEnvClient`` (sync) against the server: the protocol's raw cost;
* ``envs.make("openenv", base_url=...)``: turngym's client env, what an episode loop calls.

Prints median, 90th percentile and mean per step, and the ratios to in-process.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = ["Up", "Right", "Down", "Left"]


class Player:
    """Steps one way of reaching Sokoban; a finished episode is reset (untimed) with the next seed."""

    def __init__(self, step: Callable[[str], bool], reset: Callable[[int], None]) -> None:
        self.step, self.reset, self.episode, self.turn = step, reset, 0, 0
        reset(0)

    def time_steps(self, steps: int) -> list[float]:
        """Seconds per step over ``steps`` steps."""
        durations = []
        for _ in range(steps):
            start = time.perf_counter()
            done = self.step(ACTIONS[self.turn % len(ACTIONS)])
            durations.append(time.perf_counter() - start)
            self.turn += 1
            if done:
                self.episode += 1
                self.reset(self.episode)
        return durations


def in_process() -> tuple[Player, Callable[[], None]]:
    import envs

    env = envs.make("sokoban", max_turns=None)

    def step(action: str) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    return Player(step, lambda seed: env.reset(seed=seed)), env.close


def openenv_client(url: str) -> tuple[Player, Callable[[], None]]:
    from openenv.core import GenericEnvClient

    client = GenericEnvClient(base_url=url).sync()
    client.connect()
    return Player(lambda a: client.step({"text": a}).done, lambda seed: client.reset(seed=seed)), client.close


def turngym_client(url: str) -> tuple[Player, Callable[[], None]]:
    import envs

    env = envs.make("openenv", base_url=url)

    def step(action: str) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    return Player(step, lambda seed: env.reset(seed=seed)), env.close


def start_server(port: int) -> subprocess.Popen:
    import requests

    server = subprocess.Popen(
        [sys.executable, "-m", "envs.serve", "sokoban", "env.max_turns=null", f"port={port}"], cwd=ROOT
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                return server
        except requests.RequestException:
            time.sleep(0.5)
    server.kill()
    raise TimeoutError("the OpenEnv server did not start within 300 s")


def report(name: str, durations: list[float], baseline: float) -> None:
    ordered = sorted(durations)
    median, p90, mean = statistics.median(ordered), ordered[int(0.9 * len(ordered))], statistics.fmean(ordered)
    print(f"{name:<42} {median * 1e6:>9.0f} {p90 * 1e6:>9.0f} {mean * 1e6:>9.0f}   {median / baseline:>7.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps per way, in rounds of 100 taken in turn")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = start_server(args.port)
    url = f"http://127.0.0.1:{args.port}"
    ways = {
        "in-process envs.make('sokoban')": in_process(),
        "OpenEnv GenericEnvClient -> envs.serve": openenv_client(url),
        "envs.make('openenv') -> envs.serve": turngym_client(url),
    }
    results: dict[str, list[float]] = {name: [] for name in ways}
    try:
        # Rounds taken in turn, so that a change in the machine's load hits every way alike.
        for _ in range(max(1, args.steps // 100)):
            for name, (player, _) in ways.items():
                results[name] += player.time_steps(100)
    finally:
        for _, close in ways.values():
            close()
        server.terminate()
        server.wait(30)
    baseline = statistics.median(results["in-process envs.make('sokoban')"])
    print(f"Sokoban 6x6, 1 box, one move per step, {len(results[next(iter(results))])} steps each (microseconds)")
    print(f"{'':<42} {'median':>9} {'p90':>9} {'mean':>9}   vs in-process")
    for name, durations in results.items():
        report(name, durations, baseline)


if __name__ == "__main__":
    main()
