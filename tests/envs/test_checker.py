"""The conformance checker catches what it claims: each deliberately broken environment fails with its message."""

from __future__ import annotations

import dataclasses
import random
import re
import warnings
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.__main__ import main as envs_cli
from envs.actions import parse_actions
from envs.checker import HOSTILE_ACTIONS, CheckReport, EnvCheckError, check_text_env


class GuessEnv(envs.TextEnv):
    """A conforming environment: guess a hidden digit; wrong guesses say higher or lower."""

    instructions = "Guess the hidden digit 0-9. Answer with one digit."
    action_format = "a digit, e.g. 5"

    def __init__(self, *, max_turns: int | None = 4, format_penalty: float = 0.1, render_mode: str | None = "ansi"):
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        self.secret = 0

    def _reset(self, options):
        self.secret = int(self.np_random.integers(0, 10))
        return "I am thinking of a digit.", {}

    def _step(self, action):
        parsed = parse_actions(action, [str(d) for d in range(10)], max_actions=1)
        if not parsed.is_valid:
            return envs.StepOutcome("Invalid: answer one digit.", action_is_valid=False)
        guess = int(parsed.actions[0])
        if guess == self.secret:
            return envs.StepOutcome("Correct!", reward=1.0, terminated=True, success=True)
        return envs.StepOutcome("Higher." if guess < self.secret else "Lower.", metrics={"guess": guess})

    def render_text(self, color=False):
        return f"\x1b[1msecret={self.secret}\x1b[0m" if color else f"secret={self.secret}"

    def oracle(self):
        return [] if self.episode_over else [str(self.secret)]

    def valid_actions(self):
        return [str(d) for d in range(10)]


def failures_of(env_class) -> dict[str, str]:
    with pytest.raises(EnvCheckError) as caught:
        check_text_env(env_class)
    return caught.value.failures


NO_STATE_INFO = "reset's info has neither state_key nor distance_to_goal (optional state information)"


def test_a_conforming_env_passes_every_check_and_reports_them():
    report = check_text_env(GuessEnv, seeds=(0, 1, 2))
    assert isinstance(report, CheckReport) and report.ok and report.skipped == {"state_info": NO_STATE_INFO}
    assert report.passed == [
        "text_env",
        "reset_info",
        "step_info",
        "episode_end",
        "hostile_actions",
        "determinism",
        "messages",
        "valid_actions",
        "oracle",
        "render",
        "gymnasium",
    ]
    assert report.summary().startswith("GuessEnv: 11 passed, 1 skipped, 0 failed in ")


def test_an_instance_works_too_and_gymnasium_can_be_left_out():
    report = check_text_env(GuessEnv(), gymnasium_check=False)
    assert report.ok and "gymnasium" not in report.passed and len(report.passed) == 10


def test_checks_that_do_not_apply_are_skipped_with_the_reason():
    class NoOracleOpenEnded(GuessEnv):
        def oracle(self):
            return None

        def valid_actions(self):
            return None

    report = check_text_env(NoOracleOpenEnded)
    assert report.ok
    assert report.skipped == {
        "valid_actions": "valid_actions() is None (an open-ended action set)",
        "oracle": "oracle() is None after reset for every seed (no oracle)",
        "state_info": NO_STATE_INFO,
    }


def test_the_global_random_states_are_left_as_they_were():
    random.seed(123)
    np.random.seed(123)
    python_state, numpy_first = random.getstate(), np.random.get_state()[1].copy()
    check_text_env(GuessEnv)
    assert random.getstate() == python_state and (np.random.get_state()[1] == numpy_first).all()


def test_truncated_reported_when_the_task_was_solved():
    class TruncatesWhenSolved(GuessEnv):
        def _step(self, action):
            outcome = super()._step(action)
            if outcome.success:  # wrong: solving ends the task, which is termination
                return envs.StepOutcome("Correct!", reward=1.0, truncated=True, success=True)
            return outcome

    failures = failures_of(TruncatesWhenSolved)
    assert list(failures) == ["oracle"]
    assert re.search(
        r"seed 0: following the oracle ended with success=True, terminated=False, truncated=True: a solved task "
        r"ends the episode with terminated=True",
        failures["oracle"],
    )


def test_terminated_and_truncated_both_true():
    class BothFlags(GuessEnv):
        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            return observation, reward, terminated, terminated or truncated, info

    failures = failures_of(BothFlags)
    assert "episode_end" in failures
    assert (
        "returned terminated=True and truncated=True: when the task itself ends, report terminated only"
        in (failures["episode_end"])
    )


