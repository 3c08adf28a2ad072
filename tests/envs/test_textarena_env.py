"""The TextArena adapter: offline games keep the turngym contract, play to the end, and map rewards and invalid moves.

Needs ``pip install textarena==0.7.4``: without it these tests fail (not skip) with that command.
"""

from __future__ import annotations

import inspect
import json
import random
import warnings
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import envs
from envs.adapters.textarena_games import TEXTARENA_INSTALL, TEXTARENA_VERSION, GameRandom

try:
    import textarena
except ImportError as exc:  # fail loudly in CI: the adapter is part of the suite
    raise ImportError(f"tests/envs/test_textarena_env.py needs TextArena: {TEXTARENA_INSTALL}") from exc

from envs.adapters.textarena import TextArenaEnv, UnavailableGameError, UnavailableOfflineError

ROOT = Path(__file__).resolve().parents[2]
OFFLINE = json.loads((ROOT / "envs" / "adapters" / "data" / "textarena_offline.json").read_text())
# Single- and two-player games from the generated offline list (the test below checks they are in it).
SAMPLE = ["GuessTheNumber-v0", "TowerOfHanoi-v0", "Minesweeper-v0", "TicTacToe-v0", "ConnectFour-v0", "KuhnPoker-v0"]


def test_pinned_version_is_installed():
    assert textarena.__version__ == TEXTARENA_VERSION


def test_offline_list_is_generated_and_holds_the_sample():
    counts = OFFLINE["counts"]
    assert OFFLINE["textarena_version"] == TEXTARENA_VERSION
    assert counts["working"] == len(OFFLINE["working"]) and counts["configurations"] == 238
    assert counts["working"] + sum(counts["unavailable_by_kind"].values()) == counts["configurations"]
    assert set(SAMPLE) <= set(OFFLINE["working"])
    assert {OFFLINE["working"][g]["players"] for g in SAMPLE} == {1, 2}
    assert OFFLINE["unavailable"]["Wordle-v0"]["kind"] == "nltk_data"


@pytest.mark.parametrize("game", SAMPLE)
def test_sample_games_pass_check_env_and_play_to_the_end(game):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(envs.make("textarena", game=game))
    env = envs.make("textarena", game=game, max_turns=None)
    observation, info = env.reset(seed=4)
    assert observation.startswith("[GAME]") and info["game"] == game
    reward = 0.0
    while not env.episode_over:
        actions = env.valid_actions()
        action = actions[env.turn % len(actions)] if actions else "[0]"
        observation, reward, terminated, truncated, info = env.step(action)
        assert env.turn < 500
    assert terminated and not truncated and "[GAME] Game over." in observation
    textarena_reward = info["textarena_rewards"][str(env.player_id)]
    penalty = 0.0 if info["action_is_valid"] else env.format_penalty
    assert reward == pytest.approx(textarena_reward - penalty)


def test_guess_the_number_rewards_invalid_moves_and_oracle():
    env = envs.make("textarena", game="GuessTheNumber-v0", format_penalty=0.25)
    env.reset(seed=0)
    target = int(env.oracle()[0].strip("[]"))
    wrong = 1 if target != 1 else 2
    # "hello" becomes "[hello]": no number in brackets, rejected; TextArena allows one retry.
    observation, reward, terminated, truncated, info = env.step("hello")
    assert (reward, terminated, info["action_is_valid"]) == (-0.25, False, False)
    assert "invalid move" in observation
    observation, reward, terminated, truncated, info = env.step(str(wrong))  # "[1]": a valid, wrong guess
    assert (reward, terminated, info["action_is_valid"]) == (0.0, False, True)
    assert ("higher" if target > wrong else "lower") in observation
    assert f"[{wrong}]" not in env.valid_actions() and len(env.valid_actions()) == 19  # 20 numbers, one guessed
    observation, reward, terminated, truncated, info = env.step(env.oracle()[0])
    assert (reward, terminated, info["success"]) == (1.0, True, True)  # TextArena: 1 when solved
    assert info["textarena_rewards"] == {"0": 1.0} and env.oracle() == []


