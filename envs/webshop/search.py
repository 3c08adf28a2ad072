"""WebShop's search engine: BM25 over each product's title, description, first bullet point and option values.

The original serves search from a Pyserini (Lucene) index; this one uses ``bm25s`` (numpy only) with Lucene's
BM25 variant and Pyserini's default parameters (k1 = 0.9, b = 0.4). Analysis, applied alike to documents and
queries: lowercase, possessive "'s" removed, split into runs of letters and digits, Lucene's English stop
words removed, and plural endings stripped by Harman's S-stemmer ("batteries" -> "battery", "shoes" ->
"shoe"), a lighter stand-in for Lucene's Porter stemmer. Results are the top hits best first, ties broken by
catalogue order, with zero-score hits dropped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from envs.webshop.products import Product

__all__ = ["MAX_QUERY_TOKENS", "SearchEngine", "analyze", "document_text", "s_stem"]

#: Query tokens beyond this many are ignored (a search box holds a line, not a book).
MAX_QUERY_TOKENS = 256
_TOKEN = re.compile(r"[a-z0-9]+")
_POSSESSIVE = re.compile(r"'s\b")
# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


@functools.lru_cache(maxsize=1 << 16)
def s_stem(word: str) -> str:
    """Harman's S-stemmer: -ies -> -y, -es -> -e, -s -> "" (with its exceptions), for words over three letters."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def analyze(text: str, max_tokens: int | None = None) -> list[str]:
    """The index terms of ``text`` (see the module docstring), at most ``max_tokens`` of them."""
    words = _TOKEN.findall(_POSSESSIVE.sub("", text.lower()))
    terms = [s_stem(word) for word in words if word not in _STOP_WORDS]
    return terms if max_tokens is None else terms[:max_tokens]


def document_text(product: Product) -> str:
    """What the index holds for a product: title, description, first bullet point and every option value."""
    parts = [product.title, product.description, *product.bullet_points[:1]]
    parts.extend(value for values in product.options.values() for value in values)
    return " ".join(parts)


class SearchEngine:
    """A BM25 index over products; :meth:`search` returns positions in the product sequence it was built from."""

    def __init__(self, products: Sequence[Product], *, k1: float = 0.9, b: float = 0.4) -> None:
        try:
            import bm25s
        except ImportError as exc:
            raise ImportError("WebShop's search needs bm25s: pip install 'bm25s>=0.2'") from exc
        corpus = [analyze(document_text(p)) or [""] for p in products]
        self._retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._retriever.index(corpus, show_progress=False)
        self._num_documents = len(products)

    def search(self, keywords: str, k: int = 50) -> list[int]:
        """Positions of the ``k`` best-scoring products for ``keywords``, best first; no zero-score hits."""
        terms = analyze(keywords, MAX_QUERY_TOKENS)
        if not terms or self._num_documents == 0:
            return []
        scores = np.asarray(self._retriever.get_scores(terms), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:k]
        return [int(i) for i in order if scores[i] > 0]
