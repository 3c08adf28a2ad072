"""The run report: one self-contained HTML page with a run's curves, its episodes and their tokens.

    report = build_report(Path("runs/train/sokoban-ppo"))      # or a single episodes.jsonl
    Path("report.html").write_text(render_html(report))

:func:`build_report` gathers the data (curves from ``metrics.jsonl``, episodes from ``samples/*.jsonl`` and
``evaluations/*.jsonl``, token text from the run's tokenizer); :func:`render_html` puts it, as JSON, into
the page template with its style and script inlined, so the file opens anywhere without a network.
:func:`write_report` is what ``trainer.run`` calls: ``<run_dir>/report.html``, replaced whole.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from agents.report.curves import curve_panels, parse_metrics
from agents.report.episodes import Episode, read_episode_file

__all__ = ["REPORT_FILE", "Report", "build_report", "render_html", "run_model_name", "write_report"]

REPORT_FILE = "report.html"
EPISODE_DIRS = ("evaluations", "samples")  # the folders of a run directory that hold episodes
_DATA_MARK = "@@REPORT_DATA@@"


@dataclass
class Report:
    """What the page shows. ``vocab`` maps each token id of the episodes to its text (``None``: no tokenizer)."""

    title: str
    panels: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    vocab: dict[int, str] | None = None
    notes: list[str] = field(default_factory=list)  # what the reader should know: skipped lines, no tokenizer
    skipped_lines: int = 0


def run_model_name(run_dir: Path) -> str | None:
    """``model.name`` of ``<run_dir>/config.yaml``; ``None`` when there is no such file or key."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        return None
    import yaml

    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    model = data.get("model") if isinstance(data, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return str(name) if name else None


def build_report(source: Path, model: str | None = None, tokenizer: Any = None) -> Report:
    """The report of ``source``, a run directory or one JSONL file of episodes.

    The token text comes from ``tokenizer`` when given, else from the tokenizer of ``model``, else of the
    run's model (``config.yaml`` of the run directory, or of the run a file's folder belongs to). With
    none, the page shows the turns without the token view and says why. Raises ``FileNotFoundError``
    for a missing source and ``OSError``/``ValueError`` when ``model`` is given and does not load.
    """
    if not source.exists():
        raise FileNotFoundError(f"no such file or directory: {source}")
    report = Report(title=str(source))
    run_dir = source if source.is_dir() else _run_dir_of(source)
    if source.is_dir():
        _add_curves(report, source / "metrics.jsonl")
        files = [p for folder in EPISODE_DIRS for p in sorted((source / folder).glob("*.jsonl"))]
    else:
        files = [source]
    for path in files:
        parsed = read_episode_file(path, f"{path.parent.name}/{path.stem}" if source.is_dir() else path.stem)
        report.episodes.extend(parsed.episodes)
        if parsed.skipped:
            report.skipped_lines += parsed.skipped
            report.notes.append(f"{path.name}: skipped {parsed.skipped} malformed line(s)")
    if any(e.trajectory is not None and e.trajectory.prompt_ids for e in report.episodes):
        _add_vocab(report, tokenizer, model, run_dir)
    return report


def _run_dir_of(path: Path) -> Path | None:
    """The run directory a file of ``evaluations/`` or ``samples/`` lies in, if it is one."""
    parent = path.resolve().parent
    return parent.parent if parent.name in EPISODE_DIRS and (parent.parent / "config.yaml").is_file() else None


def _add_curves(report: Report, metrics_path: Path) -> None:
    if not metrics_path.is_file():
        report.notes.append("no metrics.jsonl: no learning curves")
        return
    with metrics_path.open(encoding="utf-8", errors="replace") as f:
        records, skipped = parse_metrics(f)
    report.panels = curve_panels(records)
    if skipped:
        report.skipped_lines += skipped
        report.notes.append(f"metrics.jsonl: skipped {skipped} malformed line(s)")


def _add_vocab(report: Report, tokenizer: Any, model: str | None, run_dir: Path | None) -> None:
    if tokenizer is None:
        name = model or (run_model_name(run_dir) if run_dir is not None else None)
        if name is None:
            report.notes.append("no model known (give --model NAME): turns are shown without the token view")
            return
        from agents.cli import UsageError
        from agents.models import load_tokenizer
        from agents.preflight import check_model

        try:
            check_model(name)  # a name that is no model fails here, not after a minute of hub retries
            tokenizer = load_tokenizer(name)
        except (OSError, ValueError, UsageError) as exc:
            if model is not None:  # asked for by name: the caller says so
                raise
            report.notes.append(f"the tokenizer of model {name!r} did not load ({exc}): no token view")
            return
    trajectories = [e.trajectory for e in report.episodes if e.trajectory is not None]
    ids = sorted({i for t in trajectories for i in (*t.prompt_ids, *t.response_ids)})
    report.vocab = {i: token_text(tokenizer, i) for i in ids}


def token_text(tokenizer: Any, token_id: int) -> str:
    """The text of one token. A byte-level token that holds part of a UTF-8 character (``√`` is two tokens)
    decodes alone to U+FFFD; it is shown as its bytes instead (``\\xe2\\x88``), so no token reads as ``�``."""
    text = tokenizer.decode([token_id], skip_special_tokens=False)
    if "\ufffd" not in text or not hasattr(tokenizer, "convert_ids_to_tokens"):
        return text
    piece = tokenizer.convert_ids_to_tokens(token_id)
    decoder = _byte_decoder()
    if not isinstance(piece, str) or not piece or any(c not in decoder for c in piece):
        return text
    return bytes(decoder[c] for c in piece).decode("utf-8", errors="backslashreplace")


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: each printable stand-in character -> the byte it stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_ins[chr(byte)] = byte
        else:
            stand_ins[chr(256 + extra)] = byte
            extra += 1
    return stand_ins


def render_html(report: Report) -> str:
    """The page: the template with its style, script and the report's data (JSON) inlined."""
    files = resources.files("agents.report")
    template = (files / "template.html").read_text(encoding="utf-8")
    page = template.replace("/*@@STYLE@@*/", (files / "style.css").read_text(encoding="utf-8"))
    page = page.replace("/*@@SCRIPT@@*/", (files / "view.js").read_text(encoding="utf-8"))
    page = page.replace("@@TITLE@@", _escape_html(report.title))
    before, after = page.split(_DATA_MARK)
    return before + _script_json(report_data(report)) + after


def report_data(report: Report) -> dict[str, Any]:
    """The JSON the page reads (see view.js for how each field is shown)."""
    return {
        "title": report.title,
        "notes": report.notes,
        "skipped": report.skipped_lines,
        "panels": report.panels,
        "vocab": None if report.vocab is None else {str(k): v for k, v in report.vocab.items()},
        "episodes": [_episode_data(e) for e in report.episodes],
    }


def write_report(run_dir: Path, tokenizer: Any = None) -> Path:
    """Write ``<run_dir>/report.html`` (next to its place, then renamed: never half written); return its path."""
    path = run_dir / REPORT_FILE
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(render_html(build_report(run_dir, tokenizer=tokenizer)), encoding="utf-8")
    os.replace(temporary, path)
    return path


def _episode_data(e: Episode) -> dict[str, Any]:
    data = {
        "kind": e.kind,
        "source": e.source,
        "step": e.step,
        "env": e.env_id,
        "seed": e.seed,
        "success": e.success,
        "return": e.episode_return,
        "termination": e.termination,
        "invalid": e.num_invalid_actions,
        "system": e.system,
        "turns": e.turns,
        "final": e.final_observation,
        "info": e.info,
    }
    t = e.trajectory
    if t is not None and t.prompt_ids:
        data["tokens"] = {
            "prompt": t.prompt_ids,
            "response": t.response_ids,
            "mask": t.response_mask,
            # one logprob per sampled token, in order; 6 significant digits are plenty to read
            "logprobs": [float(f"{lp:.6g}") for lp, m in zip(t.rollout_logprobs, t.response_mask, strict=True) if m],
            "ends": t.turn_end_indices,
            "rewards": t.turn_rewards,
        }
        if t.rollout_values:  # the critic's value of each sampled token's state, where the engine applied it
            data["tokens"]["values"] = [
                float(f"{v:.6g}") for v, m in zip(t.rollout_values, t.response_mask, strict=True) if m
            ]
    return _finite_or_null(data)


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<`` can close the element early."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
