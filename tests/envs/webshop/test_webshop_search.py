"""BM25 search: analysis (stop words, possessives, S-stemming), ranking, ties, zero-score hits, limits."""

from __future__ import annotations

import pytest
from tiny_shop import HAIR, SHAMPOO, WIDGETS, make_product

from envs.webshop.search import MAX_QUERY_TOKENS, SearchEngine, analyze, document_text, s_stem


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("batteries", "battery"),  # -ies -> -y
        ("shoes", "shoe"),  # -oes keeps its e, then -s goes
        ("boxes", "boxe"),  # -es -> -e (the S-stemmer's known rough edge)
        ("glass", "glass"),  # -ss stays
        ("status", "status"),  # -us stays
        ("bus", "bus"),  # three letters or fewer stay
        ("extensions", "extension"),
    ],
)
def test_s_stem(word, stem):
    assert s_stem(word) == stem


def test_analyze_lowercases_drops_stop_words_and_possessives():
    assert analyze("The Men's Running-Shoes, for a 5K!") == ["men", "running", "shoe", "5k"]
    assert analyze("x " * 1000, max_tokens=3) == ["x", "x", "x"]
    assert len(analyze("word " * (MAX_QUERY_TOKENS * 2), MAX_QUERY_TOKENS)) == MAX_QUERY_TOKENS


def test_document_text_is_title_description_first_bullet_and_options():
    assert document_text(HAIR) == (
        "Acme Clip In Hair Extension A clip in hair extension made of human hair. NATURAL LOOKING - blends in. "
        "black auburn 16 inch 22 inch"
    )  # the second bullet ("Tangle free fibres.") is not indexed


def test_ranking_ties_and_zero_scores():
    products = [HAIR, SHAMPOO, *WIDGETS]
    engine = SearchEngine(products)
    assert engine.search("hair extension") == [0]  # nothing else holds either word: zero scores are dropped
    assert engine.search("auburn") == [0]  # option values are indexed
    assert engine.search("tangle") == []  # the second bullet point is not
    assert engine.search("widget", k=50) == list(range(2, 26))  # equal scores: catalogue order
    assert engine.search("widget", k=5) == [2, 3, 4, 5, 6]
    assert engine.search("") == [] and engine.search("the and of") == [] and engine.search("zzz") == []


def test_more_matching_terms_rank_higher():
    a = make_product("A000000001", "Red Shoe", description="")
    b = make_product("A000000002", "Red Leather Shoe", description="")
    c = make_product("A000000003", "Blue Hat", description="")
    engine = SearchEngine([a, b, c])
    # "leather" occurs only in b, so b outranks a although a is shorter; c matches nothing.
    assert engine.search("red leather shoes") == [1, 0]
