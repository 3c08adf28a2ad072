"""Sokoban step latency: in-process against through an OpenEnv server, in one run.

    python benchmarks/openenv_step.py [--steps 2000] [--port 8765]

Starts ``python -m envs.serve sokoban`` in a subprocess (on 127.0.0.1), then times the same actions
(``Up``, ``Right``, ``Down``, ``Left`` in turn; a finished episode is reset, resets not timed) on:

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


def time_steps(step: Callable[[str], bool], reset: Callable[[int], None], steps: int) -> list[float]:
    """Seconds per ``step(action)`` call; ``step`` returns whether the episode ended (then ``reset`` runs, untimed)."""
    durations, episode = [], 0
    reset(episode)
    for i in range(steps):
        start = time.perf_counter()
        done = step(ACTIONS[i % len(ACTIONS)])
        durations.append(time.perf_counter() - start)
        if done:
            episode += 1
            reset(episode)
    return durations


def in_process(steps: int) -> list[float]:
    import envs

    env = envs.make("sokoban", max_turns=None)

    def step(action: str) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    return time_steps(step, lambda seed: env.reset(seed=seed), steps)


def openenv_client(url: str, steps: int) -> list[float]:
    from openenv.core import GenericEnvClient

    client = GenericEnvClient(base_url=url).sync()
    client.connect()
    try:
        return time_steps(lambda a: client.step({"text": a}).done, lambda seed: client.reset(seed=seed), steps)
    finally:
        client.close()


def turngym_client(url: str, steps: int) -> list[float]:
    import envs

    env = envs.make("openenv", base_url=url)

    def step(action: str) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    try:
        return time_steps(step, lambda seed: env.reset(seed=seed), steps)
    finally:
        env.close()


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
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = start_server(args.port)
    try:
        url = f"http://127.0.0.1:{args.port}"
        results = {
            "in-process envs.make('sokoban')": in_process(args.steps),
            "OpenEnv GenericEnvClient -> envs.serve": openenv_client(url, args.steps),
            "envs.make('openenv') -> envs.serve": turngym_client(url, args.steps),
        }
    finally:
        server.terminate()
        server.wait(30)
    baseline = statistics.median(results["in-process envs.make('sokoban')"])
    print(f"Sokoban 6x6, 1 box, one move per step, {args.steps} steps each (microseconds per step)")
    print(f"{'':<42} {'median':>9} {'p90':>9} {'mean':>9}   vs in-process")
    for name, durations in results.items():
        report(name, durations, baseline)


if __name__ == "__main__":
    main()
