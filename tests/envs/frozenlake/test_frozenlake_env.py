"""FrozenLakeEnv: the Gymnasium contract, hand-made maps with hand-derived rewards, limits, text, config."""

from __future__ import annotations

import inspect
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import envs
from envs.frozenlake import FrozenLakeEnv

# Gymnasium's classic 4x4 map; shortest paths take 6 moves, e.g. Down Down Right Right Down Right.
CLASSIC = ["SFFF", "FHFH", "FFFH", "HFFG"]
CONFIG = Path(__file__).resolve().parents[3] / "configs" / "env" / "frozenlake.yaml"


def make(**kwargs) -> FrozenLakeEnv:
    env = FrozenLakeEnv(**{"desc": CLASSIC, "max_turns": None, **kwargs})
    env.reset(seed=0)
    return env


# --------------------------------------------------------------------------------------------------
# Gymnasium contract and registration
# --------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*alternative render modes")
@pytest.mark.parametrize("kwargs", [{}, {"is_slippery": True}, {"require_answer_tag": True, "size": [3, 5]}])
def test_check_env_direct(kwargs):
    check_env(FrozenLakeEnv(**kwargs))


@pytest.mark.parametrize("is_slippery", [False, True])
def test_check_env_through_gymnasium_make(is_slippery):
    env = gym.make("turngym/FrozenLake-v0", is_slippery=is_slippery)
    assert isinstance(env.unwrapped, FrozenLakeEnv)
    check_env(env.unwrapped)


def test_registry_make_uses_the_defaults():
    env = envs.make("frozenlake")
    assert isinstance(env, FrozenLakeEnv)
    assert (env.shape, env.frozen_ratio, env.is_slippery, env.max_turns) == ((4, 4), 0.8, False, 5)
    assert env.num_holes == 3  # round(0.2 * 16)


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load(CONFIG.read_text())
    assert config.pop("id") == "frozenlake"
    defaults = {name: p.default for name, p in inspect.signature(FrozenLakeEnv).parameters.items()}
    assert config == defaults
    FrozenLakeEnv(**config).reset(seed=0)


def test_config_values_from_omegaconf_are_accepted():
    config = OmegaConf.load(CONFIG)
    config.size, config.is_slippery = [3, 5], True
    env = FrozenLakeEnv(**{k: v for k, v in config.items() if k != "id"})
    assert env.reset(seed=0)[1]["map"] and env.shape == (3, 5)
    config.desc = ["SFF", "FHG"]  # a ListConfig, not a list
    env = FrozenLakeEnv(**{k: v for k, v in config.items() if k != "id"})
    assert env.reset(seed=0)[1]["map"] == ["SFF", "FHG"]


# --------------------------------------------------------------------------------------------------
# Seeding
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("is_slippery", [False, True])
def test_same_seed_and_actions_give_the_same_episode(is_slippery):
    actions = ["Right || Down", "Down", "Left || Left || Up", "nonsense", "Right || Right || Down || Down"]

    def play(seed: int) -> list:
        env = FrozenLakeEnv(is_slippery=is_slippery, max_turns=None, size=6)
        record = [env.reset(seed=seed)]
        for action in actions:
            if env.episode_over:
                break
            record.append(env.step(action))
        return record

    assert play(3) == play(3)
    assert play(3) != play(4)


def test_seeds_draw_different_maps():
    env = FrozenLakeEnv()
    maps = {tuple(env.reset(seed=seed)[1]["map"]) for seed in range(50)}
    assert len(maps) > 45


def test_slippery_transitions_follow_the_seed_on_a_fixed_map():
    def slips(seed: int) -> list[list[str]]:
        env = FrozenLakeEnv(desc=["FFFFF", "FFFFF", "FFSFF", "FFFFF", "GFFFF"], is_slippery=True)
        env.reset(seed=seed)
        taken = []
        for _ in range(10):  # two moves from the centre never end the episode; reset() keeps the generator
            env.reset()
            taken.append(env.step("Up || Down")[4]["directions_taken"])
        return taken

    assert slips(1) == slips(1)
    assert slips(1) != slips(2)


# --------------------------------------------------------------------------------------------------
# Hand-made maps
# --------------------------------------------------------------------------------------------------
def test_first_observation_and_render():
    env = FrozenLakeEnv(desc=CLASSIC, relative=False)
    observation, info = env.reset(seed=0)
    assert env.render_text() == "P___\n_O_O\n___O\nO__G"
    assert observation.startswith("P___\n_O_O\n___O\nO__G\n")
    assert info["position"] == (0, 0) and info["goal"] == (3, 3) and info["map"] == CLASSIC
    assert "\x1b[" in env.render() and env.render().count("\n") == 3


def test_the_relative_lines_name_the_neighbours_and_the_goal_in_action_words():
    env = FrozenLakeEnv(desc=CLASSIC)  # relative=True, the default
    observation, _ = env.reset(seed=0)
    assert observation == (
        "P___\n_O_O\n___O\nO__G\n"
        "Next to you: Up edge, Down ice, Left edge, Right ice.\n"
        "The goal is 3 down and 3 right of you.\n"
        "Your move."
    )
    observation = env.step("Right || Down")[0]  # to (1, 1): a hole, the lines stop
    assert observation.endswith("P___".replace("P", "_") + "\n_X_O\n___O\nO__G")
    env.reset(seed=0)
    observation = env.step("Down || Down || Right || Right")[0]  # to (2, 2)
    assert observation.endswith(
        "Next to you: Up ice, Down ice, Left ice, Right hole.\nThe goal is 1 down and 1 right of you."
    )
    env.reset(seed=0)
    observation = env.step("Down || Down || Right || Right || Down")[0]  # to (3, 2): next to the goal
    assert "Next to you: Up ice, Down edge, Left ice, Right goal.\nThe goal is 1 right of you." in observation
    assert FrozenLakeEnv(desc=CLASSIC, render_mode=None).render() is None


def test_the_hole_line_says_where_every_hole_is_row_by_row():
    # CLASSIC's holes: (1,1), (1,3), (2,3), (3,0); the player starts at (0,0).
    env = FrozenLakeEnv(desc=CLASSIC, hole_line=True)
    observation, _ = env.reset(seed=0)
    assert observation.endswith(
        "The goal is 3 down and 3 right of you.\n"
        "Holes: 1 down and 1 right; 1 down and 3 right; 2 down and 3 right; 3 down of you.\nYour move."
    )
    observation = env.step("Down || Down || Right || Right")[0]  # to (2, 2)
    assert observation.endswith("Holes: 1 up and 1 left; 1 up and 1 right; 1 right; 1 down and 2 left of you.")
    no_holes = FrozenLakeEnv(desc=["SF", "FG"], hole_line=True)
    assert no_holes.reset(seed=0)[0].endswith("No holes.\nYour move.")


def test_the_safe_line_names_the_moves_onto_ice_or_the_goal():
    # CLASSIC from (0,0): Up and Left are the edge, Down (1,0) ice, Right (0,1) ice.
    env = FrozenLakeEnv(desc=CLASSIC, safe_line=True, max_actions_per_turn=1)
    assert env.reset(seed=0)[0].endswith(
        "The goal is 3 down and 3 right of you.\nSafe moves: Down, Right.\nYour move."
    )
    observation = env.step("Right")[0]  # to (0,1): Down is the hole (1,1)
    assert "Next to you: Up edge, Down hole, Left ice, Right ice." in observation
    assert "Safe moves: Left, Right." in observation
    trapped = FrozenLakeEnv(desc=["SH", "HG"], safe_line=True)
    assert trapped.reset(seed=0)[0].endswith("Safe moves: none.\nYour move.")
    next_to_goal = FrozenLakeEnv(desc=["SG"], safe_line=True)
    assert "Safe moves: Right." in next_to_goal.reset(seed=0)[0]


@pytest.mark.parametrize("line", ["hole_line", "safe_line"])
def test_a_line_of_the_relative_lines_without_them_is_refused(line):
    with pytest.raises(ValueError, match=f"{line}=True adds a line to the relative lines: set relative=True"):
        FrozenLakeEnv(desc=CLASSIC, relative=False, **{line: True})


def test_reaching_the_goal():
    env = make()
    observation, reward, terminated, truncated, info = env.step("Down || Down || Right")
    assert (reward, terminated, truncated, info["success"], info["position"]) == (0.0, False, False, False, (2, 1))
    observation, reward, terminated, truncated, info = env.step("<answer>Right || Down || Right</answer>")
    assert reward == 1.0 and terminated and not truncated and info["success"]
    assert info["actions_executed"] == ["Right", "Down", "Right"] and info["steps"] == 6
    assert info["metrics"] == {"moves": 6.0, "slips": 0.0, "fell_in_hole": 0.0}
    assert observation.endswith("____\n_O_O\n___O\nO__√") and "reached the goal" in observation
    assert env.oracle() == []
    with pytest.raises(RuntimeError):
        env.step("Up")


def test_falling_into_a_hole_ends_the_turn_early():
    env = make()
    observation, reward, terminated, truncated, info = env.step("Right || Down || Down")
    assert reward == 0.0 and terminated and not truncated and not info["success"]
    assert info["position"] == (1, 1) and info["actions_not_executed"] == 1
    assert info["metrics"]["fell_in_hole"] == 1.0
    assert observation.endswith("____\n_X_O\n___O\nO__G") and "fell into a hole" in observation


def test_moving_into_the_border_is_a_move_that_stays_put():
    env = make()
    observation, reward, terminated, truncated, info = env.step("Up || Left")
    assert (reward, terminated, truncated, info["action_is_valid"]) == (0.0, False, False, True)
    assert info["position"] == (0, 0) and info["steps"] == 2
    assert "Up (blocked by the edge), Left (blocked by the edge)" in observation


def test_partially_invalid_turn_executes_the_valid_prefix_and_pays_the_penalty():
    env = make()
    observation, reward, terminated, truncated, info = env.step("Down || jump || Down")
    assert reward == pytest.approx(-0.1) and not terminated
    assert not info["action_is_valid"] and info["position"] == (1, 0)
    assert info["actions_executed"] == ["Down"] and "'jump' is not an action" in info["invalid_reason"]
    assert "You moved: Down." in observation and "Invalid action" in observation


@pytest.mark.parametrize("text", ["", "hello", "   ", "|| ||", "Up jump"])
def test_invalid_turn_moves_nothing(text):
    env = make(format_penalty=0.5)
    observation, reward, terminated, truncated, info = env.step(text)
    assert reward == pytest.approx(-0.5) and not (terminated or truncated)
    assert not info["action_is_valid"] and info["position"] == (0, 0) and info["steps"] == 0
    assert "Nothing happened" in observation and "Right || Down" in observation


def test_goal_reached_in_an_invalid_turn_still_pays_the_penalty():
    env = make(desc=["SG"])
    _, reward, terminated, _, info = env.step("Right || fly")
    assert reward == pytest.approx(0.9) and terminated and info["success"] and not info["action_is_valid"]


def test_answer_tag_required():
    env = make(require_answer_tag=True)
    _, reward, _, _, info = env.step("Down")
    assert reward == pytest.approx(-0.1) and "<answer>" in info["invalid_reason"]
    _, reward, _, _, info = env.step("<think>maybe <answer>Right</answer>?</think> <answer>Down</answer>")
    assert reward == 0.0 and info["position"] == (1, 0)
    assert env.valid_actions() == ["<answer>Up</answer>", "<answer>Down</answer>", "<answer>Left</answer>",
                                   "<answer>Right</answer>"]  # fmt: skip


def test_actions_beyond_the_cap_are_ignored_without_penalty():
    env = make(max_actions_per_turn=2)
    observation, reward, _, _, info = env.step("Down || Down || Right || Right")
    assert reward == 0.0 and info["action_is_valid"] and info["actions_over_cap"]
    assert info["position"] == (2, 0)
    assert "Only the first 2 actions of a turn count; the others were ignored." in observation


def test_step_limit_truncates():
    env = make(desc=["SFFFG"], max_steps=3)
    observation, reward, terminated, truncated, info = env.step("Left || Left || Left || Right")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["steps"] == 3 and info["actions_not_executed"] == 1 and "ran out of moves" in observation


