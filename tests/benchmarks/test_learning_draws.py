"""``benchmarks/learning_draws.py`` resumes only a folder made with the same settings."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from learning_draws import interval, same_settings


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
