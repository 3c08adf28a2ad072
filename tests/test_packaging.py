"""The project's top-level packages are the ones Python imports, from any working directory.

turngym's packages have short names (``agents``, ``envs``, ``tools`` ...). A dependency that ships a
top-level package of the same name (openai-agents ships ``agents``) would shadow ours in every process
started outside the repository: Ray workers, console scripts, benchmarks. This fails loudly if that
happens, naming the distribution that owns the impostor.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "agents", "trainer", "tools", "sandbox", "configs")


def test_top_level_packages_resolve_to_this_project_outside_the_repository(tmp_path):
    code = (
        "import importlib.util, json; "
        f"print(json.dumps({{n: importlib.util.find_spec(n).origin for n in {PACKAGES!r}}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    origins = json.loads(out.stdout)
    wrong = {name: origin for name, origin in origins.items() if not Path(origin).resolve().is_relative_to(ROOT)}
    owners = subprocess.run(
        [sys.executable, "-m", "pip", "show", "-f", "openai-agents"], capture_output=True, text=True
    ).stdout
    assert not wrong, f"shadowed by installed packages: {wrong} (pip show openai-agents: {owners[:200]!r})"
