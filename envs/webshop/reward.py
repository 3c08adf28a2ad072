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

Fuzzy scores are those of ``thefuzz.fuzz.token_set_ratio``, which the original uses: characters
U+0080-U+00FF are deleted (``force_ascii``), the strings are lowercased, every other character that is not a
letter or digit becomes a space, and the rapidfuzz score is rounded to an integer before the comparison
with 85. Colour words are the original's list (:data:`COLOR_WORDS`).

Deliberate differences from the original code, where the spec chose otherwise:

* Options are counted per goal option: a goal option matches if some chosen value scores above 85. The
  original counts per chosen option: a "size" option only on exact equality, any other by the fuzzy score,
  and, failing both, a chosen value found in the bought product's lowercased title, bullets or description
  also counts. So on the original data (``data_dir``) the original can credit an option the goal did not
  ask for, count more option matches than goal options (a reward above 1), or refuse a size that differs
  only in punctuation ("x-large" against "x large"). The spec's reading keeps reward 1 meaning "every
  asked-for option was chosen" and the reward within [0, 1]. On the generated catalogue the two agree:
  its vocabularies are built so that no two option values of a product match each other (``taxonomy.yaml``).
* Title nouns approximate spaCy's tags (see :mod:`envs.webshop.original`): spaCy's model cannot be
  downloaded here.
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
    "fuzzy_process",
    "normalize_color",
    "option_matches",
    "score_purchase",
    "title_noun_overlap",
    "type_factor",
]

#: A fuzzy score above this (an integer 0-100) is a match.
FUZZY_THRESHOLD = 85

#: WebShop's colour words (``COLOR_SET`` of its ``web_agent_site/engine/normalize.py``), in its order, which is
#: alphabetical: :func:`normalize_color` maps a value to the first one it contains. Some are not colours
#: ("dark", "light", "natural", "christmas", "skull"): the original's list, kept as it is for fidelity.
COLOR_WORDS: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)  # fmt: skip

# thefuzz's force_ascii deletes the characters U+0080-U+00FF (accented Latin letters among them) before
# rapidfuzz's processing; characters above U+00FF are left to that processing.
_LATIN1_DELETED = {code: None for code in range(128, 256)}


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

    Substring, in the list's order, as in the original: "dark brown" and "light brown" both become "brown"
    ("brown" comes first), "dark green" and "dark red" both become "dark", "standard" becomes "tan".
    """
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value


def fuzzy_process(text: str) -> str:
    """thefuzz's processing for ``token_set_ratio``: delete U+0080-U+00FF, then rapidfuzz's ``default_process``.

    ``default_process`` lowercases, turns every character that is not a letter or digit into a space and
    strips; so "Crème" becomes "crme" (the è deleted, not split into "cr me").
    """
    from rapidfuzz.utils import default_process

    return default_process(text.translate(_LATIN1_DELETED))


def fuzzy_match(a: str, b: str) -> bool:
    """``round(token_set_ratio(a, b)) > 85`` on processed strings (thefuzz semantics through rapidfuzz)."""
    try:
        from rapidfuzz import fuzz
    except ImportError as exc:  # pragma: no cover - exercised only without the dependency
        raise ImportError("WebShop's reward needs rapidfuzz: pip install 'rapidfuzz>=3'") from exc
    pa, pb = fuzzy_process(a), fuzzy_process(b)
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
