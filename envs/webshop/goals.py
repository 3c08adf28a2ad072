"""WebShop goals: shopping instructions with the attributes, options and price cap the reward checks.

Synthetic goals (the default), as WebShop builds them: every product with an instruction text gives one
goal per combination of its option values (option names in alphabetical order), with the text
``"<instruction> with <name>: <value>, and <name>: <value>, and price lower than X.00 dollars"``. The price
cap is drawn once per product: of the multiples of 10 (10 to 990) above the product's price, take the first
four, draw two of them and keep the larger; with fewer than two such multiples there is no cap (1,000,000)
and no price text. Human goals (original data only) come from ``items_human_ins.json``: one goal per
written instruction that names at least one attribute, with the same price cap rule.

Goals are shuffled with a fixed seed and split by index: test 0-499, validation 500-1499, train 1500 on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from envs.webshop.products import Goal, Product
from envs.webshop.prose import Draw

__all__ = [
    "NO_PRICE_CAP",
    "PRICE_CAPS",
    "SHUFFLE_SEED",
    "SPLITS",
    "human_goals",
    "price_cap",
    "shuffle_goals",
    "split_indices",
    "synthetic_goals",
]

PRICE_CAPS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
NO_PRICE_CAP = 1_000_000.0
SHUFFLE_SEED = 233
#: Index ranges of the shuffled goals: (start, stop), stop None meaning "to the end".
SPLITS: Mapping[str, tuple[int, int | None]] = {"test": (0, 500), "validation": (500, 1500), "train": (1500, None)}


def price_cap(price: float, draw: Draw) -> tuple[float, str]:
    """(cap, text) for a product of this price: the larger of two of the next four multiples of 10."""
    above = [cap for cap in PRICE_CAPS if cap > price][:4]
    if len(above) < 2:
        return NO_PRICE_CAP, ""
    cap = max(draw.sample(above, 2))
    return cap, f", and price lower than {cap:.2f} dollars"


def _goal(
    product: Product, text: str, attributes: Sequence[str], options: Iterable[tuple[str, str]], cap: float
) -> Goal:
    return Goal(
        asin=product.asin,
        instruction_text=text,
        query=product.query,
        product_category=product.product_category,
        title_nouns=product.title_nouns,
        attributes=tuple(attributes),
        options=tuple(options),
        price_upper=cap,
    )


def synthetic_goals(products: Sequence[Product], seed: int = 0) -> list[Goal]:
    """One goal per option combination of every product that has an instruction, in product order."""
    draw = Draw(seed)
    goals = []
    for product in products:
        if not product.instruction_text or not product.instruction_attributes:
            continue
        cap, price_text = price_cap(product.price, draw)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[name] for name in names)):
            options = list(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{name}: {value}" for name, value in options)
            option_text = f" with {option_text}" if option_text else ""
            text = f"{product.instruction_text}{option_text}{price_text}"
            goals.append(_goal(product, text, product.instruction_attributes, options, cap))
    return goals


def human_goals(
    products: Sequence[Product], instructions: Mapping[str, Sequence[Mapping[str, Any]]], seed: int = 0
) -> list[Goal]:
    """Goals from human-written instructions: ``{asin: [{"instruction", "instruction_attributes",
    "instruction_options"}, ...]}`` (the layout of WebShop's ``items_human_ins.json``)."""
    draw = Draw(seed)
    goals = []
    for product in products:
        for written in instructions.get(product.asin, ()):
            attributes = tuple(written.get("instruction_attributes") or ())
            if not attributes:
                continue
            cap, price_text = price_cap(product.price, draw)
            text = str(written["instruction"]).strip(".") + price_text
            options = [("", str(v)) for v in written.get("instruction_options") or ()]
            goals.append(_goal(product, text, attributes, options, cap))
    return goals


def shuffle_goals(goals: Sequence[Goal], seed: int = SHUFFLE_SEED) -> tuple[Goal, ...]:
    """The goals in a fixed pseudo-random order (a seeded Fisher-Yates shuffle)."""
    return tuple(Draw(seed).sample(goals, len(goals)))


def split_indices(split: str, num_goals: int) -> range:
    """Indices of the shuffled goals that make up ``split`` ("train", "validation" or "test")."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    start, stop = SPLITS[split]
    return range(min(start, num_goals), num_goals if stop is None else min(stop, num_goals))
