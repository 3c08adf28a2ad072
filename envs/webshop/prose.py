"""The sentences of the generated catalogue: titles, bullet points, descriptions, reviews and instructions.

Every function draws from a :class:`Draw`, a seeded source that only calls ``random.Random.random()``,
whose sequence Python guarantees across versions; so the same seed writes the same catalogue everywhere.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

__all__ = [
    "Draw",
    "bullet_points",
    "description",
    "instruction",
    "join_and",
    "reviews",
    "title",
    "with_article",
]

T = TypeVar("T")

SERIES = ("Classic", "Pro", "Essentials", "Plus", "Signature", "Everyday", "Premium", "Original", "Select", "Studio")
MASS_NOUNS = frozenset(
    {"shampoo", "pasta", "honey", "granola", "green tea", "dark chocolate", "olive oil", "sparkling water", "jerky"}
    | {"beard oil", "hot sauce", "nail polish", "body lotion", "perfume", "mixed nuts", "coffee beans"}
)

_BULLET_ENDINGS = (
    "Designed around how people really use it, so it feels right from the first day.",
    "Every piece from {brand} is checked by hand before it ships.",
    "One of the reasons customers keep coming back to {brand}.",
    "Made to hold up to daily use without losing what makes it good.",
    "A detail most shoppers notice within the first week.",
    "Tested side by side with leading brands and preferred by our panel.",
    "No compromises: {brand} spent two years getting this right.",
)
_REVIEW_TITLES = {
    5: ("Love it", "Exactly what I wanted", "Five stars", "Would buy again"),
    4: ("Very good", "Great value", "Happy with it", "Solid choice"),
    3: ("It's okay", "Does the job", "Mixed feelings"),
    2: ("Disappointed", "Not as described", "Expected more"),
    1: ("Returned it", "Poor quality", "Do not buy"),
}
_REVIEW_BODIES = {
    5: (
        "Just like the listing says: {attr}. I ordered a second one for my sister.",
        "Best {noun} I have owned. Definitely {attr}.",
    ),
    4: (
        "Good value for the price and {attr}; shipping took a few days longer than promised.",
        "Does what it should. I took one star off for the packaging.",
    ),
    3: ("It is fine. I wanted it to be more {attr}, but it works.", "Average. Not bad, not great."),
    2: ("Arrived on time but did not feel {attr} at all.", "Smaller than I expected from the photos."),
    1: ("Stopped working after two weeks. Customer service was slow to answer.", "Arrived damaged."),
}


class Draw:
    """Seeded choices built on ``random.Random.random()`` only (stable across Python versions)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self._random.random()

    def below(self, n: int) -> int:
        """An integer in [0, n)."""
        return min(int(self._random.random() * n), n - 1)

    def between(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return low + self.below(high - low + 1)

    def chance(self, p: float) -> bool:
        return self._random.random() < p

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """``k`` distinct items in drawn order (a partial Fisher-Yates shuffle)."""
        pool = list(items)
        for i in range(min(k, len(pool))):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def subset(self, items: Sequence[T], k: int) -> list[T]:
        """``k`` distinct items in their original order."""
        keep = set(self.sample(range(len(items)), k))
        return [item for i, item in enumerate(items) if i in keep]


def join_and(items: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def with_article(phrase: str, noun: str) -> str:
    """``phrase`` with "a"/"an" in front, unless ``noun`` is plural or a mass noun."""
    if noun in MASS_NOUNS or _is_plural(noun):
        return phrase
    article = "an" if phrase[:1] in "aeiou" else "a"
    return f"{article} {phrase}"


def _is_plural(noun: str) -> bool:
    return noun.endswith("s") and not noun.endswith("ss")


def _capital(phrase: str) -> str:
    return " ".join(word[:1].upper() + word[1:] for word in phrase.split())


def title(draw: Draw, brand: str, noun: str, attributes: Sequence[str]) -> str:
    """An online-shop title: brand, product noun and one or two of the product's attributes."""
    shown = [_capital(a) for a in draw.sample(attributes, min(len(attributes), draw.between(1, 2)))]
    pattern = draw.below(3)
    if pattern == 0:
        return f"{brand} {draw.choice(SERIES)} {_capital(noun)}, {', '.join(shown)}"
    if pattern == 1:
        return f"{brand} {shown[0]} {_capital(noun)}" + (f" - {shown[1]}" if len(shown) > 1 else "")
    return f"{_capital(noun)} by {brand} | {' and '.join(shown)}"


def bullet_points(draw: Draw, brand: str, noun: str, attributes: Sequence[str], extra: str) -> tuple[str, ...]:
    """One bullet per attribute ("ATTRIBUTE - sentence") and one more from the category's sentences."""
    bullets = [
        f"{attribute.upper()} - " + draw.choice(_BULLET_ENDINGS).format(noun=noun, brand=brand)
        for attribute in attributes
    ]
    bullets.append(extra)
    return tuple(bullets)


def description(draw: Draw, brand: str, noun: str, attributes: Sequence[str], sentences: Sequence[str]) -> str:
    verb = "are" if _is_plural(noun) else "is"
    opening = f"The {brand} {noun} {verb} {join_and(list(attributes[:2]))}."
    middle = draw.sample(sentences, 2)
    return " ".join([opening, *middle, f"Package includes: 1 x {noun}."])


def reviews(draw: Draw, noun: str, attributes: Sequence[str]) -> tuple[tuple[str, int, str], ...]:
    """Zero to three (title, score, body) reviews, most of them positive."""
    found = []
    for _ in range(draw.between(0, 3)):
        score = draw.choice((5, 5, 5, 4, 4, 3, 2, 1))
        body = draw.choice(_REVIEW_BODIES[score]).format(noun=noun, attr=draw.choice(attributes))
        found.append((draw.choice(_REVIEW_TITLES[score]), score, body))
    return tuple(found)


def instruction(draw: Draw, noun: str, asked: Sequence[str]) -> str:
    """A buyer's request for ``noun`` naming the ``asked`` attributes, lowercase like WebShop's instructions."""
    pattern = draw.below(5) if len(asked) > 1 else draw.below(4)
    verb = "are" if _is_plural(noun) else "is"
    if pattern == 0:
        return f"i need {with_article(f'{join_and(list(asked))} {noun}', noun)}"
    if pattern == 1:
        return f"i'm looking for {with_article(noun, noun)} that {verb} {join_and(list(asked))}"
    if pattern == 2:
        return f"i want to buy {with_article(noun, noun)} which {verb} {join_and(list(asked))}"
    if pattern == 3:
        has = "have" if _is_plural(noun) else "has"
        return f"i would like {with_article(noun, noun)} that {has} {join_and(list(asked))}"
    return f"find me {with_article(f'{asked[0]} {noun}', noun)} that {verb} {join_and(list(asked[1:]))}"
