"""The verifiers 0.4 (v1) adapter: tasksets written with v1's public API, single- and multi-turn, scored by rewards.

The tasksets live beside this file (``v1_capitals``, ``v1_countdown``: loaded by plain id through
verifiers' own loader) and in ``envs/adapters/verifiers_example.py`` (a dotted module path). Needs
``pip install "turngym[verifiers]"``: without it these tests fail (not skip) with that command.
No network and no model: the test plays the model.
"""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import envs
from envs.adapters.verifiers_driver import VERIFIERS_INSTALL, VERIFIERS_VERSION

try:
    import verifiers
    import verifiers.v1
except ImportError as exc:  # fail loudly in CI: the adapter is part of the suite
    raise ImportError(f"tests/envs/test_verifiers_env.py needs verifiers: {VERIFIERS_INSTALL}") from exc

from envs.adapters.verifiers import VerifiersEnv

ROOT = Path(__file__).resolve().parents[2]


def test_pinned_version_ships_v1_only():
    assert verifiers.__version__ == VERIFIERS_VERSION
    # Why classic environments are not supported: 0.4.0 has neither the classic classes nor a legacy module.
    assert not hasattr(verifiers, "MultiTurnEnv") and importlib.util.find_spec("verifiers.legacy") is None


def test_default_example_rewards_tries_and_format_penalty():
    env = envs.make("verifiers", task_index=42)
    observation, info = env.reset(seed=0)
    assert (observation, info["task_name"]) == ("What is 28 * 79?", "multiply#42")
    assert env.instructions.startswith("Multiply the two numbers") and env.oracle() == ["<answer>2212</answer>"]
    _, reward, terminated, _, info = env.step(env.oracle()[0])
    # correct_answer 1.0 x 1 + fewer_tries (1 / 1 try) x 0.5 = 1.5; the task's @vf.stop ended it
    assert (reward, terminated, info["success"], info["stop_condition"]) == (1.5, True, True, "answered_correctly")
    env.reset(seed=0)
    steps = [env.step("2212"), env.step("<answer>2212</answer>")]
    # an untagged reply is invalid (-0.1) and wrong; then 1.0 + 0.5 x (1 / 2 tries) = 1.25
    assert [s[1] for s in steps] == [-0.1, 1.25] and [s[4]["action_is_valid"] for s in steps] == [False, True]
    assert steps[0][0] == "That is not the product. Try again: <answer>number</answer>."
    env.reset(seed=0)
    steps = [env.step(f"<answer>{n}</answer>") for n in (1, 2, 3)]
    assert [s[1:3] for s in steps] == [(0.0, False), (0.0, False), (0.0, True)]  # three tries: the env closes it
    assert steps[-1][4]["stop_condition"] == "user_closed" and steps[-1][4]["reward_breakdown"] == {
        "correct_answer": 0.0,
        "fewer_tries": 0.0,
    }


def test_single_turn_taskset_by_plain_id_with_config_and_metrics():
    env = VerifiersEnv(taskset="v1_capitals", taskset_args={"bonus": 0.5}, success_threshold=1.5)
    observation, _ = env.reset(options={"task_index": 0})
    assert observation == "Capital of France?" and env.instructions == "Answer in <answer></answer>."
    observation, reward, terminated, truncated, info = env.step("<think>easy</think><answer>Paris</answer>")
    # exact 1.0 + short_answer 0.5 (keyed score, weight 1) = 1.5; the single-agent env ends after one reply
    assert (reward, terminated, truncated, info["success"]) == (1.5, True, False, True)
    assert info["stop_condition"] == "agent_completed" and info["metrics"]["reply_chars"] == 41.0
    env = VerifiersEnv(taskset="v1_capitals", taskset_args={"bonus": 0.25}, task_index=1, format_penalty=0.2)
    env.reset(seed=0)
    assert env.step("<answer>Milan</answer>")[1] == 0.25  # wrong (0) but short (0.25)
    env.reset(seed=0)
    assert env.step("Rome")[1:3] == (-0.2, True)  # no tag: nothing scores, and the format penalty


def test_multi_turn_env_observations_stop_and_rewards():
    env = VerifiersEnv(taskset="v1_countdown", task_index=1, answer_tag=None)
    observation, _ = env.reset(seed=0)
    assert observation == "Count down from 3." and env.instructions == "Solve the task given in the user message."
    steps = [env.step(said) for said in ("3", "5", "2", "1")]
    assert [s[0] for s in steps[:3]] == ["Good. Next: 2", "No, say 2", "Good. Next: 1"]
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0, 0.75]  # finished 1.0 - 0.25 x one mistake (4 replies - 3)
    assert steps[-1][2] and steps[-1][4]["stop_condition"] == "reached_zero"
    assert env.messages()[-3:-1] == [
        {"role": "user", "content": "Good. Next: 1"},
        {"role": "assistant", "content": "1"},
    ]


def test_env_config_limits_and_turngym_truncation():
    env = VerifiersEnv(taskset="v1_countdown", env_args={"max_replies": 2}, task_index=1, answer_tag=None)
    env.reset(seed=0)
    env.step("3")
    _, reward, terminated, truncated, info = env.step("2")
    # the env's own limit closed the exchange: finished 0, mistakes 2 - 2 = 0
    assert (terminated, truncated, info["stop_condition"], reward) == (True, False, "user_closed", 0.0)
    env = VerifiersEnv(taskset="v1_countdown", task_index=1, max_turns=1, answer_tag=None)
    env.reset(seed=0)
    assert env.step("3")[1:4] == (0.0, False, True)


async def test_steps_work_inside_a_running_event_loop():
    env = VerifiersEnv(taskset="v1_capitals", task_index=1)
    env.reset(seed=0)
    assert env.step("<answer>Rome</answer>")[1:3] == (1.5, True)


def test_check_env_and_seeded_tasks():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(envs.make("verifiers", taskset="v1_countdown", answer_tag=None))
    observations = {VerifiersEnv(taskset="v1_countdown").reset(seed=s)[0] for s in range(12)}
    assert observations == {"Count down from 2.", "Count down from 3."}


def test_unsupported_and_bad_inputs_fail_clearly():
    with pytest.raises(NotImplementedError, match="single-agent v1 envs only"):
        VerifiersEnv(taskset="v1_capitals", env="user-sim").reset(seed=0)  # a modeled user: two seats
    with pytest.raises(ModuleNotFoundError, match="no-such-taskset"):
        VerifiersEnv(taskset="no-such-taskset")
    with pytest.raises(ValueError, match="task_index must be in"):
        VerifiersEnv(taskset="v1_capitals", task_index=2)


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load((ROOT / "configs" / "env" / "verifiers.yaml").read_text())
    assert config.pop("id") == "verifiers"
    assert config == {name: p.default for name, p in inspect.signature(VerifiersEnv).parameters.items()}
