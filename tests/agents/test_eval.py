"""python -m agents.eval: the summary table's arithmetic and the command line with scripted agents."""

from __future__ import annotations

import asyncio
import io
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.config import compose_eval_config, to_eval_config
from agents.eval import evaluate, main, summarize
from agents.eval_progress import EvalProgress
from agents.trajectory import Trajectory, read_trajectories

REPO_ROOT = Path(__file__).resolve().parents[2]


def trajectory(success: bool, ret: float, turns: int, invalid: int, sampled: int, termination="terminated"):
    return Trajectory(
        env_id="x",
        seed=0,
        group_id="",
        prompt_ids=[0] * 10,
        response_ids=[1] * sampled,
        response_mask=[1] * sampled,
        rollout_logprobs=[-1.0] * sampled,
        episode_return=ret,
        success=success,
        num_turns=turns,
        num_invalid_actions=invalid,
        termination=termination,
        error="boom" if termination == "error" else None,
    )


def test_summary_numbers_by_hand():
    s = summarize(
        [
            trajectory(True, 1.0, 2, 0, 4),
            trajectory(False, -0.5, 3, 1, 6, "truncated"),
            trajectory(False, 0.5, 1, 1, 2, "error"),
            trajectory(True, 1.0, 2, 0, 4, "max_tokens"),
        ]
    )
    assert s.episodes == 4
    # successes 1,0,0,1: mean 0.5; unbiased variance = 4 * 0.25 / 3 = 1/3; stderr = sqrt(1/3 / 4)
    assert s.success_rate == 0.5 and math.isclose(s.success_stderr, math.sqrt(1 / 12))
    # returns 1, -0.5, 0.5, 1: mean 0.5; squared deviations .25 + 1 + 0 + .25 = 1.5; var .5; stderr sqrt(.5/4)
    assert s.mean_return == 0.5 and math.isclose(s.return_stderr, math.sqrt(0.125))
    assert s.mean_turns == 2.0  # 8 turns / 4
    assert s.invalid_action_rate == 0.25  # 2 invalid / 8 turns
    assert s.mean_sampled_tokens == 4.0 and s.mean_total_tokens == 14.0
    assert (s.truncated, s.max_tokens, s.errors) == (1, 1, 1)


def test_empty_summary_is_zero():
    s = summarize([])
    assert s.episodes == 0 and s.success_rate == 0.0 and s.invalid_action_rate == 0.0


def test_oracle_evaluation_writes_every_trajectory(tmp_path, capsys):
    out = tmp_path / "eval.jsonl"
    assert main(["env=sokoban", "agent=oracle", "episodes=6", "seed=10", f"out={out}", "progress=false"]) == 0
    printed = capsys.readouterr().out
    assert "success rate" in printed and "100.0%" in printed and str(out) in printed
    trajectories = list(read_trajectories(out))
    assert sorted(t.seed for t in trajectories) == list(range(10, 16))
    assert all(t.success and t.termination == "terminated" and not t.trainable for t in trajectories)
    assert main(["--summarize", str(out)]) == 0
    assert "100.0%" in capsys.readouterr().out


def test_the_env_is_told_the_evaluations_turn_limit(tmp_path):
    # configs/env/sokoban.yaml says 5 turns of 5 moves; max_turns=2 plays 2: the board must count 2 x 5 moves.
    out = tmp_path / "eval.jsonl"
    assert main(["env=sokoban", "agent=oracle", "episodes=1", "max_turns=2", f"out={out}", "progress=false"]) == 0
    (trajectory,) = read_trajectories(out)
    assert "Moves left: 10" in trajectory.messages[1]["content"]


