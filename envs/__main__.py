"""``python -m envs``: list the registered environments (built-ins and plugins) and broken plugins."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

import envs


def main() -> int:
    console = Console()
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


if __name__ == "__main__":
    sys.exit(main())
