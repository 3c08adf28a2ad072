"""What Ray adds per environment step and per model turn: direct calls against actor round trips, in one run.

    python benchmarks/ray_step_overhead.py               # about 30 s, most of it Ray's start-up
    python benchmarks/ray_step_overhead.py --calls 5000

Rows, each the mean wall time of one call over ``--calls`` sequential calls (after a warm-up):

``env.step direct``
    ``SokobanEnv.step`` (6x6, one box, one move per turn) called in this process: the baseline.
``env.step in the episode loop's thread``
    The same step through the executor thread the episode loop uses for every environment call
    (``agents.episode._call_env``, with its timeout), awaited from an event loop.
``env.step via actor call``
    The same step as a method of a Ray actor holding the environment, ``ray.get`` per call: the cost
    a design that crossed a process boundary on every step would pay.
``generate direct`` / ``generate via engine actor``
    One ``generate`` of a zero-latency engine (a fixed answer), awaited directly or through
    :class:`trainer.engine_actor.EngineClient` from inside an environment actor: the boundary that
    turngym's rollout really crosses once per model turn.

The figure to read is the difference of medians between a row and its baseline: the overhead per step or turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import envs
from agents.engines.base import EngineStats, Generation, SamplingParams
from agents.episode import _call_env

MOVES = ("up", "right", "down", "left")


class ZeroLatencyEngine:
    """Returns a fixed 4-token answer at once: what is left to time is the call path."""

    name = "zero-latency"
    weight_sync = "state_dict"

    async def generate(self, input_ids, sampling, affinity_key=None) -> Generation:
        return Generation((1, 2, 3, 4), (-0.5,) * 4, "stop", prompt_tokens=len(input_ids))

    async def update_weights(self, state_dict, policy_version: int) -> None:
        pass

    def stats(self) -> EngineStats:
        return EngineStats()

    async def stats_async(self) -> EngineStats:
        return self.stats()

    async def instance_async(self) -> str:
        return "zero-latency"

    async def close(self) -> None:
        pass


class SteppingEnv:
    """A Sokoban environment that resets itself when an episode ends, so that every call is one step.

    Without a turn limit and with a large step limit, resets (which generate a level) are rare.
    """

    def __init__(self) -> None:
        self.env = envs.make("sokoban", dim=6, num_boxes=1, max_turns=None, max_steps=100_000, max_actions_per_turn=1)
        self.episode = 0
        self.env.reset(seed=self.episode)
        self.calls = 0

    def step(self, action: str) -> float:
        _, reward, terminated, truncated, _ = self.env.step(action)
        self.calls += 1
        if terminated or truncated:
            self.episode += 1
            self.env.reset(seed=self.episode)
        return reward


class EngineCaller:
    """Lives in an actor beside the environments: awaits ``generate`` through the engine client it is given."""

    def __init__(self, make_engine) -> None:
        self.engine = make_engine()

    async def generate_many(self, calls: int) -> list[float]:
        sampling = SamplingParams(max_new_tokens=4)
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            await self.engine.generate(list(range(64)), sampling, "k")
            seconds.append(time.perf_counter() - started)
        return seconds


def time_direct_steps(calls: int) -> list[float]:
    env = SteppingEnv()
    seconds = []
    for i in range(calls):
        started = time.perf_counter()
        env.step(MOVES[i % 4])
        seconds.append(time.perf_counter() - started)
    return seconds


def time_thread_steps(calls: int) -> list[float]:
    env = SteppingEnv()

    async def run() -> list[float]:
        seconds = []
        for i in range(calls):
            started = time.perf_counter()
            await _call_env(env.step, 60.0, MOVES[i % 4])
            seconds.append(time.perf_counter() - started)
        return seconds

    return asyncio.run(run())


def time_actor_steps(ray, calls: int) -> list[float]:
    actor = ray.remote(SteppingEnv).options(num_cpus=0).remote()
    ray.get(actor.step.remote("up"))
    seconds = []
    for i in range(calls):
        started = time.perf_counter()
        ray.get(actor.step.remote(MOVES[i % 4]))
        seconds.append(time.perf_counter() - started)
    ray.kill(actor)
    return seconds


def time_direct_generate(calls: int) -> list[float]:
    return asyncio.run(EngineCaller(ZeroLatencyEngine).generate_many(calls))


def time_engine_actor_generate(ray, calls: int) -> list[float]:
    from trainer.engine_actor import launch_engine_actor

    client = launch_engine_actor(ZeroLatencyEngine, num_cpus=0)
    caller = ray.remote(EngineCaller).options(num_cpus=0).remote(client.factory())
    ray.get(caller.generate_many.remote(10))
    seconds = ray.get(caller.generate_many.remote(calls))
    ray.kill(caller)
    ray.kill(client.handle)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per row (default 2000)")
    args = parser.parse_args()

    from trainer.ray_cluster import import_ray, init_ray

    ray = import_ray()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = time.perf_counter()
    init_ray(num_cpus=2)
    ray_start_s = time.perf_counter() - started

    for warm_up in (time_direct_steps, time_thread_steps, time_direct_generate):
        warm_up(100)
    rows = [
        ("env.step direct", time_direct_steps(args.calls), None),
        ("env.step in the episode loop's thread", time_thread_steps(args.calls), 0),
        ("env.step via actor call", time_actor_steps(ray, args.calls), 0),
        ("generate direct", time_direct_generate(args.calls), None),
        ("generate via engine actor", time_engine_actor_generate(ray, args.calls), 3),
    ]
    print(f"Ray start-up: {ray_start_s:.1f} s; {args.calls} sequential calls per row; times per call\n")
    print(f"{'path':<40} {'mean µs':>9} {'median µs':>10} {'p99 µs':>9} {'overhead µs (median)':>22}")
    for name, seconds, baseline in rows:
        us = sorted(1e6 * s for s in seconds)
        mean = statistics.mean(us)
        median = statistics.median(us)
        overhead = "" if baseline is None else f"{median - 1e6 * statistics.median(rows[baseline][1]):.0f}"
        print(f"{name:<40} {mean:>9.1f} {median:>10.1f} {us[int(0.99 * len(us))]:>9.1f} {overhead:>22}")
    ray.shutdown()


if __name__ == "__main__":
    main()
