"""Validation of tool-call arguments against a JSON-schema subset, with errors a model can act on.

The subset covers what tool schemas use in practice:

* ``type``: ``"object"``, ``"array"``, ``"string"``, ``"number"``, ``"integer"``, ``"boolean"``,
  ``"null"``, or a list of them. An integer is also a number; ``true``/``false`` are not numbers;
  ``3.0`` counts as an integer (JSON does not tell ``3`` from ``3.0``).
* objects: ``properties``, ``required``, ``additionalProperties`` (``true``/``false``/a schema);
* arrays: ``items`` (one schema), ``minItems``, ``maxItems``, ``uniqueItems``;
* strings: ``minLength``, ``maxLength``, ``pattern`` (Python ``re.search``);
* numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers, draft 6+);
* any type: ``enum``, ``const``;
* annotations, accepted and not checked: ``description``, ``title``, ``default``, ``examples``,
  ``format``, ``$comment``.

Any other keyword is rejected by :func:`check_schema` (at tool construction), so a schema never
silently promises a constraint that is not enforced. :func:`validate` returns every problem found,
each naming the offending location (``arguments.unit``) and what is allowed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SchemaError", "check_schema", "validate"]

_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_ANNOTATIONS = {"description", "title", "default", "examples", "format", "$comment"}
_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "enum",
    "const",
} | _ANNOTATIONS


class SchemaError(ValueError):
    """A tool's schema uses something outside the supported subset, or is malformed."""


def check_schema(schema: Any, *, where: str = "schema") -> None:
    """Raise :class:`SchemaError` unless ``schema`` lies in the supported subset (recursively)."""
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{where} must be a JSON object (dict), got {type(schema).__name__}")
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise SchemaError(f"{where} uses unsupported keywords {unknown}; supported: {sorted(_KEYWORDS)}")
    types = schema.get("type")
    for name in [types] if isinstance(types, str) else types or []:
        if name not in _TYPES:
            raise SchemaError(f"{where}: unknown type {name!r}; use one of {list(_TYPES)}")
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, where=f"{where}.properties.{name}")
    if isinstance(schema.get("additionalProperties"), Mapping):
        check_schema(schema["additionalProperties"], where=f"{where}.additionalProperties")
    if "items" in schema:
        check_schema(schema["items"], where=f"{where}.items")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"{where}.required must be a list of property names")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except re.error as exc:
            raise SchemaError(f"{where}.pattern is not a valid regular expression: {exc}") from None


def validate(instance: Any, schema: Mapping[str, Any], path: str = "arguments") -> list[str]:
    """Every way ``instance`` breaks ``schema`` (an empty list when it conforms)."""
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_has_type(instance, t) for t in allowed):
            expected = " or ".join(allowed)
            return [f"{path} must be {_article(expected)} {expected}, got {_describe(instance)}"]
    problems: list[str] = []
    if "enum" in schema and not any(_same(instance, option) for option in schema["enum"]):
        options = ", ".join(json.dumps(option) for option in schema["enum"])
        problems.append(f"{path} must be one of {options}, got {_short(instance)}")
    if "const" in schema and not _same(instance, schema["const"]):
        problems.append(f"{path} must be {json.dumps(schema['const'])}, got {_short(instance)}")
    if isinstance(instance, Mapping):
        problems += _validate_object(instance, schema, path)
    elif isinstance(instance, list):
        problems += _validate_array(instance, schema, path)
    elif isinstance(instance, str):
        problems += _validate_string(instance, schema, path)
    elif _is_number(instance):
        problems += _validate_number(instance, schema, path)
    return problems


def _validate_object(instance: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    properties = schema.get("properties") or {}
    required = schema.get("required", [])
    problems = [f"{path}.{name} is required but missing" for name in required if name not in instance]
    extra = schema.get("additionalProperties", True)
    for name, value in instance.items():
        if name in properties:
            problems += validate(value, properties[name], f"{path}.{name}")
        elif extra is False:
            known = ", ".join(properties) or "none"
            problems.append(f"{path}.{name} is not an accepted argument (accepted: {known})")
        elif isinstance(extra, Mapping):
            problems += validate(value, extra, f"{path}.{name}")
    return problems


def _validate_array(instance: list[Any], schema: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    if "minItems" in schema and len(instance) < schema["minItems"]:
        problems.append(f"{path} must have at least {schema['minItems']} items, got {len(instance)}")
    if "maxItems" in schema and len(instance) > schema["maxItems"]:
        problems.append(f"{path} must have at most {schema['maxItems']} items, got {len(instance)}")
    if schema.get("uniqueItems"):
        seen = [json.dumps(item, sort_keys=True) for item in instance]
        if len(set(seen)) < len(seen):
            problems.append(f"{path} must not repeat items")
    if "items" in schema:
        for index, item in enumerate(instance):
            problems += validate(item, schema["items"], f"{path}[{index}]")
    return problems


def _validate_string(instance: str, schema: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    if "minLength" in schema and len(instance) < schema["minLength"]:
        problems.append(f"{path} must have at least {schema['minLength']} characters, got {len(instance)}")
    if "maxLength" in schema and len(instance) > schema["maxLength"]:
        problems.append(f"{path} must have at most {schema['maxLength']} characters, got {len(instance)}")
    if "pattern" in schema and re.search(schema["pattern"], instance) is None:
        problems.append(f"{path} must match the pattern {schema['pattern']!r}, got {_short(instance)}")
    return problems


def _validate_number(instance: float, schema: Mapping[str, Any], path: str) -> list[str]:
    checks = (
        ("minimum", lambda bound: instance >= bound, ">="),
        ("maximum", lambda bound: instance <= bound, "<="),
        ("exclusiveMinimum", lambda bound: instance > bound, ">"),
        ("exclusiveMaximum", lambda bound: instance < bound, "<"),
    )
    return [
        f"{path} must be {sign} {schema[key]}, got {instance}"
        for key, holds, sign in checks
        if key in schema and not holds(schema[key])
    ]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, Mapping)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "number":
        return _is_number(value) and math.isfinite(value)
    if name == "integer":
        return _is_number(value) and math.isfinite(value) and float(value).is_integer()
    return False


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _describe(value: Any) -> str:
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", type(None): "null"}
    kind = "object" if isinstance(value, Mapping) else kinds.get(type(value), type(value).__name__)
    return f"{kind} {_short(value)}"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"
