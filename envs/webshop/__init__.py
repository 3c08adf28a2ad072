"""WebShop (Yao et al., 2022): an online shop where an agent searches, browses, picks options and buys.

    import envs
    env = envs.make("webshop", split="test")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("search[clip in hair extension]")

Modules: :mod:`.env` (the environment), :mod:`.session` (pages and transitions), :mod:`.reward` (the score
of a purchase), :mod:`.search` (BM25), :mod:`.goals` (instructions and splits), :mod:`.generate` (the
generated catalogue, from ``taxonomy.yaml``), :mod:`.original` (WebShop's own data files), :mod:`.oracle`.
"""

from typing import Any

from envs.webshop.products import Catalogue, Goal, Product, Review
from envs.webshop.reward import RewardBreakdown, score_purchase

__all__ = ["Catalogue", "Goal", "Product", "Review", "RewardBreakdown", "WebShopEnv", "score_purchase"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `python -m envs.webshop.generate` does not load the generator twice.
    if name == "WebShopEnv":
        from envs.webshop.env import WebShopEnv

        return WebShopEnv
    raise AttributeError(f"module 'envs.webshop' has no attribute {name!r}")
