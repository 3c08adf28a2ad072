"""``python -m agents.view``: a run's report as one self-contained HTML page (see :data:`USAGE`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from agents.cli import WARNING_PREFIX, print_error

__all__ = ["USAGE", "main"]

USAGE = """\
usage: python -m agents.view RUN_DIR|EPISODES.jsonl [--out REPORT.html] [--model NAME]

Write a run's report as one HTML file that opens in any browser without a network:
  - the learning curves of metrics.jsonl (held-out success with its error band, training reward,
    invalid-action rate, KL, entropy; held-out success per difficulty bucket when the run logged them);
  - every episode of samples/*.jsonl and evaluations/*.jsonl (or of the one JSONL file given: the
    out= file of agents.eval or agents.play), filtered by file, success, env and seed; each turn's
    observation, the reply, its reward, validity and the env's info;
  - the token view of an episode: every token in order, the model's sampled tokens marked (their
    rollout logprob on hover, and the critic's value where the engine applied the value head: PPO with the
    colocated engine) apart from template and environment tokens, and each turn's reward.
Open an episode directly with report.html#episode=<index>.

  --out PATH     where to write the page; default: RUN_DIR/report.html, or EPISODES.html next to the file
  --model NAME   the tokenizer for the token text (smollm2, tiny, a model directory); default: model.name
                 of the run's config.yaml (also for a file in a run's evaluations/ or samples/). Without
                 one the page shows the turns and says there is no token view.

Malformed lines are skipped; the page and standard error say how many.

Examples:
  python -m agents.view runs/train/sokoban-ppo
  python -m agents.view runs/eval/sokoban-hf.jsonl --model smollm2 --out eval.html
"""


def parse_args(argv: Sequence[str]) -> tuple[Path, Path | None, str | None]:
    """``(source, out, model)`` of the command line; ``ValueError`` with a one-line message on a mistake."""
    source, out, model = None, None, None
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, _, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in ("--out", "--model"):
            if not value:
                if not args:
                    raise ValueError(f"{name} needs a value")
                value = args.pop(0)
            if name == "--out":
                out = Path(value)
            else:
                model = value
        elif arg.startswith("-") and arg != "-":
            raise ValueError(f"unknown flag {arg!r}; flags are --out, --model and --help")
        elif source is not None:
            raise ValueError(f"one run directory or JSONL file, got {str(source)!r} and {arg!r}")
        else:
            source = Path(arg)
    if source is None:
        raise ValueError("give a run directory or an episodes JSONL file (see --help)")
    return source, out, model


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        sys.stdout.write(USAGE)
        return 0
    try:
        source, out, model = parse_args(args)
    except ValueError as exc:
        return print_error(exc)
    if not source.exists():
        return print_error(f"no such run directory or file: {source}")
    if source.is_dir() and not any((source / name).exists() for name in ("metrics.jsonl", "evaluations", "samples")):
        return print_error(f"{source} is not a run directory (no metrics.jsonl, evaluations/ or samples/)")
    from agents.cli import UsageError
    from agents.preflight import check_model
    from agents.report.page import REPORT_FILE, build_report, render_html

    try:
        if model is not None:  # before a hub lookup of a name that is no model retries for a minute
            check_model(model)
    except UsageError as exc:
        return print_error(str(exc).replace("model=", "--model "))
    try:
        report = build_report(source, model=model)
    except (OSError, ValueError) as exc:
        return print_error(f"the tokenizer of model {model!r} did not load: {exc}" if model else exc)
    if report.skipped_lines:
        skipped = f"skipped {report.skipped_lines} malformed line(s): {'; '.join(report.notes)}"
        print(WARNING_PREFIX + skipped, file=sys.stderr)
    if out is None:
        out = source / REPORT_FILE if source.is_dir() else source.with_suffix(".html")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(report), encoding="utf-8")
    except OSError as exc:
        return print_error(f"cannot write {out}: {exc}")
    tokens = "with token view" if report.vocab is not None else "no token view"
    print(f"wrote {out} ({len(report.episodes)} episodes, {len(report.panels)} curve panels, {tokens})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
