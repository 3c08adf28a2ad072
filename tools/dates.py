"""Date arithmetic on ISO dates (``YYYY-MM-DD``, proleptic Gregorian calendar, no time zones).

Operations:

* ``add_days(date, days)``: the date ``days`` later (negative: earlier);
* ``add_months(date, months)``: calendar months later, the day clamped to the month's end
  (2024-01-31 plus 1 month is 2024-02-29);
* ``days_between(date, other_date)``: ``other_date - date`` in days (negative if it is earlier);
* ``years_between(date, other_date)``: whole years from ``date`` to ``other_date`` (an age: the
  count goes up on the anniversary; a 29 February anniversary falls on 1 March in common years);
* ``weekday(date)``: the English weekday name.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Mapping
from typing import Any

from tools.base import Stateless, ToolResult

__all__ = ["DateTool", "add_months", "parse_date", "years_between"]

_OPERATIONS = ("add_days", "add_months", "days_between", "years_between", "weekday")
_NEEDS = {
    "add_days": ("days",),
    "add_months": ("months",),
    "days_between": ("other_date",),
    "years_between": ("other_date",),
    "weekday": (),
}


def parse_date(text: str, argument: str = "date") -> dt.date:
    """An ISO date; raises ``ValueError`` with a message that says the expected format."""
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{argument} must be a date written YYYY-MM-DD, e.g. 2024-03-15, got {text!r}") from None


def add_months(date: dt.date, months: int) -> dt.date:
    index = date.year * 12 + (date.month - 1) + months
    year, month = divmod(index, 12)
    if not dt.MINYEAR <= year <= dt.MAXYEAR:
        raise OverflowError("date out of range")
    day = min(date.day, calendar.monthrange(year, month + 1)[1])
    return dt.date(year, month + 1, day)


def years_between(start: dt.date, end: dt.date) -> int:
    """Whole years from ``start`` to ``end`` (negative when ``end`` is earlier)."""
    if end < start:
        return -years_between(end, start)
    years = end.year - start.year
    if (end.month, end.day) < (start.month, start.day):
        years -= 1
    return years


class DateTool(Stateless):
    """Adds days or months to dates, counts days or whole years between dates, names weekdays."""

    name = "date_calculator"
    description = (
        "Date arithmetic on YYYY-MM-DD dates. operation: add_days (date, days), add_months (date, months), "
        "days_between (date, other_date: other_date minus date), years_between (date, other_date: whole years, "
        "as for an age), weekday (date)."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": list(_OPERATIONS)},
            "date": {"type": "string", "description": "A date, YYYY-MM-DD"},
            "other_date": {"type": "string", "description": "A second date, YYYY-MM-DD"},
            "days": {"type": "integer", "description": "Days to add (negative to subtract)"},
            "months": {"type": "integer", "description": "Months to add (negative to subtract)"},
        },
        "required": ["operation", "date"],
        "additionalProperties": False,
    }

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        operation = arguments["operation"]
        missing = [name for name in _NEEDS[operation] if name not in arguments]
        if missing:
            return ToolResult.error(f"{operation} needs the argument(s) {', '.join(missing)}")
        try:
            return ToolResult(_compute(operation, arguments))
        except ValueError as exc:
            return ToolResult.error(str(exc))
        except OverflowError:
            return ToolResult.error("the date is out of range (years 1 to 9999)")


def _compute(operation: str, arguments: Mapping[str, Any]) -> str:
    date = parse_date(arguments["date"])
    if operation == "add_days":
        return (date + dt.timedelta(days=int(arguments["days"]))).isoformat()
    if operation == "add_months":
        return add_months(date, int(arguments["months"])).isoformat()
    if operation == "weekday":
        return calendar.day_name[date.weekday()]
    other = parse_date(arguments["other_date"], "other_date")
    if operation == "days_between":
        return str((other - date).days)
    return str(years_between(date, other))
