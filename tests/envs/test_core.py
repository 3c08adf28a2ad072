"""The TextEnv contract, checked on a small environment defined here."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.actions import parse_actions


class GuessEnv(envs.TextEnv):
    """Guess a hidden digit; each wrong guess says higher or lower."""

    instructions = "Guess the hidden digit 0-9. Answer with one digit."
    action_format = "a digit, e.g. 5"

    def __init__(self, *, max_turns: int | None = 4, format_penalty: float = 0.1, render_mode: str | None = "ansi"):
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        self.secret = 0

    def _reset(self, options):
        self.secret = int(options.get("secret", self.np_random.integers(0, 10)))
        return "I am thinking of a digit.", {"range": [0, 9]}

    def _step(self, action):
        parsed = parse_actions(action, [str(d) for d in range(10)], max_actions=1)
        if not parsed.is_valid:
            return envs.StepOutcome(f"Invalid: {parsed.error}. Answer one digit.", action_is_valid=False)
        guess = int(parsed.actions[0])
        if guess == self.secret:
            return envs.StepOutcome("Correct!", reward=1.0, terminated=True, success=True, metrics={"guess": guess})
        hint = "higher" if guess < self.secret else "lower"
        return envs.StepOutcome(f"No, {hint}.", metrics={"guess": guess}, extra_info={"hint": hint})

    def render_text(self, color=False):
        return f"\x1b[33msecret={self.secret}\x1b[0m" if color else f"secret={self.secret}"

    def oracle(self):
        return [str(self.secret)]


def test_check_env_passes_with_and_without_a_registered_spec():
    with pytest.warns(UserWarning, match="not having a spec"):  # without a spec Gymnasium skips one check
        check_env(GuessEnv())
    envs.register("guess-core-test", GuessEnv)
    try:
        check_env(envs.make("guess-core-test"))
        check_env(gym.make("turngym/guess-core-test").unwrapped)
    finally:
        envs.unregister("guess-core-test")


def test_reset_returns_the_standard_info_keys_and_extras():
    observation, info = GuessEnv().reset(seed=0)
    assert observation == "I am thinking of a digit."
    assert info == {"range": [0, 9], "success": False, "action_is_valid": True, "metrics": {}, "turn": 0}


def test_a_valid_wrong_guess_then_a_right_one():
    env = GuessEnv()
    env.reset(seed=0, options={"secret": 7})
    assert env.step("3") == (
        "No, higher.",
        0.0,
        False,
        False,
        {"hint": "higher", "success": False, "action_is_valid": True, "metrics": {"guess": 3.0}, "turn": 1},
    )
    observation, reward, terminated, truncated, info = env.step("<answer>7</answer>")
    assert (observation, reward, terminated, truncated, info["success"], info["turn"]) == (
        "Correct!",
        1.0,
        True,
        False,
        True,
        2,
    )
    assert env.episode_over


def test_invalid_action_is_a_normal_step_with_the_format_penalty():
    env = GuessEnv(format_penalty=0.25)
    env.reset(seed=0, options={"secret": 1})
    observation, reward, terminated, truncated, info = env.step("banana")
    assert reward == -0.25
    assert (terminated, truncated, info["action_is_valid"]) == (False, False, False)
    assert observation == "Invalid: 'banana' is not an action. Answer one digit."


def test_max_turns_truncates_but_a_terminal_last_turn_is_terminated():
    env = GuessEnv(max_turns=2)
    env.reset(seed=0, options={"secret": 5})
    assert env.step("1")[2:4] == (False, False)
    assert env.step("2")[2:4] == (False, True)  # out of turns: truncated, not terminated
    env.reset(seed=0, options={"secret": 5})
    env.step("1")
    assert env.step("5")[2:4] == (True, False)  # solved on the last allowed turn: terminated only


def test_programming_errors_raise_clearly():
    env = GuessEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("1")
    env.reset(seed=0, options={"secret": 1})
    with pytest.raises(TypeError, match="expects the model's text"):
        env.step(1)  # type: ignore[arg-type]
    env.step("1")
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"format_penalty": -1}, "format_penalty"),
        ({"render_mode": "rgb"}, "render_mode"),
    ],
)
def test_bad_constructor_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GuessEnv(**kwargs)


def test_messages_are_the_conversation_so_far():
    env = GuessEnv()
    env.reset(seed=0, options={"secret": 4})
    env.step("2")
    assert env.messages() == [
        {"role": "system", "content": "Guess the hidden digit 0-9. Answer with one digit."},
        {"role": "user", "content": "I am thinking of a digit."},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "No, higher."},
    ]
    env.messages()[0]["content"] = "changed"  # a copy: callers cannot corrupt the record
    assert env.messages()[0]["content"].startswith("Guess")
    env.reset(seed=1)
    assert len(env.messages()) == 2


class ToolEnv(GuessEnv):
    """GuessEnv whose feedback arrives as tool messages (as a tool-calling environment's would)."""

    def _step(self, action):
        outcome = super()._step(action)
        messages = (
            {"role": "tool", "name": "judge", "content": outcome.observation},
            {"role": "tool", "content": "ok"},
        )
        return envs.StepOutcome(
            outcome.observation,
            reward=outcome.reward,
            terminated=outcome.terminated,
            success=outcome.success,
            observation_messages=messages,
        )


def test_observation_messages_default_to_one_user_message_and_may_be_tool_messages():
    env = GuessEnv()
    env.reset(seed=0, options={"secret": 4})
    assert env.observation_messages() == [{"role": "user", "content": "I am thinking of a digit."}]
    env.step("2")
    assert env.observation_messages() == [{"role": "user", "content": "No, higher."}]

    env = ToolEnv()
    env.reset(seed=0, options={"secret": 4})
    env.step("2")
    tool_messages = [{"role": "tool", "name": "judge", "content": "No, higher."}, {"role": "tool", "content": "ok"}]
    assert env.observation_messages() == tool_messages
    assert env.messages()[-3:] == [{"role": "assistant", "content": "2"}, *tool_messages]
    env.observation_messages()[0]["content"] = "changed"  # a copy
    assert env.observation_messages() == tool_messages


@pytest.mark.parametrize("messages", [(), ({"role": "tool"},), ({"role": "tool", "content": 3},)])
def test_malformed_observation_messages_are_a_programming_error(messages):
    class Broken(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("x", observation_messages=messages)

    env = Broken()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="observation"):
        env.step("1")


def test_render_is_ansi_text_and_render_text_is_plain():
    env = GuessEnv()
    env.reset(seed=0, options={"secret": 3})
    assert env.render() == "\x1b[33msecret=3\x1b[0m"
    assert env.render_text() == "secret=3"
    assert GuessEnv(render_mode=None).render() is None
    with pytest.raises(RuntimeError, match=r"call reset\(\) before render\(\)"):
        GuessEnv().render()


def test_extra_info_may_not_shadow_standard_keys():
    class Clashing(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("x", extra_info={"success": True})

    env = Clashing()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"standard info keys \['success'\]"):
        env.step("1")


def test_subclasses_must_implement_the_abstract_methods():
    class Incomplete(envs.TextEnv):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_text_space_admits_any_str_within_the_length_bounds():
    space = envs.TextSpace(5)
    assert "" in space and "ab√中😀" in space and "\x00" in space
    assert "toolong" not in space and b"bytes" not in space and 3 not in space
    space.seed(0)
    samples = [space.sample() for _ in range(50)]
    assert all(s in space for s in samples)
    assert any(ord(c) > 127 for s in samples for c in s)


@settings(max_examples=200, deadline=None)
@given(actions=st.lists(st.text(), min_size=1, max_size=6))
def test_any_text_is_a_normal_step(actions):
    env = GuessEnv(max_turns=10)
    env.reset(seed=0, options={"secret": 9})
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str)
        assert reward in (-0.1, 0.0, 1.0)
        assert info["action_is_valid"] == (reward != -0.1)
        if terminated or truncated:
            break


def test_step_reward_is_rounded_after_the_format_penalty():
    class TwoMovesThenJunk(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("moved twice, then junk", reward=-0.1 + -0.1, action_is_valid=False)

    env = TwoMovesThenJunk()
    env.reset(seed=0)
    assert -0.1 + -0.1 - 0.1 != -0.3  # float noise the base class removes
    assert env.step("Up || Up || junk")[1] == -0.3


def test_info_values_are_fresh_objects_on_every_call():
    class Nested(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("x", extra_info={"grid": [[0, 1], [2, 3]], "pos": (1, [2])})

    env = Nested()
    env.reset(seed=0)
    first, second = env.step("1")[4], env.step("2")[4]
    assert first["grid"] == second["grid"] and first["grid"] is not second["grid"]
    assert first["grid"][0] is not second["grid"][0] and first["pos"][1] is not second["pos"][1]
