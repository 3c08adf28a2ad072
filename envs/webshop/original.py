"""Read the original WebShop data files, for users who have them (they cannot be downloaded here).

A data directory holds (names as in WebShop's ``data/`` folder; ``*`` is "" or a size suffix like "_1000"):

* ``items_shuffle*.json``: a list of products with ``asin``, ``name``, ``full_description``,
  ``small_description`` (a list or a string), ``pricing`` ("$12.99" or "$10.99 - $20.99"),
  ``customization_options`` ({name: [{"value": ...}, ...]} or null), ``category``, ``query``,
  ``product_category``.
* ``items_ins_v2*.json``: {asin: {"attributes": [...], "instruction": str, "instruction_attributes": [...]}}.
* ``items_human_ins.json`` (for human goals): {asin: [{"instruction", "instruction_attributes",
  "instruction_options"}, ...]}.
* ``reviews.json`` (optional): [{"asin", "reviews": [{"title", "score" or "stars", "body" or "review"}]}].

Where a pattern matches several files, the one without a suffix is used. Products are cleaned as WebShop
does: ids "nan" or longer than 10 characters and repeated ids are skipped; option names and values are
lowercased and "/" in values becomes " | "; a missing price is $100; a product without mined attributes
gets ["DUMMY_ATTR"]; the reward's price of a range is drawn inside it (seeded). Title nouns approximate
spaCy's noun tags: every alphabetic word of three or more letters that is not a stop word.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from envs.webshop.products import Product, Review
from envs.webshop.prose import Draw

__all__ = ["find_data_file", "load_human_instructions", "load_original_products", "title_nouns"]

_NOT_NOUNS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "your",
        "you",
        "our",
        "this",
        "that",
        "are",
        "was",
        "were",
        "has",
        "have",
        "not",
        "but",
        "all",
        "any",
        "can",
        "its",
        "into",
        "out",
        "set",
        "per",
        "each",
        "one",
        "two",
        "new",
        "more",
        "most",
        "very",
        "also",
        "only",
        "just",
        "than",
        "too",
        "any",
        "such",
    ]
)


def find_data_file(data_dir: Path, pattern: str, *, required: bool = True) -> Path | None:
    """The file of ``data_dir`` matching ``pattern`` (e.g. "items_shuffle*.json"), preferring the unsuffixed name."""
    matches = sorted(data_dir.glob(pattern))
    exact = data_dir / pattern.replace("*", "")
    if exact in matches:
        return exact
    if len(matches) == 1:
        return matches[0]
    if not matches:
        if required:
            raise FileNotFoundError(f"no file matching {pattern!r} in {data_dir}; see envs/webshop/original.py")
        return None
    names = ", ".join(m.name for m in matches)
    raise FileNotFoundError(
        f"several files match {pattern!r} in {data_dir} ({names}); keep one, or add the unsuffixed one"
    )


def title_nouns(title: str) -> tuple[str, ...]:
    """Distinct lowercase words of three or more letters that are not stop words, in order of appearance."""
    words = re.findall(r"[a-z]+", title.lower())
    return tuple(dict.fromkeys(w for w in words if len(w) >= 3 and w not in _NOT_NOUNS))


def _pricing(raw: Any) -> tuple[float, ...]:
    if not raw:
        return (100.0,)
    prices = [float(Decimal(re.sub(r"[^\d.]", "", part) or "0")) for part in str(raw).split("$")[1:]]
    return tuple(prices[:2]) if prices else (100.0,)


def _options(raw: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    options = {}
    for name, contents in (raw or {}).items():
        if contents is None:
            continue
        options[name.lower()] = tuple(str(c["value"]).strip().replace("/", " | ").lower() for c in contents)
    return options


def _reviews(records: Sequence[Mapping[str, Any]]) -> tuple[Review, ...]:
    reviews = []
    for r in records:
        score = r.get("score", r.get("stars", 0))
        reviews.append(
            Review(str(r.get("title", "")), int(float(score or 0)), str(r.get("body", r.get("review", ""))))
        )
    return tuple(reviews)


def _product(item: Mapping[str, Any], mined: Mapping[str, Any], reviews: Sequence[Mapping], draw: Draw) -> Product:
    pricing = _pricing(item.get("pricing"))
    price = pricing[0] if len(pricing) == 1 else draw.uniform(pricing[0], pricing[1])
    bullets = item.get("small_description") or []
    return Product(
        asin=item["asin"],
        title=str(item.get("name") or ""),
        category=str(item.get("category") or ""),
        query=str(item.get("query") or "").lower().strip(),
        product_category=str(item.get("product_category") or ""),
        title_nouns=title_nouns(str(item.get("name") or "")),
        pricing=pricing,
        price=price,
        bullet_points=tuple(str(b) for b in bullets) if isinstance(bullets, list) else (str(bullets),),
        description=str(item.get("full_description") or ""),
        attributes=tuple(mined.get("attributes") or ("DUMMY_ATTR",)),
        options=_options(item.get("customization_options")),
        reviews=_reviews(reviews),
        instruction_text=mined.get("instruction"),
        instruction_attributes=tuple(mined.get("instruction_attributes") or ()),
    )


def load_original_products(data_dir: str | Path, num_products: int | None = None, seed: int = 0) -> list[Product]:
    """The products of WebShop's data files in ``data_dir`` (the first ``num_products`` items, if given)."""
    data_dir = Path(data_dir)
    items = json.loads(find_data_file(data_dir, "items_shuffle*.json").read_text())  # type: ignore[union-attr]
    mined = json.loads(find_data_file(data_dir, "items_ins_v2*.json").read_text())  # type: ignore[union-attr]
    reviews_file = find_data_file(data_dir, "reviews.json", required=False)
    reviews = {r["asin"]: r.get("reviews") or [] for r in json.loads(reviews_file.read_text())} if reviews_file else {}
    if num_products is not None:
        items = items[:num_products]
    draw = Draw(seed)
    products, seen = [], set()
    for item in items:
        asin = item.get("asin")
        if not isinstance(asin, str) or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_product(item, mined.get(asin, {}), reviews.get(asin, []), draw))
    return products


def load_human_instructions(data_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """``items_human_ins.json`` of ``data_dir``: {asin: [instruction records]}."""
    path = find_data_file(Path(data_dir), "items_human_ins.json")
    return json.loads(path.read_text())  # type: ignore[union-attr]
