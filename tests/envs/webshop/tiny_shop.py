"""A hand-made WebShop catalogue small enough to write its pages out by hand in the tests.

One hair extension (B000000001) with two option groups and a review, a shampoo of the same brand, and 24
widgets ("Widget Number 1" ... "Widget Number 24") whose identical wording makes a search for "widget" tie
on every one of them, so results come in catalogue order: 10, 10 and 4 per page.
"""

from __future__ import annotations

from typing import Any

from envs.webshop.catalogue import Shop, build_shop
from envs.webshop.products import Goal, Product, Review

INSTRUCTION = (
    "i need a clip in hair extension with color: black, and length: 16 inch, and price lower than 30.00 dollars"
)


def make_product(asin: str, title: str, **fields: Any) -> Product:
    """A product with plain defaults for every field not given."""
    record: dict[str, Any] = {
        "category": "beauty",
        "query": "hair extensions",
        "product_category": "Beauty › Hair Care › Extensions",
        "title_nouns": ("acme", "hair", "extension"),
        "pricing": (25.99,),
        "price": 25.99,
        "bullet_points": (),
        "description": "",
        "attributes": (),
    }
    record.update(fields)
    return Product(asin=asin, title=title, **record)


HAIR = make_product(
    "B000000001",
    "Acme Clip In Hair Extension",
    bullet_points=("NATURAL LOOKING - blends in.", "Tangle free fibres."),
    description="A clip in hair extension made of human hair.",
    attributes=("clip in", "natural looking"),
    options={"color": ("black", "auburn"), "length": ("16 inch", "22 inch")},
    reviews=(Review("Love it", 5, "Looks real."), Review("Okay", 4, "A bit short.")),
    instruction_text="i need a clip in hair extension",
    instruction_attributes=("clip in",),
)
SHAMPOO = make_product(
    "B000000002",
    "Acme Shampoo",
    query="sulfate free shampoo",
    product_category="Beauty › Hair Care › Shampoo",
    title_nouns=("acme", "shampoo"),
    pricing=(8.99, 12.99),
    price=10.5,
    description="Gentle shampoo.",
)
WIDGETS = [
    make_product(
        f"W{i:09d}",
        f"Widget Number {i}",
        query="widgets",
        product_category="Tools › Widgets",
        title_nouns=("widget",),
        pricing=(5.0,),
        price=5.0,
        description="A widget.",
    )
    for i in range(1, 25)
]
HAIR_GOAL = Goal(
    asin=HAIR.asin,
    instruction_text=INSTRUCTION,
    query=HAIR.query,
    product_category=HAIR.product_category,
    title_nouns=HAIR.title_nouns,
    attributes=("clip in",),
    options=(("color", "black"), ("length", "16 inch")),
    price_upper=30.0,
)


def tiny_shop() -> Shop:
    return build_shop([HAIR, SHAMPOO, *WIDGETS], [HAIR_GOAL], "tiny")
