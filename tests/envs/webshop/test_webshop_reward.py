"""WebShop's purchase reward, term by term, on hand-made products and goals (derivations in comments)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tiny_shop import HAIR, HAIR_GOAL, make_product

from envs.webshop.reward import (
    COLOR_WORDS,
    attribute_matches,
    fuzzy_match,
    fuzzy_process,
    normalize_color,
    option_matches,
    score_purchase,
    title_noun_overlap,
    type_factor,
)

BOUGHT = make_product(
    "B0BOUGHT01",
    "Acme Red Clip In Hair Extension",
    bullet_points=("Soft and Tangle Free",),
    description="Made from human hair.",
    attributes=("natural looking", "heat resistant"),
    price=25.0,
)
GOAL = replace(
    HAIR_GOAL,
    attributes=("natural looking", "tangle free", "human hair", "long lasting"),
    options=(("color", "dark brown"), ("length", "18 inch")),
    price_upper=30.0,
)


# --------------------------------------------------------------------------------------------------
# Fuzzy matching and colours
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("long lasting", "long lasting formula", True),  # token sets: one contains the other -> 100
        ("Long-Lasting!", "long lasting", True),  # processing: lowercase, punctuation to spaces -> equal
        ("16 inch", "18 inch", True),  # "inch 16" vs "inch 18": indel ratio 2*6/14 = 85.7, rounds to 86 > 85
        ("18 inch", "22 inch", False),  # best of "inch" vs "inch 18" = 2*4/11 = 72.7
        ("heat resistant", "heat resistance", True),  # "heat resistan|t" vs "heat resistan|ce": 2*13/29 = 89.7
        ("gluten free", "sugar free", False),  # "free" vs "free gluten": 2*4/15 = 53; whole strings lower still
        ("", "anything", False),  # an empty string scores 0
    ],
)
def test_fuzzy_match_is_thefuzz_token_set_ratio_above_85(a, b, expected):
    assert fuzzy_match(a, b) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("dark brown", "brown"),  # "brown" comes before "dark" in the original's alphabetical list
        ("light brown", "brown"),  # so both browns normalise alike, as in the original
        ("mint green", "green"),  # "green" < "mint" in the alphabetical list
        ("standard", "tan"),  # substring matching: s-TAN-dard
        ("xl", "xl"),  # no colour word: unchanged
        # The original's list has "dark", "light", "natural", ... and no "ruby" or "auburn":
        ("dark green", "dark"),  # "dark" comes before "green": every dark colour becomes "dark"
        ("dark red", "dark"),
        ("light pink", "light"),  # "light" < "pink"
        ("light blue", "blue"),  # but "blue" < "light"
        ("natural", "natural"),
        ("ruby red", "red"),  # no "ruby": "red" is the first word contained
        ("auburn", "auburn"),  # not a colour word of the original: unchanged
        ("stone washed", "ash"),  # substring: w-ASH-ed, and "ash" < "stone"
    ],
)
def test_normalize_color_maps_to_the_first_colour_word_contained(value, expected):
    assert normalize_color(value) == expected


def test_colour_words_are_the_originals_in_its_order():
    assert len(COLOR_WORDS) == 102 and list(COLOR_WORDS) == sorted(COLOR_WORDS)
    assert {"dark", "light", "multicolor", "stonewash", "christmas"} <= set(COLOR_WORDS)
    assert not {"ruby", "auburn", "berry", "emerald", "scarlet"} & set(COLOR_WORDS)


@pytest.mark.parametrize(
    ("text", "processed"),
    [
        ("Crème Brûlée", "crme brle"),  # è (U+00E8) and û (U+00FB) are deleted, as thefuzz's force_ascii does
        ("Café-Noir!", "caf noir"),  # é deleted; "-" and "!" become spaces, then stripped
        ("Œuvre Ł", "œuvre ł"),  # Œ (U+0152) and Ł (U+0141) lie above U+00FF: kept, and lowercased
        ("  Heat-Resistant  ", "heat resistant"),
    ],
)
def test_fuzzy_processing_deletes_latin1_accents_like_thefuzz(text, processed):
    assert fuzzy_process(text) == processed


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # "crme" vs "creme": no shared token, so the ratio of the strings: 2 * 4 / (4 + 5) = 88.9 -> 89 > 85.
        # (Splitting è into a space instead gives "cr me" vs "creme": 2 * 4 / 10 = 80, no match.)
        ("crème", "creme", True),
        ("naïve", "naive", True),  # "nave" vs "naive": 2 * 4 / 9 = 88.9 -> 89
        ("straße", "strasse", False),  # "strae" vs "strasse": 2 * 5 / 12 = 83.3 -> 83, not above 85
    ],
)
def test_fuzzy_match_on_accented_text(a, b, expected):
    assert fuzzy_match(a, b) is expected


def test_original_data_reward_with_accents_and_dark_colours():
    # A product as the original data has them: an accented attribute, a "dark ..." colour.
    # Attributes: "creme" vs the product's "Crème": 89 > 85 -> 1 of 1.
    # Options: "dark red" and "dark green" both normalise to "dark" -> 100 -> 1 of 1.
    # Price 25 <= 30 -> 1. Total (1 + 1 + 1) / (1 + 1 + 1) = 1; same query -> type factor 1: reward 1.0.
    # (With accents split into spaces and without "dark" among the colours it was (0 + 0 + 1) / 3.)
    product = make_product("B0CREME001", "Acme Lipstick", attributes=("Crème",), price=25.0)
    goal = replace(GOAL, attributes=("creme",), options=(("color", "dark green"),), price_upper=30.0)
    breakdown = score_purchase(product, goal, {"color": "dark red"})
    assert (breakdown.attribute_matches, breakdown.option_matches, breakdown.reward) == (1, 1, 1.0)


# --------------------------------------------------------------------------------------------------
# Attributes, options, price
# --------------------------------------------------------------------------------------------------
def test_attribute_matches_use_attributes_then_title_bullets_description():
    # natural looking: fuzzy in the attributes (100)             -> 1
    # tangle free: substring of the lowercased bullets            -> 1
    # human hair: substring of the lowercased description         -> 1
    # long lasting: nowhere                                       -> 0
    assert attribute_matches(BOUGHT, GOAL.attributes) == 3
    assert attribute_matches(BOUGHT, ("red clip",)) == 1  # substring of the lowercased title
    assert attribute_matches(BOUGHT, ("heat resistance",)) == 1  # fuzzy 89.7 against "heat resistant"


def test_option_matches_normalise_colours_and_fuzzy_match_each_goal_option():
    # dark brown -> brown, light brown -> brown: match. 18 inch vs 22 inch: 72.7, no match.
    assert option_matches(["light brown", "22 inch"], ["dark brown", "18 inch"]) == 1
    # A goal option matches a chosen value of any option name; each goal option counts once.
    assert option_matches(["18 inch"], ["18 inch", "18 inch"]) == 2
    assert option_matches([], ["black"]) == 0


def test_price_cap_is_inclusive():
    at_cap = score_purchase(replace(BOUGHT, price=30.0), GOAL, {})
    above = score_purchase(replace(BOUGHT, price=30.01), GOAL, {})
    assert at_cap.price_ok and not above.price_ok


# --------------------------------------------------------------------------------------------------
# Type factor
# --------------------------------------------------------------------------------------------------
def _kind(query: str, path: str, nouns: tuple[str, ...]):
    return make_product("B0TYPE0001", "x", query=query, product_category=path, title_nouns=nouns)


@pytest.mark.parametrize(
    ("query", "path", "nouns", "goal_nouns", "expected"),
    [
        # same query, overlap 2/3 -> 1.0
        ("hair extensions", "X › Y", ("hair", "extension"), ("acme", "hair", "extension"), 1.0),
        # same query but no shared noun: overlap 0 -> 0.0 whatever else matches
        ("hair extensions", "X › Y", ("wig",), ("acme", "hair", "extension"), 0.0),
        # same query, overlap 1/11 = 0.09 < 0.1 -> 0.1
        ("hair extensions", "X › Y", ("hair",), ("hair", *"abcdefghij"), 0.1),
        # nothing else matches but overlap 1/4 = 0.25 > 0.2 -> 1.0
        ("wigs", "X › Y", ("hair",), ("hair", "a", "b", "c"), 1.0),
        # overlap 1/5 = 0.2 is not > 0.2 and nothing else matches -> 0.5
        ("wigs", "X › Y", ("hair",), ("hair", "a", "b", "c", "d"), 0.5),
        # two shared path elements (Beauty, Hair Care), overlap 1/8 = 0.125 -> 1.0
        ("wigs", "Beauty › Hair Care › Wigs", ("hair",), ("hair", *"abcdefg"), 1.0),
        # one shared path element is not enough: 0.5
        ("wigs", "Beauty › Wigs", ("hair",), ("hair", *"abcdefg"), 0.5),
        # a goal title without nouns counts as overlap 0.2: 0.5 without other matches, 1.0 with the query
        ("wigs", "X › Y", ("hair",), (), 0.5),
        ("hair extensions", "X › Y", ("hair",), (), 1.0),
    ],
)
def test_type_factor_levels(query, path, nouns, goal_nouns, expected):
    goal = replace(HAIR_GOAL, title_nouns=goal_nouns)  # query "hair extensions", path Beauty › Hair Care › Extensions
    assert type_factor(_kind(query, path, nouns), goal)[0] == expected


def test_title_noun_overlap_counts_distinct_goal_nouns():
    assert (
        title_noun_overlap(["hair", "hair", "clip"], ["hair", "extension", "hair"]) == 0.5
    )  # {hair} / {hair, extension}
    assert title_noun_overlap(["hair"], []) == 0.2


# --------------------------------------------------------------------------------------------------
# The whole reward
# --------------------------------------------------------------------------------------------------
def test_score_combines_every_term():
    # attributes 3 of 4 (above); options: light brown ~ dark brown, 22 inch != 18 inch -> 1 of 2;
    # price 25 <= 30 -> 1; total (3 + 1 + 1) / (4 + 2 + 1) = 5/7; same query -> type factor 1.
    breakdown = score_purchase(BOUGHT, GOAL, {"color": "light brown", "length": "22 inch"})
    assert breakdown.reward == pytest.approx(5 / 7)
    assert (breakdown.attribute_matches, breakdown.option_matches, breakdown.price_ok) == (3, 1, True)
    assert (breakdown.type_factor, breakdown.query_match, breakdown.title_score) == (1.0, True, 1.0)


def test_score_is_scaled_by_the_type_factor():
    # Another query, path "X › Y", no noun shared with (acme, hair, extension): type factor 0.0, so even with
    # both options right (and 25.99 under the cap) the reward is 0.
    other = make_product("B0OTHER001", "Shampoo", query="shampoo", product_category="X › Y", title_nouns=("shampoo",))
    assert score_purchase(other, HAIR_GOAL, {"color": "black", "length": "16 inch"}).reward == 0.0


def test_goal_product_with_goal_options_scores_exactly_one():
    # clip in (attribute) + black + 16 inch + 25.99 <= 30 over 1 + 2 + 1 = 4/4, same query -> 1.0
    breakdown = score_purchase(HAIR, HAIR_GOAL, {"color": "black", "length": "16 inch"})
    assert breakdown.reward == 1.0
    # Without choosing options: (1 + 0 + 1) / 4 = 0.5
    assert score_purchase(HAIR, HAIR_GOAL, {}).reward == 0.5
