"""RolloutManager on a real local Ray: group shape, fault injection, determinism, plugins, the engine actor.

One Ray session serves the whole module. The engine is FixedEngine (rollout_doubles.py) inside a
real engine actor, so every episode's generate goes env actor -> engine actor -> back.
"""

from __future__ import annotations

import asyncio
import functools
import time

import pytest
import rollout_doubles
from rollout_doubles import CharRenderer, FixedEngine, failing_setup, register_test_envs

from agents.engines.base import SamplingParams
from agents.engines.registry import EngineSpec
from agents.episode import EpisodeLimits
from trainer.engine_actor import EngineClient, launch_engine_actor
from trainer.ray_cluster import init_ray
from trainer.rollout import GroupRequest, RolloutConfig, RolloutManager, group_requests
from trainer.rollout_records import METRIC_NAMES
from trainer.rollout_worker import ChatRendererFactory

ray = pytest.importorskip("ray", reason="the rollout tests need the [ray] extra: pip install 'turngym[ray]'")

pytestmark = pytest.mark.ray

FAST = RolloutConfig(num_env_actors=2, max_episode_retries=1, restart_after_step_timeouts=2, env_actor_num_cpus=0.25)


def died_within(handle, seconds: float) -> bool:
    """Whether the actor stops answering within ``seconds``: ``ray.kill`` is asynchronous, so a call sent
    right after it may still be served."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(handle.stats.remote(), timeout=max(deadline - time.monotonic(), 0.1))
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            return False
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def ray_session() -> None:
    init_ray(num_cpus=2, object_store_memory=100 * 1024**2)
    ray.cloudpickle.register_pickle_by_value(rollout_doubles)  # Ray workers cannot import tests/trainer
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def engine(ray_session) -> EngineClient:
    return launch_engine_actor(functools.partial(FixedEngine, action="go"), num_cpus=0.25)


def make_manager(engine: EngineClient, config: RolloutConfig = FAST) -> RolloutManager:
    return RolloutManager(config, CharRenderer, engine.factory(), setup=register_test_envs)


@pytest.fixture(scope="module")
def manager(engine) -> RolloutManager:
    """One manager for the tests that need no special configuration: it must survive each of their faults."""
    with make_manager(engine) as shared:
        yield shared


def collect(manager: RolloutManager, groups, **kwargs):
    result = asyncio.run(manager.collect(groups, **kwargs))
    assert set(result.metrics) == {f"rollout/{name}" for name in METRIC_NAMES}
    for group in result.groups:  # the guarantee every test relies on: complete, valid, one seed and id
        assert len({(t.seed, t.group_id, t.env_id) for t in group}) == 1
        for t in group:
            t.validate()
            assert t.termination != "error"
    return result


def test_groups_have_g_members_with_one_seed_and_one_group_id(manager):
    result = collect(manager, group_requests("test-counter", seeds=[3, 4, 5], group_size=4))
    assert [len(group) for group in result.groups] == [4, 4, 4]
    assert [group[0].seed for group in result.groups] == [3, 4, 5]
    assert len({group[0].group_id for group in result.groups}) == 3
    assert result.dropped_group_ids == [] and result.failed == []
    m = result.metrics
    assert (m["rollout/groups_completed"], m["rollout/episodes_completed"], m["rollout/episodes_failed"]) == (3, 12, 0)


def test_an_env_that_always_raises_drops_its_whole_group_only(manager):
    groups = [GroupRequest("test-raising", 1, 2, group_id="bad"), *group_requests("test-counter", [1, 2], 2)]
    result = collect(manager, groups)
    assert result.dropped_group_ids == ["bad"]
    assert [group[0].seed for group in result.groups] == [1, 2]
    m = result.metrics
    # Each of the two members fails, is retried once (max_episode_retries=1); the first member out of
    # retries drops the group, cancelling the other: 3 or 4 failed attempts, 2 retries or 1 if the
    # second member's retry was never started.
    assert m["rollout/groups_dropped"] == 1 and m["rollout/groups_completed"] == 2
    assert 3 <= m["rollout/env_errors"] == m["rollout/episodes_failed"] == len(result.failed) <= 4
    assert 1 <= m["rollout/episodes_retried"] <= 2
    assert all(t.error == "RuntimeError: injected step failure" for t in result.failed)


def test_an_env_that_fails_once_is_retried_and_its_group_completes(manager, tmp_path):
    groups = group_requests("test-flaky", seeds=[7, 8], group_size=2, env_options={"marker_dir": str(tmp_path)})
    result = collect(manager, groups)
    # Exactly one episode per seed fails (the marker file is created once): two failures, two retries.
    m = result.metrics
    assert (m["rollout/env_errors"], m["rollout/episodes_retried"], m["rollout/groups_completed"]) == (2, 2, 2)
    assert sorted(t.seed for t in result.failed) == [7, 8]
    assert [len(group) for group in result.groups] == [2, 2]


def test_hung_steps_time_out_and_the_actor_is_recycled(engine):
    config = RolloutConfig(num_env_actors=1, max_episode_retries=1, restart_after_step_timeouts=2)
    groups = [GroupRequest("test-hanging", 1, 2, group_id="hung"), GroupRequest("test-counter", 1, 2)]
    with make_manager(engine, config) as manager:
        original = manager.actor_handles[0]
        started = time.monotonic()
        result = collect(manager, groups, limits=EpisodeLimits(step_timeout_s=0.3))
        elapsed = time.monotonic() - started
        assert manager.actor_handles[0] != original
        assert died_within(original, 30)  # killed once its last episode finished
    m = result.metrics
    # One actor: both first attempts time out on it (2 -> recycled); the retries time out too, the
    # first of them drops the group and the other is cancelled or ignored: 3 timeouts counted.
    assert (m["rollout/step_timeouts"], m["rollout/actors_recycled"], m["rollout/actors_restarted"]) == (3, 1, 1)
    assert result.dropped_group_ids == ["hung"] and len(result.groups) == 1
    assert elapsed < 20  # the hung steps block for 20 s each: nobody waited for them


def test_a_killed_actor_is_replaced_and_its_episodes_run_elsewhere(manager):
    slow = {"turns": 4, "step_sleep_s": 0.15}
    groups = group_requests("test-counter", seeds=range(4), group_size=2, env_options=slow)
    victim = manager.actor_handles[0]

    async def collect_and_kill():
        task = asyncio.ensure_future(manager.collect(groups))
        await asyncio.sleep(0.3)  # each episode takes 4 x 0.15 s: the victim has episodes in flight
        ray.kill(victim)
        return await task

    result = asyncio.run(collect_and_kill())
    assert victim not in manager.actor_handles and len(manager.actor_handles) == 2
    m = result.metrics
    assert (m["rollout/actors_died"], m["rollout/actors_restarted"], m["rollout/groups_completed"]) == (1, 1, 4)
    assert m["rollout/episodes_redispatched"] >= 1 and m["rollout/episodes_retried"] == 0
    assert result.failed == []
    assert [len(group) for group in result.groups] == [2, 2, 2, 2]


def test_max_in_flight_caps_the_episodes_at_once_and_the_rest_wait_their_turn(ray_session):
    """Every episode waits on the engine for most of its life (0.1 s a turn), so the engine's most requests in
    flight is the most episodes in flight: the cap, reached; without it, every episode at once."""
    for cap, expected in ((3, 3), (None, 8)):
        slow = launch_engine_actor(functools.partial(FixedEngine, action="go", delay_s=0.1), num_cpus=0.25)
        with make_manager(slow) as manager:
            result = collect(manager, group_requests("test-counter", seeds=range(8), group_size=1), max_in_flight=cap)
        assert [group[0].seed for group in result.groups] == list(range(8))
        assert result.metrics["rollout/groups_completed"] == 8
        assert slow.stats().extra["max_concurrent"] == expected
        ray.kill(slow.handle)
    with pytest.raises(ValueError, match="max_in_flight must be >= 1"):
        asyncio.run(manager.collect(group_requests("test-counter", seeds=[0], group_size=1), max_in_flight=0))


def test_episodes_still_waiting_at_the_deadline_drop_their_groups(engine):
    with make_manager(engine) as manager:
        # One episode takes about 2 s and one plays at a time: the first ends before the deadline (with a second to
        # spare on a loaded machine), the second cannot
        slow = {"turns": 4, "step_sleep_s": 0.5}
        groups = group_requests("test-counter", seeds=range(4), group_size=1, env_options=slow)
        result = collect(manager, groups, max_in_flight=1, timeout_s=3.0)
    m = result.metrics
    assert m["rollout/deadline_exceeded"] == 1 and m["rollout/groups_completed"] >= 1
    assert m["rollout/groups_completed"] + m["rollout/groups_dropped_deadline"] == 4
    assert [group[0].seed for group in result.groups] == list(range(int(m["rollout/groups_completed"])))


def test_actors_that_keep_dying_raise_after_max_actor_restarts(engine):
    config = RolloutConfig(num_env_actors=1, max_actor_restarts=1)
    # The first crash is replaced (1 restart allowed) and the episode re-dispatched; it crashes the
    # replacement too: a second replacement would exceed the limit.
    message = r"replaced 2 times in one collect \(RolloutConfig.max_actor_restarts=1\)"
    with make_manager(engine, config) as manager, pytest.raises(RuntimeError, match=message):
        asyncio.run(manager.collect(group_requests("test-crashing", [0], 1)))


def test_an_actor_that_cannot_start_is_reported(engine):
    with pytest.raises(RuntimeError, match=r"(?s)an environment actor failed to start.*injected setup failure"):
        RolloutManager(RolloutConfig(num_env_actors=1), CharRenderer, engine.factory(), setup=failing_setup)


def test_the_deadline_drops_unfinished_groups_and_returns_on_time(manager):
    groups = [
        GroupRequest("test-counter", 1, 2, env_options={"step_sleep_s": 5.0}, group_id="slow"),
        GroupRequest("test-counter", 2, 2, group_id="fast"),
    ]
    started = time.monotonic()
    result = collect(manager, groups, timeout_s=1.5)
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 5.0  # the deadline plus cancelling, on a busy 2-core machine
    assert result.dropped_group_ids == ["slow"] and [g[0].group_id for g in result.groups] == ["fast"]
    m = result.metrics
    assert m["rollout/deadline_exceeded"] == m["rollout/groups_dropped_deadline"] == m["rollout/groups_dropped"] == 1


def test_same_seeds_give_the_same_observations(manager):
    first = collect(manager, group_requests("sokoban", seeds=[11, 12], group_size=2))
    second = collect(manager, group_requests("sokoban", seeds=[11, 12], group_size=2))
    observations = [[[m["content"] for m in t.messages] for t in group] for group in first.groups]
    assert observations == [[[m["content"] for m in t.messages] for t in group] for group in second.groups]
    # Within a group, the same seed and the same (fixed) actions give the same episode; seeds 11 and 12 differ.
    assert observations[0][0] == observations[0][1] and observations[1][0] == observations[1][1]
    assert observations[0][0][1] != observations[1][0][1]
    assert [t.prompt_ids for t in first.trajectories] == [t.prompt_ids for t in second.trajectories]


def test_plugin_environments_load_in_the_actor(manager):
    # "countdown" is not among the environments setup registers: the actor discovers it through the
    # example plugin package's entry point.
    result = collect(manager, group_requests("countdown", seeds=[0], group_size=2, env_options={"max_turns": 2}))
    (group,) = result.groups
    assert [t.env_id for t in group] == ["countdown", "countdown"]
    assert group[0].messages[0]["content"].startswith("Count down to zero.")
    assert all(t.termination == "truncated" and t.num_turns == 2 for t in group)  # "go" is never the right number


def test_an_unknown_environment_id_raises_out_of_collect(manager):
    with pytest.raises(RuntimeError, match="unknown environment id 'no-such-env'"):
        asyncio.run(manager.collect(group_requests("no-such-env", [0], 1)))


def test_weights_version_reaches_every_actor_through_the_engine_actor(engine, manager):
    requests_before = engine.stats().requests
    asyncio.run(engine.update_weights({}, policy_version=3))
    assert engine.stats().policy_version == 3
    result = collect(manager, group_requests("test-counter", seeds=[0, 1], group_size=2))
    assert [t.policy_version for t in result.trajectories] == [3, 3, 3, 3]
    assert engine.stats().requests - requests_before == 8  # 4 episodes x 2 turns, all through the one engine actor
    asyncio.run(engine.update_weights({}, policy_version=0))


def test_the_real_stack_chat_renderer_and_hf_engine_actor(ray_session):
    hf = launch_engine_actor(EngineSpec("hf", "tiny", seed=0, max_batch_size=8), num_cpus=1)
    try:
        # One environment actor: one process more to start on a small machine.
        with RolloutManager(RolloutConfig(num_env_actors=1), ChatRendererFactory("tiny"), hf.factory()) as manager:
            result = collect(
                manager,
                group_requests("sokoban", seeds=[0, 1], group_size=2, env_options={"max_turns": 2}),
                sampling=SamplingParams(temperature=1.0),
                limits=EpisodeLimits(max_new_tokens=6),
            )
        stats = hf.stats()
    finally:
        ray.kill(hf.handle)
    assert [len(group) for group in result.groups] == [2, 2]
    renderer = ChatRendererFactory("tiny")()  # the same renderer, built here: prompts are a pure function of text
    for t in result.trajectories:
        assert t.prompt_ids == renderer.prompt_ids(t.messages[:2])
        assert (t.num_turns, t.termination) == (2, "truncated")
        sampled_logprobs = [lp for lp, m in zip(t.rollout_logprobs, t.response_mask, strict=True) if m]
        assert all(lp < 0 for lp in sampled_logprobs) and len(set(sampled_logprobs)) > 1
    # 4 episodes x 2 turns through the one engine actor. Turn 2's input starts with turn 1's prompt and
    # output, which the engine cached except the last sampled token: at least len(prompt) + len(output 1)
    # - 1 = len(prompt) + turn_end_indices[0] tokens per episode come from the prefix cache.
    assert stats.requests == 8
    assert stats.cached_prompt_tokens >= sum(len(t.prompt_ids) + t.turn_end_indices[0] for t in result.trajectories)
    # each environment actor told the engine actor as its episode ended: no finished episode's keys/values stay
    assert stats.extra["prefix_cache_tokens"] == 0
