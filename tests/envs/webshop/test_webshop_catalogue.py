"""The generated catalogue and its goals: deterministic, large, varied, and unambiguous for the reward."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from envs.webshop.catalogue import load_shop
from envs.webshop.generate import generate_products, load_taxonomy, main
from envs.webshop.goals import NO_PRICE_CAP, PRICE_CAPS, price_cap, shuffle_goals, split_indices, synthetic_goals
from envs.webshop.products import Product, catalogue_hash
from envs.webshop.prose import Draw
from envs.webshop.reward import fuzzy_match, normalize_color

# The SHA-256 of generate_products(seed=0). It changes only when taxonomy.yaml, generate.py or prose.py
# change on purpose; then update it here (python -m envs.webshop.generate prints it).
EXPECTED_HASH = "48d12e8d1b6a6bdbd7ca55f84c1dff6c55d8f94e18721c635759c2ece7719517"


@pytest.fixture(scope="module")
def shop():
    return load_shop()


def test_catalogue_is_deterministic_and_seeded(shop):
    products = list(shop.catalogue.products)
    assert catalogue_hash(generate_products(0)) == catalogue_hash(products) == EXPECTED_HASH
    assert catalogue_hash(generate_products(1, per_type=2)) != catalogue_hash(generate_products(0, per_type=2))


def test_generate_cli_prints_size_and_hash(capsys, tmp_path):
    assert main(["--per-type", "1", "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("60 products, sha256 ") and (tmp_path / "c.json").stat().st_size > 1000


def test_catalogue_size_and_variety(shop):
    products = shop.catalogue.products
    assert len(products) == 4500  # 60 product types x 75
    assert len({p.asin for p in products}) == len({p.title for p in products}) == 4500
    assert Counter(p.category for p in products) == dict.fromkeys(
        ["beauty", "electronics", "fashion", "food", "furniture"], 900
    )
    assert len({p.query for p in products}) == 60
    assert sum(len(p.pricing) == 2 for p in products) > 600  # about a fifth show a price range
    assert sum(not p.options for p in products) > 50  # some products have no options at all


def test_every_product_is_consistent(shop):
    for p in shop.catalogue.products:
        assert p.asin.startswith("B0") and len(p.asin) == 10
        assert " › " in p.product_category and p.title_nouns and p.description and p.bullet_points
        assert 2 <= len(p.attributes) <= 5 and set(p.instruction_attributes) <= set(p.attributes)
        assert p.pricing[0] <= p.price <= p.pricing[-1]
        assert p.instruction_text and all(a in p.instruction_text for a in p.instruction_attributes)
        assert all(v == v.lower() and len(vs) >= 2 for vs in p.options.values() for v in vs)


@pytest.mark.parametrize("kind", load_taxonomy(), ids=lambda t: t.noun)
def test_vocabularies_do_not_match_each_other(kind):
    # Reward 1 then means the asked-for attributes and options were bought, not look-alikes.
    pool = kind.attributes + kind.common_attributes
    assert not [(a, b) for a, b in combinations(pool, 2) if fuzzy_match(a, b)]
    values = [normalize_color(v) for vs in kind.options.values() for v in vs]
    assert not [(a, b) for a, b in combinations(values, 2) if fuzzy_match(a, b)]


def test_goal_counts_and_splits(shop):
    goals = shop.catalogue.goals
    # One goal per option combination of each product.
    expected = 0
    for p in shop.catalogue.products:
        combinations_count = 1
        for values in p.options.values():
            combinations_count *= len(values)
        expected += combinations_count
    assert len(goals) == expected
    assert [len(shop.split(name)) for name in ("test", "validation", "train")] == [500, 1000, len(goals) - 1500]
    assert split_indices("test", 300) == range(0, 300) and split_indices("train", 300) == range(300, 300)


def test_goal_text_options_and_price_cap(shop):
    for goal in shop.catalogue.goals[:2000]:
        product = shop.catalogue.by_asin[goal.asin]
        above = [c for c in PRICE_CAPS if c > product.price][:4]
        assert goal.price_upper in above[1:]  # the larger of two distinct draws is never the first
        names = [n for n, _ in goal.options]
        assert names == sorted(product.options) and all(v in product.options[n] for n, v in goal.options)
        options_text = ", and ".join(f"{n}: {v}" for n, v in goal.options)
        expected = product.instruction_text + (f" with {options_text}" if options_text else "")
        assert goal.instruction_text == f"{expected}, and price lower than {goal.price_upper:.2f} dollars"


def test_price_cap_rule():
    # 983.5: only 990 lies above -> no cap. 975: 980 and 990 -> the larger, 990.
    assert price_cap(983.5, Draw(0)) == (NO_PRICE_CAP, "")
    assert price_cap(975.0, Draw(0)) == (990.0, ", and price lower than 990.00 dollars")
    caps = {price_cap(12.5, Draw(seed))[0] for seed in range(200)}
    assert caps == {30.0, 40.0, 50.0}  # two of 20, 30, 40, 50; the larger is never 20


def test_goals_for_products_without_options_and_shuffle_is_a_permutation():
    product = Product(
        "B0NOOPT001", "T", "c", "q", "A › B", ("t",), (5.0,), 5.0, (), "", ("x",), {}, (), "i need x", ("x",)
    )
    goals = synthetic_goals([product])
    assert len(goals) == 1 and goals[0].options == () and goals[0].instruction_text.startswith("i need x, and price")
    shuffled = shuffle_goals(list(range(100)))  # type: ignore[arg-type]
    assert sorted(shuffled) == list(range(100)) and list(shuffled) != list(range(100))
