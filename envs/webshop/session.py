"""One shopper's visit to the WebShop site: the pages, what can be clicked on each, and the transitions.

Pages and their clickables (matched lowercased):

* search: a search bar (``search[keywords]``), nothing to click.
* results: ``back to search``, ``< prev`` (page > 1), ``next >`` (more results follow), and the id of each
  product shown; 10 of at most 50 hits per page, under the header "Page N (Total results: M)".
* item: ``back to search``, ``< prev`` (to the results page it came from), every option value (clicking one
  records it as the choice for its option name), ``description``, ``features``, ``reviews``, ``buy now``.
* description / features / reviews: ``back to search``, ``< prev`` (to the item, choices kept).
* done: after ``buy now``; nothing more.

Leaving an item for the results or the search page forgets the chosen options, as the original site does.
:meth:`ShopSession.page` lists a page's visible elements; :func:`render` writes them in the ``text`` mode
(strings joined by " [SEP] ") or the ``text_rich`` mode (one per line, buttons as ``[button] X [button_]``,
chosen options and visited products as ``[clicked button] X [clicked button_]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from envs.webshop.products import Product

__all__ = [
    "BACK_TO_SEARCH",
    "BUY_NOW",
    "NEXT_PAGE",
    "OBSERVATION_MODES",
    "PREV_PAGE",
    "RESULTS_PER_PAGE",
    "SEARCH_RETURN_N",
    "SUB_PAGES",
    "Element",
    "PageKind",
    "ShopSession",
    "render",
]

SEARCH_RETURN_N = 50
RESULTS_PER_PAGE = 10
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SEARCH_BUTTON = "Search"
OBSERVATION_MODES = ("text", "text_rich")


class PageKind(str, Enum):
    SEARCH = "search"
    RESULTS = "results"
    ITEM = "item"
    DESCRIPTION = "description"
    FEATURES = "features"
    REVIEWS = "reviews"
    DONE = "done"


SUB_PAGES = {"description": PageKind.DESCRIPTION, "features": PageKind.FEATURES, "reviews": PageKind.REVIEWS}


@dataclass(frozen=True)
class Element:
    """One visible string of a page: plain ``text``, a ``button``, an ``option`` value or a ``product`` id link."""

    kind: str
    text: str
    clicked: bool = False


@dataclass
class ShopSession:
    """The state of one visit: current page, last search, results page, product and chosen options.

    ``search_fn(keywords)`` returns the hits (best first) for a query; ``products`` resolves ids. ``score``
    is shown on the done page (the environment sets it when the purchase is scored).
    """

    instruction: str
    products: Mapping[str, Product]
    search_fn: Callable[[str], Sequence[Product]]
    kind: PageKind = PageKind.SEARCH
    keywords: str = ""
    results: list[Product] = field(default_factory=list)
    page_number: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)
    score: float | None = None

    # ----------------------------------------------------------------------------------------------
    # What the page offers
    # ----------------------------------------------------------------------------------------------
    @property
    def product(self) -> Product | None:
        return None if self.asin is None else self.products[self.asin]

    @property
    def has_search_bar(self) -> bool:
        return self.kind is PageKind.SEARCH

    @property
    def page_results(self) -> list[Product]:
        start = (self.page_number - 1) * RESULTS_PER_PAGE
        return self.results[start : start + RESULTS_PER_PAGE]

    def clickables(self) -> list[str]:
        """The lowercased texts that ``click[...]`` accepts on this page, in page order."""
        return [
            e.text.lower()
            for e in self.page()
            if e.kind in ("button", "option", "product") and e.text != SEARCH_BUTTON
        ]

    def page(self) -> list[Element]:
        """The visible elements of the current page, top to bottom (the instruction first)."""
        header = [Element("text", "Instruction:"), Element("text", self.instruction)]
        if self.kind is PageKind.SEARCH:
            return [*header, Element("button", SEARCH_BUTTON)]
        if self.kind is PageKind.RESULTS:
            return header + self._results_elements()
        if self.kind is PageKind.ITEM:
            return header + self._item_elements()
        if self.kind is PageKind.DONE:
            score = "" if self.score is None else f"{self.score:.4g}"
            return [
                Element("text", "Thank you for shopping with us!"),
                Element("text", f"Your score (min 0, max 1): {score}"),
            ]
        return header + self._sub_page_elements()

    def _results_elements(self) -> list[Element]:
        elements = [Element("button", BACK_TO_SEARCH)]
        elements.append(Element("text", f"Page {self.page_number} (Total results: {len(self.results)})"))
        if self.page_number > 1:
            elements.append(Element("button", PREV_PAGE))
        if self.page_number * RESULTS_PER_PAGE < len(self.results):
            elements.append(Element("button", NEXT_PAGE))
        for product in self.page_results:
            elements.append(Element("product", product.asin, clicked=product.asin in self.visited))
            elements.append(Element("text", product.title))
            elements.append(Element("text", product.price_tag))
        return elements

    def _item_elements(self) -> list[Element]:
        product = self.product
        assert product is not None
        elements = [Element("button", BACK_TO_SEARCH), Element("button", PREV_PAGE)]
        for name, values in product.options.items():
            elements.append(Element("text", name))
            elements.extend(Element("option", value, clicked=self.options.get(name) == value) for value in values)
        elements += [
            Element("text", product.title),
            Element("text", f"Price: {product.price_tag}"),
            Element("text", f"Rating: {product.rating}"),
        ]
        elements += [Element("button", name) for name in ("Description", "Features", "Reviews", BUY_NOW)]
        return elements

    def _sub_page_elements(self) -> list[Element]:
        product = self.product
        assert product is not None
        elements = [Element("button", BACK_TO_SEARCH), Element("button", PREV_PAGE)]
        if self.kind is PageKind.DESCRIPTION:
            elements.append(Element("text", product.description))
        elif self.kind is PageKind.FEATURES:
            elements.extend(Element("text", bullet) for bullet in product.bullet_points)
        elif not product.reviews:
            elements.append(Element("text", "No reviews yet."))
        else:
            for review in product.reviews:
                elements += [Element("text", review.title), Element("text", f"Score: {review.score}/5")]
                elements.append(Element("text", review.body))
        return elements

    # ----------------------------------------------------------------------------------------------
    # Transitions
    # ----------------------------------------------------------------------------------------------
    def search(self, keywords: str) -> None:
        """Run a search (the caller checks that the page has a search bar) and show results page 1."""
        self.keywords = keywords
        self.results = list(self.search_fn(keywords))
        self._show_results(1)

    def click(self, target: str) -> bool:
        """Follow the clickable ``target`` (lowercase); False if it is not on the page. ``buy now`` ends on done."""
        if target not in self.clickables():
            return False
        if target == BACK_TO_SEARCH.lower():
            self.kind, self.keywords, self.results, self.asin, self.options = PageKind.SEARCH, "", [], None, {}
        elif self.kind is PageKind.RESULTS:
            self._click_on_results(target)
        elif self.kind is PageKind.ITEM:
            self._click_on_item(target)
        else:  # a sub-page: the only other button is < prev
            self.kind = PageKind.ITEM
        return True

    def _show_results(self, page_number: int) -> None:
        self.kind, self.page_number, self.asin, self.options = PageKind.RESULTS, page_number, None, {}

    def _click_on_results(self, target: str) -> None:
        if target == NEXT_PAGE.lower():
            self._show_results(self.page_number + 1)
        elif target == PREV_PAGE.lower():
            self._show_results(self.page_number - 1)
        else:
            asin = next(p.asin for p in self.page_results if p.asin.lower() == target)
            self.kind, self.asin, self.options = PageKind.ITEM, asin, {}
            self.visited.add(asin)

    def _click_on_item(self, target: str) -> None:
        product = self.product
        assert product is not None
        if target == PREV_PAGE.lower():
            self._show_results(self.page_number)
        elif target in SUB_PAGES:
            self.kind = SUB_PAGES[target]
        elif target == BUY_NOW.lower():
            self.kind = PageKind.DONE
        else:
            name = next(n for n, values in product.options.items() if target in values)
            self.options[name] = target


def render(elements: Sequence[Element], mode: str) -> str:
    """A page as observation text: ``text`` joins the strings with " [SEP] "; ``text_rich`` puts one per line."""
    if mode == "text":
        return " [SEP] ".join(e.text for e in elements)
    if mode != "text_rich":
        raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {mode!r}")
    lines = []
    for e in elements:
        if e.kind == "text":
            lines.append(e.text)
        elif e.clicked:
            lines.append(f"[clicked button] {e.text} [clicked button_]")
        else:
            lines.append(f"[button] {e.text} [button_]")
    return "\n".join(lines)
