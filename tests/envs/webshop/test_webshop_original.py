"""The loader of WebShop's original JSON files, on tiny files written here in the original layout."""

from __future__ import annotations

import json

import pytest

from envs.webshop.env import WebShopEnv
from envs.webshop.original import find_data_file, load_original_products, title_nouns

ITEMS = [
    {
        "asin": "B07ABC1234",
        "name": "Earthy Bright Citrus Deodorant for Sensitive Skin",
        "full_description": "A gentle deodorant.",
        "small_description": ["Aluminum free", "Made for sensitive skin"],
        "pricing": "$10.99",
        "customization_options": {
            "Scent": [{"value": "Bright Citrus", "image": None}, {"value": "Lavender/Mint", "image": None}],
            "Size": [{"value": "3 Ounce", "image": None}, {"value": "6 Ounce", "image": None}],
        },
        "category": "beauty",
        "query": "Deodorant ",
        "product_category": "Beauty & Personal Care › Personal Care › Deodorants",
    },
    {
        "asin": "B07XYZ9876",
        "name": "Oak Bookshelf",
        "full_description": None,
        "small_description": "Five shelves",
        "pricing": "$40.00 - $60.00",
        "customization_options": None,
        "category": "furniture",
        "query": "bookshelf",
        "product_category": "Home & Kitchen › Furniture › Bookcases",
    },
    {"asin": "nan", "name": "skipped: the id is nan"},
    {"asin": "B07ABC1234", "name": "skipped: a repeated id"},
    {
        "asin": "B07NOPRICE",
        "name": "Plain Mug",
        "full_description": "",
        "small_description": [],
        "pricing": "",
        "customization_options": {},
        "category": "furniture",
        "query": "mug",
        "product_category": "Home & Kitchen › Kitchen › Mugs",
    },
]
MINED = {
    "B07ABC1234": {
        "attributes": ["sensitive skin", "aluminum free"],
        "instruction": "i need a citrus deodorant for sensitive skin",
        "instruction_attributes": ["sensitive skin"],
    },
    "B07XYZ9876": {"attributes": ["solid wood"], "instruction": None, "instruction_attributes": None},
}
HUMAN = {
    "B07ABC1234": [
        {
            "instruction": "i want an aluminum free deodorant in bright citrus, 3 ounce.",
            "instruction_attributes": ["aluminum free"],
            "instruction_options": ["bright citrus", "3 ounce"],
        },
        {"instruction": "no attributes: skipped", "instruction_attributes": [], "instruction_options": []},
    ]
}
REVIEWS = [{"asin": "B07ABC1234", "reviews": [{"title": "Nice", "stars": "4.0", "review": "Works."}]}]


@pytest.fixture
def data_dir(tmp_path):
    for name, content in [
        ("items_shuffle_1000.json", ITEMS),
        ("items_ins_v2_1000.json", MINED),
        ("items_human_ins.json", HUMAN),
        ("reviews.json", REVIEWS),
    ]:
        (tmp_path / name).write_text(json.dumps(content))
    return tmp_path


def test_products_are_cleaned_like_webshop(data_dir):
    products = load_original_products(data_dir)
    assert [p.asin for p in products] == ["B07ABC1234", "B07XYZ9876", "B07NOPRICE"]  # nan and the repeat skipped
    deodorant, shelf, mug = products
    assert deodorant.options == {"scent": ("bright citrus", "lavender | mint"), "size": ("3 ounce", "6 ounce")}
    assert (deodorant.pricing, deodorant.price, deodorant.price_tag) == ((10.99,), 10.99, "$10.99")
    assert deodorant.query == "deodorant" and deodorant.attributes == ("sensitive skin", "aluminum free")
    assert deodorant.reviews[0].score == 4 and deodorant.reviews[0].body == "Works." and deodorant.rating == "4.0"
    assert shelf.pricing == (40.0, 60.0) and 40.0 <= shelf.price <= 60.0 and shelf.price_tag == "$40.00 to $60.00"
    assert shelf.bullet_points == ("Five shelves",) and shelf.description == "" and shelf.instruction_text is None
    assert mug.pricing == (100.0,) and mug.attributes == ("DUMMY_ATTR",) and mug.options == {}
    assert load_original_products(data_dir, num_products=2)[-1].asin == "B07XYZ9876"


def test_title_nouns_approximation():
    assert title_nouns("The Oak Bookshelf for Books, 5 Shelves and Oak") == ("oak", "bookshelf", "books", "shelves")


def test_file_choice(tmp_path):
    (tmp_path / "items_shuffle_1000.json").write_text("[]")
    assert find_data_file(tmp_path, "items_shuffle*.json").name == "items_shuffle_1000.json"
    (tmp_path / "items_shuffle_100.json").write_text("[]")
    with pytest.raises(FileNotFoundError, match="several files match"):
        find_data_file(tmp_path, "items_shuffle*.json")
    (tmp_path / "items_shuffle.json").write_text("[]")
    assert find_data_file(tmp_path, "items_shuffle*.json").name == "items_shuffle.json"
    with pytest.raises(FileNotFoundError, match="no file matching 'items_ins_v2"):
        find_data_file(tmp_path, "items_ins_v2*.json")


def test_synthetic_goals_and_oracle_on_original_data(data_dir):
    env = WebShopEnv(data_dir=str(data_dir), split="test", show_available_actions=False)
    # Only the deodorant has an instruction: 2 scents x 2 sizes = 4 goals.
    assert len(env.goals) == 4
    texts = sorted(g.instruction_text.split(", and price")[0] for g in env.goals)
    assert texts[0] == "i need a citrus deodorant for sensitive skin with scent: bright citrus, and size: 3 ounce"
    for index in range(4):
        env.reset(options={"goal_index": index})
        while not env.episode_over:
            _, reward, _, _, info = env.step(env.oracle()[0])
        assert (reward, info["success"]) == (1.0, True)


def test_human_goals(data_dir):
    env = WebShopEnv(data_dir=str(data_dir), human_goals=True, split="test")
    assert len(env.goals) == 1  # the record without attributes is skipped
    goal = env.goals[0]
    # 10.99: the next four multiples of 10 are 20, 30, 40, 50; the cap is the larger of two of them.
    assert goal.price_upper in (30.0, 40.0, 50.0)
    assert goal.instruction_text == (
        "i want an aluminum free deodorant in bright citrus, 3 ounce, "
        f"and price lower than {goal.price_upper:.2f} dollars"
    )
    env.reset(seed=0)
    while not env.episode_over:
        _, reward, _, _, info = env.step(env.oracle()[0])
    assert (reward, info["purchase"]["options"]) == (1.0, {"scent": "bright citrus", "size": "3 ounce"})


def test_human_goals_need_original_data():
    with pytest.raises(ValueError, match="human goals need WebShop's original data"):
        WebShopEnv(human_goals=True)
