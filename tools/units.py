"""Unit conversion: length, mass, time, temperature, volume, area and speed.

Each unit is a factor to its dimension's base unit (metre, kilogram, second, cubic metre, square
metre, metre per second); temperatures are affine (an offset and a ratio to Celsius). Results are
rounded to 12 significant digits, which removes binary floating-point noise. Factors are
the exact legal definitions where one exists (1 in = 0.0254 m, 1 lb = 0.45359237 kg, 1 US gal =
231 in³). A year is 365 days and a month 30 days (calendar arithmetic belongs to the date tool).
Unit names are case-insensitive apart from a few symbols, and plurals are accepted ("miles", "kg",
"Fahrenheit", "°C"). Converting across dimensions is an error that names both dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tools.base import Stateless, ToolResult
from tools.calculator import format_number

__all__ = ["UnitError", "UnitTool", "convert", "known_units"]

_INCH = 0.0254
_FOOT = 12 * _INCH
_MILE = 5280 * _FOOT
_GALLON = 231 * _INCH**3
_POUND = 0.45359237

# dimension -> unit symbol -> (factor to the base unit, aliases)
_UNITS: dict[str, dict[str, tuple[float, tuple[str, ...]]]] = {
    "length": {
        "m": (1.0, ("meter", "meters", "metre", "metres")),
        "km": (1000.0, ("kilometer", "kilometers", "kilometre", "kilometres")),
        "cm": (0.01, ("centimeter", "centimeters", "centimetre", "centimetres")),
        "mm": (0.001, ("millimeter", "millimeters", "millimetre", "millimetres")),
        "mi": (_MILE, ("mile", "miles")),
        "yd": (3 * _FOOT, ("yard", "yards")),
        "ft": (_FOOT, ("foot", "feet")),
        "in": (_INCH, ("inch", "inches")),
        "nmi": (1852.0, ("nautical mile", "nautical miles")),
    },
    "mass": {
        "kg": (1.0, ("kilogram", "kilograms")),
        "g": (0.001, ("gram", "grams")),
        "mg": (1e-6, ("milligram", "milligrams")),
        "t": (1000.0, ("tonne", "tonnes", "metric ton", "metric tons")),
        "lb": (_POUND, ("lbs", "pound", "pounds")),
        "oz": (_POUND / 16, ("ounce", "ounces")),
        "st": (14 * _POUND, ("stone", "stones")),
    },
    "time": {
        "s": (1.0, ("sec", "second", "seconds")),
        "ms": (0.001, ("millisecond", "milliseconds")),
        "min": (60.0, ("minute", "minutes")),
        "h": (3600.0, ("hr", "hour", "hours")),
        "day": (86400.0, ("d", "days")),
        "week": (7 * 86400.0, ("wk", "weeks")),
        "month": (30 * 86400.0, ("months",)),
        "year": (365 * 86400.0, ("yr", "years")),
    },
    "volume": {
        "m3": (1.0, ("cubic meter", "cubic meters", "cubic metre", "cubic metres", "m^3")),
        "l": (0.001, ("liter", "liters", "litre", "litres")),
        "ml": (1e-6, ("milliliter", "milliliters", "millilitre", "millilitres")),
        "gal": (_GALLON, ("gallon", "gallons")),
        "qt": (_GALLON / 4, ("quart", "quarts")),
        "pt": (_GALLON / 8, ("pint", "pints")),
        "cup": (_GALLON / 16, ("cups",)),
        "fl_oz": (_GALLON / 128, ("fl oz", "fluid ounce", "fluid ounces")),
    },
    "area": {
        "m2": (1.0, ("square meter", "square meters", "square metre", "square metres", "m^2")),
        "km2": (1e6, ("square kilometer", "square kilometers", "square kilometre", "square kilometres", "km^2")),
        "ha": (1e4, ("hectare", "hectares")),
        "acre": (4840 * (3 * _FOOT) ** 2, ("acres",)),
        "ft2": (_FOOT**2, ("square foot", "square feet", "ft^2")),
        "mi2": (_MILE**2, ("square mile", "square miles", "mi^2")),
    },
    "speed": {
        "m/s": (1.0, ("meters per second", "metres per second", "mps")),
        "km/h": (1000 / 3600, ("kph", "kmh", "kilometers per hour", "kilometres per hour")),
        "mph": (_MILE / 3600, ("miles per hour", "mi/h")),
        "knot": (1852 / 3600, ("knots", "kn", "kt")),
    },
}
# temperature: unit -> (zero, numerator, denominator): celsius = (value - zero) * numerator / denominator
_TEMPERATURES: dict[str, tuple[float, int, int, tuple[str, ...]]] = {
    "C": (0.0, 1, 1, ("celsius", "°c", "degc", "degrees celsius")),
    "F": (32.0, 5, 9, ("fahrenheit", "°f", "degf", "degrees fahrenheit")),
    "K": (273.15, 1, 1, ("kelvin", "kelvins")),
}


class UnitError(ValueError):
    """An unknown unit or a conversion between dimensions; the message lists what is accepted."""


def _build_index() -> dict[str, tuple[str, str]]:
    entries = [(dim, symbol, aliases) for dim, units in _UNITS.items() for symbol, (_, aliases) in units.items()]
    entries += [("temperature", symbol, aliases) for symbol, (*_, aliases) in _TEMPERATURES.items()]
    index: dict[str, tuple[str, str]] = {}
    for dimension, symbol, aliases in entries:
        for name in (symbol, *aliases):
            if name.lower() in index:
                raise AssertionError(f"unit name {name!r} is ambiguous")
            index[name.lower()] = (dimension, symbol)
    return index


_INDEX = _build_index()


def known_units() -> dict[str, list[str]]:
    """Unit symbols by dimension."""
    known = {dimension: list(units) for dimension, units in _UNITS.items()}
    known["temperature"] = list(_TEMPERATURES)
    return known


def _resolve(unit: str) -> tuple[str, str]:
    found = _INDEX.get(" ".join(unit.strip().lower().split()))
    if found is None:
        listing = "; ".join(f"{dim}: {', '.join(symbols)}" for dim, symbols in known_units().items())
        raise UnitError(f"unknown unit {unit!r}; known units are {listing}")
    return found


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit``; raises :class:`UnitError`."""
    source_dim, source = _resolve(from_unit)
    target_dim, target = _resolve(to_unit)
    if source_dim != target_dim:
        raise UnitError(f"cannot convert {source_dim} ({from_unit}) to {target_dim} ({to_unit})")
    if source_dim == "temperature":
        zero, numerator, denominator, _ = _TEMPERATURES[source]
        celsius = (value - zero) * numerator / denominator
        zero, numerator, denominator, _ = _TEMPERATURES[target]
        result = celsius * denominator / numerator + zero
    else:
        result = value * _UNITS[source_dim][source][0] / _UNITS[target_dim][target][0]
    # 12 significant digits: drops float noise (1 mi = 1.609344 km, not 1.6093439999999999)
    return float(f"{result:.12g}")


class UnitTool(Stateless):
    """Converts a value between units of one dimension."""

    name = "convert_units"
    description = (
        "Convert a value between units of length (m, km, cm, mm, mi, yd, ft, in, nmi), mass (kg, g, mg, t, lb, "
        "oz, st), time (s, ms, min, h, day, week, month=30 days, year=365 days), temperature (C, F, K), volume "
        "(m3, l, ml, gal, qt, pt, cup, fl_oz; US measures), area (m2, km2, ha, acre, ft2, mi2) and speed (m/s, "
        "km/h, mph, knot)."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "value": {"type": "number", "description": "The quantity to convert"},
            "from_unit": {"type": "string", "description": "The unit of value, e.g. 'km'"},
            "to_unit": {"type": "string", "description": "The unit wanted, e.g. 'mi'"},
        },
        "required": ["value", "from_unit", "to_unit"],
        "additionalProperties": False,
    }

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        try:
            result = convert(float(arguments["value"]), arguments["from_unit"], arguments["to_unit"])
        except UnitError as exc:
            return ToolResult.error(str(exc))
        if not math.isfinite(result):
            return ToolResult.error("the result is too large for a float")
        return ToolResult(f"{format_number(result)} {_resolve(arguments['to_unit'])[1]}")
