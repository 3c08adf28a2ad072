"""Lookup over in-memory tables: one record by its key, or one field of it.

Tables are lists of JSON-like records (dicts) with a key field each (``"name"`` unless told
otherwise). Keys match case-insensitively after collapsing whitespace; an unknown key is an error
that suggests the closest keys, an unknown field one that lists the table's fields.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tools.base import Stateless, ToolResult

__all__ = ["LookupTool"]


def _normalize(key: str) -> str:
    return " ".join(key.lower().split())


class LookupTool(Stateless):
    """Finds a record by key in one of several named tables.

    Args:
        tables: table name -> records (dicts with JSON-compatible values).
        key_fields: table name -> the field that identifies a record (default ``"name"``).
        name: the tool's name; description: what the tables hold (shown to the model).
    """

    def __init__(
        self,
        tables: Mapping[str, Sequence[Mapping[str, Any]]],
        *,
        key_fields: Mapping[str, str] | None = None,
        name: str = "lookup",
        description: str = "Look up a record by its key in a table",
    ) -> None:
        if not tables:
            raise ValueError("LookupTool needs at least one table")
        self.name = name
        self.description = description
        self.key_fields = {table: (key_fields or {}).get(table, "name") for table in tables}
        self._index: dict[str, dict[str, Mapping[str, Any]]] = {}
        for table, records in tables.items():
            key_field = self.key_fields[table]
            index: dict[str, Mapping[str, Any]] = {}
            for record in records:
                if key_field not in record:
                    raise ValueError(f"a record of table {table!r} has no key field {key_field!r}: {record!r}")
                key = _normalize(str(record[key_field]))
                if key in index:
                    raise ValueError(f"table {table!r} has two records with the key {record[key_field]!r}")
                index[key] = record
            self._index[table] = index
        self.parameters: Mapping[str, Any] = {
            "type": "object",
            "properties": {
                "table": {"type": "string", "enum": list(tables), "description": "The table to search"},
                "key": {"type": "string", "description": "The record's key (its name), e.g. 'Kestrel Dynamics'"},
                "field": {"type": "string", "description": "Only this field of the record (optional)"},
            },
            "required": ["table", "key"],
            "additionalProperties": False,
        }

    def find(self, table: str, key: str) -> Mapping[str, Any] | None:
        return self._index[table].get(_normalize(key))

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        table, key = arguments["table"], arguments["key"]
        record = self.find(table, key)
        if record is None:
            keys = [str(r[self.key_fields[table]]) for r in self._index[table].values()]
            close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            return ToolResult.error(f"no record {key!r} in table {table!r}{hint}")
        field = arguments.get("field")
        if field is None:
            return ToolResult(json.dumps(record, ensure_ascii=False))
        if field not in record:
            return ToolResult.error(f"records of {table!r} have no field {field!r}; fields: {', '.join(record)}")
        value = record[field]
        return ToolResult(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