def test_missing_standard_info_key():
    class NoMetrics(GuessEnv):
        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            del info["metrics"]
            return observation, reward, terminated, truncated, info

    failures = failures_of(NoMetrics)
    assert failures["step_info"].startswith(
        "step 1 after reset(seed=0) returned info without the standard key(s) ['metrics']: every reset and step "
        "info holds success, action_is_valid, metrics and turn"
    )


def test_standard_info_key_of_the_wrong_type():
    class IntSuccess(GuessEnv):
        def reset(self, *, seed=None, options=None):
            observation, info = super().reset(seed=seed, options=options)
            return observation, {**info, "success": 0}

    failures = failures_of(IntSuccess)
    assert failures["reset_info"] == "reset(seed=0) returned info['success'] = 0 of type int: it must be a bool"


def test_nondeterministic_seeding_through_the_global_random_module():
    class GlobalRandom(GuessEnv):
        def _reset(self, options):
            self.secret = random.randint(0, 9)  # wrong: ignores reset's seed
            return f"I am thinking of a digit (hint: not {(self.secret + 1) % 10}).", {}

    failures = failures_of(GlobalRandom)
    assert re.match(
        r"reset\(seed=0\) and the same actions played twice on the same instance differ: reset gave .* Draw every "
        r"random number from self.np_random",
        failures["determinism"],
    )


def test_state_carried_over_between_episodes_is_nondeterminism_too():
    class CountsEpisodes(GuessEnv):
        episodes = 0

        def _reset(self, options):
            observation, info = super()._reset(options)
            self.episodes += 1
            return f"{observation} Episode {self.episodes}.", info

    assert "the same instance differ" in failures_of(CountsEpisodes)["determinism"]


def test_raising_on_a_hostile_action():
    class Strict(GuessEnv):
        def _step(self, action):
            int(action)  # wrong: model text may be anything
            return super()._step(action)

    message = failures_of(Strict)["hostile_actions"]
    assert message.startswith(
        "step('') raised ValueError: invalid literal for int() with base 10: ''; parse model text"
    )
    assert "StepOutcome(..., action_is_valid=False), never an exception" in message


