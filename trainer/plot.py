"""Learning curves of a run as one PNG: a grid with one panel per metric against the step.

    python -m trainer.plot runs/sokoban-ppo                      # writes runs/sokoban-ppo/learning_curves.png
    python -m trainer.plot runs/a/metrics.jsonl --out a.png --metrics reward/mean,actor/kl_ref

By default the panels are the main curves (:data:`DEFAULT_METRICS`) that the run logged; the mean
reward gets a band of one standard deviation when ``reward/std`` was logged, the held-out success rate
(``eval/success_rate``, logged at the evaluation steps only) a band of one standard error. Steps where a metric
was not finite (``null`` in the file) are gaps in its curve. matplotlib draws off-screen (Agg).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.metrics import read_metrics

__all__ = ["DEFAULT_METRICS", "OUTPUT_FILE", "main", "plot_run"]

OUTPUT_FILE = "learning_curves.png"
MATPLOTLIB_INSTALL_HINT = "pip install matplotlib"
DEFAULT_METRICS: tuple[str, ...] = (
    "eval/success_rate",
    "eval/invalid_action_rate",
    "reward/mean",
    "reward/success_rate",
    "episode/invalid_action_rate",
    "actor/policy_loss",
    "critic/value_loss",
    "actor/entropy",
    "actor/kl_ref",
    "actor/grad_norm",
    "rollout/logprob_mismatch",
    "throughput/tokens_per_s",
    "curriculum/difficulty_mean",
    "curriculum/ceiling",
)
#: metric -> (the metric whose ±1 band is drawn around it, the band's label)
_BAND = {"reward/mean": ("reward/std", "±1 std"), "eval/success_rate": ("eval/success_stderr", "±1 s.e.")}
_COLUMNS = 3
_PANEL_INCHES = (4.2, 2.8)


def plot_run(source: str | Path, out: str | Path | None = None, metrics: Sequence[str] | None = None) -> Path:
    """Draw the curves of ``source`` (a run directory or its metrics.jsonl) and return the PNG's path.

    ``out`` defaults to ``learning_curves.png`` in the run directory; ``metrics`` to
    :data:`DEFAULT_METRICS`. Requested metrics the run never logged are skipped. Raises ``ValueError``
    when the file has no steps or none of the requested metrics.
    """
    source = Path(source)
    run_dir = source if source.is_dir() else source.parent
    records = read_metrics(source)
    if not records:
        raise ValueError(f"{source} has no steps yet: nothing to plot")
    requested = list(metrics) if metrics is not None else list(DEFAULT_METRICS)
    present = [name for name in requested if any(name in record for record in records)]
    if not present:
        logged = sorted({key for record in records for key in record} - {"step", "wall_time"})
        raise ValueError(f"{source} has none of the metrics {requested}; it has {logged}")
    out = Path(out) if out is not None else run_dir / OUTPUT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    figure = _draw(records, present)
    figure.savefig(out, dpi=100)
    return out


def _draw(records: list[dict[str, Any]], names: list[str]) -> Any:
    """A matplotlib Figure with one panel per name; drawn on its own Agg canvas, so no global backend changes."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib: {MATPLOTLIB_INSTALL_HINT}") from exc
    columns = min(_COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    figure = Figure(figsize=(_PANEL_INCHES[0] * columns, _PANEL_INCHES[1] * rows), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False).flatten()
    for ax, name in zip(axes, names, strict=False):
        steps, values = _series(records, name)
        ax.plot(steps, values, color="tab:blue", linewidth=1.2, marker="." if len(steps) < 30 else None)
        band, label = _BAND.get(name, (None, ""))
        if band is not None and any(band in record for record in records):
            _, spread = _series(records, name, band)
            lower = [v - s for v, s in zip(values, spread, strict=True)]
            upper = [v + s for v, s in zip(values, spread, strict=True)]
            ax.fill_between(steps, lower, upper, color="tab:blue", alpha=0.2, linewidth=0, label=label)
            ax.legend(loc="best", fontsize="small")
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    return figure


def _series(records: list[dict[str, Any]], name: str, paired: str | None = None) -> tuple[list[int], list[float]]:
    """Steps that logged ``name`` and the values of ``paired`` (default ``name``) there; missing values are nan."""
    rows = [record for record in records if name in record]
    key = paired or name
    return [record["step"] for record in rows], [float(record.get(key, math.nan)) for record in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.plot", description="Plot a run's learning curves.")
    parser.add_argument("source", help="a run directory or its metrics.jsonl")
    parser.add_argument("--out", help=f"where to write the PNG (default: <run dir>/{OUTPUT_FILE})")
    parser.add_argument("--metrics", help="comma-separated metric names (default: the main curves)")
    args = parser.parse_args(argv)
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()] if args.metrics else None
    try:
        path = plot_run(args.source, out=args.out, metrics=metrics)
    except (ValueError, OSError, ImportError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the exception holds
        print(f"trainer.plot: error: {message}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
