"""The learning curves of a run, as panels of points the page draws (``metrics.jsonl``, one record a step).

Read as plain JSON lines (``trainer.metrics.read_metrics`` belongs to the trainer, which agents never
import): a line that is not a JSON object with an integer ``step`` is skipped and counted. A panel has one
or more lines, each a list of ``[step, value]`` points (only the steps where the metric was logged and
finite) and, for the held-out success rate and the training reward, a band ``[step, low, high]``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["PANELS", "curve_panels", "parse_metrics"]

#: (title, [(metric, label, band metric or None)]) in the order the page shows them; a metric the run
#: never logged is left out, a panel with none of its metrics too.
PANELS: tuple[tuple[str, tuple[tuple[str, str, str | None], ...]], ...] = (
    ("held-out success", (("eval/success_rate", "success rate ±1 s.e.", "eval/success_stderr"),)),
    ("training reward", (("reward/mean", "mean reward ±1 std", "reward/std"),)),
    ("training success", (("reward/success_rate", "success rate", None),)),
    (
        "invalid-action rate",
        (("episode/invalid_action_rate", "training", None), ("eval/invalid_action_rate", "held-out", None)),
    ),
    ("KL", (("actor/kl_ref", "to the reference", None), ("actor/approx_kl", "to the rollout policy", None))),
    ("entropy", (("actor/entropy", "policy entropy", None),)),
)
#: ``eval/success_<bucket>``: the held-out success rate of one difficulty bucket (``eval/episodes_<bucket>``
#: its episodes); ``eval/success_rate`` and ``eval/success_stderr`` are not buckets.
_BUCKET = re.compile(r"^eval/success_(?!rate$|stderr$)(.+)$")


def parse_metrics(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
    """The records of ``lines`` (``metrics.jsonl``) and how many non-blank lines were skipped."""
    records, skipped = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and not isinstance(record["step"], bool):
            records.append(record)
        else:
            skipped += 1
    return records, skipped


def curve_panels(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The panels of :data:`PANELS` that ``records`` have, then one of held-out success per difficulty bucket."""
    panels = []
    for title, lines in PANELS:
        drawn = [_line(records, metric, label, band) for metric, label, band in lines]
        drawn = [line for line in drawn if line["points"]]
        if drawn:
            panels.append({"title": title, "lines": drawn})
    buckets = sorted({m.group(1) for r in records for key in r if (m := _BUCKET.match(key))})
    if buckets:
        drawn = [_line(records, f"eval/success_{bucket}", bucket, None) for bucket in buckets]
        panels.append({"title": "held-out success by difficulty", "lines": [d for d in drawn if d["points"]]})
    return panels


def _line(records: list[dict[str, Any]], metric: str, label: str, band: str | None) -> dict[str, Any]:
    points, band_points = [], []
    for record in sorted(records, key=lambda r: r["step"]):
        value = _finite(record.get(metric))
        if value is None:
            continue
        points.append([record["step"], value])
        spread = _finite(record.get(band)) if band else None
        if spread is not None:
            band_points.append([record["step"], value - spread, value + spread])
    line: dict[str, Any] = {"metric": metric, "label": label, "points": points}
    if band_points:
        line["band"] = band_points
    return line


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