def test_unreadable_text_marked_valid_or_unpenalised():
    class AcceptsAnything(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("Noted.")

    assert (
        "was marked action_is_valid=True: text the environment cannot read must be flagged invalid"
        in (failures_of(AcceptsAnything)["hostile_actions"])
    )

    class PaysForJunk(GuessEnv):
        def _step(self, action):
            outcome = super()._step(action)
            return envs.StepOutcome(outcome.observation, reward=0.5, action_is_valid=outcome.action_is_valid)

    # 0.5 - 0.1 = 0.4 > -0.1: junk earns more than the penalty allows
    assert "step('') earned 0.4, more than -format_penalty = -0.1" in failures_of(PaysForJunk)["hostile_actions"]


def test_echoing_a_huge_action_back():
    class Echo(GuessEnv):
        def _step(self, action):
            outcome = super()._step(action)
            return envs.StepOutcome(f"You said: {action}", action_is_valid=outcome.action_is_valid)

    message = failures_of(Echo)["hostile_actions"]
    # "You said: " (10 characters) + 400,000 characters of "<answer>" * 50,000 (the emoji's 10,010 fit the bound)
    assert "returned an observation of 400010 characters: do not echo the action back in full" in message


def test_a_step_after_the_end_that_does_not_raise():
    class Endless(GuessEnv):
        def step(self, action):
            self._episode_over = False  # wrong: hides the end of the episode
            return super().step(action)

    assert failures_of(Endless)["episode_end"].startswith(
        "step() after the episode ended returned normally: raise RuntimeError('... call reset() first')"
    )


def test_a_non_str_action_must_raise_type_error():
    class Coerces(GuessEnv):
        def step(self, action):
            return super().step(str(action))

    assert failures_of(Coerces)["episode_end"].startswith("step(42) did not raise TypeError")


def test_instructions_that_change_with_the_seed():
    class PromptPerEpisode(GuessEnv):
        def _reset(self, options):
            observation, info = super()._reset(options)
            self.instructions = f"Guess the digit. Game number {self.np_random.integers(1000)}."
            return observation, info

    assert failures_of(PromptPerEpisode)["text_env"].startswith("instructions differ between seeds [0, 1, 2]")


def test_an_observation_that_is_not_the_recorded_one():
    class Shouting(GuessEnv):
        def step(self, action):
            observation, *rest = super().step(action)
            return (observation.upper(), *rest)

    failures = failures_of(Shouting)
    assert "but messages() recorded" in failures["messages"]


def test_an_oracle_that_does_not_solve_the_task():
    class WrongOracle(GuessEnv):
        def oracle(self):
            return [] if self.episode_over else [str((self.secret + 1) % 10)]

    assert (
        "following the oracle ended with success=False, terminated=False, truncated=True"
        in (failures_of(WrongOracle)["oracle"])
    )


def test_valid_actions_that_step_rejects():
    class Liar(GuessEnv):
        def valid_actions(self):
            return ["eleven"]

    failures = failures_of(Liar)
    assert failures["valid_actions"] == (
        "valid_actions() listed eleven but step marked it invalid: list only actions step accepts"
    )


def test_plain_text_with_colour_codes():
    class AlwaysColoured(GuessEnv):
        def render_text(self, color=False):
            return "\x1b[1msecret\x1b[0m"

    assert failures_of(AlwaysColoured)["render"] == (
        "render_text() contains ANSI escape codes: add colours only when color=True"
    )


def test_gymnasium_warnings_fail_and_other_libraries_warnings_do_not():
    class NoFps(GuessEnv):
        metadata: ClassVar[dict] = {"render_modes": ["ansi"]}  # Gymnasium's checker wants render_fps too

    assert failures_of(NoFps)["gymnasium"] == (
        "Gymnasium's check_env warned: [\"WARN: No render fps was declared in the environment "
        "(env.metadata['render_fps'] is None or not defined), rendering may occur at inconsistent fps.\"]; "
        "fix what it names"
    )

    class LeakyLibrary(GuessEnv):
        def _reset(self, options):
            warnings.warn("a library left a file open", ResourceWarning, stacklevel=1)
            return super()._reset(options)

    assert check_text_env(LeakyLibrary).ok


def test_an_env_that_is_not_a_text_env():
    class Plain(gym.Env):
        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.Discrete(2)

    report = check_text_env(Plain(), raise_on_failure=False)
    assert not report.ok and report.passed == []
    assert report.failures["text_env"].startswith("Plain is not an envs.TextEnv: subclass envs.TextEnv")


def test_error_message_lists_every_failure():
    class Broken(GuessEnv):
        instructions = ""

        def _step(self, action):
            int(action)
            return super()._step(action)

    with pytest.raises(EnvCheckError) as caught:
        check_text_env(Broken)
    text = str(caught.value)
    assert text.startswith(f"Broken failed {len(caught.value.failures)} conformance check(s):\n- text_env: ")
    assert "\n- hostile_actions: step('') raised ValueError" in text


def test_hostile_actions_are_the_documented_ones_and_may_be_replaced():
    assert HOSTILE_ACTIONS[0] == "" and max(len(a) for a in HOSTILE_ACTIONS) == 2_000_000

    class ReadsEverything(GuessEnv):
        def _step(self, action):
            return envs.StepOutcome("Noted.")  # every text is a move here, so its own list has none

        def oracle(self):
            return None

    assert check_text_env(ReadsEverything, hostile_actions=(), gymnasium_check=False).ok


def test_cli_checks_a_registered_env_and_returns_its_status(capsys):
    envs.register("checker-guess", GuessEnv)

    class Strict(GuessEnv):
        def _step(self, action):
            return super()._step(str(int(action)))

    envs.register("checker-strict", Strict)
    try:
        assert envs_cli(["check", "checker-guess", "max_turns=3", "--seeds", "4,5"]) == 0
        assert "turngym/checker-guess: 11 passed, 1 skipped, 0 failed" in capsys.readouterr().out
        assert envs_cli(["check", "checker-strict"]) == 1
        assert "FAILED  hostile_actions: step('') raised ValueError" in capsys.readouterr().out
        assert envs_cli(["check", "checker-guess", "max_turn=3"]) == 2
        assert "does not accept 'max_turn' (did you mean 'max_turns'?)" in capsys.readouterr().out
    finally:
        envs.unregister("checker-guess", "checker-strict")


# --------------------------------------------------------------------------------------------------
# The optional state information: state_key and distance_to_goal
# --------------------------------------------------------------------------------------------------
class WalkEnv(envs.TextEnv):
    """A conforming environment with state information: walk from cell 0 to cell LENGTH with "+" and "-".

    Each turn makes the moves of a "||"-separated list, reported in ``info["actions_executed"]``; the
    distance is the cells left, the key the cell.
    """

    LENGTH = 4
    instructions = "Walk from cell 0 to the last cell. Answer with + or -, several separated by ||."
    action_format = "+ || +"

    def __init__(self, *, max_turns: int | None = 6, format_penalty: float = 0.1, render_mode: str | None = "ansi"):
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        self.cell = 0

    def _reset(self, options):
        self.cell = 0
        return "You are on cell 0.", self._state()

    def _step(self, action):
        parsed = parse_actions(action, ["+", "-"], max_actions=3)
        executed = []
        for move in parsed.actions:
            if self.cell == self.LENGTH:
                break
            self.cell = min(max(self.cell + self._step_of(move), 0), self.LENGTH)
            executed.append(move)
        solved = self.cell == self.LENGTH
        return envs.StepOutcome(
            f"You are on cell {self.cell}.",
            reward=float(solved),
            terminated=solved,
            success=solved,
            action_is_valid=parsed.is_valid,
            extra_info={**self._state(), "actions_executed": executed},
        )

    def _step_of(self, move: str) -> int:
        return 1 if move == "+" else -1

    def _state(self) -> dict:
        return {"state_key": f"cell {self.cell}", "distance_to_goal": self.LENGTH - self.cell}

    def render_text(self, color=False):
        return f"cell {self.cell}"

    def oracle(self):
        left = self.LENGTH - self.cell
        return [] if self.episode_over else [" || ".join(["+"] * min(left, 3))] * (1 if left <= 3 else 2)

    def valid_actions(self):
        return ["+", "-", "+ || +"]


def state_failure(env_class) -> str:
    failures = check_text_env(env_class, raise_on_failure=False).failures
    assert "state_info" in failures, failures
    return failures["state_info"]


def test_state_information_is_checked_when_given():
    report = check_text_env(WalkEnv, seeds=(0, 1, 2))
    assert report.ok and report.skipped == {} and report.passed[-1] == "state_info"


def test_a_state_key_that_is_not_a_str():
    class IntKey(WalkEnv):
        def _state(self):
            return {**super()._state(), "state_key": self.cell}

    assert state_failure(IntKey) == (
        "reset(seed=0) returned info['state_key'] = 0 of type int: it must be a str, a canonical key of the whole "
        "state (equal strings exactly when the states are equal)"
    )


@pytest.mark.parametrize(("distance", "shown"), [(-1, "-1 of type int"), (2.0, "2.0 of type float"), ("2", "2 of")])
def test_a_distance_that_is_not_a_count(distance, shown):
    class OddDistance(WalkEnv):
        def _state(self):
            return {**super()._state(), "distance_to_goal": distance}

    message = state_failure(OddDistance)
    assert message.startswith(f"reset(seed=0) returned info['distance_to_goal'] = {shown}")
    assert "it must be an int >= 0 (the optimal number of moves left) or None (unsolvable or unknown)" in message


def test_a_distance_that_is_not_zero_on_success():
    class NeverZero(WalkEnv):
        def _state(self):
            return {**super()._state(), "distance_to_goal": self.LENGTH - self.cell + 1}

    assert state_failure(NeverZero) == (
        "seed 0, oracle turn 2 (+) returned distance_to_goal = 1 with success = True: the distance is 0 exactly "
        "when the task is solved"
    )


def test_a_distance_that_does_not_fall_along_the_oracle():
    class Stuck(WalkEnv):  # 4 until solved: the oracle's first turn of 3 moves leaves it at 4
        def _state(self):
            return {**super()._state(), "distance_to_goal": 0 if self.cell == self.LENGTH else self.LENGTH}

    assert state_failure(Stuck) == (
        "seed 0, oracle turn 1 (+ || + || +): following the oracle took distance_to_goal from 4 to 4 in 3 move(s): "
        "an optimal plan lowers the optimal distance by exactly the moves it makes; fix the distance or the oracle, "
        "or, if a move's outcome is random, set stochastic_dynamics = True"
    )


def test_a_distance_that_falls_faster_than_one_per_move():
    class Halved(WalkEnv):  # 8, 6, 4, ...: the oracle's 3 moves take it from 8 to 2
        def _state(self):
            return {**super()._state(), "distance_to_goal": 2 * (self.LENGTH - self.cell)}

    assert state_failure(Halved).startswith(
        "seed 0, oracle turn 1 (+ || + || +): distance_to_goal fell from 8 to 2 in 3 move(s): an optimal distance "
        "falls by at most one per move"
    )


def test_equal_keys_need_equal_distances():
    class CoarseKey(WalkEnv):  # the key forgets the cell
        def _state(self):
            return {**super()._state(), "state_key": "walking" if self.cell < self.LENGTH else "done"}

    assert state_failure(CoarseKey).startswith(
        "seed 0, oracle turn 1 (+ || + || +): state_key walking came with distance_to_goal 4 before and 1 now: "
        "equal keys mean equal states"
    )


def test_keys_given_at_reset_must_follow_every_step():
    class ResetOnly(WalkEnv):
        def _step(self, action):
            outcome = super()._step(action)
            return envs.StepOutcome(outcome.observation, terminated=outcome.terminated, success=outcome.success)

    assert state_failure(ResetOnly).startswith(
        "seed 0, oracle turn 1 (+ || + || +) returned no info['state_key', 'distance_to_goal'], which reset gave"
    )


def test_a_fresh_instance_must_give_the_same_state_information():
    class PerInstance(WalkEnv):
        instances = 0

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            PerInstance.instances += 1
            self.tag = PerInstance.instances

        def _state(self):
            return {**super()._state(), "state_key": f"cell {self.cell} of walk {self.tag}"}

    assert re.fullmatch(  # the determinism check built a fresh instance too, so the walk's number varies
        r"seed 0, reset: a fresh instance gave \(state_key, distance_to_goal\) = \('cell 0 of walk \d+', 4\), the "
        r"first \('cell 0 of walk 1', 4\): the same seed and actions must give the same state information",
        state_failure(PerInstance),
    )


def test_stochastic_dynamics_are_exempt_from_the_exact_fall_only():
    class Slippery(WalkEnv):  # a move slips back with probability 1/2; the distance is still the cells left
        def _step_of(self, move):
            return super()._step_of(move) if self.np_random.random() < 0.5 else -1

    message = state_failure(Slippery)
    assert "following the oracle took distance_to_goal" in message and "set stochastic_dynamics = True" in message

    class DeclaredSlippery(Slippery):
        stochastic_dynamics = True

    report = check_text_env(DeclaredSlippery, raise_on_failure=False)
    assert "state_info" in report.passed

    class SlipperyAndWrong(DeclaredSlippery):
        def _state(self):
            return {**super()._state(), "distance_to_goal": 2 * (self.LENGTH - self.cell)}

    assert "falls by at most one per move" in state_failure(SlipperyAndWrong)


class MovesWalkEnv(WalkEnv):
    """WalkEnv that also reports each move's distance and where the action text wrote it."""

    def _step(self, action):
        parsed = parse_actions(action, ["+", "-"], max_actions=3)
        start = self.cell
        outcome = super()._step(action)
        moves = len(outcome.extra_info["actions_executed"])
        cells = []
        for move in parsed.actions[:moves]:
            start = min(max(start + self._step_of(move), 0), self.LENGTH)
            cells.append(self.LENGTH - start)
        extra = {"move_distances": self._move_distances(cells), "move_spans": [list(s) for s in parsed.spans[:moves]]}
        return dataclasses.replace(outcome, extra_info={**outcome.extra_info, **extra})

    def _move_distances(self, distances):
        return distances


def test_per_move_information_is_checked_when_given():
    assert "state_info" in check_text_env(MovesWalkEnv, seeds=(0, 1)).passed

    class LastMoveOff(MovesWalkEnv):
        def _move_distances(self, distances):
            return [*distances[:-1], distances[-1] + 1] if distances else distances

    assert "is not the step's distance_to_goal" in state_failure(LastMoveOff)

    class TooFastWithinTheTurn(MovesWalkEnv):  # 4, then 1 after the first move: a fall of 3 in one move
        def _move_distances(self, distances):
            return [1 if i == 0 and d > 1 else d for i, d in enumerate(distances)]

    assert "move 1: distance_to_goal fell from 4 to 1 in 1 move(s)" in state_failure(TooFastWithinTheTurn)

    class OneShort(MovesWalkEnv):
        def _move_distances(self, distances):
            return distances[1:]

    assert "must be lists with one entry per move made" in state_failure(OneShort)
