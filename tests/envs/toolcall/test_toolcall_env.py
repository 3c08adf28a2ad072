"""The tool-calling environment: oracle on every task, scoring, penalties, tool messages and state."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import yaml

import envs
from envs.toolcall.env import ToolCallEnv
from envs.toolcall.scoring import answer_is_correct, parse_number
from envs.toolcall.tasks import load_tasks

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "env" / "toolcall.yaml"
CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
BAD_JSON = '<tool_call>{"name": "calculator", "arguments": {"expression": }}</tool_call>'


@pytest.fixture(scope="module")
def env() -> ToolCallEnv:
    return ToolCallEnv(split="all")


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load(CONFIG.read_text())
    assert config.pop("id") == "toolcall"
    defaults = {name: p.default for name, p in inspect.signature(ToolCallEnv).parameters.items()}
    assert config == defaults
    assert isinstance(envs.make("toolcall"), ToolCallEnv)


def test_the_oracle_solves_every_bundled_task(env):
    for index, task in enumerate(env.tasks):
        env.reset(options={"task_index": index})
        total = 0.0
        while not env.episode_over:
            _, reward, _, _, info = env.step(env.oracle()[0])
            total += reward
        assert info["success"] and total == 1.0, task.id
        assert env.turn == task.hops + 1


def test_gold_arguments_come_from_the_question_or_earlier_results(env):
    # Every entity name and converted value a gold call uses must be readable from the question or
    # from what earlier turns returned: the tasks can be solved by reading the tool results.
    checked = 0
    for index, task in enumerate(env.tasks):
        env.reset(options={"task_index": index})
        seen = task.question
        for turn_text in env.oracle()[:-1]:
            for name, arguments in _calls_of(turn_text):
                for key in ("key", "account", "to_account", "product", "value"):
                    if key in arguments:
                        value = arguments[key]
                        text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
                        assert text in seen, (task.id, name, key, value)
                        checked += 1
            _, _, _, _, _ = env.step(turn_text)
            seen += "\n".join(m["content"] for m in env.observation_messages())
        if task.kind in ("text", "date"):
            assert task.answer in seen, task.id
    assert checked > 400


def _calls_of(turn_text: str) -> list[tuple[str, dict]]:
    from tools.parsers import parse_hermes

    return [(c.name, dict(c.arguments)) for c in parse_hermes(turn_text).calls]


def test_wrong_answers_score_zero(env):
    for index, task in enumerate(env.tasks):
        env.reset(options={"task_index": index})
        if task.kind == "number":
            wrong = str(float(task.answer) + 2 * task.tolerance + 1)
        elif task.kind == "date":
            wrong = "1999-01-01"
        elif task.kind == "text":
            wrong = "Nobody in particular"
        else:
            wrong = "done"  # without doing the job: the state is still the starting one
        _, reward, terminated, _, info = env.step(f"<answer>{wrong}</answer>")
        assert (reward, terminated, info["success"]) == (0.0, True, False), task.id
        assert info["gold_answer"] == task.answer


def test_numeric_tolerance_and_number_reading():
    task = next(t for t in load_tasks() if t.template == "ceo_height_ft")  # rounded to 2 decimals: tolerance 0.01
    gold = float(task.answer)
    assert task.tolerance == 0.01
    assert answer_is_correct(task, f"about {gold + 0.01:.2f} ft")
    assert not answer_is_correct(task, f"{gold + 0.02:.2f}")
    assert not answer_is_correct(task, f"{gold} or {gold + 1}")  # two numbers: ambiguous
    assert parse_number("1,234,567 people") == 1234567.0
    assert parse_number("−3.5") == -3.5 and parse_number("no number") is None


def test_text_answers_ignore_case_and_end_punctuation():
    task = next(t for t in load_tasks() if t.template == "founding_weekday")
    assert answer_is_correct(task, f"  {task.answer.lower()}. ")
    assert not answer_is_correct(task, f"It was a {task.answer}")


def test_tool_turns_return_one_tool_message_per_call(env):
    env.reset(options={"task_id": "city_population-00"})
    observation, reward, terminated, truncated, info = env.step(f"Let me compute.\n{CALC}\n{CALC}")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, False, True)
    assert env.observation_messages() == [
        {"role": "tool", "name": "calculator", "content": "42"},
        {"role": "tool", "name": "calculator", "content": "42"},
    ]
    assert observation == "[calculator] 42\n\n[calculator] 42"
    assert info["metrics"] == {"tool_calls": 2.0, "invalid_calls": 0.0, "failed_calls": 0.0}
    assert env.messages()[-3]["role"] == "assistant"


def test_invalid_calls_are_penalised_per_call(env):
    env.reset(options={"task_id": "city_population-00"})
    # one valid and one malformed call: -0.05, and the turn is valid
    _, reward, _, _, info = env.step(CALC + BAD_JSON)
    assert (reward, info["action_is_valid"]) == (-0.05, True)
    assert env.observation_messages()[1]["content"].startswith("Error: invalid JSON: Expecting value")
    # only invalid calls (unknown tool, schema violation): 2 x -0.05 and the format penalty -0.1
    unknown = '<tool_call>{"name": "weather", "arguments": {}}</tool_call>'
    schema = '<tool_call>{"name": "convert_units", "arguments": {"value": "3", "from_unit": "km"}}</tool_call>'
    _, reward, _, _, info = env.step(unknown + schema)
    assert (reward, info["action_is_valid"]) == (-0.2, False)
    assert info["invalid_calls"][1] == (
        "Error: invalid arguments for convert_units: arguments.to_unit is required but missing; "
        'arguments.value must be a number, got string "3"'
    )
    # a call that runs and fails costs nothing
    _, reward, _, _, info = env.step(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1/0"}}</tool_call>'
    )
    assert (reward, info["metrics"]["failed_calls"]) == (0.0, 1.0)


def test_turn_without_call_or_answer_gets_the_format_penalty(env):
    env.reset(options={"task_id": "city_population-00"})
    for text in ["I think the answer is 5.", "<answer> </answer>", f"<think>{CALC}</think>"]:
        _, reward, terminated, _, info = env.step(text)
        assert (reward, terminated, info["action_is_valid"]) == (-0.1, False, False), text


def test_calls_over_the_limit_are_not_run_and_cost_one_penalty():
    env = ToolCallEnv(max_calls_per_turn=2)
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step(CALC * 5)
    assert reward == -0.05 and info["metrics"]["tool_calls"] == 5.0
    messages = env.observation_messages()
    assert [m["content"] for m in messages] == [
        "42",
        "42",
        "Error: 3 more tool call(s) not run: at most 2 calls per turn",
    ]


def test_an_answer_next_to_calls_is_ignored(env):
    env.reset(options={"task_id": "city_population-00"})
    _, _, terminated, _, _ = env.step(CALC + "<answer>42</answer>")
    assert not terminated
    assert env.observation_messages()[-1]["role"] == "user"
    assert "answer in a message of its own" in env.observation_messages()[-1]["content"]


def test_stateful_tasks_score_the_final_state_and_episodes_do_not_share_it(env):
    task = next(t for t in env.tasks if t.template == "bank_transfer")
    env.reset(options={"task_id": task.id})
    start = dict(env.tool_state["bank"])
    env.step(env.oracle()[0])
    assert env.tool_state["bank"] == task.expected_state != start
    env.reset(options={"task_id": task.id})
    assert env.tool_state["bank"] == start  # a fresh copy


def test_refused_operations_leave_the_state_unchanged(env):
    task = next(t for t in env.tasks if t.template == "bank_transfer")
    env.reset(options={"task_id": task.id})
    call = task.gold_turns[0][0][1]
    start = dict(env.tool_state["bank"])
    too_much = {**call, "amount": start[call["account"]] / 100 + 1}
    env.step(f"<tool_call>{json.dumps({'name': 'bank', 'arguments': too_much})}</tool_call>")
    assert env.observation_messages()[0]["content"].startswith("Error: insufficient funds")
    thirds = {**call, "amount": 0.333}
    env.step(f"<tool_call>{json.dumps({'name': 'bank', 'arguments': thirds})}</tool_call>")
    assert "whole cents" in env.observation_messages()[0]["content"]
    assert env.tool_state["bank"] == start


def test_max_turns_truncates_and_reset_options_are_checked():
    env = ToolCallEnv(max_turns=2)
    env.reset(seed=1)
    env.step(CALC)
    _, _, terminated, truncated, _ = env.step(CALC)
    assert (terminated, truncated) == (False, True)
    with pytest.raises(ValueError, match="no task 'nope' in split 'train'"):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": 1})
    with pytest.raises(ValueError, match="split must be"):
        ToolCallEnv(split="dev")


def test_tools_and_instructions(env):
    names = [schema["function"]["name"] for schema in env.tools]
    assert names == ["lookup", "search", "calculator", "convert_units", "date_calculator", "bank", "inventory"]
    assert all(name in env.instructions for name in names)
    env.reset(options={"task_index": 0})
    env.step(CALC)
    assert "calculator" in env.render_text() and "\x1b[" in env.render()
