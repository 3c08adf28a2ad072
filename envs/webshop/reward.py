"""WebShop's reward for a purchase (Yao et al., 2022), as specified in the project's WebShop spec.

    total  = (attribute_matches + option_matches + price_ok) / (n_goal_attributes + n_goal_options + 1)
    reward = total * type_factor

* Attribute match: a goal attribute matches if some attribute of the bought product scores
  ``token_set_ratio > 85`` against it, or it is a substring of the bought product's lowercased title,
  bullet points (joined by spaces) or description.
* Option match: every chosen option value and every goal option value is colour-normalised
  (:func:`normalize_color`); a goal option matches if some chosen value scores ``token_set_ratio > 85``.
* ``price_ok``: the bought product's price is at most the goal's price cap.
* Type factor: 1.0; 0.5 if none of (same search query as the goal product, at least two shared elements of
  the category paths split at "›", title noun overlap > 0.2) holds; then 0.1 if the title noun overlap is
  below 0.1; then 0.0 if it is 0. Title noun overlap = |nouns(bought title) ∩ nouns(goal title)| /
  |nouns(goal title)|, 0.2 when the goal title has no nouns. Nouns are stored with each product.

Fuzzy scores are those of ``thefuzz.fuzz.token_set_ratio``, which the original uses: the strings are
lowercased, every character that is not a letter or digit becomes a space, and the rapidfuzz score is
rounded to an integer before the comparison with 85.

Deliberate differences from the original code, where the spec chose otherwise: option matches are counted
per goal option (the original counts per chosen option, matches size options exactly and also accepts an
option value found in the title or text); the generated catalogue's vocabularies are built so that no two
option values of a product match each other (see ``taxonomy.yaml``), which makes the two readings agree on
it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from envs.webshop.products import Goal, Product

__all__ = [
    "COLOR_WORDS",
    "FUZZY_THRESHOLD",
    "RewardBreakdown",
    "attribute_matches",
    "fuzzy_match",
    "normalize_color",
    "option_matches",
    "score_purchase",
    "title_noun_overlap",
    "type_factor",
]

#: A fuzzy score above this (an integer 0-100) is a match.
FUZZY_THRESHOLD = 85

#: Colour words in alphabetical order; :func:`normalize_color` maps a value to the first one it contains.
COLOR_WORDS: tuple[str, ...] = (
    "amber", "apricot", "aqua", "auburn", "azure", "beige", "berry", "black", "blonde", "blue", "blush", "brass",
    "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cherry", "chocolate",
    "coffee", "cognac", "copper", "coral", "cream", "crimson", "denim", "ebony", "emerald", "fuchsia", "gold",
    "graphite", "gray", "green", "grey", "indigo", "ivory", "khaki", "lavender", "lemon", "lilac", "lime",
    "magenta", "maroon", "mauve", "mint", "mocha", "mustard", "navy", "nude", "oatmeal", "olive", "orange",
    "peach", "pewter", "pink", "plum", "purple", "rainbow", "red", "rose", "ruby", "rust", "sage", "salmon",
    "sand", "sapphire", "scarlet", "silver", "slate", "tan", "taupe", "teal", "terracotta", "turquoise",
    "violet", "walnut", "white", "wine", "yellow",
)  # fmt: skip


@dataclass(frozen=True)
class RewardBreakdown:
    """Every term of one purchase's reward (``reward`` is the final value)."""

    reward: float
    attribute_matches: int
    num_goal_attributes: int
    option_matches: int
    num_goal_options: int
    price_ok: bool
    type_factor: float
    query_match: bool
    category_match: bool
    title_score: float

    def as_dict(self) -> dict[str, float | int | bool]:
        return dict(self.__dict__)


def normalize_color(value: str) -> str:
    """The first colour word of :data:`COLOR_WORDS` that is a substring of ``value``, else ``value`` unchanged.

    Substring, as in the original: "dark brown" and "light brown" both become "brown", "standard" becomes "tan".
    """
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value


def _process(text: str) -> str:
    """thefuzz's full_process: lowercase, non-alphanumerics to spaces, stripped (ASCII letters and digits only)."""
    return "".join(c if c.isascii() and c.isalnum() else " " for c in text.lower()).strip()


def fuzzy_match(a: str, b: str) -> bool:
    """``round(token_set_ratio(a, b)) > 85`` on processed strings (thefuzz semantics through rapidfuzz)."""
    try:
        from rapidfuzz import fuzz
    except ImportError as exc:  # pragma: no cover - exercised only without the dependency
        raise ImportError("WebShop's reward needs rapidfuzz: pip install 'rapidfuzz>=3'") from exc
    pa, pb = _process(a), _process(b)
    if not pa or not pb:
        return False  # thefuzz scores an empty string 0
    return round(fuzz.token_set_ratio(pa, pb)) > FUZZY_THRESHOLD


def attribute_matches(product: Product, goal_attributes: Sequence[str]) -> int:
    """How many goal attributes the product has (fuzzy among its attributes, or in title, bullets, description)."""
    title = product.title.lower()
    bullets = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    count = 0
    for wanted in goal_attributes:
        if (
            any(fuzzy_match(have, wanted) for have in product.attributes)
            or wanted in title
            or wanted in bullets
            or wanted in description
        ):
            count += 1
    return count


def option_matches(chosen_values: Iterable[str], goal_values: Sequence[str]) -> int:
    """How many goal option values some chosen value matches, after colour normalisation."""
    chosen = [normalize_color(v) for v in chosen_values]
    return sum(any(fuzzy_match(normalize_color(wanted), c) for c in chosen) for wanted in goal_values)


def title_noun_overlap(bought_nouns: Iterable[str], goal_nouns: Iterable[str]) -> float:
    """|bought ∩ goal| / |goal| over distinct nouns; 0.2 when the goal title has none."""
    goal_set = set(goal_nouns)
    if not goal_set:
        return 0.2
    return len(set(bought_nouns) & goal_set) / len(goal_set)


def _category_elements(path: str) -> set[str]:
    return {part.strip() for part in path.split("›")}


def type_factor(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """(type factor, query match, category match, title noun overlap) of buying ``product`` for ``goal``."""
    query_match = product.query == goal.query
    category_match = len(_category_elements(product.product_category) & _category_elements(goal.product_category)) >= 2
    title_score = title_noun_overlap(product.title_nouns, goal.title_nouns)
    factor = 1.0
    if not (query_match or category_match or title_score > 0.2):
        factor = 0.5
    if title_score < 0.1:
        factor = 0.1
    if title_score == 0.0:
        factor = 0.0
    return factor, query_match, category_match, title_score


def score_purchase(product: Product, goal: Goal, chosen_options: Mapping[str, str]) -> RewardBreakdown:
    """The reward of buying ``product`` with ``chosen_options`` (option name -> value) for ``goal``."""
    factor, query_match, category_match, title_score = type_factor(product, goal)
    n_attributes = attribute_matches(product, goal.attributes)
    n_options = option_matches(chosen_options.values(), goal.option_values)
    price_ok = product.price <= goal.price_upper
    total = (n_attributes + n_options + int(price_ok)) / (len(goal.attributes) + len(goal.option_values) + 1)
    return RewardBreakdown(
        reward=total * factor,
        attribute_matches=n_attributes,
        num_goal_attributes=len(goal.attributes),
        option_matches=n_options,
        num_goal_options=len(goal.option_values),
        price_ok=price_ok,
        type_factor=factor,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )
