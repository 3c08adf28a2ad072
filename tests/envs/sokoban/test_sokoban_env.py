"""SokobanEnv: the Gymnasium contract, seeding, the oracle, robustness to any text, options and config."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import envs
from envs.sokoban import ACTIONS, SokobanEnv, solve
from envs.sokoban.env import LEVELS_DIR
from envs.sokoban.text import relative_lines

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "env" / "sokoban.yaml"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# --------------------------------------------------------------------------------------------------
# Gymnasium contract and registration
# --------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*alternative render modes")
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"dim": [7, 8], "num_boxes": 2, "max_turns": None},
        {"dim": 8, "num_boxes": 2, "require_answer_tag": True, "max_actions_per_turn": 1, "max_turns": 20},
        {"level_file": "tutorial.xsb"},
    ],
)
def test_check_env_direct(kwargs):
    check_env(SokobanEnv(**kwargs))


def test_check_env_through_gymnasium_make():
    env = gym.make("turngym/Sokoban-v0", dim=7, num_boxes=2)
    assert isinstance(env.unwrapped, SokobanEnv)
    check_env(env.unwrapped)
    assert env.reset(seed=3)[0] == envs.make("sokoban", dim=7, num_boxes=2).reset(seed=3)[0]


def test_registry_make_uses_the_defaults():
    env = envs.make("sokoban")
    assert isinstance(env, SokobanEnv)
    assert (env.shape, env.num_boxes, env.max_turns, env.max_steps, env.max_actions_per_turn) == ((6, 6), 1, 5, 100, 5)
    assert env.max_moves == 25  # the move budget: 5 turns of 5 moves


def test_config_lists_every_option_with_its_default():
    """Every option is in the config with SokobanEnv's default, but for the one the file documents as
    chosen for the default run: levels solvable in 3 moves."""
    config = yaml.safe_load(CONFIG.read_text())
    assert config.pop("id") == "sokoban"
    defaults = {name: p.default for name, p in inspect.signature(SokobanEnv).parameters.items()}
    assert config.pop("max_moves") == 3 and defaults.pop("max_moves") is None
    assert config == defaults
    SokobanEnv(**config).reset(seed=0)


def test_config_values_from_omegaconf_are_accepted():
    config = OmegaConf.load(CONFIG)
    config.dim, config.num_boxes = [7, 9], 2  # a ListConfig, not a list
    env = SokobanEnv(**{k: v for k, v in config.items() if k != "id"})
    env.reset(seed=0)
    assert env.shape == (7, 9) and (env.level.rows, env.level.cols) == (7, 9)


# --------------------------------------------------------------------------------------------------
# Seeding
# --------------------------------------------------------------------------------------------------
def test_same_seed_and_actions_give_the_same_episode():
    actions = ["Right || Down", "Down", "Left || Left || Up", "nonsense", "Right || Right || Down || Down"]

    def play(seed: int) -> list:
        env = SokobanEnv(dim=8, num_boxes=2, max_turns=None)
        record = [env.reset(seed=seed)]
        for action in actions:
            if env.episode_over:
                break
            record.append(env.step(action))
        return record

    assert play(3) == play(3)
    assert play(3) != play(4)


def test_seeds_draw_different_levels():
    env = SokobanEnv()
    boards = {env.reset(seed=seed)[0] for seed in range(50)}
    assert len(boards) >= 45


def test_reset_without_seed_continues_the_generator():
    env = SokobanEnv()
    first = env.reset(seed=1)[0]
    second = env.reset()[0]
    assert first != second and SokobanEnv().reset(seed=1)[0] == first


# --------------------------------------------------------------------------------------------------
# Observations, info, rendering
# --------------------------------------------------------------------------------------------------
def test_first_observation_info_and_render():
    env = SokobanEnv()
    observation, info = env.reset(seed=0)
    board = env.render_text()
    assert observation.startswith(board + "\n") and "Boxes on targets: 0/1" in observation
    assert set(board) <= set("#_OXP\n")
    assert ANSI.sub("", env.render()) == board and "\x1b[" in env.render()
    assert SokobanEnv(render_mode=None).render() is None
    assert info["num_boxes"] == 1 and info["boxes_on_target"] == 0 and info["steps"] == 0
    assert info["optimal_moves"] == solve(env.level).solution.num_moves


SMOLLM2 = Path(__file__).resolve().parents[2] / "fixtures" / "tokenizers" / "smollm2"
LEVEL = "#######\n#@ $ .#\n##    #\n#######"


def test_board_formats_cells_grid_and_positions():
    cells = SokobanEnv(max_turns=3, board="cells", relative=False)
    observation = cells.reset(seed=0, options={"level": LEVEL})[0]
    assert observation.startswith("# # # # # # #\n# P _ X _ O #\n# # _ _ _ _ #\n# # # # # # #\nBoxes on targets")
    grid = SokobanEnv(max_turns=3, relative=False)
    assert grid.reset(seed=0, options={"level": LEVEL})[0].startswith("#######\n#P_X_O#\n##____#\n#######\n")
    assert "Positions are" not in cells.instructions and "You:" not in observation

    located = SokobanEnv(max_turns=3, board="cells", positions=True, relative=False)
    observation = located.reset(seed=0, options={"level": LEVEL})[0]
    assert "\nYou: (1, 1). Boxes: (1, 3). Targets: (1, 5).\nBoxes on targets: 0/1." in observation
    assert "Positions are (row, column), counted from 0 at the top left." in located.instructions
    after = located.step("Right || Right || Down")[0]  # the second move pushes the box to (1, 4)
    assert "\n# # _ P _ _ #\n# # # # # # #\nYou: (2, 3). Boxes: (1, 4). Targets: (1, 5).\n" in after
    with pytest.raises(ValueError, match="board must be one of"):
        SokobanEnv(board="ascii")


def test_relative_lines_name_directions_from_the_player_by_hand():
    level = "#######\n#@ $ .#\n##    #\n#######"
    env = SokobanEnv(max_turns=3, relative=True)
    observation = env.reset(seed=0, options={"level": level})[0]
    assert observation.startswith(
        "#######\n#P_X_O#\n##____#\n#######\n"
        "Next to you: Up wall, Down wall, Left wall, Right floor.\n"
        "The box is 2 right of you; the target is 2 right of the box.\nBoxes on targets: 0/1."
    )
    after = env.step("Right || Down || Right || Up")[0]  # under the box; Up is blocked (a wall behind it)
    assert "Next to you: Up box, Down wall, Left floor, Right floor.\nThe box is 1 up of you;" in after
    after = env.step("Left || Up || Right")[0]  # behind the box, one push
    assert "Next to you: Up wall, Down floor, Left floor, Right box.\n" in after
    assert "The box is 1 right of you; the target is 1 right of the box." in after
    assert "Positions are" not in env.instructions


def test_box_line_names_what_is_next_to_each_box_by_hand():
    env = SokobanEnv(max_turns=3, box_line=True)
    observation = env.reset(seed=0, options={"level": "#######\n#@$ .#\n##    #\n#######"})[0]
    assert (
        "Next to you: Up wall, Down wall, Left wall, Right box.\n"
        "The box is 1 right of you; the target is 2 right of the box.\n"
        "Next to the box: Up wall, Down floor, Left you, Right floor.\nBoxes on targets:"
    ) in observation
    after = env.step("Right || Right")[0]  # the box onto the target
    assert "The box is 1 right of you; it is on a target.\n" in after
    assert "\nNext to the box: Up wall, Down floor, Left you, Right wall.\n" in after
    several = SokobanEnv(max_turns=3, box_line=True)
    observation = several.reset(seed=0, options={"level": "#######\n#@$. #\n#  $.#\n#  * #\n#######"})[0]
    assert "\nNext to box 1: Up wall, Down floor, Left you, Right target.\n" in observation
    assert "\nNext to box 2: Up target, Down box on a target, Left floor, Right target.\n" in observation
    assert "\nNext to box 3: Up box, Down wall, Left floor, Right floor.\n" in observation
    assert "Next to the box" not in SokobanEnv(max_turns=3).reset(seed=0)[0]
    with pytest.raises(ValueError, match="set relative=True as well"):
        SokobanEnv(relative=False, box_line=True)


def test_relative_lines_with_several_boxes_point_each_box_to_its_nearest_free_target():
    level = "#######\n#@$. #\n#  $.#\n#  * #\n#######"
    env = SokobanEnv(max_turns=3, relative=True)
    observation = env.reset(seed=0, options={"level": level})[0]
    assert "Next to you: Up wall, Down floor, Left wall, Right box.\n" in observation
    assert "Box 1 is 1 right of you; its nearest free target is 1 right of it." in observation
    # two free targets one cell away: the tie goes to the one nearer the top left
    assert "Box 2 is 1 down and 2 right of you; its nearest free target is 1 up of it." in observation
    assert "Box 3 is 2 down and 2 right of you; it is on a target." in observation
    both = SokobanEnv(max_turns=3, relative=True, positions=True, board="cells")
    observation = both.reset(seed=0, options={"level": level})[0]
    assert (
        "\nYou: (1, 1). Boxes: (1, 2), (2, 3), (3, 3). Targets: (1, 3), (2, 4), (3, 3).\nNext to you:" in observation
    )


@given(seed=st.integers(0, 10_000), moves=st.lists(st.sampled_from(ACTIONS), max_size=12))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_relative_lines_agree_with_the_board(seed, moves):
    """Property: walking by the words lands where the words say: the cell named next to the player in a
    direction is what the board holds there, and "the box is a down and b right of you" is the box's cell."""
    env = SokobanEnv(max_turns=None, relative=True, max_steps=1000)
    observation = env.reset(seed=seed)[0]
    for move in moves:
        if env.episode_over:
            break
        observation = env.step(move)[0]
    board, level = env.board, env.board.level
    lines = relative_lines(board).split("\n")
    assert "\n".join(lines) in observation
    names = dict(part.split(" ", 1) for part in lines[0].removeprefix("Next to you: ").removesuffix(".").split(", "))
    for action, name in names.items():
        cell = board.player + level.offset(action)
        if cell in board.boxes:
            assert name == ("box on a target" if cell in level.targets else "box")
        else:
            assert name == ("wall" if cell in level.walls else "target" if cell in level.targets else "floor")
    (box,) = board.boxes
    match = re.match(r"The box is (.*) of you; ", lines[1])
    assert match is not None
    row, col = level.position(board.player)
    for amount, word in re.findall(r"(\d+) (up|down|left|right)", match.group(1)):
        step = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}[word]
        row, col = row + step[0] * int(amount), col + step[1] * int(amount)
    assert (row, col) == level.position(box)


