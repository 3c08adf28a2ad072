"""Question templates of the tool-calling tasks: one function per kind of question.

Each template draws its entities with the given ``random.Random`` and returns a task's fields (all
but ``id`` and ``split``): the question, the answer computed from the world's data, and the gold
turns of tool calls. ``hops`` counts the gold call turns (dependent steps); calls inside one turn
are independent. Numeric questions state their rounding; the tolerance is one unit of the last
requested decimal (0 for exact integers).
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
from collections.abc import Callable, Mapping
from typing import Any

from envs.toolcall.tasks import Call
from tools.calculator import format_number

__all__ = ["STATEFUL_TEMPLATES", "TEMPLATES"]

World = Mapping[str, Any]
Template = Callable[[random.Random, World], dict[str, Any]]
TEMPLATES: dict[str, Template] = {}
STATEFUL_TEMPLATES: set[str] = set()


def _template(stateful: bool = False) -> Callable[[Template], Template]:
    def register(function: Template) -> Template:
        TEMPLATES[function.__name__] = function
        if stateful:
            STATEFUL_TEMPLATES.add(function.__name__)
        return function

    return register


def _lookup(table: str, key: str, field: str | None = None) -> Call:
    args = {"table": table, "key": key}
    if field is not None:
        args["field"] = field
    return ("lookup", args)


def _convert(value: float, from_unit: str, to_unit: str) -> Call:
    return ("convert_units", {"value": value, "from_unit": from_unit, "to_unit": to_unit})


def _date(operation: str, date: str, **extra: Any) -> Call:
    return ("date_calculator", {"operation": operation, "date": date, **extra})


def _task(question: str, turns: list[list[Call]], **answer: Any) -> dict[str, Any]:
    gold = [[{"name": name, "arguments": arguments} for name, arguments in turn] for turn in turns]
    return {"question": question, "gold_turns": gold, "hops": len(turns), **answer}


def _number(value: float, decimals: int | None = None) -> dict[str, Any]:
    """Answer fields of a numeric task rounded to ``decimals`` (``None``: an exact integer)."""
    if decimals is None:
        return {"kind": "number", "answer": str(int(value)), "tolerance": 0.0}
    return {"kind": "number", "answer": format_number(round(value, decimals)), "tolerance": 10.0**-decimals}


def _text(value: str) -> dict[str, Any]:
    return {"kind": "text", "answer": value, "accepted": [value]}


# Conversions written out here (exact legal definitions), independent of the unit tool's tables.
_TO_METRIC = {"mi": 1.609344, "gal": 3.785411784, "lb": 0.45359237, "acre": 0.40468564224, "knot": 1.852}


def convert(value: float, source: str, target: str) -> float:
    """The conversions the templates ask for."""
    if (source, target) == ("F", "C"):
        return (value - 32) * 5 / 9
    if source in _TO_METRIC:
        return value * _TO_METRIC[source]
    feet = {"cm": 30.48, "m": 0.3048}
    if target == "ft":
        return value / feet[source]
    if (source, target) == ("kg", "lb"):
        return value / 0.45359237
    if (source, target) == ("km", "mi"):
        return value / 1.609344
    raise ValueError(f"no conversion {source} -> {target} in the templates")


def years_between(born: str, day: str) -> int:
    """Whole years from ``born`` to ``day`` (an age), negative when ``day`` comes first."""
    start, end = dt.date.fromisoformat(born), dt.date.fromisoformat(day)
    sign = 1
    if end < start:
        start, end, sign = end, start, -1
    return sign * (end.year - start.year - ((end.month, end.day) < (start.month, start.day)))


def _pick(rng: random.Random, world: World, table: str) -> dict[str, Any]:
    return rng.choice(world["tables"][table])


def _get(world: World, table: str, name: str) -> dict[str, Any]:
    return next(r for r in world["tables"][table] if r["name"] == name)


def _rounding(decimals: int) -> str:
    return "Round to the nearest whole number." if decimals == 0 else f"Round to {decimals} decimal places."


# --------------------------------------------------------------------------------------------------
# One hop
# --------------------------------------------------------------------------------------------------
@_template()
def city_population(rng: random.Random, world: World) -> dict[str, Any]:
    city = _pick(rng, world, "cities")
    return _task(
        f"What is the population of {city['name']}?",
        [[_lookup("cities", city["name"], "population")]],
        **_number(city["population"]),
    )


@_template()
def product_weight_lb(rng: random.Random, world: World) -> dict[str, Any]:
    product = _pick(rng, world, "products")
    kg = product["weight_kg"]
    return _task(
        f"How much does one {product['name']} weigh, in pounds? {_rounding(2)}",
        [[_lookup("products", product["name"], "weight_kg")], [_convert(kg, "kg", "lb")]],
        **_number(convert(kg, "kg", "lb"), 2),
    )


@_template()
def company_founder(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    return _task(
        f"Who founded {company['name']}? Answer with the full name.",
        [[("search", {"query": f"{company['name']} founded by"})]],
        **_text(world["founders"][company["name"]]),
    )


@_template()
def arithmetic(rng: random.Random, world: World) -> dict[str, Any]:
    a, b, c, d = rng.randrange(12, 999), rng.randrange(3, 99), rng.randrange(1, 5000), rng.randrange(2, 60)
    expression = f"({a} * {b} - {c}) / {d}"
    return _task(
        f"Compute ({a} × {b} − {c}) ÷ {d}. {_rounding(3)}",
        [[("calculator", {"expression": expression})]],
        **_number((a * b - c) / d, 3),
    )


@_template()
def unit_conversion(rng: random.Random, world: World) -> dict[str, Any]:
    value, source, target = rng.choice(
        [
            (rng.randrange(1, 500), "mi", "km"),
            (rng.randrange(1, 500), "gal", "l"),
            (rng.randrange(-40, 120), "F", "C"),
            (rng.randrange(1, 300), "lb", "kg"),
            (rng.randrange(1, 90), "acre", "ha"),
            (rng.randrange(5, 300), "knot", "km/h"),
        ]
    )
    return _task(
        f"Convert {value} {source} to {target}. {_rounding(2)}",
        [[_convert(value, source, target)]],
        **_number(convert(value, source, target), 2),
    )


@_template()
def date_after(rng: random.Random, world: World) -> dict[str, Any]:
    start = dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(2000))
    days = rng.randrange(10, 1500)
    answer = (start + dt.timedelta(days=days)).isoformat()
    return _task(
        f"Which date is {days} days after {start.isoformat()}? Answer as YYYY-MM-DD.",
        [[_date("add_days", start.isoformat(), days=days)]],
        kind="date",
        answer=answer,
    )


# --------------------------------------------------------------------------------------------------
# Two hops
# --------------------------------------------------------------------------------------------------
@_template()
def company_country(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    city = _get(world, "cities", company["headquarters"])
    return _task(
        f"In which country does {company['name']} have its headquarters?",
        [[_lookup("companies", company["name"], "headquarters")], [_lookup("cities", city["name"], "country")]],
        **_text(city["country"]),
    )


@_template()
def maker_employees(rng: random.Random, world: World) -> dict[str, Any]:
    product = _pick(rng, world, "products")
    company = _get(world, "companies", product["maker"])
    return _task(
        f"How many employees does the company that makes the {product['name']} have?",
        [[_lookup("products", product["name"], "maker")], [_lookup("companies", company["name"], "employees")]],
        **_number(company["employees"]),
    )


@_template()
def founding_weekday(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    weekday = calendar.day_name[dt.date.fromisoformat(company["founded"]).weekday()]
    return _task(
        f"On which day of the week was {company['name']} founded?",
        [[_lookup("companies", company["name"], "founded")], [_date("weekday", company["founded"])]],
        **_text(weekday),
    )


@_template()
def population_density(rng: random.Random, world: World) -> dict[str, Any]:
    city = _pick(rng, world, "cities")
    expression = f"{city['population']} / {format_number(city['area_km2'])}"
    return _task(
        f"What is the population density of {city['name']} in people per square kilometre? {_rounding(1)}",
        [[_lookup("cities", city["name"])], [("calculator", {"expression": expression})]],
        **_number(city["population"] / city["area_km2"], 1),
    )


@_template()
def order_total(rng: random.Random, world: World) -> dict[str, Any]:
    product = _pick(rng, world, "products")
    units = rng.randrange(2, 40)
    price = format_number(product["price_usd"])
    return _task(
        f"How much do {units} units of the {product['name']} cost in total, in US dollars? {_rounding(2)}",
        [[_lookup("products", product["name"], "price_usd")], [("calculator", {"expression": f"{units} * {price}"})]],
        **_number(units * product["price_usd"], 2),
    )


@_template()
def age_at_release(rng: random.Random, world: World) -> dict[str, Any]:
    person, product = _pick(rng, world, "people"), _pick(rng, world, "products")
    born, released = person["born"], product["released"]
    years = years_between(born, released)
    return _task(
        f"How old was {person['name']}, in whole years, on the day the {product['name']} was released?",
        [
            [_lookup("people", person["name"], "born"), _lookup("products", product["name"], "released")],
            [_date("years_between", born, other_date=released)],
        ],
        **_number(years),
    )


@_template()
def days_between_releases(rng: random.Random, world: World) -> dict[str, Any]:
    first, second = sorted(rng.sample(world["tables"]["products"], 2), key=lambda p: p["released"])
    days = (dt.date.fromisoformat(second["released"]) - dt.date.fromisoformat(first["released"])).days
    return _task(
        f"How many days after the {first['name']} was the {second['name']} released?",
        [
            [_lookup("products", first["name"], "released"), _lookup("products", second["name"], "released")],
            [_date("days_between", first["released"], other_date=second["released"])],
        ],
        **_number(days),
    )


@_template()
def river_length_mi(rng: random.Random, world: World) -> dict[str, Any]:
    city = _pick(rng, world, "cities")
    km = world["city_facts"][city["name"]]["river_length_km"]
    return _task(
        f"How long, in miles, is the river that flows through {city['name']}? {_rounding(1)}",
        [[("search", {"query": f"river {city['name']}"})], [_convert(km, "km", "mi")]],
        **_number(convert(km, "km", "mi"), 1),
    )


@_template()
def festival_weekday(rng: random.Random, world: World) -> dict[str, Any]:
    city = _pick(rng, world, "cities")
    facts = world["city_facts"][city["name"]]
    year = rng.randrange(2025, 2031)
    date = f"{year}-{facts['festival_date']}"
    weekday = calendar.day_name[dt.date.fromisoformat(date).weekday()]
    return _task(
        f"{city['name']} holds its {facts['festival']} on the same date every year. "
        f"On which day of the week will it fall in {year}?",
        [[("search", {"query": f"{facts['festival']} {city['name']}"})], [_date("weekday", date)]],
        **_text(weekday),
    )


# --------------------------------------------------------------------------------------------------
# Three hops and more
# --------------------------------------------------------------------------------------------------
@_template()
def ceo_height_ft(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    person = _get(world, "people", company["ceo"])
    cm = person["height_cm"]
    return _task(
        f"How tall is the CEO of {company['name']}, in feet? {_rounding(2)}",
        [
            [_lookup("companies", company["name"], "ceo")],
            [_lookup("people", person["name"], "height_cm")],
            [_convert(cm, "cm", "ft")],
        ],
        **_number(convert(cm, "cm", "ft"), 2),
    )


@_template()
def hq_building_ft(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    city = company["headquarters"]
    metres = world["city_facts"][city]["building_height_m"]
    return _task(
        f"How tall, in feet, is the tallest building in the city where {company['name']} has its headquarters? "
        f"{_rounding(1)}",
        [
            [_lookup("companies", company["name"], "headquarters")],
            [("search", {"query": f"tallest building {city}"})],
            [_convert(metres, "m", "ft")],
        ],
        **_number(convert(metres, "m", "ft"), 1),
    )


@_template()
def maker_city_elevation_ft(rng: random.Random, world: World) -> dict[str, Any]:
    product = _pick(rng, world, "products")
    company = _get(world, "companies", product["maker"])
    city = _get(world, "cities", company["headquarters"])
    metres = city["elevation_m"]
    return _task(
        f"What is the elevation, in feet, of the headquarters city of the company that makes the "
        f"{product['name']}? {_rounding(0)}",
        [
            [_lookup("products", product["name"], "maker")],
            [_lookup("companies", company["name"], "headquarters")],
            [_lookup("cities", city["name"], "elevation_m")],
            [_convert(metres, "m", "ft")],
        ],
        **_number(convert(metres, "m", "ft"), 0),
    )


@_template()
def ceo_age_at_founding(rng: random.Random, world: World) -> dict[str, Any]:
    company = _pick(rng, world, "companies")
    person = _get(world, "people", company["ceo"])
    years = years_between(person["born"], company["founded"])
    return _task(
        f"How many whole years passed between the birth of the CEO of {company['name']} and the founding of "
        f"{company['name']}? (Negative if the company was founded before the CEO was born.)",
        [
            [_lookup("companies", company["name"])],
            [_lookup("people", person["name"], "born")],
            [_date("years_between", person["born"], other_date=company["founded"])],
        ],
        **_number(years),
    )
