"""Build a WebShop :class:`Shop` (catalogue, goals, search index) once per process and configuration.

The generated catalogue is rebuilt in every process rather than read from a disk cache: generating its
4,500 products (about 0.5 s on an idle core) takes as long as parsing the same products from their 7 MB of
JSON, and nothing can go stale. :func:`load_shop` keeps the last few shops in memory, so environments made
with the same configuration in one process share one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from envs.webshop.generate import DEFAULT_PER_TYPE, generate_products
from envs.webshop.goals import human_goals, shuffle_goals, split_indices, synthetic_goals
from envs.webshop.original import load_human_instructions, load_original_products
from envs.webshop.products import Catalogue, Goal, Product
from envs.webshop.search import SearchEngine
from envs.webshop.session import SEARCH_RETURN_N

__all__ = ["Shop", "build_shop", "load_shop"]


@dataclass(frozen=True)
class Shop:
    """A catalogue with its goals and search engine."""

    catalogue: Catalogue
    engine: SearchEngine

    def search(self, keywords: str) -> list[Product]:
        """The top hits for ``keywords`` (at most 50), best first."""
        products = self.catalogue.products
        return [products[i] for i in self.engine.search(keywords, SEARCH_RETURN_N)]

    def split(self, name: str) -> list[Goal]:
        """The goals of a split ("train", "validation" or "test")."""
        goals = self.catalogue.goals
        return [goals[i] for i in split_indices(name, len(goals))]


def build_shop(products: list[Product], goals: list[Goal], source: str) -> Shop:
    """A shop over ``products``; ``goals`` are shuffled with the fixed seed before splitting."""
    catalogue = Catalogue(products=tuple(products), goals=shuffle_goals(goals), source=source)
    return Shop(catalogue=catalogue, engine=SearchEngine(catalogue.products))


@functools.lru_cache(maxsize=4)
def load_shop(
    *,
    data_dir: str | None = None,
    human: bool = False,
    num_products: int | None = None,
    catalogue_seed: int = 0,
) -> Shop:
    """The generated shop (``data_dir`` None) or one over WebShop's original files in ``data_dir``.

    ``human``: goals from human instructions (original data only). ``num_products``: only the first N
    products. ``catalogue_seed``: the generator's seed, and the seed of price draws for original data.
    """
    if data_dir is None:
        if human:
            raise ValueError("human goals need WebShop's original data: set data_dir (or human_goals=False)")
        products = generate_products(catalogue_seed, DEFAULT_PER_TYPE)[:num_products]
        return build_shop(products, synthetic_goals(products, catalogue_seed), f"generated(seed={catalogue_seed})")
    products = load_original_products(data_dir, num_products, catalogue_seed)
    goals = (
        human_goals(products, load_human_instructions(data_dir), catalogue_seed)
        if human
        else synthetic_goals(products, catalogue_seed)
    )
    return build_shop(products, goals, f"original({Path(data_dir)})")