def test_two_invalid_moves_forfeit_with_textarena_minus_one():
    env = envs.make("textarena", game="TicTacToe-v0", format_penalty=0.1)
    env.reset(seed=0)
    env.step("[9]")  # cells are 0-8: rejected, one retry left
    observation, reward, terminated, truncated, info = env.step("no move")
    # TextArena: the second invalid move in a row loses (-1, the opponent +1); turngym adds the penalty.
    assert terminated and reward == pytest.approx(-1.1) and not info["success"]
    assert info["textarena_rewards"] == {"0": -1.0, "1": 1.0}


def test_two_player_win_against_a_scripted_opponent():
    # The opponent always plays the lowest free cell; we take 4, 8 and then 0 for the diagonal...
    # after 4 (us) the opponent takes 0, after 8 it takes 1, after 2 it takes 3, and 6 completes 2-4-6.
    def lowest_free(history: str) -> str:
        board = history.rsplit("Available Moves:", 1)[1]
        return min(board.split(","), key=lambda m: int(m.strip(" '[]\n")))

    env = envs.make("textarena", game="TicTacToe-v0", opponent=lowest_free)
    observation, info = env.reset(seed=0)
    assert info["opponent_moves"] == []  # player 0 starts
    rewards = [env.step(move)[1] for move in ("[4]", "[8]", "[2]")]
    assert rewards == [0.0, 0.0, 0.0]
    _, reward, terminated, _, info = env.step("[6]")
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    assert info["textarena_rewards"] == {"0": 1.0, "1": -1.0}


def test_player_one_waits_for_the_opponent_and_opponents_are_validated():
    env = envs.make("textarena", game="TicTacToe-v0", player_id=1, opponent="first")
    observation, info = env.reset(seed=0)
    assert len(info["opponent_moves"]) == 1 and "placed their symbol" in observation
    with pytest.raises(ValueError, match="opponent must be one of"):
        TextArenaEnv(game="TicTacToe-v0", opponent="minimax")
    with pytest.raises(ValueError, match="player_id must be"):
        TextArenaEnv(game="GuessTheNumber-v0", player_id=1)


def test_unavailable_games_give_clear_errors():
    with pytest.raises(UnavailableOfflineError, match=r"'Wordle-v0' is unavailable \(nltk_data\).*nltk.downloader"):
        TextArenaEnv(game="Wordle-v0")
    with pytest.raises(UnavailableOfflineError, match=r"\(api_key\)"):
        TextArenaEnv(game="TwentyQuestions-v0")
    with pytest.raises(UnavailableGameError, match=r"\(players\).*1- and 2-player"):
        TextArenaEnv(game="SecretMafia-v0")
    with pytest.raises(ValueError, match="Did you mean 'TicTacToe-v0'"):
        TextArenaEnv(game="TicTacTo-v0")


def test_same_seed_same_game_and_the_global_random_is_untouched():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    first = envs.make("textarena", game="Minesweeper-v0")
    second = envs.make("textarena", game="Minesweeper-v0")
    assert first.reset(seed=7)[0] == second.reset(seed=7)[0]
    assert first.step("[3 3]")[0] == second.step("[3 3]")[0]
    assert random.random() == expected  # the games drew from their own random state


def test_game_random_keeps_its_own_stream():
    game_random = GameRandom(5)
    with game_random.active():
        first = random.random()
    random.seed(0)
    with game_random.active():
        second = random.random()
    reference = random.Random(5)
    assert (first, second) == (reference.random(), reference.random())


def test_huge_actions_are_cut_in_the_observation():
    env = envs.make("textarena", game="TicTacToe-v0", max_message_chars=100)
    env.reset(seed=0)
    observation, reward, *_ = env.step("[" + "x" * 100_000 + "]")
    assert len(observation) < 2_000 and reward == -0.1


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load((ROOT / "configs" / "env" / "textarena.yaml").read_text())
    assert config.pop("id") == "textarena"
    assert config == {name: p.default for name, p in inspect.signature(TextArenaEnv).parameters.items()}
