"""The plain classes behind the Ray actors (EnvWorker, EngineHost) and the rollout records, without Ray."""

from __future__ import annotations

import asyncio
import os
import sys

import numpy as np
import pytest
from rollout_doubles import ACTION_LOGPROB, STOP, CharRenderer, FixedEngine, register_test_envs

from agents.engines.base import SamplingParams
from agents.episode import EpisodeLimits, EpisodeSpec
from envs.registry import UnknownEnvironmentError
from trainer.engine_actor import EngineHost
from trainer.ray_cluster import default_object_store_bytes, import_ray
from trainer.rollout_records import GroupRequest, RolloutConfig, group_requests
from trainer.rollout_worker import EnvWorker, is_step_timeout

register_test_envs()


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def first_value(seed: int) -> int:
    """CounterEnv's first observation is n=<first draw of np_random seeded with seed in [0, 1000)>."""
    return int(np.random.default_rng(seed).integers(0, 1000))


def test_episodes_run_concurrently_up_to_the_cap_and_come_back_in_spec_order():
    engine = FixedEngine(action="go", delay_s=0.05)
    worker = EnvWorker(CharRenderer(), engine, max_concurrent_episodes=4)
    specs = [EpisodeSpec("test-counter", seed, group_id=f"g{seed}") for seed in range(6)]

    trajectories = asyncio.run(worker.run_episodes(specs, policy_version=0))

    # 6 episodes, at most 4 at once: the first 4 all wait in generate together, never a 5th.
    assert engine.max_concurrent == 4
    assert engine.requests == 6 * 2  # two turns each
    assert [(t.seed, t.group_id) for t in trajectories] == [(s, f"g{s}") for s in range(6)]
    for t in trajectories:
        t.validate()
        v = first_value(t.seed)
        assert t.prompt_ids == ids(f"S:Say anything.|U:n={v}|A:")
        # turn 1: g o STOP sampled; continuation |U:n=<v+1>|A: (the stop token was sampled: no glue); turn 2: g o STOP
        continuation = ids(f"|U:n={v + 1}|A:")
        assert t.response_ids == [*ids("go"), STOP, *continuation, *ids("go"), STOP]
        assert t.response_mask == [1, 1, 1] + [0] * len(continuation) + [1, 1, 1]
        assert t.rollout_logprobs == [ACTION_LOGPROB] * 3 + [0.0] * len(continuation) + [ACTION_LOGPROB] * 3
        assert (t.turn_rewards, t.episode_return, t.termination, t.success) == ([0.0, 1.0], 1.0, "terminated", True)
    assert worker.stats().episodes == 6 and worker.stats().errors == 0


def test_the_cap_holds_across_concurrent_calls():
    engine = FixedEngine(delay_s=0.05)
    worker = EnvWorker(CharRenderer(), engine, max_concurrent_episodes=3)

    async def two_calls():
        specs = [EpisodeSpec("test-counter", seed) for seed in range(4)]
        return await asyncio.gather(worker.run_episodes(specs[:2], None, None, 0), worker.run_episodes(specs[2:]))

    first, second = asyncio.run(two_calls())
    assert len(first) == len(second) == 2
    assert engine.max_concurrent == 3


def test_policy_version_defaults_to_the_engines():
    engine = FixedEngine()
    engine.version = 5
    worker = EnvWorker(CharRenderer(), engine)
    spec = EpisodeSpec("test-counter", 1)
    assert asyncio.run(worker.run_episodes([spec]))[0].policy_version == 5
    assert asyncio.run(worker.run_episodes([spec], policy_version=2))[0].policy_version == 2


def test_failures_come_back_as_error_trajectories_and_hung_steps_are_counted():
    worker = EnvWorker(CharRenderer(), FixedEngine())
    specs = [
        EpisodeSpec("test-raising", 1),
        EpisodeSpec("test-broken-constructor", 2),
        EpisodeSpec("test-hanging", 3, env_options={"hang_s": 1.0}),
        EpisodeSpec("test-counter", 4),
    ]
    limits = EpisodeLimits(step_timeout_s=0.2)

    raising, broken, hanging, fine = asyncio.run(worker.run_episodes(specs, limits=limits, policy_version=0))

    assert raising.termination == broken.termination == hanging.termination == "error"
    assert raising.error == "RuntimeError: injected step failure"
    assert broken.error == "OSError: injected constructor failure"
    assert hanging.error.startswith("StepTimeoutError: ")
    assert [is_step_timeout(t) for t in (raising, broken, hanging, fine)] == [False, False, True, False]
    assert fine.termination == "terminated"
    for t in (raising, broken, hanging, fine):
        t.validate()
    stats = worker.stats()
    assert (stats.episodes, stats.errors, stats.step_timeouts, stats.pid) == (4, 3, 1, os.getpid())


def test_an_unknown_environment_id_raises_before_any_episode_starts():
    engine = FixedEngine()
    worker = EnvWorker(CharRenderer(), engine)
    specs = [EpisodeSpec("test-counter", 0), EpisodeSpec("no-such-env", 0)]
    with pytest.raises(UnknownEnvironmentError, match="unknown environment id 'no-such-env'"):
        asyncio.run(worker.run_episodes(specs, policy_version=0))
    assert engine.requests == 0


def test_worker_rejects_a_zero_cap():
    with pytest.raises(ValueError, match="max_concurrent_episodes must be >= 1"):
        EnvWorker(CharRenderer(), FixedEngine(), max_concurrent_episodes=0)


def test_engine_host_forwards_every_call():
    host = EngineHost(lambda: FixedEngine(action="a"))

    async def calls():
        generation = await host.generate([5, 6], SamplingParams(max_new_tokens=8), "k")
        await host.update_weights({}, policy_version=3)
        return generation, await host.stats(), await host.ping()

    generation, stats, name = asyncio.run(calls())
    assert (generation.output_ids, generation.logprobs, generation.finish_reason) == ((97, STOP), (-1.0, -1.0), "stop")
    assert (stats.requests, stats.policy_version, name) == (1, 3, "fixed")


def test_group_request_specs_share_seed_and_group_and_number_the_samples():
    request = GroupRequest("test-counter", seed=9, group_size=3, env_options={"turns": 4})
    specs = request.specs("grp")
    assert [(s.env_id, s.seed, s.group_id, s.sample_index, dict(s.env_options)) for s in specs] == [
        ("test-counter", 9, "grp", i, {"turns": 4}) for i in range(3)
    ]
    assert len({s.affinity_key for s in specs}) == 3
    assert group_requests("e", [4, 5], 2) == [GroupRequest("e", 4, 2), GroupRequest("e", 5, 2)]
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        GroupRequest("e", 0, 0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_env_actors", 0), ("max_episode_retries", -1), ("restart_after_step_timeouts", 0), ("collect_timeout_s", 0)],
)
def test_rollout_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=f"RolloutConfig.{field}"):
        RolloutConfig(**{field: value})


def test_missing_ray_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray looks like to import
    with pytest.raises(ImportError, match=r'pip install "turngym\[ray\]"'):
        import_ray()


@pytest.mark.parametrize(("memory_gib", "expected"), [(24, 256 * 1024**2), (63, 256 * 1024**2), (64, None)])
def test_object_store_is_capped_below_64_gib(monkeypatch, memory_gib, expected):
    page = 4096
    sysconf = {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": memory_gib * 1024**3 // page}
    monkeypatch.setattr(os, "sysconf", sysconf.__getitem__)
    assert default_object_store_bytes() == expected
