"""mkdocs hook: the configuration reference, generated from the config schemas at build time.

The page ``configuration.md`` holds the marker ``<!-- config-reference -->``; this hook replaces it with
one table per dataclass (field, type, schema default, the value ``configs/train.yaml`` sets, and the
inline comments of both). The schemas are read from source with :mod:`ast` and :mod:`tokenize`, so the
build imports nothing of turngym (no torch, no Hydra) and the page cannot drift from the code.
"""

from __future__ import annotations

import ast
import html
import io
import json
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- config-reference -->"
PAGE = "configuration.md"
SCHEMA_FILES = ("trainer/config.py", "trainer/config_phases.py", "agents/config.py")
TRAIN_YAML = "configs/train.yaml"


@dataclass
class Field:
    name: str
    type: str
    default: str
    comment: str


@dataclass
class Schema:
    name: str
    module: str
    doc: str
    bases: list[str]
    fields: list[Field]


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on that line (without ``#``)."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    return comments


def _field_comment(item: ast.AnnAssign, comments: dict[int, str], lines: list[str]) -> str:
    """The field's inline comment, else the comment lines right above it."""
    if item.end_lineno == item.lineno and item.lineno in comments:
        return comments[item.lineno]
    above, number = [], item.lineno - 1
    while number in comments and lines[number - 1].lstrip().startswith("#"):
        above.insert(0, comments[number])
        number -= 1
    return " ".join(above)


def _default(value: ast.expr | None) -> str:
    if value is None:
        return "(required)"
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
        for keyword in value.keywords:
            if keyword.arg == "default":
                return ast.unparse(keyword.value)
            if keyword.arg == "default_factory":
                factory = keyword.value
                if isinstance(factory, ast.Lambda):
                    return ast.unparse(factory.body)
                name = ast.unparse(factory)
                return {"list": "[]", "dict": "{}"}.get(name, f"{name}()")
    return ast.unparse(value)


def read_schemas(root: Path = ROOT) -> dict[str, Schema]:
    """Every ``@dataclass`` of the schema files, by class name, fields in source order."""
    schemas = {}
    for relative in SCHEMA_FILES:
        source = (root / relative).read_text()
        comments = _comments(source)
        lines = source.splitlines()
        module = relative[:-3].replace("/", ".")
        for node in ast.parse(source).body:
            if not isinstance(node, ast.ClassDef):
                continue
            if not any(ast.unparse(d).startswith(("dataclass", "dataclasses.dataclass")) for d in node.decorator_list):
                continue
            fields = [
                Field(
                    name=item.target.id,
                    type=ast.unparse(item.annotation),
                    default=_default(item.value),
                    comment=_field_comment(item, comments, lines),
                )
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
            doc = " ".join((ast.get_docstring(node) or "").split())
            schemas[node.name] = Schema(node.name, module, doc, [ast.unparse(b) for b in node.bases], fields)
    return schemas


def read_train_yaml(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """``section.key`` -> (value, comment) for the two-level keys of ``configs/train.yaml``.

    A comment-only line indented under a key continues that key's comment."""
    entries: dict[str, tuple[str, str]] = {}
    section, last = None, None
    for line in (root / TRAIN_YAML).read_text().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            continue
        if stripped.startswith("#"):
            if last and indent > 2:
                value, comment = entries[last]
                entries[last] = (value, f"{comment} {stripped.lstrip('#').strip()}".strip())
            continue
        body, _, comment = line.partition(" #")
        key, _, value = body.strip().partition(":")
        if indent == 0:
            section, last = (key if not value.strip() else None), None
            continue
        if section and indent == 2:
            last = f"{section}.{key}"
            entries[last] = (value.strip(), comment.strip())
    return entries


def _cell(text: str) -> str:
    """Plain text for a table cell: pipes escaped, ``<placeholders>`` kept as text."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """A code span for a table cell (a pipe inside a code span does not split the cell)."""
    return f"`{text}`" if text else ""


def _as_yaml(default: str) -> str:
    """A Python default as it is written on the command line: ``True`` -> ``true``, ``None`` -> ``null``."""
    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return default
    return json.dumps(value) if not isinstance(value, str) else value


def _merge_comments(schema_comment: str, yaml_comment: str) -> str:
    if not yaml_comment or yaml_comment == schema_comment:
        return schema_comment
    if not schema_comment:
        return yaml_comment
    return f"{schema_comment} (`train.yaml`: {yaml_comment})"


def _all_fields(schema: Schema, schemas: dict[str, Schema]) -> list[Field]:
    inherited = [f for base in schema.bases if base in schemas for f in _all_fields(schemas[base], schemas)]
    return inherited + schema.fields


def _table(prefix: str, schema: Schema, schemas: dict[str, Schema], yaml: dict | None) -> list[str]:
    """The section of one dataclass, then those of its nested dataclasses."""
    title = f"`{prefix}`" if prefix else f"`{schema.name}`"
    lines = [f"### {title}", "", f"Schema: `{schema.module}.{schema.name}`."]
    if schema.doc:
        lines += ["", schema.doc.replace("``", "`")]
    with_yaml = yaml is not None
    header = "| field | type | default | comment |"
    if with_yaml:
        header = "| field | type | schema default | `train.yaml` | comment |"
    lines += ["", header, "|---" * header.count(" | ") + "|---|"]
    nested = []
    for f in _all_fields(schema, schemas):
        key = f"{prefix}.{f.name}" if prefix else f.name
        if f.type in schemas:
            nested.append((key, schemas[f.type]))
            default = f"see `{key}`"
        else:
            default = _code(_as_yaml(f.default))
        comment = f.comment
        row = [f"`{f.name}`", _code(f.type), default]
        if with_yaml:
            value, yaml_comment = yaml.get(key, ("", ""))
            row.append(_code(value))
            comment = _merge_comments(comment, yaml_comment)
        row.append(_cell(comment))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for key, child in nested:
        lines += _table(key, child, schemas, yaml)
    return lines


def _group_files(root: Path) -> list[str]:
    """The files of the groups ``algo``, ``model`` and ``engine``: what each choice sets over the schema."""
    lines = [
        "### The group files",
        "",
        "`algo=<name>`, `model=<name>` and `engine=<name>` load `configs/training/<group>/<name>.yaml` over the"
        " schema's defaults (and `configs/train.yaml` over both); command-line overrides come last.",
        "",
    ]
    for group in ("algo", "model", "engine"):
        for path in sorted((root / "configs" / "training" / group).glob("*.yaml")):
            lines += [f"#### `{group}={path.stem}`", "", "```yaml", path.read_text().rstrip(), "```", ""]
    return lines


def render_reference(root: Path = ROOT) -> str:
    schemas = read_schemas(root)
    yaml = read_train_yaml(root)
    lines = ["## `python -m trainer.run` (`TrainConfig`)", ""]
    lines += [
        "Each section below is a group or a plain section of `configs/train.yaml`; set a field on the command"
        " line as `<section>.<field>=<value>`. `env` is the environment's own options (`configs/env/<id>.yaml`,"
        " see [Environments](environments.md)); the groups `algo`, `model` and `engine` start from their files"
        " in `configs/training/`, which override some schema defaults.",
        "",
    ]
    for f in schemas["TrainConfig"].fields:
        if f.type in schemas:
            lines += _table(f.name, schemas[f.type], schemas, yaml)
    lines += _group_files(root)
    for command, name in (("agents.play", "PlayConfig"), ("agents.eval", "EvalConfig")):
        lines += [f"## `python -m {command}` (`{name}`)", ""]
        lines += _table("", schemas[name], schemas, None)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:  # mkdocs' hook signature
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker {MARKER}: the generated reference has nowhere to go")
    return markdown.replace(MARKER, render_reference())
