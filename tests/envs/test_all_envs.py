"""Every registered environment (built-ins and installed plugins) passes the conformance checker.

:func:`envs.checker.check_text_env` runs Gymnasium's ``check_env`` and the turngym contract (standard
info keys, hostile actions, seeding, episode end, messages, oracle, ...); the checker's own tests are
in tests/envs/test_checker.py.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs
from envs.checker import check_text_env

# Environments whose default configuration needs a sandbox backend (Docker or bubblewrap).
NEEDS_SANDBOX = {"code"}
ENV_IDS = [
    pytest.param(env_id, marks=pytest.mark.docker) if env_id in NEEDS_SANDBOX else env_id for env_id in envs.ids()
]


@pytest.fixture
def ready(request: pytest.FixtureRequest, env_id: str) -> None:
    if env_id in NEEDS_SANDBOX:
        request.getfixturevalue("code_sandbox_ready")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_passes_the_conformance_checker(env_id, ready):
    report = check_text_env(lambda: envs.make(env_id), seeds=(0, 1, 2))
    assert report.ok and "gymnasium" in report.passed and "hostile_actions" in report.passed
    if envs.spec(env_id).source == "turngym":  # every built-in's default configuration has an oracle
        assert "oracle" in report.passed, report.skipped.get("oracle")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_make_builds_the_same_environment(env_id, ready):
    env = gym.make(envs.spec(env_id).gym_id)
    assert isinstance(env.unwrapped, envs.TextEnv)
    gym_observation, _ = env.reset(seed=11)
    own_observation, _ = envs.make(env_id).reset(seed=11)
    assert gym_observation == own_observation
