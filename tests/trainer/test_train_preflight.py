"""Runs that cannot work stop before anything heavy starts (:mod:`trainer.preflight`).

Each case goes through the real :func:`trainer.run.train`: the mistake must come back as a one-line
:class:`UsageError` naming the fix, within seconds, with Ray never started and no run directory written.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

import envs
from agents.config import UsageError
from agents.models import tiny_model_path
from trainer.config import compose_train_config, to_train_config
from trainer.run import train

REPO_ROOT = Path(__file__).resolve().parents[2]


def register_no_backend() -> None:
    """An environment whose constructor fails as the code environment does without a sandbox backend, and Sokoban
    registered under an id of its own."""
    from envs.sokoban import SokobanEnv

    class NoSandboxEnv(SokobanEnv):
        def __init__(self, **options):
            raise RuntimeError("CodeEnv cannot create its sandbox (backend 'auto'): no backend works here")

    with contextlib.suppress(ValueError):
        envs.register("no-sandbox-test", NoSandboxEnv)
    with contextlib.suppress(ValueError):  # Sokoban under an id with no config file: no env.max_actions_per_turn
        envs.register("sokoban-bare-test", SokobanEnv)


@pytest.fixture(scope="module", autouse=True)
def warm_imports():
    """Import what the checks import once, so that the timings below measure the checks."""
    from trainer.rollout_worker import ChatRendererFactory

    envs.make("sokoban").close()
    ChatRendererFactory("tiny")()  # the tokenizer and template modules


def config_for(tmp_path: Path, *overrides: str):
    base = ["env=sokoban", "model=tiny", "trainer.progress=false", f"trainer.run_dir={tmp_path / 'run'}"]
    return to_train_config(compose_train_config([*base, *overrides]))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["env.dimm=8"], "environment 'sokoban' does not accept 'dimm' (did you mean 'dim'?)"),
        (["env.dim=3"], "a 3x3 room (outer walls included) has 1 inner cells, too few for 1 box(es)"),
        (["env=no-sandbox-test"], "environment 'no-sandbox-test' cannot be built: RuntimeError: CodeEnv cannot"),
        (["env=toolcall", "algo=gigpo"], 'env=toolcall reports no info["state_key"], which gigpo\'s state-based'),
        (
            ["env=toolcall", "algo.step_groups.weight=1", "algo.step_groups.key=distance"],
            'env=toolcall reports no info["distance_to_goal"], which ppo\'s state-based credit needs: set '
            "algo.step_groups.weight=0, or",
        ),
        (
            ["env=toolcall", "algo.move_credit.weight=1"],
            'env=toolcall reports no info["move_distances"] and info["move_spans"] after a step, which '
            "algo.move_credit needs: set algo.move_credit.weight=0, or",
        ),
        (
            ["env=frozenlake", "env.is_slippery=true", "algo.move_credit.weight=1"],
            "env=frozenlake has random move outcomes here (stochastic_dynamics), and algo.move_credit would charge",
        ),
        (
            ["env=sokoban-bare-test", "algo.move_credit.weight=1", "algo.move_credit.stop=true"],
            "env=sokoban-bare-test has no integer env.max_actions_per_turn, the move limit a turn that algo.move_",
        ),
        (["env=toolcall", "curriculum=adaptive"], "env=toolcall has no difficulty_range, which curriculum=adaptive"),
        (
            ["curriculum=adaptive", "curriculum.floor=9"],
            "curriculum.floor=9 is above the hardest level env=sokoban generates (difficulty_range [2, 3]): set",
        ),
        (["env=toolcall", "algo.shaping.required=true"], 'reports no info["distance_to_goal"], which ppo\'s'),
        (
            ["rollout.max_total_tokens=200", "rollout.max_new_tokens=64"],
            "rollout.max_total_tokens=200 leaves less than one turn of rollout.max_new_tokens=64: set",
        ),
    ],
)
def test_a_run_that_cannot_work_fails_in_seconds_without_ray(tmp_path, overrides, message):
    if ray.is_initialized():
        ray.shutdown()
    register_no_backend()
    config = config_for(tmp_path, *overrides)
    started = time.perf_counter()
    with pytest.raises(UsageError) as caught:
        train(config, setup=register_no_backend)
    elapsed = time.perf_counter() - started
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not ray.is_initialized(), "Ray started before the check"
    assert not (tmp_path / "run").exists()
    assert elapsed < 5, f"{elapsed:.1f} s"


def test_a_model_directory_without_a_config_and_a_finished_run_directory(tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"holds no config\.json"):
        train(config_for(tmp_path, f"model={empty}"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1, "wall_time": 0}\n')
    with pytest.raises(UsageError, match=r"already holds a run: continue it with trainer\.resume=true"):
        train(config_for(tmp_path))
    assert not ray.is_initialized()
    assert tiny_model_path().is_dir()


def test_the_command_line_prints_one_line_and_exits_2(tmp_path):
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "trainer.run", "env=sokoban", "algo=ppo", "model=tiny", "env.dim=3"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.perf_counter() - started
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "turngym: error: a 3x3 room (outer walls included) has 1 inner cells, too few for 1 box(es): they need "
        "at least 4; use a larger dim or fewer boxes (set options with env.<option>=<value>)"
    ]
    assert not (tmp_path / "runs").exists()
    assert elapsed < 30, f"{elapsed:.1f} s"  # measured: about 4 s, most of it imports


def test_ppos_default_shaping_is_off_with_one_line_where_the_env_reports_no_distance(tmp_path, caplog):
    from trainer.preflight import preflight

    config = config_for(tmp_path, "env=toolcall", "rollout.max_total_tokens=8192")  # its tools' prompt is long
    # algo=ppo's default shaping: coef 0.5, required false
    assert config.algo.shaping.coef == 0.5 and not config.algo.shaping.required
    with caplog.at_level("INFO", logger="trainer.run"):
        preflight(config)
    lines = [r.getMessage() for r in caplog.records if "distance_to_goal" in r.getMessage()]
    assert lines == ['env=toolcall reports no info["distance_to_goal"]: progress shaping is off for this run']
    caplog.clear()
    with caplog.at_level("INFO", logger="trainer.run"):
        preflight(config_for(tmp_path, "env=sokoban"))  # it reports distances: shaping on, nothing said
    assert not [r for r in caplog.records if "distance_to_goal" in r.getMessage()]
