"""``python -m agents.play`` driven through pipes, as a person at a terminal would drive it.

The toy line environment (tests/agents/toy_line_env.py) is registered inside the subprocess, so it
also exercises the fallback to ``env/registered.yaml``; the built-in environments run through the
real ``python -m agents.play``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from toy_line_env import ToyLineEnv

import envs
from agents.record import EpisodeRecord, read_jsonl

HERE = Path(__file__).parent
WITH_TOY_ENV = (
    "import sys, toy_line_env; toy_line_env.register(); from agents.play import main; sys.exit(main(sys.argv[1:]))"
)


def play(*args: str, stdin: str = "", cwd: Path, toy: bool = True) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WITH_TOY_ENV] if toy else [sys.executable, "-m", "agents.play"]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    environ.pop("NO_COLOR", None)
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=environ, timeout=120
    )


def lines(*items: str) -> str:
    return "".join(f"{item}\n" for item in items)


def toy_solution(seed: int, length: int = 6) -> list[str]:
    env = ToyLineEnv(length=length)
    env.reset(seed=seed)
    return env.oracle()


def saved(path: Path) -> list[EpisodeRecord]:
    return read_jsonl(path) if path.exists() else []


def assert_clean_exit(result: subprocess.CompletedProcess[str], code: int = 0) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_person_solves_a_level_and_the_episode_is_saved(tmp_path):
    solution = toy_solution(seed=2)
    result = play("env=toy-line", "seed=2", "out=eps.jsonl", stdin=lines(*solution, ":q"), cwd=tmp_path)
    assert_clean_exit(result)
    assert "\x1b[" not in result.stdout  # a pipe gets plain text
    assert "Episode over (terminated): solved" in result.stdout
    [record] = saved(tmp_path / "eps.jsonl")
    assert (record.env_id, record.seed, record.agent) == ("toy-line", 2, "human")
    assert record.actions == solution
    assert record.rewards == [0.0] * (len(solution) - 1) + [1.0]
    assert record.success and record.termination_reason == "terminated" and record.num_turns == len(solution)
    assert record.messages[0]["role"] == "system" and len(record.messages) == 2 + 2 * len(solution)


def test_undo_then_continue_equals_playing_without_the_mistake(tmp_path):
    solution = toy_solution(seed=4)
    clean = play("env=toy-line", "seed=4", "out=clean.jsonl", stdin=lines(*solution, ":q"), cwd=tmp_path)
    mistaken = lines(solution[0], "left", ":u", "jump", ":u", *solution[1:], ":q")
    undone = play("env=toy-line", "seed=4", "out=undone.jsonl", stdin=mistaken, cwd=tmp_path)
    assert_clean_exit(clean)
    assert_clean_exit(undone)
    assert "undid 'left'" in undone.stdout and "undid 'jump'" in undone.stdout
    assert saved(tmp_path / "undone.jsonl") == saved(tmp_path / "clean.jsonl")


def test_restart_keeps_the_seed_and_saves_the_abandoned_attempt(tmp_path):
    solution = toy_solution(seed=1)
    result = play("env=toy-line", "seed=1", stdin=lines("left", ":r", *solution, ":q"), cwd=tmp_path)
    assert_clean_exit(result)
    default_path = tmp_path / "runs" / "play" / "toy-line.jsonl"
    assert f"saved to {Path('runs/play/toy-line.jsonl')}" in result.stdout.replace("episodes saved", "saved")
    abandoned, solved = saved(default_path)
    assert (abandoned.actions, abandoned.termination_reason, abandoned.seed) == (["left"], "abandoned", 1)
    assert (solved.actions, solved.success, solved.seed) == (solution, True, 1)


def test_next_episode_uses_the_next_seed_and_r_replays_the_same(tmp_path):
    first, second = toy_solution(seed=7), toy_solution(seed=8)
    stdin = lines(*first, "", *second, ":r", *second, ":q")
    result = play("env=toy-line", "seed=7", "out=eps.jsonl", stdin=stdin, cwd=tmp_path)
    assert_clean_exit(result)
    records = saved(tmp_path / "eps.jsonl")
    assert [(r.seed, r.success) for r in records] == [(7, True), (8, True), (8, True)]
    assert "3 episode(s) finished, 3 solved" in result.stdout


def test_quit_before_any_action_saves_nothing(tmp_path):
    result = play("env=toy-line", "out=eps.jsonl", stdin=lines(":q"), cwd=tmp_path)
    assert_clean_exit(result)
    assert not (tmp_path / "eps.jsonl").exists()
    assert "0 episode(s) finished" in result.stdout


def test_end_of_input_mid_episode_saves_an_unfinished_episode(tmp_path):
    result = play("env=toy-line", "seed=0", "out=eps.jsonl", stdin="jump\nleft", cwd=tmp_path)
    assert_clean_exit(result)
    [record] = saved(tmp_path / "eps.jsonl")
    assert record.actions == ["jump", "left"] and not record.finished
    assert record.termination_reason == "abandoned" and not record.terminated and not record.truncated


def test_invalid_action_shows_the_error_and_the_penalty(tmp_path):
    result = play("env=toy-line", "seed=0", "out=eps.jsonl", stdin=lines("jump", ":q"), cwd=tmp_path)
    assert_clean_exit(result)
    assert "Invalid action 'jump'" in result.stdout
    assert "reward -0.10" in result.stdout and "action INVALID" in result.stdout
    [record] = saved(tmp_path / "eps.jsonl")
    assert record.action_is_valid == [False] and record.rewards == [-0.1]


def test_commands_help_unknown_and_literal_colon(tmp_path):
    result = play("env=toy-line", "seed=0", "out=eps.jsonl", stdin=lines(":h", ":zz", "::x", ":q"), cwd=tmp_path)
    assert_clean_exit(result)
    assert ":u        undo the last action" in result.stdout
    assert "unknown command ':zz'" in result.stdout
    assert saved(tmp_path / "eps.jsonl")[0].actions == [":x"]


def test_color_true_decorates_the_board(tmp_path):
    result = play("env=toy-line", "seed=0", "color=true", "out=eps.jsonl", stdin=lines(":q"), cwd=tmp_path)
    assert_clean_exit(result)
    assert "\x1b[33mP\x1b[0m" in result.stdout


def test_oracle_agent_plays_episodes_by_itself(tmp_path):
    result = play("env=toy-line", "agent=oracle", "episodes=3", "delay=0", "seed=5", "out=eps.jsonl", cwd=tmp_path)
    assert_clean_exit(result)
    records = saved(tmp_path / "eps.jsonl")
    assert [(r.seed, r.agent, r.success) for r in records] == [
        (5, "oracle", True),
        (6, "oracle", True),
        (7, "oracle", True),
    ]
    assert all(r.actions == toy_solution(r.seed) for r in records)


def test_random_agent_plays_to_the_end(tmp_path):
    result = play("env=toy-line-no-oracle", "agent=random", "delay=0", "seed=0", "out=eps.jsonl", cwd=tmp_path)
    assert_clean_exit(result)
    [record] = saved(tmp_path / "eps.jsonl")
    assert record.finished and record.agent == "random" and 1 <= record.num_turns <= 20


def test_oracle_agent_on_an_env_without_oracle_is_a_usage_error(tmp_path):
    result = play("env=toy-line-no-oracle", "agent=oracle", cwd=tmp_path)
    assert_clean_exit(result, code=2)
    assert "has no oracle; use agent=random" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["env=sokobn"], "Did you mean 'sokoban'?"),
        (["env=toy-line", "env.lenght=3"], "'lenght' (did you mean 'length'?)"),
        (["env=toy-line", "env.length=1"], "length must be >= 2"),
        (["env=toy-line", "agent=robot"], "unknown agent 'robot'"),
        (["env=toy-line", "seed=abc"], "could not be converted to Integer"),
        (["env=toy-line", "--verbose"], "unknown flag '--verbose'"),
        (["env=sokoban", "env.dim=3"], "too few for 1 box(es): they need at least 4; use a larger dim"),
        (["env=toy-line", "agent=llm", "model=/nonexistent"], "model=/nonexistent is not a directory"),
    ],
)
def test_bad_input_is_a_one_line_error_with_exit_code_2(tmp_path, args, message):
    result = play(*args, stdin=lines("right"), cwd=tmp_path)
    assert_clean_exit(result, code=2)
    # One error line; the other lines, if any, are one-line warnings (the test session's broken plugin).
    errors = [line for line in result.stderr.splitlines() if not line.startswith("turngym: warning:")]
    assert errors == [errors[0]] and errors[0].startswith("turngym: error: ") and message in errors[0]
    assert result.stdout == ""  # nothing interactive happened


def test_help_is_fast_and_imports_nothing_heavy(tmp_path):
    code = (
        "import sys; from agents.play import main; assert main(['--help']) == 0; "
        "heavy = {'hydra', 'torch', 'transformers', 'gymnasium'} & set(sys.modules); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m agents.play env=<id>")
    for key in ("agent=human", "episodes=null", "delay=0.5", "out=null", "color=null", ":u", ":r", ":q", ":h"):
        assert key in result.stdout


def test_cfg_prints_the_composed_config(tmp_path):
    result = play("--cfg", "env=toy-line", "env.length=9", "seed=3", cwd=tmp_path)
    assert_clean_exit(result)
    assert "id: toy-line" in result.stdout and "length: 9" in result.stdout and "seed: 3" in result.stdout


def test_a_plugin_env_without_a_config_file_plays(tmp_path):
    # "countdown" comes from the example plugin package the test session installs (tests/conftest.py).
    result = play(
        "env=countdown", "env.start=4", "agent=oracle", "delay=0", "seed=0", "out=eps.jsonl", cwd=tmp_path, toy=False
    )
    assert_clean_exit(result)
    [record] = saved(tmp_path / "eps.jsonl")
    assert record.env_id == "countdown" and record.env_options == {"start": 4} and record.success
    assert record.actions[-1] == "0" and record.rewards[-1] == 1.0


def solve_in_process(env_id: str, seed: int, **options) -> tuple[list[str], list[float]]:
    """The oracle's actions for ``seed`` and the rewards they earn, computed in this process."""
    env = envs.make(env_id, **options)
    env.reset(seed=seed)
    actions, rewards = [], []
    while not env.episode_over:
        actions.append(env.oracle()[0])
        rewards.append(env.step(actions[-1])[1])
    return actions, rewards


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_person_solves_a_builtin_env_through_the_real_entry_point(tmp_path, name):
    solution, rewards = solve_in_process(name, seed=3)
    stdin = lines(*solution, ":q")
    result = play(f"env={name}", "seed=3", "out=eps.jsonl", stdin=stdin, cwd=tmp_path, toy=False)
    assert_clean_exit(result)
    [record] = saved(tmp_path / "eps.jsonl")
    assert (record.env_id, record.actions, record.rewards) == (name, solution, rewards)
    assert record.success and record.termination_reason == "terminated"