def test_cells_board_is_one_token_per_cell_with_a_bpe_tokenizer():
    """What the option is for: with the cells board every row of a generated level reads as exactly as
    many tokens as it has cells, so a column is a fixed offset from the row start; the grid board does not."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(SMOLLM2)
    rows_misaligned = 0
    for seed in range(20):
        env = SokobanEnv(max_turns=3, board="cells")
        env.reset(seed=seed)
        for row in env.render_text().split("\n"):
            assert len(tokenizer.encode(" " + row)) == env.shape[1]
        grid_rows = SokobanEnv(max_turns=3)
        grid_rows.reset(seed=seed)
        rows_misaligned += sum(
            len(tokenizer.encode(row)) != grid_rows.shape[1] for row in grid_rows.render_text().split("\n")
        )
    assert rows_misaligned > 0


def test_instructions_explain_legend_rules_and_format():
    text = SokobanEnv(require_answer_tag=True).instructions
    for symbol in ("# wall", "_ floor", "O target", "X box", "√ box on a target", "P you", "S you on a target"):
        assert symbol in text
    assert "<answer>Up || Left</answer>" in text and "up to 5" in text
    assert "an invalid answer costs 1." in text and "-0.1 per move" in text
    assert SokobanEnv().instructions == SokobanEnv().instructions  # constant per configuration


def test_an_invalid_turn_costs_more_than_any_valid_turn():
    # The costliest valid turn: 5 blocked moves, 5 x -0.1 = -0.5. An unreadable turn costs the default penalty, 1.
    env = SokobanEnv(max_turns=None)
    env.reset(seed=0, options={"level": "#####\n#@$.#\n#####"})
    _, blocked, *_ = env.step("Up || Up || Up || Up || Up")
    _, unreadable, *_ = env.step("I think we should go up")
    assert blocked == -0.5 and unreadable == -1.0
    with pytest.warns(UserWarning, match="format_penalty >= 0.5"):
        SokobanEnv(format_penalty=0.1)  # RAGEN's value: no cheaper than a single move


def test_the_status_line_counts_the_moves_the_turn_limit_allows():
    env = SokobanEnv(max_turns=3)  # 3 turns x 5 moves, far below max_steps=100
    observation, _ = env.reset(seed=0)
    assert "Moves left: 15." in observation
    observation, *_ = env.step("Left")
    assert "Moves left: 10." in observation  # one turn used, whatever it held
    unlimited = SokobanEnv(max_turns=None, max_steps=7)
    observation, _ = unlimited.reset(seed=0)
    assert "Moves left: 7." in observation


def test_metrics_after_a_step():
    env = SokobanEnv(max_turns=None)
    env.reset(seed=0, options={"level": "#######\n#@$.  #\n#  .$ #\n#######"})
    _, _, _, _, info = env.step("Right || Down")
    assert info["metrics"] == {"boxes_on_target_fraction": 0.5, "moves": 2.0, "pushes": 1.0}


# --------------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "seeds"),
    [
        ({}, 60),
        ({"dim": 8, "num_boxes": 2}, 20),
        ({"dim": 10, "num_boxes": 4}, 3),
        ({"require_answer_tag": True}, 10),
        ({"oracle_turns": "phases", "max_turns": 3}, 60),
        ({"oracle_turns": "phases", "dim": 8, "num_boxes": 2}, 20),
    ],
)
def test_oracle_solves_generated_episodes_with_the_expected_return(kwargs, seeds):
    for seed in range(seeds):
        env = SokobanEnv(**kwargs)
        _, info = env.reset(seed=seed)
        optimal, num_boxes = info["optimal_moves"], info["num_boxes"]
        plan = env.oracle()
        assert len(plan) <= env.max_turns and all(len(turn.split("||")) <= env.max_actions_per_turn for turn in plan)
        total = 0.0
        while not env.episode_over:
            _, reward, terminated, truncated, info = env.step(env.oracle()[0])
            total += reward
        assert info["success"] and terminated and not truncated
        assert info["steps"] == optimal
        # every move costs 0.1, every box ends on a target (+1 each, net), solving gives 10
        assert total == pytest.approx(-0.1 * optimal + num_boxes + 10)


def test_oracle_from_mid_episode_positions():
    rng = np.random.default_rng(0)
    solved = 0
    for seed in range(40):
        env = SokobanEnv(dim=7, num_boxes=2, max_turns=None)
        env.reset(seed=seed)
        env.step(" || ".join(ACTIONS[i] for i in rng.integers(4, size=3)))
        if env.episode_over:
            continue
        plan = env.oracle()
        if plan is None:  # the random moves made the position unsolvable
            assert solve(env.board.snapshot()).status == "no_solution"
            continue
        expected = solve(env.board.snapshot()).solution.num_moves
        for turn in plan:
            *_, info = env.step(turn)
        assert info["success"] and info["steps"] == 3 + expected
        solved += 1
    assert solved >= 30


# Box at row 3 column 2, target at row 1 column 4: the one optimal solution pushes Right twice, walks
# Down and Right to below the box and pushes Up twice (kinds: push push walk walk push push).
_TWO_PUSH_RUNS = "#######\n#   . #\n#     #\n#@$   #\n#     #\n#######"


@pytest.mark.parametrize(
    ("max_turns", "expected"),
    [
        (3, ["Right || Right", "Down || Right", "Up || Up"]),  # a turn per phase
        (None, ["Right || Right", "Down || Right", "Up || Up"]),
        # two turns: the walk joins the push run before it (the start of a push run stays a turn's start)
        (2, ["Right || Right || Down || Right", "Up || Up"]),
        (1, ["Right || Right || Down || Right || Up", "Up"]),  # 6 moves cannot fit one turn: packed, as it would be
    ],
)
def test_oracle_cuts_its_turns_where_the_solution_changes_phase(max_turns, expected):
    packed = SokobanEnv(max_turns=max_turns, max_moves=6)
    phases = SokobanEnv(max_turns=max_turns, max_moves=6, oracle_turns="phases")
    for env in (packed, phases):
        env.reset(seed=0, options={"level": _TWO_PUSH_RUNS})
    assert phases.optimal_solution.moves == ("Right", "Right", "Down", "Right", "Up", "Up")
    assert packed.oracle() == ["Right || Right || Down || Right || Up", "Up"]
    assert phases.oracle() == expected
    if max_turns == 3:  # asked again after a turn, it cuts what is left within the turns left
        phases.step("Right || Right")
        assert phases.oracle() == ["Down || Right", "Up || Up"]
        phases.step("Down")  # half the walk: one turn is left, so the walk's rest and the pushes share it
        assert phases.oracle() == ["Right || Up || Up"]


def test_oracle_turns_is_checked():
    with pytest.raises(ValueError, match="oracle_turns must be one of"):
        SokobanEnv(oracle_turns="phase")


def test_oracle_before_reset_and_after_the_end():
    env = SokobanEnv()
    assert env.oracle() is None
    env.reset(seed=0, options={"level": "#####\n#@$.#\n#####"})
    assert env.oracle() == ["Right"]
    env.step("Right")
    assert env.oracle() == []


def test_oracle_of_a_stuck_position_is_none():
    env = SokobanEnv(max_turns=None)
    env.reset(seed=0, options={"level": "#######\n# $@ .#\n#     #\n#######"})
    env.step("Left")  # pushes the box into the top-left corner: it can never move again
    assert not env.episode_over and env.oracle() is None


# --------------------------------------------------------------------------------------------------
# Any text is a normal step
# --------------------------------------------------------------------------------------------------
def _allowed_rewards(num_boxes: int, max_actions: int, format_penalty: float) -> list[float]:
    values = []
    for moves in range(max_actions + 1):
        for change in range(-num_boxes, num_boxes + 1):
            for solved in (0, 10):
                for invalid in (0, format_penalty):
                    values.append(-0.1 * moves + change + solved - invalid)
    return values


_WORDS = st.sampled_from([*ACTIONS, "up", " LEFT ", "<answer>", "</answer>", "||", "|", ",", "jump", "", "\n"])
_TEXT = st.one_of(
    st.text(),
    st.lists(_WORDS, max_size=30).map(" ".join),
    st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=8), st.integers(1, 200_000)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(_TEXT, min_size=1, max_size=6), seed=st.integers(0, 20))
def test_any_text_is_a_normal_step(texts, seed):
    env = SokobanEnv(num_boxes=2, dim=7, max_turns=None)
    env.reset(seed=seed)
    allowed = _allowed_rewards(2, env.max_actions_per_turn, env.format_penalty)
    for text in texts:
        observation, reward, terminated, truncated, info = env.step(text)
        assert isinstance(observation, str) and len(observation) < 2_000
        assert any(abs(reward - value) < 1e-9 for value in allowed), reward
        assert info["action_is_valid"] == (info["invalid_reason"] == "")
        if terminated or truncated:
            break


# --------------------------------------------------------------------------------------------------
# Levels from files and options
# --------------------------------------------------------------------------------------------------
def test_level_file_the_seed_picks_the_level():
    env = SokobanEnv(level_file="tutorial.xsb")
    names = {env.reset(seed=seed)[1]["level_name"] for seed in range(40)}
    assert len(names) >= 5
    _, info = env.reset(options={"level_index": 0})
    assert info["level_name"] == "1 First push" and info["optimal_moves"] == 1
    assert SokobanEnv(level_file=str(LEVELS_DIR / "tutorial.xsb")).reset(seed=2) == env.reset(seed=2)


def test_reset_options_are_checked():
    env = SokobanEnv()
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"levle": "x"})
    with pytest.raises(ValueError, match="needs a level_file"):
        env.reset(options={"level_index": 0})
    with pytest.raises(ValueError, match="one level"):
        env.reset(options={"level": "#####\n#@$.#\n#####\n\n#####\n#@$.#\n#####"})
    with pytest.raises(ValueError, match="level_index must lie in"):
        SokobanEnv(level_file="tutorial.xsb").reset(options={"level_index": 99})


def test_unsolvable_level_from_options_has_no_optimal_moves():
    env = SokobanEnv()
    _, info = env.reset(options={"level": "#####\n#$  #\n# @.#\n#####"})
    assert info["optimal_moves"] is None and env.oracle() is None


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dim": 2}, ValueError, "at least 3"),
        ({"dim": [6]}, TypeError, "pair"),
        ({"dim": "6"}, TypeError, "pair"),
        ({"dim": 4, "num_boxes": 2}, ValueError, "too few for 2 box"),
        ({"num_boxes": 0}, ValueError, "num_boxes must be a positive integer"),
        ({"max_steps": 0}, ValueError, "max_steps"),
        ({"max_actions_per_turn": 0}, ValueError, "max_actions_per_turn"),
        ({"max_moves": 0}, ValueError, "max_moves"),
        ({"min_pushes": 30}, ValueError, "at least 30 pushes"),
        ({"max_turns": 1, "max_actions_per_turn": 1, "num_boxes": 2, "dim": 8}, ValueError, "at most 1 moves"),
        ({"level_file": "no_such_file.xsb"}, FileNotFoundError, "tutorial.xsb"),
        ({"max_turns": 0}, ValueError, "max_turns"),
    ],
)
def test_invalid_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        SokobanEnv(**kwargs)
