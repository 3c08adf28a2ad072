"""turngym's tool-call parsers and schema validator against BFCL's ground truth, by BFCL's AST-match rules.

    pip install --no-deps bfcl-eval==2026.3.23      # the data only; never a runtime dependency
    python benchmarks/bfcl_parser.py                  # a few seconds

For each case of BFCL's ``simple`` (Python), ``multiple`` and ``parallel`` categories, the ground-truth
calls (one acceptable value per argument: the first listed that is not ``""``; an argument whose
only acceptable value is ``""`` is left out, as BFCL's "optional, may be omitted") are rendered
two ways, as Hermes ``<tool_call>`` text and as OpenAI ``tool_calls``, and parsed back with
:func:`tools.parsers.parse_hermes` and :func:`tools.parsers.parse_openai_tool_calls`. The parsed
calls are then

* validated against the case's function schemas (BFCL's types mapped to JSON Schema: ``dict`` ->
  ``object``, ``float`` -> ``number``, ``tuple`` -> ``array``, ``any`` -> unconstrained; its
  non-standard ``optional`` flag dropped) with :func:`tools.schema.validate`;
* matched against the acceptable answers with BFCL's AST rules, implemented here from its
  documentation: the function name is equal; every required argument is present; no argument
  outside the schema or the answer; Python types as BFCL checks them (an int is accepted for a
  float); strings compared after removing spaces and ``,./-_*^`` and lower-casing; lists
  element-wise, dicts key by key; an omitted argument must allow ``""``; ``parallel`` cases match
  calls to answers in any order, one to one.

As a control that the matcher rejects wrong calls, each case is also checked with one argument
value replaced by a value no answer lists: the share of such perturbed cases rejected is reported.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.base import ToolCall  # noqa: E402
from tools.parsers import parse_hermes, parse_openai_tool_calls, render_hermes, to_openai_tool_calls  # noqa: E402
from tools.schema import check_schema, validate  # noqa: E402

INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
CATEGORIES = {
    "simple": "BFCL_v4_simple_python.json",
    "multiple": "BFCL_v4_multiple.json",
    "parallel": "BFCL_v4_parallel.json",
}
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer", "string": "string"}
_PYTHON_TYPES = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list}
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")
_NOT_AN_ANSWER = "\u2603 not an acceptable value \u2603"


def data_dir() -> Path:
    """BFCL's data folder inside the installed ``bfcl-eval`` package (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise ImportError(f"BFCL's data ships in the bfcl-eval package: {INSTALL}")
    return Path(spec.origin).parent / "data"


