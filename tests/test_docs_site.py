"""The docs site builds with warnings as errors, and the README's links into docs/ name existing files."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # the target of a Markdown link or image


def test_mkdocs_strict_build_passes(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason='the docs extra: pip install -e ".[docs]"')
    pytest.importorskip("mkdocstrings_handlers.python", reason='the docs extra: pip install -e ".[docs]"')
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    elapsed = time.monotonic() - start
    assert result.returncode == 0, f"mkdocs build --strict failed after {elapsed:.1f} s:\n{result.stderr[-6000:]}"
    assert (tmp_path / "site" / "index.html").is_file()
    # the generated configuration reference replaced its marker with the schema's tables
    reference = (tmp_path / "site" / "configuration" / "index.html").read_text()
    assert "config-reference" not in reference and "trainer.config.AlgoConfig" in reference


def test_readme_links_into_docs_name_existing_files_and_headings() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(readme) if not re.match(r"[a-z]+:", t)]
    assert any(t.startswith("docs/") for t in targets), "the README links to no page of docs/"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    for target in targets:
        path, _, anchor = target.partition("#")
        if anchor and path.endswith(".md"):
            assert anchor in _heading_anchors(ROOT / path), f"README.md links to {target}: {path} has no such heading"


def _heading_anchors(path: Path) -> set[str]:
    """The ids mkdocs gives the headings of a page (the toc extension's slugs of the heading text)."""
    from markdown.extensions.toc import slugify

    headings = re.findall(r"^#{1,6} (.+)$", path.read_text(), flags=re.MULTILINE)
    return {slugify(heading.replace("`", ""), "-") for heading in headings}


def test_configuration_reference_reads_schema_and_train_yaml() -> None:
    """The generated rows carry the schema's default, train.yaml's value and their comments."""
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "docs" / "hooks" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    page = module.render_reference()
    # TrainerOptions.total_steps = 20 in trainer/config.py; configs/train.yaml sets 16, with a comment
    assert "| `total_steps` | `int` | `20` | `16` | the default Sokoban run still gains from step 12 to 16" in page
    # a field inside a nested dataclass, under its dotted section, with its inline comment
    assert "### `algo.shaping`" in page and "0: off" in page
    # the agents' commands, fields of the shared LLMOptions base included
    assert "## `python -m agents.eval` (`EvalConfig`)" in page and "| `temperature` | `float` | `0.7` |" in page
