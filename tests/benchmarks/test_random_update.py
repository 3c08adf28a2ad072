"""``benchmarks/random_update.py``: the trained change of each matrix, shuffled, keeps its size and spectrum."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from random_update import shuffled_change, shuffled_policy

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "random_update.py"


def test_a_shuffled_change_is_the_same_entries_in_other_places_with_the_same_singular_values() -> None:
    change = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    shuffled = shuffled_change(change, torch.Generator().manual_seed(0))
    # a permutation of rows and one of columns: every row of the result is some row of the change, its
    # entries in one shared column order, so the multiset of entries and the singular values are the change's
    assert sorted(shuffled.flatten().tolist()) == list(range(12))
    assert torch.allclose(torch.linalg.svdvals(shuffled), torch.linalg.svdvals(change), atol=1e-5)
    rows = {tuple(sorted(row)) for row in shuffled.tolist()}
    assert rows == {(0.0, 1.0, 2.0, 3.0), (4.0, 5.0, 6.0, 7.0), (8.0, 9.0, 10.0, 11.0)}
    vector = torch.tensor([1.0, -2.0])
    assert shuffled_change(vector, torch.Generator().manual_seed(0)) is vector


def test_the_shuffled_policy_moves_only_what_training_moved_and_by_as_much() -> None:
    base = {"a.weight": torch.ones(4, 3), "b.weight": torch.zeros(2, 2), "norm.weight": torch.ones(3)}
    change = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    trained = {
        "a.weight": base["a.weight"] + change,
        "b.weight": base["b.weight"].clone(),
        "norm.weight": base["norm.weight"],
    }
    weights, norms = shuffled_policy(base, trained, seed=3)
    assert weights["b.weight"] is base["b.weight"] and weights["norm.weight"] is base["norm.weight"]
    moved = weights["a.weight"] - base["a.weight"]
    # the two changed entries, +0.5 and -1.0, land in other cells; norm sqrt(0.25 + 1) either way
    assert sorted(moved.flatten().tolist()) == [-1.0] + [0.0] * 10 + [0.5]
    assert norms == {"a.weight": pytest.approx(1.25**0.5)}
    assert torch.equal(shuffled_policy(base, trained, seed=3)[0]["a.weight"], weights["a.weight"])  # seeded


def test_weights_of_two_different_models_are_refused() -> None:
    with pytest.raises(ValueError, match=r"different tensors \(first: \['extra'\]\)"):
        shuffled_policy({"a": torch.zeros(1)}, {"a": torch.zeros(1), "extra": torch.zeros(1)}, seed=0)


def test_the_script_writes_a_loadable_policy_folder_beside_the_base_files(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    base, trained = tmp_path / "base", tmp_path / "trained"
    for folder, value in ((base, 0.0), (trained, 2.0)):
        folder.mkdir()
        save_file({"w": torch.full((2, 2), value), "v": torch.zeros(2)}, folder / "model.safetensors")
        (folder / "config.json").write_text("{}")
    (base / "COMPLETE").write_text("")
    out = tmp_path / "shuffled"
    command = [sys.executable, str(SCRIPT), "--base", str(base), "--trained", str(trained), "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    assert torch.equal(load_file(out / "model.safetensors")["w"], torch.full((2, 2), 2.0))  # all equal: any order
    assert (out / "config.json").is_file() and not (out / "COMPLETE").exists()
    summary = json.loads((out / "random_update.json").read_text())
    assert summary["changed_tensors"] == 1 and summary["change_norm"] == pytest.approx(4.0)  # sqrt(4 * 2^2)
    again = subprocess.run(command, capture_output=True, text=True)
    assert again.returncode == 2 and "exists: pass a new folder" in again.stderr
