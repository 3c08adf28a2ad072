"""Rollout through the gateway: agent functions play groups; failures are retried, dropped, never leaked.

The engine is the real ``hf`` engine on the tiny model, in this process (no Ray): the agent rollout
only needs an Engine. ``trainer.run`` with an agent is tested in test_train_agent.py.
"""

from __future__ import annotations

import functools
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.gateway.agent import command_agent, load_agent, load_tasks, play_session, read_outcome
from agents.models import load_model, load_tokenizer
from trainer.agent_rollout import AgentRollout, AgentRolloutConfig
from trainer.rollout_records import METRIC_NAMES, group_requests

AGENT = str(Path(__file__).with_name("digits_agent.py"))
SAMPLING = SamplingParams(max_new_tokens=8, temperature=0.7, seed=5)


class SamplingSpy:
    """The tiny engine, remembering the sampling of every request."""

    name = "spy"

    def __init__(self) -> None:
        self.engine = HfEngine(_model(), device="cpu", seed=0)
        self.sampling: list[SamplingParams] = []

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None):
        self.sampling.append(sampling)
        return await self.engine.generate(input_ids, sampling, affinity_key)


@functools.cache
def _model():
    return load_model("tiny")


def _rollout(function: str, **options) -> tuple[AgentRollout, SamplingSpy]:
    engine = SamplingSpy()
    config = AgentRolloutConfig(entry=f"{AGENT}:{function}", tasks=f"{AGENT}:task", **options)
    return AgentRollout(config, engine, load_tokenizer("tiny")), engine


async def test_groups_of_agent_episodes_become_trajectories_at_the_rollouts_sampling() -> None:
    rollout, engine = _rollout("agent")
    try:
        result = await rollout.collect(group_requests("x", [3, 4], 3), sampling=SAMPLING, policy_version=7)
    finally:
        await rollout.close()
    assert len(result.groups) == 2 and all(len(group) == 3 for group in result.groups)
    for group in result.groups:
        assert len({t.group_id for t in group}) == 1
        for trajectory in group:
            trajectory.validate()
            assert trajectory.trainable and trajectory.policy_version == 7 and len(trajectory.turn_rewards) == 2
            assert trajectory.episode_return == pytest.approx(sum(trajectory.turn_rewards))
    # The agent asked for max_tokens=12 at the default temperature; the rollout's sampling wins.
    assert {(s.temperature, s.max_new_tokens) for s in engine.sampling} == {(0.7, 8)}
    assert len({s.seed for s in engine.sampling}) == len(engine.sampling) == 12  # one stream per request
    assert set(result.metrics) >= {f"rollout/{k}" for k in METRIC_NAMES}
    assert result.metrics["rollout/groups_completed"] == 2 and result.metrics["rollout/segments_per_episode"] == 1
    assert rollout.gateway.sessions == {}


@pytest.mark.parametrize(
    ("function", "options", "error"),
    [
        ("crashing_agent", {}, "RuntimeError: the agent crashed"),
        ("hanging_agent", {"episode_timeout_s": 0.5}, "timed out after 0.5 s"),
        ("silent_agent", {}, "made no request"),
    ],
)
async def test_a_failing_agent_is_retried_then_its_group_is_dropped_and_no_session_leaks(function, options, error):
    rollout, _ = _rollout(function, max_episode_retries=1, **options)
    try:
        result = await rollout.collect(group_requests("x", [1], 2), sampling=SAMPLING)
    finally:
        await rollout.close()
    assert result.groups == [] and len(result.dropped_group_ids) == 1
    assert result.metrics["rollout/groups_dropped"] == 1 and result.metrics["rollout/episodes_retried"] >= 1
    assert result.failed and all(t.termination == "error" and error in t.error for t in result.failed)
    assert rollout.gateway.sessions == {}


