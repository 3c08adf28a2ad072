"""WebShop's reference solution: buy the goal's own product with the goal's options.

From any page: go back to the search page if the product is not reachable from here, search for the
product's title, page through the results to it, open it, click every goal option not chosen yet, buy. A
goal option that is not literally one of the product's values (human instructions paraphrase) is mapped to
the product value it matches best under the reward's fuzzy score.
"""

from __future__ import annotations

from envs.webshop.catalogue import Shop
from envs.webshop.products import Goal, Product
from envs.webshop.session import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE, RESULTS_PER_PAGE, PageKind, ShopSession

__all__ = ["goal_option_clicks", "plan_purchase"]


def goal_option_clicks(product: Product, goal: Goal, chosen: dict[str, str]) -> list[str]:
    """The option values to click on ``product``'s page so that every goal option is chosen."""
    from rapidfuzz import fuzz, process

    from envs.webshop.reward import fuzzy_process

    by_value = {value: name for name, values in product.options.items() for value in values}
    clicks = []
    for _, wanted in goal.options:
        value = wanted.lower() if wanted.lower() in by_value else None
        if value is None and by_value:
            best = process.extractOne(wanted, list(by_value), scorer=fuzz.token_set_ratio, processor=fuzzy_process)
            value = best[0] if best is not None else None
        if value is not None and chosen.get(by_value[value]) != value and value not in clicks:
            clicks.append(value)
    return clicks


def _page_moves(current: int, target: int) -> list[str]:
    step = NEXT_PAGE if target > current else PREV_PAGE
    return [f"click[{step.lower()}]"] * abs(target - current)


def plan_purchase(session: ShopSession, goal: Goal, shop: Shop) -> list[str] | None:
    """The action texts that buy ``goal.asin`` with the goal's options from ``session``'s page, or ``None``
    when a search for the product's title does not return it."""
    product = shop.catalogue.by_asin[goal.asin]
    target = product.asin
    if session.kind is PageKind.ITEM and session.asin == target:
        return plan_purchase_on_item(product, goal, session.options)
    if session.kind in (PageKind.DESCRIPTION, PageKind.FEATURES, PageKind.REVIEWS) and session.asin == target:
        return [f"click[{PREV_PAGE.lower()}]", *plan_purchase_on_item(product, goal, session.options)]
    open_item = [f"click[{target.lower()}]", *plan_purchase_on_item(product, goal, {})]
    shown = [p.asin for p in session.results]
    if session.kind is PageKind.RESULTS and target in shown:
        position = shown.index(target)
        return _page_moves(session.page_number, position // RESULTS_PER_PAGE + 1) + open_item
    keywords = product.title.lower().replace("[", " ").replace("]", " ")
    found = [p.asin for p in shop.search(keywords)]
    if target not in found:
        return None
    plan = [] if session.kind is PageKind.SEARCH else [f"click[{BACK_TO_SEARCH.lower()}]"]
    plan.append(f"search[{keywords}]")
    return plan + _page_moves(1, found.index(target) // RESULTS_PER_PAGE + 1) + open_item


def plan_purchase_on_item(product: Product, goal: Goal, chosen: dict[str, str]) -> list[str]:
    """On ``product``'s page with ``chosen`` options: the option clicks, then buy."""
    return [f"click[{v}]" for v in goal_option_clicks(product, goal, chosen)] + [f"click[{BUY_NOW.lower()}]"]
