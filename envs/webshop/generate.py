"""Generate WebShop's product catalogue deterministically from ``taxonomy.yaml`` and a seed.

    python -m envs.webshop.generate [--seed 0] [--per-type 75] [--out catalogue.json]

prints the number of products and the catalogue's SHA-256 (and writes the products as JSON with ``--out``).
The same seed gives the same catalogue on every machine and Python version (see :class:`prose.Draw`).

Each of the taxonomy's product types gets ``per_type`` products: a brand of its shop category, two to five
attributes (mostly the type's own, some the category's), each option group with probability 0.85 and then
two or more of its values, a price (a fifth of the products show a price range; the reward's price is drawn
inside it), an Amazon-style title, bullet points, a description, up to three reviews and a shopping
instruction naming one to three of the product's attributes.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.webshop import prose
from envs.webshop.products import Product, Review, catalogue_hash

__all__ = ["DEFAULT_PER_TYPE", "TAXONOMY_PATH", "ProductType", "generate_products", "generator_fingerprint"]

TAXONOMY_PATH = Path(__file__).with_name("taxonomy.yaml")
DEFAULT_PER_TYPE = 75
_OPTION_GROUP_PROBABILITY = 0.85
_PRICE_RANGE_PROBABILITY = 0.2
# Words of product nouns that are not nouns (spaCy would tag them ADJ, ADP or VERB).
_NOT_NOUNS = frozenset({"over", "electric", "wireless", "mechanical", "portable", "smart", "mixed", "green", "dark"})
_NOT_NOUNS |= {"hot", "sparkling", "standing", "throw", "by", "and", "co"}
_TYPE_KEYS = frozenset({"noun", "query", "path", "price", "attributes", "options"})
_ASIN_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class ProductType:
    """One entry of ``taxonomy.yaml``'s types, with its shop category's shared vocabulary."""

    category: str
    department: str
    noun: str
    query: str
    path: str
    price: tuple[float, float]
    attributes: tuple[str, ...]
    common_attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    brands: tuple[str, ...]
    sentences: tuple[str, ...]

    @property
    def product_category(self) -> str:
        return f"{self.department} › {self.path}"


def load_taxonomy(path: Path = TAXONOMY_PATH) -> list[ProductType]:
    """The product types of a taxonomy file, in file order."""
    import yaml

    data = yaml.safe_load(path.read_text())
    types = []
    for category, spec in data.items():
        for entry in spec["types"]:
            if set(entry) != _TYPE_KEYS:
                raise ValueError(
                    f"{path}: a type of {category!r} needs exactly the keys {sorted(_TYPE_KEYS)}: {entry}"
                )
            types.append(
                ProductType(
                    category=category,
                    department=spec["department"],
                    noun=entry["noun"],
                    query=entry["query"],
                    path=entry["path"],
                    price=(float(entry["price"][0]), float(entry["price"][1])),
                    attributes=tuple(entry["attributes"]),
                    common_attributes=tuple(spec["common_attributes"]),
                    options={name: tuple(str(v) for v in values) for name, values in entry["options"].items()},
                    brands=tuple(spec["brands"]),
                    sentences=tuple(spec["sentences"]),
                )
            )
    return types


def generator_fingerprint() -> str:
    """A short hash of the taxonomy and the generator's code: generated catalogues are cached under it."""
    digest = hashlib.sha256()
    for path in (TAXONOMY_PATH, Path(__file__), Path(prose.__file__)):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def generate_products(seed: int = 0, per_type: int = DEFAULT_PER_TYPE) -> list[Product]:
    """``per_type`` products for every product type of the taxonomy, shuffled (so that the first N products
    sample every type, as in WebShop's ``items_shuffle.json``); ids and titles are unique."""
    if per_type < 1:
        raise ValueError(f"per_type must be a positive integer, got {per_type!r}")
    draw = prose.Draw(seed)
    asins: set[str] = set()
    titles: set[str] = set()
    products = []
    for product_type in load_taxonomy():
        for _ in range(per_type):
            products.append(_product(draw, product_type, _new_asin(draw, asins), titles))
    return draw.sample(products, len(products))


def _new_asin(draw: prose.Draw, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(draw.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _product(draw: prose.Draw, kind: ProductType, asin: str, titles: set[str]) -> Product:
    brand = draw.choice(kind.brands)
    own = draw.sample(kind.attributes, draw.between(2, 4))
    attributes = own + draw.sample(kind.common_attributes, draw.between(0, 1))
    title = prose.title(draw, brand, kind.noun, attributes)
    while title in titles:  # a model number tells apart products that would share a title
        title = f"{title} (Model {draw.choice('ABCDEFGHJKLMNPRSTVXZ')}{draw.between(100, 999)})"
    titles.add(title)
    pricing, price = _pricing(draw, kind.price)
    asked = draw.sample(own, draw.between(1, min(3, len(own))))
    return Product(
        asin=asin,
        title=title,
        category=kind.category,
        query=kind.query,
        product_category=kind.product_category,
        title_nouns=_nouns(brand) + _nouns(kind.noun),
        pricing=pricing,
        price=price,
        bullet_points=prose.bullet_points(draw, brand, kind.noun, attributes, draw.choice(kind.sentences)),
        description=prose.description(draw, brand, kind.noun, attributes, kind.sentences),
        attributes=tuple(attributes),
        options=_options(draw, kind.options),
        reviews=tuple(Review(t, s, b) for t, s, b in prose.reviews(draw, kind.noun, attributes)),
        instruction_text=prose.instruction(draw, kind.noun, asked),
        instruction_attributes=tuple(asked),
    )


def _nouns(text: str) -> tuple[str, ...]:
    """Lowercase words of a brand or product noun that count as nouns (hyphens split words, one letter is no word)."""
    words = re.split(r"[\s\-&]+", text.lower())
    return tuple(w for w in words if len(w) > 1 and w not in _NOT_NOUNS)


def _pricing(draw: prose.Draw, bounds: tuple[float, float]) -> tuple[tuple[float, ...], float]:
    """Prices ending in .99: one, or a range whose reward price is drawn inside it (as WebShop does)."""
    low = math.floor(draw.uniform(*bounds)) + 0.99
    if not draw.chance(_PRICE_RANGE_PROBABILITY):
        return (low,), low
    high = math.floor(low * draw.uniform(1.15, 1.6)) + 0.99
    return (low, high), round(draw.uniform(low, high), 2)


def _options(draw: prose.Draw, groups: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    options = {}
    for name, values in groups.items():
        if draw.chance(_OPTION_GROUP_PROBABILITY):
            options[name] = tuple(draw.subset(values, draw.between(2, len(values))))
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-type", type=int, default=DEFAULT_PER_TYPE)
    parser.add_argument("--out", type=Path, default=None, help="write the products as a JSON list to this file")
    args = parser.parse_args(argv)
    products = generate_products(args.seed, args.per_type)
    if args.out is not None:
        import json

        records: list[dict[str, Any]] = [p.to_json() for p in products]
        args.out.write_text(json.dumps(records, indent=1))
    print(f"{len(products)} products, sha256 {catalogue_hash(products)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
