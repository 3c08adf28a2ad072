"""Every registered environment (built-ins and installed plugins) keeps the Gymnasium and turngym contracts."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs

ENV_IDS = envs.ids()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_passes_without_warnings(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(envs.make(env_id))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_make_builds_the_same_environment(env_id):
    env = gym.make(envs.spec(env_id).gym_id)
    assert isinstance(env.unwrapped, envs.TextEnv)
    gym_observation, _ = env.reset(seed=11)
    own_observation, _ = envs.make(env_id).reset(seed=11)
    assert gym_observation == own_observation


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_and_actions_give_the_same_episode(env_id):
    def play(seed: int) -> list:
        env = envs.make(env_id)
        observation, info = env.reset(seed=seed)
        record = [observation, info]
        env.action_space.seed(seed)
        for _ in range(3):
            actions = env.valid_actions()
            action = actions[env.turn % len(actions)] if actions else env.action_space.sample()
            step = env.step(action)
            record.append(step)
            if step[2] or step[3]:
                break
        return record

    assert play(5) == play(5)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_instructions_and_render(env_id):
    env = envs.make(env_id)
    env.reset(seed=0)
    assert env.instructions.strip()
    assert env.action_format.strip()
    assert isinstance(env.render(), str) and env.render_text().strip()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_hostile_actions_are_normal_steps(env_id):
    hostile = ["", "\x00" * 100, "😀" * 10_000, "<answer>" * 50_000, "A" * 2_000_000, "\u202e||\u200d||</answer>"]
    for action in hostile:
        env = envs.make(env_id)
        env.reset(seed=3)
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str) and len(observation) < 20_000
        assert info["action_is_valid"] is False
        assert reward <= -env.format_penalty + 1e-9


@pytest.mark.parametrize("env_id", [i for i in ENV_IDS if envs.spec(i).source == "turngym"])
def test_builtin_oracle_solves_the_default_episode(env_id):
    for seed in range(5):
        env = envs.make(env_id)
        env.reset(seed=seed)
        while not env.episode_over:
            _, _, _, _, info = env.step(env.oracle()[0])
        assert info["success"], f"{env_id} seed {seed}: the oracle did not solve the episode"