def test_reaching_the_goal_on_the_last_allowed_step_terminates():
    env = make(desc=["SFFFG"], max_steps=4)
    _, reward, terminated, truncated, info = env.step("Right || Right || Right || Right")
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_turn_limit_truncates():
    env = make(max_turns=2)
    assert env.step("Left")[3] is False
    _, reward, terminated, truncated, info = env.step("Left")
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, True, 2)


def test_reset_options_set_the_map_of_one_episode():
    env = FrozenLakeEnv(size=5)
    _, info = env.reset(seed=0, options={"desc": "P_O\n__G"})
    assert info["map"] == ["SFH", "FFG"] and env.render_text().startswith("P_O\n__G\nNext to you:")
    _, info = env.reset(seed=0)
    assert len(info["map"]) == 5


def test_instructions_depend_on_the_configuration_only():
    plain = FrozenLakeEnv().instructions
    assert "√" in plain and "slippery" not in plain and "up to 5" in plain
    assert "probability 1/3" in FrozenLakeEnv(is_slippery=True).instructions
    assert "<answer>Right || Down</answer>" in FrozenLakeEnv(require_answer_tag=True).instructions
    env = FrozenLakeEnv()
    env.reset(seed=1)
    assert env.instructions == plain and env.messages()[0] == {"role": "system", "content": plain}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 1}, "at least 2 tiles"),
        ({"size": [0, 4]}, "at least 2 tiles"),
        ({"size": "4"}, "size must be"),
        ({"size": [2, 2.5]}, "integers"),
        ({"frozen_ratio": 0.0}, "frozen_ratio"),
        ({"frozen_ratio": 1.5}, "frozen_ratio"),
        ({"size": 2, "frozen_ratio": 0.3}, "start and goal need 2"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_actions_per_turn": 0}, "max_actions_per_turn"),
        ({"desc": ["SFG", "FF"]}, "same length"),
        ({"desc": ["SFX"]}, "unknown tiles"),
        ({"desc": ["SFS", "FFG"]}, "exactly one start"),
        ({"desc": ["SFF"]}, "exactly one goal"),
    ],
)
def test_bad_configuration_fails_loudly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrozenLakeEnv(**kwargs)


# --------------------------------------------------------------------------------------------------
# Robustness: any text is a normal transition
# --------------------------------------------------------------------------------------------------
_ENVS = [FrozenLakeEnv(max_turns=None), FrozenLakeEnv(is_slippery=True, require_answer_tag=True, max_turns=3)]
_TEXT = st.text()
_WORDS = st.sampled_from(["Up", "down", " LEFT ", "right.", "||", "|", ",", "\n", "<answer>", "</answer>", "<think>"])


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(_TEXT, st.lists(st.one_of(_WORDS, st.text(max_size=5))).map("".join)), which=st.integers(0, 1))
def test_arbitrary_text_never_raises(text, which):
    env = _ENVS[which]
    if env.episode_over:
        env.reset(seed=len(text))
    observation, reward, terminated, truncated, info = env.step(text)
    assert isinstance(observation, str) and len(observation) < 2_000
    assert reward in (0.0, 1.0, -0.1, pytest.approx(0.9), pytest.approx(-0.1))
    assert info["action_is_valid"] == (info["invalid_reason"] == "")


HUGE_TEXTS = {
    "many_actions": "Up || " * 1_000_000,
    "one_long_token": "x" * 10_000_000,
    "unclosed_tags": "<answer>" * 200_000,
    "unclosed_think": "<think>" + "Up " * 1_000_000,
    "unicode": "é\u202e😀\x00" * 100_000,
}


@pytest.mark.parametrize("name", list(HUGE_TEXTS))
def test_huge_text_is_cheap_and_bounded(name):
    env = make()
    text = HUGE_TEXTS[name]
    observation, _, _, _, info = env.step(text)
    # The parser quotes at most 40 characters of a bad token (escaped, so up to a few hundred).
    assert len(observation) < 1_000 and len(info["invalid_reason"]) < 300
