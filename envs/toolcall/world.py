"""The fictional world the tool-calling tasks ask about, generated deterministically from a seed.

Tables (every record keyed by ``name``):

* ``cities``: country, population, area_km2, elevation_m, founded (a year);
* ``companies``: industry, founded (a date), headquarters (a city), ceo (a person), employees,
  revenue_musd (millions of US dollars), products (names);
* ``people``: born (a date), city, employer (a company), job, height_cm;
* ``products``: maker (a company), category, price_usd, weight_kg, released (a date).

Documents (for the search tool) hold facts that are in no table: each city's tallest building
(its height in metres), its river (length in km) and its yearly festival (a month and day), and
each company's founder. The bank (balances in cents, one account per person) and the inventory
(units per product) are the starting states of the stateful tasks.

All names are invented: syllables joined by a seeded ``random.Random``, whose integer-seeded
``choice``/``randrange``/``shuffle`` give the same results on every supported Python.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

__all__ = ["generate_world"]

_SYLLABLES = (
    "bra", "mol", "ven", "dar", "kes", "tor", "lin", "vel", "sar", "quo", "mir", "zan", "pel", "hal",
    "oro", "thal", "ris", "gan", "fen", "lux", "dor", "ema", "nix", "bel", "cor", "ast", "ulm", "jor",
)  # fmt: skip
_CITY_ENDINGS = ("holt", "mere", "ford", "haven", "stad", "port", "wick", "dale")
_COUNTRIES = ("Norvania", "Estrelle", "Kaldor", "Ombria")
_COMPANY_SUFFIXES = ("Dynamics", "Works", "Labs", "Industries", "Systems", "Foundry", "Holdings")
_INDUSTRIES = ("robotics", "textiles", "batteries", "optics", "food", "shipping", "software")
_FIRST_NAMES = (
    "Ilsa", "Torven", "Maren", "Odile", "Kasimir", "Brina", "Evander", "Sunniva", "Lorcan", "Thessaly",
    "Quill", "Ysolde", "Anselm", "Rhosyn", "Dagny", "Caspian", "Wrenna", "Bastien", "Isolde", "Faramond",
)  # fmt: skip
_LAST_NAMES = (
    "Vantrell", "Okonkwe", "Halvorsen", "Desmarais", "Quillfeather", "Ambrecht", "Sorensky", "Lindqvast",
    "Marchetti-Oyelaran", "Tamsworth", "Ferreiro", "Kowalczy", "Abernathe", "Nakagawara", "Oduya",
)  # fmt: skip
_JOBS = ("engineer", "designer", "analyst", "chemist", "pilot", "accountant", "technician", "manager")
_PRODUCT_KINDS = {
    "robotics": ("Rover", "Arm", "Drone"),
    "textiles": ("Coat", "Scarf", "Tent"),
    "batteries": ("Cell", "Pack", "Charger"),
    "optics": ("Lens", "Scope", "Camera"),
    "food": ("Crisps", "Tea", "Syrup"),
    "shipping": ("Crate", "Pallet", "Trolley"),
    "software": ("Suite", "Engine", "Studio"),
}
_FESTIVALS = ("Lantern Festival", "Harvest Fair", "Kite Day", "River Parade", "Winter Market", "Bell Night")
_BUILDING_SUFFIXES = ("Tower", "Spire", "Needle", "Pinnacle")

NUM_CITIES = 12
NUM_COMPANIES = 14
NUM_PEOPLE = 36
PRODUCTS_PER_COMPANY = 2


def _date(rng: random.Random, first_year: int, last_year: int) -> str:
    start = dt.date(first_year, 1, 1).toordinal()
    end = dt.date(last_year, 12, 31).toordinal()
    return dt.date.fromordinal(start + rng.randrange(end - start + 1)).isoformat()


def _unique_words(rng: random.Random, count: int, make: Any, taken: set[str]) -> list[str]:
    words: list[str] = []
    while len(words) < count:
        word = make()
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(syllables)).capitalize()


def _cities(rng: random.Random, taken: set[str]) -> list[dict[str, Any]]:
    names = _unique_words(rng, NUM_CITIES, lambda: _word(rng, 1) + rng.choice(_CITY_ENDINGS), taken)
    return [
        {
            "name": name,
            "country": _COUNTRIES[i % len(_COUNTRIES)],
            "population": rng.randrange(20_000, 2_500_000),
            "area_km2": rng.randrange(400, 90_000) / 10,
            "elevation_m": rng.randrange(2, 1800),
            "founded": rng.randrange(900, 1900),
        }
        for i, name in enumerate(names)
    ]


def _people(rng: random.Random, cities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pairs = [(first, last) for first in _FIRST_NAMES for last in _LAST_NAMES]
    rng.shuffle(pairs)
    return [
        {
            "name": f"{first} {last}",
            "born": _date(rng, 1950, 1998),
            "city": rng.choice(cities)["name"],
            "employer": "",  # filled in once companies exist
            "job": rng.choice(_JOBS),
            "height_cm": rng.randrange(150, 201),
        }
        for first, last in pairs[:NUM_PEOPLE]
    ]


def _companies(rng: random.Random, cities: list, people: list, taken: set[str]) -> list[dict[str, Any]]:
    words = _unique_words(rng, NUM_COMPANIES, lambda: _word(rng, 2), taken)
    ceos = rng.sample(range(len(people)), NUM_COMPANIES)
    companies = []
    for i, word in enumerate(words):
        companies.append(
            {
                "name": f"{word} {_COMPANY_SUFFIXES[i % len(_COMPANY_SUFFIXES)]}",
                "industry": _INDUSTRIES[i % len(_INDUSTRIES)],
                "founded": _date(rng, 1890, 2015),
                "headquarters": rng.choice(cities)["name"],
                "ceo": people[ceos[i]]["name"],
                "employees": rng.randrange(12, 60_000),
                "revenue_musd": rng.randrange(10, 900_000) / 10,
                "products": [],
            }
        )
    for i, person in enumerate(people):
        person["employer"] = companies[ceos.index(i)]["name"] if i in ceos else rng.choice(companies)["name"]
    return companies


def _products(rng: random.Random, companies: list[dict[str, Any]], taken: set[str]) -> list[dict[str, Any]]:
    products = []
    for company in companies:
        kinds = rng.sample(_PRODUCT_KINDS[company["industry"]], PRODUCTS_PER_COMPANY)
        for kind in kinds:
            [word] = _unique_words(rng, 1, lambda: _word(rng, 2), taken)
            name = f"{word} {kind}"
            company["products"].append(name)
            products.append(
                {
                    "name": name,
                    "maker": company["name"],
                    "category": company["industry"],
                    "price_usd": rng.randrange(199, 250_000) / 100,
                    "weight_kg": rng.randrange(5, 20_000) / 100,
                    "released": _date(rng, 2000, 2023),
                }
            )
    return products


def _city_facts(rng: random.Random, cities: list[dict[str, Any]], taken: set[str]) -> dict[str, dict[str, Any]]:
    facts = {}
    for city in cities:
        building = f"{_word(rng, 2)} {rng.choice(_BUILDING_SUFFIXES)}"
        [river] = _unique_words(rng, 1, lambda: _word(rng, 2), taken)
        facts[city["name"]] = {
            "building": building,
            "building_height_m": rng.randrange(80, 640),
            "building_year": rng.randrange(1950, 2022),
            "river": river,
            "river_length_km": rng.randrange(40, 2400),
            "festival": rng.choice(_FESTIVALS),
            "festival_date": _date(rng, 2001, 2001)[5:],  # MM-DD of a common year: never 02-29
        }
    return facts


def _documents(cities: list, companies: list, people: list, facts: dict) -> list[dict[str, str]]:
    documents = []
    for city in cities:
        f = facts[city["name"]]
        month, day = (int(part) for part in f["festival_date"].split("-"))
        when = dt.date(2001, month, day).strftime("%B %d").replace(" 0", " ")
        documents.append(
            {
                "title": f"{city['name']} landmarks",
                "text": (
                    f"The tallest building in {city['name']} is the {f['building']}, {f['building_height_m']} metres "
                    f"tall, completed in {f['building_year']}. The river {f['river']} flows through {city['name']}; "
                    f"it is {f['river_length_km']} km long. Every year on {when} the city holds its {f['festival']}."
                ),
            }
        )
    for company in companies:
        documents.append(
            {
                "title": f"History of {company['name']}",
                "text": (
                    f"{company['name']} was founded on {company['founded']} by {company['founder']} in "
                    f"{company['headquarters']}. It works in {company['industry']} and today employs "
                    f"{company['employees']} people."
                ),
            }
        )
    return documents


def generate_world(seed: int = 2024) -> dict[str, Any]:
    """The world as JSON-ready data: ``tables``, ``documents``, ``city_facts``, ``bank`` and ``inventory``."""
    rng = random.Random(seed)
    taken: set[str] = set()
    cities = _cities(rng, taken)
    people = _people(rng, cities)
    companies = _companies(rng, cities, people, taken)
    products = _products(rng, companies, taken)
    founders = rng.sample([f"{first} {rng.choice(_LAST_NAMES)}" for first in _FIRST_NAMES], NUM_COMPANIES)
    for company, founder in zip(companies, founders, strict=True):
        company["founder"] = founder  # only in the documents (removed from the table below)
    facts = _city_facts(rng, cities, taken)
    documents = _documents(cities, companies, people, facts)
    for company in companies:
        del company["founder"]
    founder_of = dict(zip((c["name"] for c in companies), founders, strict=True))
    return {
        "seed": seed,
        "tables": {"cities": cities, "companies": companies, "people": people, "products": products},
        "documents": documents,
        "city_facts": facts,
        "founders": founder_of,
        "bank": {p["name"]: 2 * 100 * rng.randrange(50, 5000) for p in people},  # cents, even dollars
        "inventory": {p["name"]: rng.randrange(0, 80) for p in products},
    }