def test_sokoban_undo_then_continue_equals_playing_without_the_mistake(tmp_path):
    # One move per turn, as a person types them; the mistakes come mid-episode.
    solution, _ = solve_in_process("sokoban", seed=5, max_turns=50)
    moves = [move for turn in solution for move in turn.split(" || ")]
    assert len(moves) >= 3
    args = ("env=sokoban", "seed=5", "env.max_turns=50")
    clean = play(*args, "out=clean.jsonl", stdin=lines(*moves, ":q"), cwd=tmp_path, toy=False)
    mistaken = lines(moves[0], "Up || Up", ":u", "dance", ":u", *moves[1:], ":q")
    undone = play(*args, "out=undone.jsonl", stdin=mistaken, cwd=tmp_path, toy=False)
    assert_clean_exit(clean)
    assert_clean_exit(undone)
    assert "undid 'Up || Up'" in undone.stdout and "undid 'dance'" in undone.stdout
    assert saved(tmp_path / "undone.jsonl") == saved(tmp_path / "clean.jsonl")
    [record] = saved(tmp_path / "clean.jsonl")
    assert record.success and record.actions == moves


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_oracle_agent_solves_builtin_envs(tmp_path, name):
    args = (f"env={name}", "agent=oracle", "episodes=3", "delay=0", "seed=10", "out=eps.jsonl")
    result = play(*args, cwd=tmp_path, toy=False)
    assert_clean_exit(result)
    records = saved(tmp_path / "eps.jsonl")
    assert [(r.seed, r.agent, r.success) for r in records] == [
        (10, "oracle", True),
        (11, "oracle", True),
        (12, "oracle", True),
    ]
    assert "3 episode(s) finished, 3 solved" in result.stdout


def test_sokoban_options_reach_the_env_and_unknown_ones_fail_early(tmp_path):
    options = {"dim": 7, "num_boxes": 2}
    # max_moves=3 is what configs/env/sokoban.yaml sets: the same level only if the file's options reach the env
    solution, rewards = solve_in_process("sokoban", seed=1, max_moves=3, **options)
    args = ("env=sokoban", "env.dim=7", "env.num_boxes=2", "seed=1", "out=eps.jsonl")
    result = play(*args, stdin=lines(*solution, ":q"), cwd=tmp_path, toy=False)
    assert_clean_exit(result)
    [record] = saved(tmp_path / "eps.jsonl")
    assert record.env_options["dim"] == 7 and record.env_options["num_boxes"] == 2
    assert record.rewards == rewards and record.success
    typo = play("env=sokoban", "env.dimm=8", stdin=lines("Up"), cwd=tmp_path, toy=False)
    assert_clean_exit(typo, code=2)
    assert "'dimm' (did you mean 'dim'?)" in typo.stderr and typo.stdout == ""
