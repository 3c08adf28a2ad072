"""Write the bundled world and tasks of the tool-calling environment: ``python -m envs.toolcall.generate``.

The output is a pure function of the seeds below: running the script again rewrites identical
files (a test regenerates the set in memory and compares). Each template yields up to
``PER_TEMPLATE`` distinct questions (fewer where the world has fewer entities); a fifth of each
template's tasks, at least one, go to the ``test`` split, the rest to ``train``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from envs.toolcall import templates_stateful  # noqa: F401  (registers the stateful templates)
from envs.toolcall.tasks import DATA_DIR, Task
from envs.toolcall.templates import STATEFUL_TEMPLATES, TEMPLATES
from envs.toolcall.world import generate_world

__all__ = ["generate", "write"]

WORLD_SEED = 2024
TASK_SEED = 7
PER_TEMPLATE = 16
PER_STATEFUL_TEMPLATE = 12
TEST_FRACTION = 0.2
_MAX_DRAWS = 400


def _draw(name: str, world: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """Distinct instances of one template (by question text), in drawing order."""
    wanted = PER_STATEFUL_TEMPLATE if name in STATEFUL_TEMPLATES else PER_TEMPLATE
    instances: dict[str, dict[str, Any]] = {}
    for _ in range(_MAX_DRAWS):
        fields = TEMPLATES[name](rng, world)
        instances.setdefault(fields["question"], fields)
        if len(instances) == wanted:
            break
    return list(instances.values())


def generate(world_seed: int = WORLD_SEED, task_seed: int = TASK_SEED) -> tuple[dict[str, Any], list[Task]]:
    """The world and every task (train and test), deterministically."""
    world = generate_world(world_seed)
    rng = random.Random(task_seed)
    tasks = []
    for name in sorted(TEMPLATES):
        instances = _draw(name, world, rng)
        test_count = max(1, round(TEST_FRACTION * len(instances)))
        test_indices = set(rng.sample(range(len(instances)), test_count))
        for index, fields in enumerate(instances):
            split = "test" if index in test_indices else "train"
            tasks.append(Task.from_json({"id": f"{name}-{index:02d}", "template": name, "split": split, **fields}))
    return world, tasks


def write(directory: Path = DATA_DIR) -> tuple[Path, Path]:
    world, tasks = generate()
    directory.mkdir(parents=True, exist_ok=True)
    world_path, tasks_path = directory / "world.json", directory / "tasks.json"
    world_path.write_text(json.dumps(world, indent=1, ensure_ascii=False) + "\n")
    tasks_path.write_text(json.dumps([t.to_json() for t in tasks], indent=1, ensure_ascii=False) + "\n")
    return world_path, tasks_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output directory (default: the bundled data)")
    args = parser.parse_args(argv)
    world_path, tasks_path = write(args.out)
    tasks = json.loads(tasks_path.read_text())
    splits = {s: sum(t["split"] == s for t in tasks) for s in ("train", "test")}
    print(f"wrote {world_path} and {tasks_path}: {len(tasks)} tasks ({splits['train']} train, {splits['test']} test)")


if __name__ == "__main__":
    main()
