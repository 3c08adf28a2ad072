"""Learning-curve plots: a real PNG whose size follows the panels drawn, errors, and the CLI."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.metrics import MetricsWriter
from trainer.plot import main, plot_run

REPO_ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Each panel is 4.2 x 2.8 inches at 100 dpi (420 x 280 pixels), three panels to a row.
PANEL_W, PANEL_H = 420, 280


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which follows the 8-byte signature, a length and the chunk type."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def make_run(run_dir: Path, steps: int = 6) -> Path:
    with MetricsWriter(run_dir, tensorboard=False) as writer:
        for step in range(1, steps + 1):
            writer.write(
                step,
                {
                    "reward/mean": step / 10,
                    "reward/std": 0.05,
                    "reward/success_rate": step / 20,
                    "actor/kl_ref": math.nan if step == 3 else 0.01 * step,  # a gap in the curve
                    "custom/unplotted": 1.0,
                },
            )
    return run_dir


def test_default_plot_has_a_panel_per_logged_main_metric(tmp_path):
    run_dir = make_run(tmp_path / "run")
    path = plot_run(run_dir)
    assert path == run_dir / "learning_curves.png"
    assert path.stat().st_size > 0
    # 3 of the 10 default metrics were logged (reward/mean, reward/success_rate, actor/kl_ref; reward/std
    # is drawn as the band): one row of three panels. Absent metrics are skipped, not drawn empty.
    assert png_size(path) == (3 * PANEL_W, 1 * PANEL_H)


def test_chosen_metrics_and_output_path(tmp_path):
    run_dir = make_run(tmp_path / "run")
    out = tmp_path / "figures" / "curves.png"
    path = plot_run(run_dir / "metrics.jsonl", out=out, metrics=["reward/mean", "not/logged"])
    assert path == out
    assert png_size(out) == (PANEL_W, PANEL_H)  # the missing metric is skipped: one panel
    three = plot_run(run_dir, out=tmp_path / "three.png", metrics=["reward/std", "a", "custom/unplotted", "b"])
    assert png_size(three) == (2 * PANEL_W, PANEL_H)  # 2 of the 4 present: one row of two


def test_panels_wrap_into_rows(tmp_path):
    run_dir = make_run(tmp_path / "run")
    names = ["reward/mean", "reward/std", "reward/success_rate", "custom/unplotted"]
    path = plot_run(run_dir, out=tmp_path / "grid.png", metrics=names)
    assert png_size(path) == (3 * PANEL_W, 2 * PANEL_H)  # 4 panels: 3 in the first row, 1 in the second


def test_nothing_to_plot_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    with pytest.raises(ValueError, match="no steps"):
        plot_run(tmp_path / "empty")
    run_dir = make_run(tmp_path / "run")
    with pytest.raises(ValueError, match=r"none of the metrics \['x/y'\]; it has \['actor/kl_ref'"):
        plot_run(run_dir, metrics=["x/y"])
    assert not (run_dir / "learning_curves.png").exists()


def test_cli_prints_the_path(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run")
    out = tmp_path / "cli.png"
    assert main([str(run_dir), "--out", str(out), "--metrics", "reward/mean, reward/success_rate"]) == 0
    assert capsys.readouterr().out == f"{out}\n"
    assert png_size(out) == (2 * PANEL_W, PANEL_H)


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("trainer.plot: error: no metrics file at") and captured.err.count("\n") == 1
    run_dir = make_run(tmp_path / "run")
    assert main([str(run_dir), "--metrics", "x/y"]) == 2
    assert "none of the metrics" in capsys.readouterr().err


def test_module_runs_as_a_program(tmp_path):
    run_dir = make_run(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "trainer.plot", str(run_dir)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{run_dir / 'learning_curves.png'}\n"
    assert png_size(run_dir / "learning_curves.png") == (3 * PANEL_W, PANEL_H)
