"""Scripted agents and EpisodeSession on the in-process toy line environment."""

from __future__ import annotations

import pytest
from toy_line_env import ToyLineEnv, ToyLineNoOracleEnv

from agents.base import Agent, NoOracleError, OracleAgent, RandomAgent, has_oracle, make_agent
from agents.session import EpisodeSession, NondeterministicEnvError


def run_episode(env, agent, seed: int) -> EpisodeSession:
    session = EpisodeSession(env, env_id="toy-line", env_options={}, seed=seed, agent=agent.name)
    session.start()
    while not session.over:
        session.step(agent.act(env, session.observation))
    return session


@pytest.mark.parametrize("seed", range(5))
def test_oracle_agent_solves_in_the_fewest_turns(seed):
    env = ToyLineEnv(length=8)
    session = run_episode(env, OracleAgent(), seed)
    record = session.to_record()
    assert record.success and record.terminated and record.termination_reason == "terminated"
    # The goal is drawn in [1, length) and the oracle walks straight there: one reward of 1 at the end.
    assert record.num_turns == env.goal
    assert record.rewards == [0.0] * (env.goal - 1) + [1.0]
    assert record.actions == ["right"] * env.goal


def test_oracle_agent_raises_without_an_oracle():
    env = ToyLineNoOracleEnv()
    env.reset(seed=0)
    assert not has_oracle(env) and has_oracle(ToyLineEnv())
    with pytest.raises(NoOracleError, match="no oracle"):
        OracleAgent().act(env, "")


def test_random_agent_picks_valid_actions_reproducibly():
    env = ToyLineEnv()
    env.reset(seed=0)
    picks = [RandomAgent(seed=7).act(env, "") for _ in range(3)]
    assert len(set(picks)) == 1  # the same seed gives the same first pick
    agent = RandomAgent(seed=7)
    sequence = [agent.act(env, "") for _ in range(50)]
    assert set(sequence) == {"left", "right"}
    again = RandomAgent(seed=7)
    assert [again.act(env, "") for _ in range(50)] == sequence


def test_random_agent_samples_the_action_space_when_actions_are_open_ended():
    env = ToyLineNoOracleEnv()
    env.reset(seed=0)
    first = [RandomAgent(seed=1).act(env, "") for _ in range(2)]
    assert first[0] == first[1] and isinstance(first[0], str)
    session = run_episode(env, RandomAgent(seed=1), seed=0)
    assert session.to_record().termination_reason in ("terminated", "truncated")


def test_scripted_agents_satisfy_the_protocol():
    assert isinstance(make_agent("oracle"), Agent) and isinstance(make_agent("random", seed=0), Agent)
    with pytest.raises(ValueError, match="oracle, random"):
        make_agent("human")


def test_undo_equals_never_having_played_the_action():
    env = ToyLineEnv(length=8)
    session = EpisodeSession(env, env_id="toy-line", env_options={}, seed=3, agent="human")
    session.start()
    assert not session.undo()
    session.step("right")
    session.step("jump")  # invalid: the mistake to take back
    assert session.undo()
    assert session.actions == ["right"] and env.turn == 1
    clean = EpisodeSession(ToyLineEnv(length=8), env_id="toy-line", env_options={}, seed=3, agent="human")
    clean.start()
    clean.step("right")
    assert session.observation == clean.observation
    assert session.to_record("abandoned") == clean.to_record("abandoned")


def test_undo_detects_a_nondeterministic_env():
    class Drifting(ToyLineEnv):
        resets = 0

        def _reset(self, options):
            Drifting.resets += 1
            observation, info = super()._reset(options)
            return observation, info

        def _step(self, action):
            outcome = super()._step(action)
            return type(outcome)(f"{outcome.observation} #{Drifting.resets}")

    session = EpisodeSession(Drifting(), env_id="drift", env_options={}, seed=0, agent="human")
    session.start()
    session.step("right")
    session.step("right")
    with pytest.raises(NondeterministicEnvError, match="deterministic"):
        session.undo()


def test_to_record_requires_a_reason_before_the_end():
    session = EpisodeSession(ToyLineEnv(), env_id="toy-line", env_options={"length": 6}, seed=0, agent="human")
    session.start()
    with pytest.raises(ValueError, match="not over"):
        session.to_record()
    record = session.to_record("abandoned")
    assert record.num_turns == 0 and not record.finished and record.env_options == {"length": 6}
    assert record.messages == [
        {"role": "system", "content": ToyLineEnv.instructions},
        {"role": "user", "content": session.observation},
    ]
