"""The records of a WebShop catalogue: products, their reviews, and the goals (shopping instructions).

Field names follow the meaning of the original WebShop data: ``query`` is the search query a product was
collected under, ``category`` the shop category (beauty, electronics, ...), ``product_category`` the
category path "A › B › C", ``title_nouns`` the nouns of the title the type reward compares, ``price`` the
price the reward and the goals use (for a price range, a value drawn inside it once, at catalogue build).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Catalogue", "Goal", "Product", "Review", "catalogue_hash"]


@dataclass(frozen=True)
class Review:
    """One customer review: a short title, a score from 1 to 5 and the text."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """One product of the shop, with everything its pages show and the reward reads.

    ``options`` maps an option name (lowercase, e.g. "color") to its values (lowercase, in page order).
    ``pricing`` holds one price, or the low and high ends of a range, as the results page shows them.
    ``instruction_text`` and ``instruction_attributes``: a shopping instruction written for this product and
    the attributes it asks for (``None`` and ``()`` for products without one); synthetic goals come from them.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    title_nouns: tuple[str, ...]
    pricing: tuple[float, ...]
    price: float
    bullet_points: tuple[str, ...]
    description: str
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reviews: tuple[Review, ...] = ()
    instruction_text: str | None = None
    instruction_attributes: tuple[str, ...] = ()

    @property
    def price_tag(self) -> str:
        """The price as pages show it: "$12.99", or "$12.99 to $19.99" for a range."""
        return " to ".join(f"${p:.2f}" for p in self.pricing)

    @property
    def rating(self) -> str:
        """The mean review score with one decimal ("4.3"), or "N.A." without reviews."""
        if not self.reviews:
            return "N.A."
        return f"{sum(r.score for r in self.reviews) / len(self.reviews):.1f}"

    def to_json(self) -> dict[str, Any]:
        record = dict(self.__dict__)
        record["options"] = {k: list(v) for k, v in self.options.items()}
        record["reviews"] = [dict(r.__dict__) for r in self.reviews]
        return record

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Product:
        fields = dict(record)
        for name in ("title_nouns", "pricing", "bullet_points", "attributes", "instruction_attributes"):
            fields[name] = tuple(fields[name])
        fields["options"] = {k: tuple(v) for k, v in fields["options"].items()}
        fields["reviews"] = tuple(Review(**r) for r in fields["reviews"])
        return cls(**fields)


@dataclass(frozen=True)
class Goal:
    """One shopping task: an instruction and what the reward compares a purchase with.

    ``asin`` is the product the goal was written for (the oracle buys it); ``query``, ``product_category``,
    ``title_nouns`` are that product's, for the type reward. ``options`` pairs option names with the wanted
    values (names may be "" for human instructions, which list values only). ``price_upper`` is the price cap
    (1,000,000 when the instruction names none).
    """

    asin: str
    instruction_text: str
    query: str
    product_category: str
    title_nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float

    @property
    def option_values(self) -> tuple[str, ...]:
        return tuple(value for _, value in self.options)


@dataclass(frozen=True)
class Catalogue:
    """Products (in a fixed order) with lookup by id, and the goals split into test, validation and train.

    ``goals`` holds every goal in shuffled order; the splits are index ranges of it (see :mod:`envs.webshop.goals`).
    """

    products: tuple[Product, ...]
    goals: tuple[Goal, ...]
    source: str
    by_asin: Mapping[str, Product] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {p.asin: p for p in self.products})


def catalogue_hash(products: Sequence[Product]) -> str:
    """SHA-256 of the products' canonical JSON: equal hashes mean identical catalogues."""
    digest = hashlib.sha256()
    for product in products:
        digest.update(json.dumps(product.to_json(), sort_keys=True, ensure_ascii=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()