async def test_the_collect_deadline_drops_unfinished_groups() -> None:
    rollout, _ = _rollout("hanging_agent", collect_timeout_s=0.5, episode_timeout_s=30)
    try:
        result = await rollout.collect(group_requests("x", [1, 2], 1), sampling=SAMPLING)
    finally:
        await rollout.close()
    assert result.groups == [] and result.metrics["rollout/groups_dropped_deadline"] == 2
    assert result.metrics["rollout/deadline_exceeded"] == 1


async def test_an_agent_that_compacts_its_history_gives_one_exact_segment_per_request() -> None:
    rollout, _ = _rollout("compacting_agent")
    try:
        result = await rollout.collect(group_requests("x", [1], 2), sampling=SAMPLING)
    finally:
        await rollout.close()
    (group,) = result.groups
    assert len(group) == 6 and result.metrics["rollout/segments_per_episode"] == 3
    assert all(t.turn_rewards == [1.0] and t.metrics["gateway/segments"] == 3 for t in group)


# ---------------------------------------------------------------------------------------------- loading
def test_agents_and_tasks_are_checked_when_loaded(tmp_path) -> None:
    module = tmp_path / "user_agent.py"
    module.write_text(
        textwrap.dedent(
            """
            def sync_agent(client, task):
                return 1.0

            async def one_argument(client):
                return 1.0

            NOT_CALLABLE = 3
            """
        )
    )
    with pytest.raises(ValueError, match="must be an async function"):
        load_agent(f"{module}:sync_agent")
    with pytest.raises(ValueError, match=r"must take \(client, task\)"):
        load_agent(f"{module}:one_argument")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        load_agent(f"{module}:missing")
    with pytest.raises(ValueError, match="module:function"):
        load_agent("no_colon")
    with pytest.raises(ValueError, match="exactly one"):
        load_agent(f"{module}:sync_agent", command="true")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"q": 1}\n\n{"q": 2}\n')
    assert [load_tasks(str(tasks))(seed) for seed in range(3)] == [{"q": 1}, {"q": 2}, {"q": 1}]
    assert load_tasks(None)(12) == 12


@pytest.mark.parametrize(
    ("value", "words"),
    [("high", "must be a finite number"), (float("nan"), "finite"), ({"reward": 1, "bonus": 2}, "unknown keys")],
)
def test_what_an_agent_returns_must_be_a_reward(value, words) -> None:
    with pytest.raises(TypeError, match=words):
        read_outcome(value)
    assert read_outcome({"reward": 1, "turn_rewards": [0.5], "success": 0}).success is False


async def test_a_command_agent_talks_to_the_gateway_and_prints_its_reward(tmp_path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, openai
            task = json.loads(os.environ["TURNGYM_TASK"])
            client = openai.OpenAI(max_retries=0)
            messages = [{"role": "user", "content": "hi"}]
            reply = client.chat.completions.create(model="m", messages=messages, max_tokens=3)
            print("some log line")
            print(json.dumps({"reward": task["value"]}))
            """
        )
    )
    rollout, _ = _rollout("agent")
    await rollout.start()
    try:
        agent = command_agent(f"{sys.executable} {script}")
        trajectories = await play_session(
            rollout.gateway, rollout._server.session_url, agent, {"value": 0.25}, session_id="c1", timeout_s=60
        )
        assert [t.turn_rewards for t in trajectories] == [[0.25]]
        hung = command_agent(f"{sys.executable} -c 'import time; time.sleep(60)'")
        (failed,) = await play_session(
            rollout.gateway, rollout._server.session_url, hung, {}, session_id="c2", timeout_s=0.5
        )
        assert failed.termination == "error" and "timed out" in failed.error
        broken = command_agent(f"{sys.executable} -c 'print(\"no reward here\")'")
        (failed,) = await play_session(
            rollout.gateway, rollout._server.session_url, broken, {}, session_id="c3", timeout_s=30
        )
        assert "not a reward" in failed.error
    finally:
        await rollout.close()
    assert rollout.gateway.sessions == {}
