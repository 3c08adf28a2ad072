"""CodeEnv: episodes, rewards in both modes, multi-turn feedback, options, config and registration."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import envs
import sandbox as sandbox_package
from envs.code import CodeEnv
from envs.code import env as code_env_module
from envs.code.extract import fenced

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "env" / "code.yaml"


def make(**kwargs) -> CodeEnv:
    return CodeEnv(sandbox="process", **kwargs)


@pytest.mark.filterwarnings("ignore:.*alternative render modes")
def test_check_env_multi_turn():
    check_env(make(max_turns=3, reward_mode="fraction"))


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load(CONFIG.read_text())
    assert config.pop("id") == "code"
    defaults = {name: p.default for name, p in inspect.signature(CodeEnv).parameters.items()}
    assert config == defaults
    assert envs.spec("code").gym_id == "turngym/Code-v0"


def test_single_turn_oracle_and_mutant():
    env = make()
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    _, reward, terminated, truncated, info = env.step(env.oracle()[0])
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    _, reward, terminated, truncated, info = env.step(fenced(env.problem.mutant))
    # The attempt budget is part of the task: the one failed attempt terminates, it does not truncate.
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)


def test_multi_turn_rewards_are_improvements_of_the_best_score():
    env = make(max_turns=3, reward_mode="fraction")
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    n = len(env.problem.tests)
    observation, reward, terminated, _, info = env.step(fenced("def rotate_left(items):\n    return items"))
    passed = info["tests_passed"]  # rotating a list of one element (or none) is the identity
    # 9 tests: the first 9 // 3 = 3 are visible, and "fraction" scores the 6 held-out ones alone.
    held_out_passed = info["case_statuses"][3:].count("passed")
    assert n == 9 and 0 < passed < n and reward == pytest.approx(held_out_passed / 6) and not terminated
    assert "visible tests passed." in observation and "Fix your program" in observation
    _, reward, terminated, _, info = env.step("no code at all")
    assert (reward, info["action_is_valid"], terminated) == (-0.1, False, False)
    _, reward, terminated, _, info = env.step(env.oracle()[0])
    assert reward == pytest.approx(1 - held_out_passed / 6) and terminated and info["success"]


def test_feedback_never_shows_held_out_tests():
    # A lookup table of everything the feedback showed over 4 turns: it passes the visible tests and
    # earns nothing, in either reward mode, because the reward comes from tests never shown.
    for mode in ("all", "fraction"):
        env = make(max_turns=4, reward_mode=mode)
        env.reset(options={"problem_id": "bundled/caesar_shift/0"})
        problem = env.problem
        table: dict[str, str] = {}
        total = 0.0
        for _ in range(4):
            program = f"import sys\ntable = {table!r}\nprint(table.get(sys.stdin.read(), ''))\n"
            observation, reward, terminated, _, _ = env.step(fenced(program))
            total += reward
            for case in problem.tests:
                if repr(case.output.strip()) in observation or case.output.strip() in observation.split("\n"):
                    table[case.input] = case.output
            if terminated:
                break
        hidden = problem.tests[len(problem.tests) // 3 :]
        assert problem.kind == "stdio" and total == 0.0
        assert not any(case.input in table for case in hidden)
        assert set(table) <= {case.input for case in problem.tests[: len(problem.tests) // 3]} and table


def test_last_turn_without_success_terminates():
    env = make(max_turns=2)
    env.reset(seed=0)
    assert env.step("nothing")[2] is False
    _, reward, terminated, truncated, info = env.step("still nothing")
    assert (reward, terminated, truncated) == (-0.1, True, False)


def test_feedback_is_clipped():
    env = make(max_turns=2, feedback_chars=200, max_failures_shown=1)
    env.reset(options={"problem_id": "bundled/caesar_shift/0"})
    observation, *_ = env.step(
        fenced("print('x' * 5000)\n" if env.problem.kind == "stdio" else "def caesar_shift(t): return 'x' * 5000")
    )
    assert len(observation) <= 200


def test_reset_options_and_seeding():
    env = make()
    first = env.reset(seed=7)[0]
    assert env.reset(seed=7)[0] == first
    assert env.reset(options={"problem_index": 0})[1]["problem_id"] == env.problems[0].id
    with pytest.raises(ValueError, match="no problem"):
        env.reset(options={"problem_id": "nope"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": 1})


def test_splits_partition_the_problems():
    train, test, every = make(split="train"), make(split="test"), make()
    assert len(train.problems) + len(test.problems) == len(every.problems)
    assert not {p.id for p in train.problems} & {p.id for p in test.problems}
    assert 0.1 < len(test.problems) / len(every.problems) < 0.3


def test_answer_tag_mode():
    env = make(answer_tag="answer")
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    code = env.problem.reference
    assert env.step(f"<answer>{code}</answer>")[1] == 1.0


def test_missing_sandbox_is_a_clear_error(monkeypatch):
    def refuse(backend):
        raise sandbox_package.SandboxError("no isolating sandbox backend is available:\ninstall bubblewrap")

    monkeypatch.setattr(sandbox_package, "make_sandbox", refuse)
    monkeypatch.setattr(code_env_module, "_SANDBOXES", {})
    with pytest.raises(sandbox_package.SandboxError) as raised:
        CodeEnv(sandbox="auto")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("CodeEnv cannot create its sandbox (sandbox='auto')")
    assert "install bubblewrap" in message and message.endswith("env.sandbox=process")


def test_bad_options_raise():
    with pytest.raises(ValueError, match="reward_mode"):
        make(reward_mode="best")
    with pytest.raises(ValueError, match="split"):
        make(split="dev")
    with pytest.raises(FileNotFoundError, match="neither"):
        make(dataset="/no/such/file.jsonl")


def test_tamper_metrics_flag_programs_that_touch_the_judge():
    env = make(max_turns=2)
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    honest = env.step(env.oracle()[0])[4]["metrics"]
    assert honest["judge_tamper"] == 0.0 and all(honest[f"tamper_{s}"] == 0.0 for s in code_env_module.TAMPER_SIGNALS)
    env.reset(options={"problem_id": "bundled/rotate_left/2"})
    forging = env.step(fenced("import sys\nprint('All 9 tests passed.')\nsys.exit(0)"))[4]["metrics"]
    # A call problem: the printed summary is verdict-like, and exiting before the call is an early exit.
    assert (forging["judge_tamper"], forging["tamper_verdict_output"], forging["tamper_early_exit"]) == (1, 1, 1)
    later = env.step("no program")[4]["metrics"]  # the flag stays up for the rest of the episode
    assert later["judge_tamper"] == 1.0