def test_random_agent_on_frozenlake_with_env_options(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    args = ["env=frozenlake", "agent=random", "episodes=5", "env.size=5", f"out={out}", "progress=false"]
    assert main(args) == 0
    assert len(list(read_trajectories(out))) == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["env=sokoban", "agent=orcale"], "unknown agent 'orcale' (did you mean 'oracle'?)"),
        (["env=sokoban", "episodes=0"], "episodes must be at least 1"),
        (["env=sokoban", "temperature=-1"], "temperature must be >= 0"),
        (["env=sokoban", "agent=oracle", "env.dimm=3"], "did you mean 'dim'"),
        (["env=sokoban", "agent=openai"], "agent=openai needs base_url"),
        (["agent=oracle"], "choose an environment with env=<id>"),
        (["env=sokoban", "--bogus"], "unknown flag"),
        (["env=sokoban", "env.dim=3"], "too few for 1 box(es): they need at least 4; use a larger dim"),
        (["env=sokoban", "model=/nonexistent"], "model=/nonexistent is not a directory"),
        (["env=sokoban", f"model={Path(__file__).parent}"], "holds no config.json"),
    ],
)
def test_mistakes_exit_2_with_one_line_before_any_model_loads(args, message, capsys):
    started = time.perf_counter()
    assert main([*args, "progress=false"] if "--bogus" not in args else args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("turngym: error: ")
    assert time.perf_counter() - started < 5  # no model was loaded


def test_a_missing_model_is_one_line_through_the_real_entry_point(tmp_path):
    """``python -m agents.eval model=/nonexistent`` prints one line, not transformers' traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "agents.eval", "env=sokoban", "model=/nonexistent", "episodes=1"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "turngym: error: model=/nonexistent is not a directory (nor smollm2, tiny or an org/name hub id): "
        "choose model=smollm2, model=tiny or model=<a Hugging Face model directory>"
    ]


def test_off_a_terminal_progress_is_printed_as_plain_lines(tmp_path):
    """Piped output gets a start line and a line per tenth of the episodes (here every episode of 6)."""
    out = tmp_path / "eval.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "agents.eval", "env=sokoban", "agent=oracle", "episodes=6", f"out={out}"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "eval: 6 episodes of sokoban, agent=oracle, 16 at a time"
    assert [line.split("  elapsed")[0] for line in lines[1:]] == [f"eval {n}/6  success {n}/{n}" for n in range(1, 7)]


def test_progress_lines_every_tenth_and_a_heartbeat_when_nothing_finishes():
    clock = [0.0]
    stream = io.StringIO()
    with EvalProgress(40, "40 episodes", stream=stream, interval_s=30, clock=lambda: clock[0]) as progress:
        for _ in range(5):  # every 4 episodes: one line at the 4th
            progress.advance(success=True)
        assert progress.wait_s == 30
        clock[0] = 29.0
        progress.heartbeat()  # not yet 30 s since the last line
        clock[0] = 30.0
        progress.heartbeat()
        clock[0] = 100.0
        progress.advance(success=False)  # the 6th: 70 s since the last line, so a line
    assert stream.getvalue().splitlines() == [
        "eval: 40 episodes",
        "eval 4/40  success 4/4  elapsed 0s",
        "eval 5/40  success 5/5  elapsed 30s",
        "eval 6/40  success 5/6  elapsed 1m40s",
    ]


def test_help_and_cfg(capsys):
    assert main(["--help"]) == 0
    assert "agent=hf" in capsys.readouterr().out
    assert main(["--cfg", "env=sokoban", "agent=random"]) == 0
    assert "agent: random" in capsys.readouterr().out


def test_a_sampling_seed_replays_the_same_episodes(tmp_path):
    def play(name: str, *extra: str) -> list[list[int]]:
        out = tmp_path / f"{name}.jsonl"
        args = ["env=sokoban", "agent=hf", "model=tiny", "episodes=4", "max_new_tokens=6", "max_turns=2"]
        assert main([*args, "concurrency=1", "temperature=1.0", f"out={out}", "progress=false", *extra]) == 0
        return [t.response_ids for t in read_trajectories(out)]

    first, again = play("a", "sampling_seed=3"), play("b", "sampling_seed=3")
    assert first == again  # the same tokens at temperature 1 (one episode at a time: batching changes the logits)
    assert play("c", "sampling_seed=4") != first
    assert main(["env=sokoban", "sampling_seed=-1", "progress=false"]) == 2


def test_an_environment_limit_below_the_evaluations_is_said_once(tmp_path):
    def evaluation_output(max_turns: int) -> str:
        args = ["env=sokoban", "agent=oracle", "episodes=1", f"max_turns={max_turns}", f"out={tmp_path / 'e.jsonl'}"]
        stream = io.StringIO()
        asyncio.run(evaluate(to_eval_config(compose_eval_config([*args, "progress=false"])), stream=stream))
        return stream.getvalue()

    # configs/env/sokoban.yaml says 5 turns: max_turns=8 still plays 5, and the evaluation says why
    assert evaluation_output(8).splitlines() == [
        "eval: episodes end after at most 5 turn(s): env.max_turns=5 is below max_turns=8 "
        "(the smaller limit wins; raise env.max_turns to play more)"
    ]
    assert evaluation_output(2) == ""  # the loop's own limit is the smaller: nothing to say
