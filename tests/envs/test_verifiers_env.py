"""The verifiers adapter: environments defined here (single- and multi-turn) run turn by turn, scored by their rubric.

Needs ``pip install verifiers==0.3.1``: without it these tests fail (not skip) with that command.
No network and no model: the test plays the model.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import envs
from envs.verifiers_driver import VERIFIERS_INSTALL, VERIFIERS_VERSION

try:
    import verifiers as vf
    from datasets import Dataset
except ImportError as exc:  # fail loudly in CI: the adapter is part of the suite
    raise ImportError(f"tests/envs/test_verifiers_env.py needs verifiers: {VERIFIERS_INSTALL}") from exc

from envs.verifiers import VerifiersEnv

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"question": "Capital of France?", "answer": "Paris"}, {"question": "Capital of Italy?", "answer": "Rome"}]
CLEANED: list[str] = []


# --------------------------------------------------------------------------------------------------
# verifiers environments defined by the test (classic API, load_environment convention)
# --------------------------------------------------------------------------------------------------
def load_single_turn(bonus: float = 0.5) -> vf.SingleTurnEnv:
    """One answer; reward = 1 x exact (async) + bonus x short_answer (sync)."""
    parser = vf.XMLParser(["answer"])

    async def exact(completion, answer, **kwargs) -> float:
        await asyncio.sleep(0)  # a real coroutine: the adapter must await it
        return 1.0 if parser.parse_answer(completion) == answer else 0.0

    def short_answer(completion, **kwargs) -> float:
        return 1.0 if len(parser.parse_answer(completion) or "x" * 99) <= 5 else 0.0

    rubric = vf.Rubric(funcs=[exact, short_answer], weights=[1.0, bonus], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(ROWS), system_prompt="Answer in <answer></answer>.", parser=parser, rubric=rubric
    )


class CountdownEnv(vf.MultiTurnEnv):
    """Say the numbers from the row's start down to 1, one per turn; the environment says the next one."""

    async def setup_state(self, state):
        state["expected"] = int(state["answer"])
        return state

    async def env_response(self, messages, state, **kwargs):
        said = self.parser.parse_answer(messages)
        if said != str(state["expected"]):
            return [vf.UserMessage(content=f"No, say {state['expected']}")]
        state["expected"] -= 1
        if state["expected"] == 0:  # verifiers' way to end from env_response: a final response
            state["final_env_response"] = [vf.UserMessage(content="Done!")]
            return state["final_env_response"]
        return [vf.UserMessage(content=f"Good. Next: {state['expected']}")]

    @vf.cleanup
    async def record_cleanup(self, state) -> None:
        CLEANED.append(state["answer"])


def load_countdown(max_turns: int = 6) -> CountdownEnv:
    parser = vf.Parser()

    def finished(state, **kwargs) -> float:
        return 1.0 if state["expected"] == 0 else 0.0

    async def mistakes(state, **kwargs) -> float:
        return float(len(state["trajectory"]) - int(state["answer"]))

    rubric = vf.Rubric(funcs=[finished, mistakes], weights=[1.0, -0.25], parser=parser)
    rows = [{"question": "Count down from 2.", "answer": "2"}, {"question": "Count down from 3.", "answer": "3"}]
    return CountdownEnv(dataset=Dataset.from_list(rows), parser=parser, rubric=rubric, max_turns=max_turns)


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------
def test_pinned_version_is_installed():
    assert vf.__version__ == VERIFIERS_VERSION


def test_single_turn_reward_comes_from_the_rubric():
    env = VerifiersEnv(environment=load_single_turn, env_args={"bonus": 0.5}, success_threshold=1.5)
    observation, info = env.reset(options={"example_index": 0})
    assert observation == "Capital of France?" and env.instructions == "Answer in <answer></answer>."
    observation, reward, terminated, truncated, info = env.step("<think>easy</think><answer>Paris</answer>")
    # exact 1.0 x 1 + short_answer ("Paris" has 5 characters) 1.0 x 0.5 = 1.5
    assert (reward, terminated, truncated, info["success"]) == (1.5, True, False, True)
    assert info["reward_breakdown"]["exact"] == 1.0 and info["metrics"]["short_answer"] == 1.0
    env.reset(options={"example_index": 1})
    _, reward, terminated, _, info = env.step("<answer>Milan</answer>")
    assert (reward, info["success"]) == (0.5, False)  # wrong (0) but short (0.5)


