"""The bundled task set: regenerated identically, split, spread over templates and hops."""

from __future__ import annotations

import collections
import json

from envs.toolcall.generate import generate
from envs.toolcall.tasks import DATA_DIR, load_tasks
from envs.toolcall.templates import STATEFUL_TEMPLATES, TEMPLATES


def test_bundled_files_are_what_the_generator_writes():
    world, tasks = generate()
    assert json.loads((DATA_DIR / "world.json").read_text()) == json.loads(json.dumps(world))
    assert json.loads((DATA_DIR / "tasks.json").read_text()) == json.loads(json.dumps([t.to_json() for t in tasks]))


def test_split_sizes_and_coverage():
    tasks = load_tasks()
    assert len(tasks) == 352 and len({t.id for t in tasks}) == 352
    by_split = collections.Counter(t.split for t in tasks)
    assert by_split == {"train": 286, "test": 66}
    for name in TEMPLATES:
        splits = {t.split for t in tasks if t.template == name}
        assert splits == {"train", "test"}, name
    assert collections.Counter(t.hops for t in tasks).keys() == {1, 2, 3, 4}
    assert sum(t.kind == "state" for t in tasks) == 12 * len(STATEFUL_TEMPLATES) == 72
    assert {t.kind for t in tasks} == {"number", "text", "date", "state"}
    assert len({t.question for t in tasks}) == len(tasks)


def test_stateful_tasks_change_the_state():
    world = json.loads((DATA_DIR / "world.json").read_text())
    for task in load_tasks():
        if task.kind == "state":
            start = world[task.state_tool]
            assert task.expected_state != start and set(task.expected_state) == set(start), task.id
