"""``python -m trainer.run``'s command line: --help, --cfg, and errors that stop before anything heavy starts.

No test here trains: :func:`trainer.run.train` is replaced by a function that fails the test if it is
reached, so a check that wrongly lets a config through shows as a failure, not as a training run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import trainer.run
from trainer.config import compose_train_config
from trainer.run import USAGE, main

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        pytest.fail("trainer.run.main started training")

    monkeypatch.setattr(trainer.run, "train", refuse)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage(flag, capsys):
    assert main([flag, "env=sokoban", "trainer.total_steps=abc"]) == 0  # help wins over everything else
    out, err = capsys.readouterr()
    assert out == USAGE and err == ""


def test_usage_lists_every_algo_model_and_engine_file():
    def choices(key: str) -> list[str]:  # the words after "  key=default" in USAGE, up to the first "("
        line = next(line for line in USAGE.splitlines() if line.startswith(f"  {key}="))
        return line.split("(")[0].split()[1:]

    folder = REPO_ROOT / "configs"
    algos = ["ppo", "grpo", "gigpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "gspo", "cispo"]
    assert choices("algo") == " | ".join(algos).split()
    assert sorted(algos) == sorted(p.stem for p in (folder / "training" / "algo").glob("*.yaml"))
    assert choices("engine") == ["hf"]  # "hf (embedded transformers engine) | sglang (...)"
    assert "| sglang (engine.urls=" in USAGE
    assert choices("model") == ["smollm2"]  # "smollm2 (embedded ...) | tiny | a Hugging Face model directory"
    assert "| tiny | a Hugging Face model directory" in USAGE


def test_an_unknown_flag_is_a_one_line_error(capsys):
    assert main(["env=sokoban", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "turngym: error: unknown flag '--dry-run'; flags are --help and --cfg\n"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["env=sokoban", "algo=ppo", "algo.critic=false"], ["set algo.critic=true"]),
        (["env=sokoban", "algo=grpo", "algo.group_size=1"], ["set algo.group_size to 2 or more"]),
        (["env=sokobn"], ["Did you mean 'sokoban'"]),
        (["algo=grpo"], ["choose an environment with env=<id>"]),
        (["env=sokoban", "trainr.total_steps=2"], ["did you mean 'trainer'"]),
        (["env=sokoban", "trainer.n_gpus=99"], ["set trainer.n_gpus="]),
        (["env=sokoban", "--cfg", "algo=grop"], ["did you mean 'grpo'"]),  # --cfg still checks the overrides
    ],
)
def test_a_bad_config_returns_2_before_anything_starts(argv, words, capsys):
    started = time.perf_counter()
    assert main(argv) == 2
    elapsed = time.perf_counter() - started
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("turngym: error: ") and err.count("\n") == 1
    for word in words:
        assert word in err, (word, err)
    assert elapsed < 10, f"{elapsed:.1f} s: something heavy started before the config was checked"


def test_cfg_prints_the_composed_config(capsys):
    assert main(["--cfg", "env=sokoban", "algo=grpo", "trainer.total_steps=7"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "advantage: grpo" in out
    printed = OmegaConf.create(out)
    assert printed == compose_train_config(["env=sokoban", "algo=grpo", "trainer.total_steps=7"])
    assert (printed.algo.group_size, printed.trainer.total_steps, printed.env.id) == (4, 7, "sokoban")


def test_python_dash_m_help_is_fast():
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "trainer.run", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout == USAGE and result.stderr == ""
    assert elapsed < 10, f"python -m trainer.run --help took {elapsed:.1f} s"


def test_a_run_that_stops_early_exits_1_with_its_one_line_reason(monkeypatch, capsys):
    from trainer.faults import RunFailedError

    def stops(config):
        raise RunFailedError("every group failed in 2 steps in a row (trainer.max_failed_steps=2), so the run stopped")

    monkeypatch.setattr(trainer.run, "train", stops)
    assert main(["env=sokoban", "model=tiny"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "turngym: error: every group failed in 2 steps in a row (trainer.max_failed_steps=2), so the run stopped\n"
    )


@pytest.mark.parametrize(
    ("interrupt", "code", "name"), [(KeyboardInterrupt(), 130, "SIGINT"), (KeyboardInterrupt(15), 143, "SIGTERM")]
)
def test_a_stopped_run_exits_128_plus_the_signal_with_one_line(monkeypatch, capsys, interrupt, code, name):
    def stopped(config):
        raise interrupt  # Ctrl-C, or SIGTERM as the run's handler raises it

    monkeypatch.setattr(trainer.run, "train", stopped)
    assert main(["env=sokoban", "model=tiny"]) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"turngym: error: stopped by {name}; continue from the last checkpoint with trainer.resume=true\n"
