"""``python -m envs``: list the registered environments; ``python -m envs check <id> [key=value ...]``: check one.

    python -m envs                                   # every environment (built-ins and plugins), broken plugins
    python -m envs check sokoban dim=8 num_boxes=2   # the conformance checker (envs/checker.py) on one
    python -m envs check my-env --seeds 0,1,2,3

Values are read as YAML (``max_turns=3`` is an int, ``config={a: 1}`` a dict, ``x=null`` None). The
exit status is 0 when every check passed, 1 when one failed, 2 when the environment cannot be built;
listing returns 1 when a plugin failed to load.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

import envs


def list_environments(console: Console) -> int:
    table = Table(title="turngym environments")
    for column in ("id", "gymnasium id", "source", "description"):
        table.add_column(column)
    for env_spec in envs.list_specs():
        table.add_row(env_spec.id, env_spec.gym_id, env_spec.source, env_spec.description)
    console.print(table)
    errors = envs.plugin_errors()
    for plugin, error in errors.items():
        console.print(f"[red]plugin {plugin} failed to load:[/red] {error}")
    return 1 if errors else 0


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``, each value read as YAML."""
    import yaml

    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"options are key=value, got {pair!r}")
        options[key] = yaml.safe_load(value) if value else ""
    return options


def check_environment(console: Console, env_id: str, pairs: list[str], seeds: list[int]) -> int:
    from envs.checker import check_text_env

    options = parse_options(pairs)
    try:  # an unknown id or option, or an environment that cannot be built: one line, not a traceback
        envs.make(env_id, **options)
    except Exception as exc:
        console.print(
            f"cannot build {env_id!r}: {type(exc).__name__}: {exc}", style="red", markup=False, soft_wrap=True
        )
        return 2
    report = check_text_env(lambda: envs.make(env_id, **options), seeds=seeds, raise_on_failure=False)
    for line in report.summary().splitlines():
        style = "red" if "FAILED" in line else "yellow" if "skipped" in line else None
        console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    check = commands.add_parser("check", help="run the conformance checker on one environment")
    check.add_argument("env_id", help="a registered id, e.g. sokoban or turngym/Sokoban-v0")
    check.add_argument("options", nargs="*", metavar="key=value", help="constructor options, read as YAML")
    check.add_argument("--seeds", default="0,1,2", help="comma-separated reset seeds (default 0,1,2)")
    args = parser.parse_args(argv)
    console = Console()
    if args.command == "check":
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        return check_environment(console, args.env_id, args.options, seeds)
    return list_environments(console)


if __name__ == "__main__":
    sys.exit(main())
