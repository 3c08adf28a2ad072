"""``benchmarks/learning_draws.py`` resumes only a folder made with the same settings, and runs draws side by side."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

import pytest

from agents.trajectory import Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import learning_draws
from learning_draws import against, interval, same_settings


def _args(**changes) -> argparse.Namespace:
    values = dict(
        algo="ppo", overrides=["algo.shaping.coef=0.5"], env_id="sokoban", env=[], eval_episodes=256,
        eval_seed=10_000, temperature=0.7, sampling_seed=0, max_turns=3, max_total_tokens=1024,
    )  # fmt: skip
    values.update(changes)
    return argparse.Namespace(**values)


def test_a_new_folder_records_its_settings_and_resumes_only_with_the_same(tmp_path: Path) -> None:
    policy = tmp_path / "policy"
    assert same_settings(tmp_path, _args(), policy)
    recorded = json.loads((tmp_path / "settings.json").read_text())
    assert recorded["overrides"] == ["algo.shaping.coef=0.5"] and recorded["warmup_policy"] == str(policy.resolve())
    assert same_settings(tmp_path, _args(), policy)
    with pytest.raises(SystemExit, match=r"other settings \(overrides, sampling_seed\)"):
        same_settings(tmp_path, _args(overrides=[], sampling_seed=None), policy)


def test_limits_are_recorded_only_when_not_the_defaults(tmp_path: Path) -> None:
    policy = tmp_path / "policy"
    (tmp_path / "a").mkdir()
    assert same_settings(tmp_path / "a", _args(), policy)
    assert "limits" not in json.loads((tmp_path / "a" / "settings.json").read_text())  # older folders still resume
    (tmp_path / "b").mkdir()
    assert same_settings(tmp_path / "b", _args(max_turns=8, max_total_tokens=2048), policy)
    recorded = json.loads((tmp_path / "b" / "settings.json").read_text())
    assert recorded["limits"] == {"max_turns": 8, "max_total_tokens": 2048}
    with pytest.raises(SystemExit, match=r"other settings \(limits\)"):
        same_settings(tmp_path / "b", _args(), policy)


def test_draws_without_recorded_settings_are_not_read_back(tmp_path: Path) -> None:
    (tmp_path / "draw_0").mkdir()
    assert not same_settings(tmp_path, _args(), tmp_path / "policy")


def test_intervals_by_hand() -> None:
    # values 0, 1, 1, 0: mean 0.5, stdev sqrt(1/3), s.e. sqrt(1/3)/2 = 0.288675
    assert interval([0.0, 1.0, 1.0, 0.0])["ci95"] == pytest.approx(1.96 * 0.288675, rel=1e-5)
    assert interval([0.0, 1.0, 1.0, 0.0], t=True)["ci95"] == pytest.approx(3.182 * 0.288675, rel=1e-5)
    assert interval([0.3])["n"] == 1


def _draws(folder: Path, args: argparse.Namespace, held_out: dict[int, list[bool]]) -> Path:
    """A folder of draws: its settings and, per training seed, held-out episodes with these successes."""
    folder.mkdir()
    same_settings(folder, args, folder.parent / "policy")
    for seed, successes in held_out.items():
        run_dir = folder / f"draw_{seed}"
        run_dir.mkdir()
        rows = [{**_episode(10_000 + k), "success": ok} for k, ok in enumerate(successes)]
        (run_dir / "held_out.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def _episode(seed: int) -> dict:
    return Trajectory(
        env_id="sokoban", seed=seed, group_id=str(seed), prompt_ids=[1], response_ids=[2], response_mask=[1]
    ).to_dict()


def test_draws_of_two_methods_pair_per_training_seed_and_held_out_seed(tmp_path: Path) -> None:
    ours = _draws(tmp_path / "ours", _args(), {0: [True, True, False, True], 1000: [True, False, False, False]})
    theirs = _draws(tmp_path / "theirs", _args(overrides=[]), {0: [False, True, False, False], 7: [True] * 4})
    report = against(ours, theirs)
    # only seed 0 is in both: differences +1, 0, 0, +1 -> mean 0.5, stdev sqrt(1/3), 2 gained, none lost
    assert [d["seed"] for d in report["draws"]] == [0]
    assert report["draws"][0]["difference"]["mean"] == 0.5
    assert report["draws"][0]["difference"]["ci95"] == pytest.approx(1.96 * 0.288675, rel=1e-5)
    assert (report["draws"][0]["gained"], report["draws"][0]["lost"]) == (2, 0)
    assert report["overall"]["n"] == 1


def test_draws_from_another_warm_up_or_evaluation_are_not_paired(tmp_path: Path) -> None:
    ours = _draws(tmp_path / "ours", _args(), {0: [True]})
    theirs = _draws(tmp_path / "theirs", _args(sampling_seed=None), {0: [False]})
    with pytest.raises(SystemExit, match=r"differs from .* in sampling_seed: its draws cannot be paired"):
        against(ours, theirs)


def test_draws_run_side_by_side_keep_their_order_and_each_writes_its_result(tmp_path: Path, monkeypatch) -> None:
    running, most = set(), [0]
    lock, both_started = threading.Lock(), threading.Barrier(2, timeout=10)

    commands = []

    def fake_run(command: list[str]):
        commands.append(command)
        seed = int(next(a for a in command if a.startswith("trainer.seed=")).split("=")[1])
        with lock:
            running.add(seed)
            most[0] = max(most[0], len(running))
        both_started.wait()  # a second draw that never starts beside the first times this out
        run_dir = Path(next(a for a in command if a.startswith("trainer.run_dir=")).split("=", 1)[1])
        (run_dir / "checkpoints" / "step_000002" / "policy").mkdir(parents=True)
        with lock:
            running.discard(seed)
        return 10.0 + seed, type("Memory", (), {"peak_pss": 2**30})()

    successes = {"warmup": [True, False, False, False], "draw_0": [True, True, False, False],
                 "draw_1000": [True, True, True, True]}  # fmt: skip

    def fake_evaluate(policy: Path, args, out: Path, threads=None) -> dict[int, float]:
        key = "warmup" if out.name == "warmup_eval.jsonl" else out.parent.name
        rows = [{**_episode(10_000 + k), "success": ok} for k, ok in enumerate(successes[key])]
        out.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return {10_000 + k: float(ok) for k, ok in enumerate(successes[key])}

    monkeypatch.setattr(learning_draws, "run_timed", fake_run)
    monkeypatch.setattr(learning_draws, "evaluate", fake_evaluate)
    out = tmp_path / "draws"
    argv = [
        "learning_draws.py",
        "--seeds",
        "1000",
        "0",
        "--jobs",
        "2",
        "--warmup",
        str(tmp_path / "w"),
        "--out",
        str(out),
        "--eval-episodes",
        "4",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    learning_draws.main()
    report = json.loads((out / "learning_draws.json").read_text())
    assert most[0] == 2 and report["jobs"] == 2
    assert all("model.lora_layers=15" in command for command in commands)  # the embedded model's RL settings
    assert [d["seed"] for d in report["draws"]] == [1000, 0]  # the order asked for, whichever finished first
    # seed 1000: 4 of 4 against the warm-up's 1 of 4 -> +0.75; seed 0: 2 of 4 -> +0.25
    assert [d["rl_minus_warmup"]["mean"] for d in report["draws"]] == [0.75, 0.25]
    assert [d["rl_wall_s"] for d in report["draws"]] == [1010.0, 10.0]
    assert json.loads((out / "draw_0" / "draw.json").read_text())["success"]["mean"] == 0.5
    # run again: both draws are read back, nothing is trained
    monkeypatch.setattr(learning_draws, "run_timed", lambda command: pytest.fail("a finished draw ran again"))
    learning_draws.main()
    assert json.loads((out / "learning_draws.json").read_text())["draws"] == report["draws"]


def test_jobs_below_one_are_refused(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["learning_draws.py", "--jobs", "0"])
    with pytest.raises(SystemExit):
        learning_draws.main()
    assert "--jobs must be at least 1, got 0" in capsys.readouterr().err


def test_every_kept_checkpoint_is_judged_and_a_read_back_draw_gets_its_curve(tmp_path: Path, monkeypatch) -> None:
    def fake_run(command: list[str]):
        run_dir = Path(next(a for a in command if a.startswith("trainer.run_dir=")).split("=", 1)[1])
        for step in (8, 16):
            (run_dir / "checkpoints" / f"step_{step:06d}" / "policy").mkdir(parents=True)
        return 1.0, type("Memory", (), {"peak_pss": 2**30})()

    # per evaluated file: the successes on held-out seeds 10,000-10,003
    successes = {"warmup_eval.jsonl": [True, False, False, False], "held_out_step_8.jsonl": [True, True, False, False],
                 "held_out.jsonl": [True, True, True, False]}  # fmt: skip
    evaluated = []

    def fake_evaluate(policy: Path, args, out: Path, threads=None) -> dict[int, float]:
        evaluated.append((policy.parent.name if policy.name == "policy" else policy.name, out.name))
        values = successes[out.name] if out.parent.name in ("draws", "draw_0") else [False] * 4
        rows = [{**_episode(10_000 + k), "success": ok} for k, ok in enumerate(values)]
        out.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return {10_000 + k: float(ok) for k, ok in enumerate(values)}

    monkeypatch.setattr(learning_draws, "run_timed", fake_run)
    monkeypatch.setattr(learning_draws, "evaluate", fake_evaluate)
    out = tmp_path / "draws"
    argv = ["learning_draws.py", "--seeds", "0", "--warmup", str(tmp_path / "w"), "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--eval-episodes", "4", "--checkpoints"])
    learning_draws.main()
    draw = json.loads((out / "draw_0" / "draw.json").read_text())
    # step 8: 2 of 4 against the warm-up's 1 -> +0.25; step 16, the final policy: 3 of 4 -> +0.5, evaluated once
    assert [(p["step"], p["rl_minus_warmup"]["mean"]) for p in draw["by_step"]] == [(8, 0.25), (16, 0.5)]
    assert draw["by_step"][-1]["success"] == draw["success"]
    assert evaluated == [("w", "warmup_eval.jsonl"), ("step_000016", "held_out.jsonl"),
                         ("step_000008", "held_out_step_8.jsonl")]  # fmt: skip
    report = json.loads((out / "learning_draws.json").read_text())
    assert [p["step"] for p in report["overall"]["by_step"]] == [8, 16]
    assert report["overall"]["by_step"][0]["rl_minus_warmup"]["mean"] == 0.25
    # a draw finished without --checkpoints, read back with it: its kept checkpoints are judged, nothing is trained
    monkeypatch.setattr(learning_draws, "run_timed", lambda command: pytest.fail("a finished draw ran again"))
    (out / "draw_0" / "held_out_step_8.jsonl").unlink()
    del draw["by_step"]
    (out / "draw_0" / "draw.json").write_text(json.dumps(draw))
    evaluated.clear()
    learning_draws.main()
    assert evaluated == [("step_000008", "held_out_step_8.jsonl")]  # the final policy's episodes are read back
    again = json.loads((out / "draw_0" / "draw.json").read_text())
    assert [(p["step"], p["rl_minus_warmup"]["mean"]) for p in again["by_step"]] == [(8, 0.25), (16, 0.5)]


def test_a_draw_trained_before_is_judged_without_training_and_an_evaluation_cut_short_runs_again(
    tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "draws"
    out.mkdir()
    same_settings(out, _args(overrides=[], eval_episodes=4, sampling_seed=None), tmp_path / "w")  # as main's below
    run_dir = out / "draw_0"
    for step in (8, 16):
        (run_dir / "checkpoints" / f"step_{step:06d}" / "policy").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("trainer:\n  total_steps: 16\n")
    assert not learning_draws.trained(run_dir)  # the last step's checkpoint is not whole yet
    (run_dir / "checkpoints" / "step_000016" / "COMPLETE").write_text("")
    assert learning_draws.trained(run_dir)

    def rows(successes: list[bool]) -> str:
        return "".join(json.dumps({**_episode(10_000 + k), "success": ok}) + "\n" for k, ok in enumerate(successes))

    (out / "warmup_eval.jsonl").write_text(rows([True, False, False, False]))
    (run_dir / "held_out.jsonl").write_text(rows([True, True, True, False]))  # the final policy's: every episode
    (run_dir / "held_out_step_8.jsonl").write_text(rows([True, True]) + '{"env_id": "sok')  # stopped part-way
    evaluated = []

    def fake_evaluate(policy: Path, args, out: Path, threads=None) -> dict[int, float]:
        evaluated.append(out.name)
        out.write_text(rows([True, True, False, False]))
        return {10_000 + k: float(k < 2) for k in range(4)}

    monkeypatch.setattr(learning_draws, "run_timed", lambda command: pytest.fail("a trained draw ran again"))
    monkeypatch.setattr(learning_draws, "evaluate", fake_evaluate)
    argv = ["learning_draws.py", "--seeds", "0", "--warmup", str(tmp_path / "w"), "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--eval-episodes", "4", "--checkpoints", "--"])
    learning_draws.main()
    assert evaluated == ["held_out_step_8.jsonl"]  # the warm-up's and the final policy's episodes are read back
    draw = json.loads((run_dir / "draw.json").read_text())
    # final: 3 of 4 against the warm-up's 1 of 4 -> +0.5; step 8, evaluated again: 2 of 4 -> +0.25
    assert [(p["step"], p["rl_minus_warmup"]["mean"]) for p in draw["by_step"]] == [(8, 0.25), (16, 0.5)]
    assert draw["rl_wall_s"] is None and draw["peak_pss_gib"] is None
    report = json.loads((out / "learning_draws.json").read_text())
    assert report["overall"]["rl_wall_s_mean"] is None and report["overall"]["peak_pss_gib_max"] is None


def test_evaluations_beside_other_draws_share_the_cores_out(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(learning_draws.os, "cpu_count", lambda: 2)
    assert learning_draws.eval_threads(_args(jobs=1)) is None  # alone: torch's default
    assert learning_draws.eval_threads(_args(jobs=2)) == 1
    assert learning_draws.eval_threads(_args(jobs=4)) == 1  # never none
    environments = []

    def fake_run(command, env=None, **kwargs):
        environments.append(env)
        Path(next(a for a in command if a.startswith("out=")).removeprefix("out=")).write_text(
            json.dumps({**_episode(10_000), "success": True}) + "\n"
        )

    monkeypatch.setattr(learning_draws.subprocess, "run", fake_run)
    args = _args(eval_episodes=1)
    assert learning_draws.evaluate(tmp_path / "p", args, tmp_path / "a.jsonl", threads=1) == {10_000: 1.0}
    learning_draws.evaluate(tmp_path / "p", args, tmp_path / "b.jsonl")
    assert environments[0]["OMP_NUM_THREADS"] == "1" and environments[0]["PATH"] == learning_draws.os.environ["PATH"]
    assert environments[1] is None  # the parent's environment, unchanged


def test_outcomes_count_the_failures_left_without_a_solution_and_the_successes_per_difficulty(tmp_path: Path) -> None:
    def episode(seed: int, start: int, after: list[int | None], success: bool, moves=()) -> dict:
        turns = len(after)
        return {
            **_episode(seed), "success": success, "initial_distance": start, "turn_rewards": [0.0] * turns,
            "turn_state_keys": ["k"] * turns, "turn_distances_before": [start] * turns, "turn_distances_after": after,
            "turn_move_distances": list(moves),
        }  # fmt: skip

    rows = [
        episode(0, 2, [0], True, [[1, 0]]),  # solved, 1-3 moves
        episode(1, 3, [2, None], False, [[2], [None]]),  # a box pushed where it can never reach its target: lost
        episode(2, 5, [4, 3, 3], False, [[4], [3], [3, 3]]),  # out of turns, still solvable
        episode(3, 8, [None, None, None], False),  # lost; no per-move record: its turns are not counted
    ]
    path = tmp_path / "held_out.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert learning_draws.outcomes(path) == {
        "by_difficulty": [["1-3", 0.5, 2], ["4-6", 0.0, 1], ["7-9", 0.0, 1]],
        "failed_lost": 2,
        "failed_solvable": 1,
        "moves_per_turn": 8 / 6,  # 2 + 1 + 1 + 1 + 1 + 2 moves over 6 turns
    }
    path.write_text(json.dumps(_episode(9)) + "\n")  # an env without a solver: nothing to count
    assert learning_draws.outcomes(path) == {
        "by_difficulty": [],
        "failed_lost": None,
        "failed_solvable": None,
        "moves_per_turn": None,
    }