def load_cases(category: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """Cases of one category, each with its ``function`` list and ``ground_truth``."""
    directory = directory or data_dir()
    name = CATEGORIES[category]
    questions = [json.loads(line) for line in (directory / name).read_text().splitlines() if line.strip()]
    answers = {}
    for line in (directory / "possible_answer" / name).read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            answers[entry["id"]] = entry["ground_truth"]
    return [{**case, "ground_truth": answers[case["id"]]} for case in questions]


# --------------------------------------------------------------------------------------------------
# Schemas and ground truth
# --------------------------------------------------------------------------------------------------
def to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema in standard JSON Schema (the subset :mod:`tools.schema` checks)."""
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":
            continue
        if key == "type":
            if value != "any":
                converted["type"] = _TYPES.get(value, value)
        elif key == "properties":
            converted["properties"] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            converted["items"] = to_json_schema(value)
        else:
            converted[key] = value
    return converted


def _choose(acceptable: list[Any]) -> tuple[bool, Any]:
    """(present, value): the first acceptable value that is not ``""``, resolved recursively."""
    for option in acceptable:
        if option == "":
            continue
        return True, _resolve(option)
    return False, None


def _resolve(value: Any) -> Any:
    """A concrete value from an acceptable one: dicts hold lists of acceptable values per key."""
    if isinstance(value, dict):
        resolved = {}
        for key, options in value.items():
            present, chosen = _choose(options if isinstance(options, list) else [options])
            if present:
                resolved[key] = chosen
        return resolved
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return [_resolve(item) for item in value]
    return value


def gold_calls(case: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The case's ground truth as concrete calls (name, arguments)."""
    calls = []
    for entry in case["ground_truth"]:
        [(name, parameters)] = entry.items()
        arguments = {}
        for parameter, acceptable in parameters.items():
            present, value = _choose(acceptable)
            if present:
                arguments[parameter] = value
        calls.append((name, arguments))
    return calls


# --------------------------------------------------------------------------------------------------
# BFCL's AST match
# --------------------------------------------------------------------------------------------------
def _standardize(text: str) -> str:
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _same_value(value: Any, acceptable: list[Any]) -> bool:
    """Whether ``value`` is one of the acceptable values (strings standardized, lists element-wise)."""
    if isinstance(value, str):
        return _standardize(value) in {_standardize(a) for a in acceptable if isinstance(a, str)}
    if isinstance(value, list) and not any(isinstance(v, dict) for v in value):
        wanted = [[_standardize(x) if isinstance(x, str) else x for x in a] for a in acceptable if isinstance(a, list)]
        return [_standardize(x) if isinstance(x, str) else x for x in value] in wanted
    return value in acceptable


def _dict_matches(value: Mapping[str, Any], acceptable: Mapping[str, list[Any]]) -> bool:
    for key, item in value.items():
        if key not in acceptable or not _same_value(item, acceptable[key]):
            return False
    return all(key in value or "" in options for key, options in acceptable.items())


def _value_matches(value: Any, acceptable: list[Any], bfcl_type: str, item_type: str | None) -> bool:
    expected = _PYTHON_TYPES.get(bfcl_type, dict if bfcl_type == "dict" else str)
    if bfcl_type == "float" and type(value) is int:
        value = float(value)
    if bfcl_type != "any" and type(value) is not expected:
        return False
    if bfcl_type == "dict":
        return any(_dict_matches(value, option) for option in acceptable if isinstance(option, dict))
    if bfcl_type == "array" and item_type == "dict":
        return any(
            isinstance(option, list)
            and len(option) == len(value)
            and all(_dict_matches(v, o) for v, o in zip(value, option, strict=True))
            for option in acceptable
        )
    return _same_value(value, acceptable)


def call_matches(call: ToolCall, function: Mapping[str, Any], answer: Mapping[str, list[Any]]) -> bool:
    """BFCL's AST check of one call against one function description and its acceptable arguments."""
    if call.error or call.name != function["name"]:
        return False
    properties = function["parameters"].get("properties", {})
    if any(name not in call.arguments for name in function["parameters"].get("required", [])):
        return False
    for name, value in call.arguments.items():
        if name not in properties or name not in answer:
            return False
        item_type = properties[name].get("items", {}).get("type")
        if not _value_matches(value, answer[name], properties[name]["type"], item_type):
            return False
    return all(name in call.arguments or "" in options for name, options in answer.items())


def case_matches(calls: tuple[ToolCall, ...], case: Mapping[str, Any]) -> bool:
    """All ground-truth calls matched one to one by the parsed calls (any order)."""
    functions = {f["name"]: f for f in case["function"]}
    answers = [next(iter(entry.items())) for entry in case["ground_truth"]]
    if len(calls) != len(answers):
        return False
    unused = list(calls)
    for name, answer in answers:
        function = functions[name]
        match = next((c for c in unused if call_matches(c, function, answer)), None)
        if match is None:
            return False
        unused.remove(match)
    return True


def _perturb(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls with the first argument value replaced by one no answer lists (None: no argument)."""
    for index, (name, arguments) in enumerate(calls):
        if arguments:
            key = next(iter(arguments))
            changed = list(calls)
            changed[index] = (name, {**arguments, key: _NOT_AN_ANSWER})
            return changed
    return None


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------
@dataclass
class Figures:
    cases: int = 0
    hermes_exact: int = 0  # parsed calls equal the rendered ones
    openai_exact: int = 0
    schema_valid: int = 0  # every parsed call passes the JSON-schema validation
    hermes_ast: int = 0  # BFCL's AST match on the Hermes round trip
    openai_ast: int = 0
    perturbed: int = 0
    perturbed_rejected: int = 0


def evaluate_case(case: Mapping[str, Any], figures: Figures, failures: list[str]) -> None:
    calls = gold_calls(case)
    schemas = {f["name"]: to_json_schema(f["parameters"]) for f in case["function"]}
    for schema in schemas.values():
        check_schema(schema)
    hermes = parse_hermes(render_hermes(calls)).calls
    openai = parse_openai_tool_calls(json.loads(json.dumps(to_openai_tool_calls(calls))))
    figures.cases += 1
    figures.hermes_exact += [(c.name, dict(c.arguments)) for c in hermes] == calls
    figures.openai_exact += [(c.name, dict(c.arguments)) for c in openai] == calls
    problems = [p for c in hermes for p in validate(c.arguments, schemas.get(c.name, {}))]
    figures.schema_valid += not problems
    hermes_ok, openai_ok = case_matches(hermes, case), case_matches(openai, case)
    figures.hermes_ast += hermes_ok
    figures.openai_ast += openai_ok
    if problems or not hermes_ok or not openai_ok:
        failures.append(f"{case['id']}: schema problems {problems}, AST hermes={hermes_ok} openai={openai_ok}")
    perturbed = _perturb(calls)
    if perturbed is not None:
        figures.perturbed += 1
        figures.perturbed_rejected += not case_matches(parse_hermes(render_hermes(perturbed)).calls, case)


def run(categories: list[str], directory: Path | None = None) -> tuple[dict[str, Figures], list[str]]:
    results, failures = {}, []
    for category in categories:
        figures = Figures()
        for case in load_cases(category, directory):
            evaluate_case(case, figures, failures)
        results[category] = figures
    return results, failures


def _table(results: Mapping[str, Figures]) -> str:
    header = "category  cases  hermes exact  openai exact  schema valid  AST hermes  AST openai  perturbed rejected"
    rows = [header]
    for category, f in results.items():
        rows.append(
            f"{category:<9} {f.cases:>5}  {f.hermes_exact:>12}  {f.openai_exact:>12}  {f.schema_valid:>12}  "
            f"{f.hermes_ast:>10}  {f.openai_ast:>10}  {f.perturbed_rejected:>8} of {f.perturbed}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES), choices=list(CATEGORIES))
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    results, failures = run(args.categories)
    print(_table(results))
    for failure in failures[:20]:
        print("  " + failure)
    if args.json:
        args.json.write_text(json.dumps({k: vars(v) for k, v in results.items()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