def test_unparsable_answer_is_invalid_and_still_scored():
    env = VerifiersEnv(environment=load_single_turn, example_index=0, format_penalty=0.2)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("Paris")  # no <answer> tag: the parser reads nothing
    # rubric: exact 0 + short_answer 0 (nothing parsed) = 0; minus the 0.2 format penalty
    assert (reward, terminated, info["action_is_valid"]) == (-0.2, True, False)


def test_multi_turn_protocol_observations_and_final_reward():
    env = VerifiersEnv(environment=load_countdown, example_index=1)
    observation, _ = env.reset(seed=0)
    assert observation == "Count down from 3." and env.instructions == "Solve the task given in the user message."
    steps = [env.step(said) for said in ("3", "5", "2", "1")]
    assert [s[0] for s in steps[:3]] == ["Good. Next: 2", "No, say 2", "Good. Next: 1"]
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0, 0.75]  # finished 1.0 - 0.25 x one mistake (4 turns - 3)
    assert steps[-1][0] == "Done!" and steps[-1][2] and steps[-1][4]["stop_condition"] == "has_final_env_response"
    assert env.messages()[-2:] == [{"role": "assistant", "content": "1"}, {"role": "user", "content": steps[-1][0]}]


def test_environment_turn_limit_terminates_and_turngym_limit_truncates():
    env = VerifiersEnv(environment=load_countdown, env_args={"max_turns": 2}, example_index=1)
    env.reset(seed=0)
    env.step("3")
    _, reward, terminated, truncated, info = env.step("2")
    # verifiers' own max_turns ended it: finished 0, mistakes 2 - 3 = -1 -> -0.25 x -1 = +0.25
    assert (terminated, truncated, info["stop_condition"], reward) == (True, False, "max_turns_reached", 0.25)
    env = VerifiersEnv(environment=load_countdown, example_index=1, max_turns=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step("3")
    assert (reward, terminated, truncated) == (0.0, False, True)


def test_abandoned_rollout_runs_cleanup_on_reset():
    gc.collect()  # environments of earlier tests left mid-episode clean up when collected
    CLEANED.clear()
    env = VerifiersEnv(environment=load_countdown, example_index=0)
    env.reset(seed=0)
    env.step("2")
    env.reset(seed=1)  # the first rollout is cancelled: verifiers' cleanup handlers still run
    assert CLEANED == ["2"]
    env.close()
    assert CLEANED == ["2", "2"]


async def test_steps_work_inside_a_running_event_loop():
    env = VerifiersEnv(environment=load_single_turn, example_index=1)
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step("<answer>Rome</answer>")
    assert (reward, terminated) == (1.5, True)


def test_check_env_and_seeded_rows():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(envs.make("verifiers", environment=load_countdown))
    observations = {VerifiersEnv(environment=load_countdown).reset(seed=s)[0] for s in range(12)}
    assert observations == {"Count down from 2.", "Count down from 3."}


def test_loading_by_module_name_and_bad_inputs():
    env = VerifiersEnv(environment="envs.verifiers_example", env_args={"num_examples": 3})
    assert len(env.dataset) == 3
    env = VerifiersEnv(
        environment="envs.verifiers_example:load_environment", example_index=2, env_args={"num_examples": 3}
    )
    env.reset(seed=0)
    _, reward, *_ = env.step(env.oracle()[0])
    assert reward == 1.5  # the built-in example: correct 1.0 + 0.5 x (1 / 1 try)
    with pytest.raises(ValueError, match="Could not import 'no-such-env'"):
        VerifiersEnv(environment="no-such-env")
    with pytest.raises(ValueError, match="example_index must be in"):
        VerifiersEnv(environment=load_single_turn, example_index=2)


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load((ROOT / "configs" / "env" / "verifiers.yaml").read_text())
    assert config.pop("id") == "verifiers"
    assert config == {name: p.default for name, p in inspect.signature(VerifiersEnv).parameters.items()}
