"""``benchmarks/update_geometry.py``: norms and cosines of weight changes, and of one run's increments, by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from update_geometry import change, cosine, geometry

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "update_geometry.py"


def test_a_change_is_every_tensor_minus_the_base_in_name_order() -> None:
    base = {"b": torch.tensor([1.0, 1.0]), "a": torch.tensor([[2.0]])}
    policy = {"b": torch.tensor([1.0, 4.0]), "a": torch.tensor([[1.0]])}
    assert change(base, policy).tolist() == [-1.0, 0.0, 3.0]  # "a" first: 1 - 2; then "b": 0, 3
    with pytest.raises(ValueError, match="other tensors"):
        change(base, {"a": torch.zeros(1, 1)})


def test_steps_that_keep_one_direction_and_steps_that_turn_are_told_apart() -> None:
    # run "steady": two increments (3, 4) and (3, 4): the change doubles, increments' cosine 1;
    # run "turning": increments (3, 4) and (-4, 3): orthogonal, the change grows by sqrt(2) (norm 5 -> 5 sqrt 2)
    changes = {
        "steady_1": torch.tensor([3.0, 4.0]),
        "steady_2": torch.tensor([6.0, 8.0]),
        "turning_2": torch.tensor([-1.0, 7.0]),
    }
    report = geometry(changes, [["steady_1", "steady_2"], ["steady_1", "turning_2"]])
    assert report["norm"] == {"steady_1": 5.0, "steady_2": 10.0, "turning_2": pytest.approx(50**0.5)}
    # (3, 4) . (-1, 7) = 25, over 5 * sqrt(50): 1 / sqrt(2)
    assert report["cosine"]["steady_1 | turning_2"] == pytest.approx(2**-0.5)
    steady, turning = report["runs"]
    assert steady["increment_norm"] == [5.0, 5.0] and steady["increment_cosine"] == {"0 | 1": pytest.approx(1.0)}
    assert turning["increment_norm"] == [5.0, 5.0] and turning["increment_cosine"] == {"0 | 1": pytest.approx(0.0)}
    assert cosine(torch.zeros(2), torch.ones(2)) == 0.0


def test_the_script_reads_policy_folders_and_refuses_a_folder_without_weights(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    for name, values in (("base", [0.0, 0.0]), ("one", [1.0, 0.0]), ("two", [1.0, 1.0])):
        (tmp_path / name).mkdir()
        save_file({"w": torch.tensor(values)}, tmp_path / name / "model.safetensors")
    out = tmp_path / "geometry.json"
    command = [sys.executable, str(SCRIPT), "--base", str(tmp_path / "base"), "--out", str(out)]
    subprocess.run([*command, "--run", str(tmp_path / "one"), str(tmp_path / "two")], check=True, capture_output=True)
    report = json.loads(out.read_text())
    assert report["runs"][0]["increment_norm"] == [1.0, 1.0]  # (1, 0), then (0, 1): orthogonal
    assert report["runs"][0]["increment_cosine"] == {"0 | 1": 0.0}
    refused = subprocess.run([*command, "--policy", str(tmp_path)], capture_output=True, text=True)
    assert refused.returncode == 2 and "has no model.safetensors" in refused.stderr
