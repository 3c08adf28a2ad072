"""WebShopEnv on a hand-made shop: exact pages in both observation modes, transitions, pagination, bad actions."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from tiny_shop import HAIR, INSTRUCTION, tiny_shop

import envs
from envs.webshop import env as env_module
from envs.webshop.env import WebShopEnv

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "env" / "webshop.yaml"
HEAD = f"Instruction: [SEP] {INSTRUCTION} [SEP] "
ITEM_PAGE = (
    HEAD + "Back to Search [SEP] < Prev [SEP] color [SEP] black [SEP] auburn [SEP] length [SEP] 16 inch [SEP] 22 inch "
    "[SEP] Acme Clip In Hair Extension [SEP] Price: $25.99 [SEP] Rating: 4.5 [SEP] Description [SEP] Features "
    "[SEP] Reviews [SEP] Buy Now"
)  # rating: (5 + 4) / 2 = 4.5


@pytest.fixture
def make_env(monkeypatch):
    shop = tiny_shop()
    monkeypatch.setattr(env_module, "load_shop", lambda **kwargs: shop)

    def make(**kwargs) -> WebShopEnv:
        kwargs.setdefault("show_available_actions", False)
        env = WebShopEnv(split="test", **kwargs)
        env.reset(seed=0)
        return env

    return make


# --------------------------------------------------------------------------------------------------
# Pages, text mode
# --------------------------------------------------------------------------------------------------
def test_search_page_and_available_actions(make_env):
    env = make_env(show_available_actions=True)
    observation, info = env.reset(seed=0)
    assert observation == HEAD + "Search\nAvailable actions: search[<keywords>]"
    assert info["page"] == "search" and info["goal_asin"] == HAIR.asin
    assert env.valid_actions() == [f"search[{INSTRUCTION}]"]


def test_search_results_then_item_then_sub_pages(make_env):
    env = make_env()
    observation, reward, terminated, truncated, info = env.step("search[Hair Extension]")
    # Only the hair extension's text holds "hair" or "extension"; one page, so no Next >.
    assert observation == HEAD + (
        "Back to Search [SEP] Page 1 (Total results: 1) [SEP] B000000001 [SEP] Acme Clip In Hair Extension "
        "[SEP] $25.99"
    )
    assert (reward, terminated, truncated, info["action_is_valid"], info["page"]) == (
        0.0,
        False,
        False,
        True,
        "results",
    )
    assert env.step("click[B000000001]")[0] == ITEM_PAGE
    assert env.step("click[description]")[0] == HEAD + (
        "Back to Search [SEP] < Prev [SEP] A clip in hair extension made of human hair."
    )
    assert env.step("click[< prev]")[0] == ITEM_PAGE
    assert env.step("click[features]")[0] == HEAD + (
        "Back to Search [SEP] < Prev [SEP] NATURAL LOOKING - blends in. [SEP] Tangle free fibres."
    )
    env.step("click[< prev]")
    assert env.step("click[reviews]")[0] == HEAD + (
        "Back to Search [SEP] < Prev [SEP] Love it [SEP] Score: 5/5 [SEP] Looks real. [SEP] Okay [SEP] Score: 4/5 "
        "[SEP] A bit short."
    )
    env.step("click[< prev]")
    assert env.step("click[< prev]")[0].startswith(HEAD + "Back to Search [SEP] Page 1 (Total results: 1)")
    assert env.step("click[back to search]")[0] == HEAD + "Search"


def test_price_range_shows_both_ends(make_env):
    env = make_env()
    observation = env.step("search[shampoo]")[0]
    assert "B000000002 [SEP] Acme Shampoo [SEP] $8.99 to $12.99" in observation


def test_pagination_ten_per_page(make_env):
    env = make_env()
    page1 = env.step("search[widget]")[0]
    # 24 widgets tie on score (same words, same length), so they come in catalogue order.
    assert page1.startswith(HEAD + "Back to Search [SEP] Page 1 (Total results: 24) [SEP] Next > [SEP] W000000001")
    assert page1.endswith("W000000010 [SEP] Widget Number 10 [SEP] $5.00")
    page2 = env.step("click[next >]")[0]
    assert page2.startswith(
        HEAD + "Back to Search [SEP] Page 2 (Total results: 24) [SEP] < Prev [SEP] Next > [SEP] W000000011"
    )
    page3 = env.step("click[next >]")[0]
    assert page3.startswith(HEAD + "Back to Search [SEP] Page 3 (Total results: 24) [SEP] < Prev [SEP] W000000021")
    assert page3.count("Widget Number") == 4 and "Next >" not in page3
    _, _, _, _, info = env.step("click[next >]")  # not on the last page
    assert info["action_available"] is False
    # An item opened from page 3 goes back to page 3.
    env.step("click[w000000022]")
    assert env.step("click[< prev]")[0].startswith(HEAD + "Back to Search [SEP] Page 3 (Total results: 24)")
    assert env.step("click[< prev]")[0].startswith(HEAD + "Back to Search [SEP] Page 2 (Total results: 24)")


def test_search_results_are_capped_at_fifty(monkeypatch):
    from tiny_shop import make_product

    from envs.webshop.catalogue import build_shop
    from envs.webshop.products import Goal

    many = [make_product(f"M{i:09d}", f"Gadget {i}", description="gadget") for i in range(60)]
    goal = Goal(many[0].asin, "buy a gadget", "hair extensions", "Beauty", ("gadget",), ("gadget",), (), 10.0)
    shop = build_shop(many, [goal], "many")
    monkeypatch.setattr(env_module, "load_shop", lambda **kwargs: shop)
    env = WebShopEnv(split="test", show_available_actions=False)
    env.reset(seed=0)
    assert "Page 1 (Total results: 50)" in env.step("search[gadget]")[0]


# --------------------------------------------------------------------------------------------------
# Options, buying, text_rich
# --------------------------------------------------------------------------------------------------
def test_options_are_recorded_and_buying_scores_the_purchase(make_env):
    env = make_env(observation_mode="text_rich")
    env.step("search[hair extension]")
    env.step("click[b000000001]")
    env.step("click[auburn]")
    observation = env.step("click[black]")[0]  # a second click in the same group replaces the first
    assert observation == "\n".join(
        [
            "Instruction:",
            INSTRUCTION,
            "[button] Back to Search [button_]",
            "[button] < Prev [button_]",
            "color",
            "[clicked button] black [clicked button_]",
            "[button] auburn [button_]",
            "length",
            "[button] 16 inch [button_]",
            "[button] 22 inch [button_]",
            "Acme Clip In Hair Extension",
            "Price: $25.99",
            "Rating: 4.5",
            "[button] Description [button_]",
            "[button] Features [button_]",
            "[button] Reviews [button_]",
            "[button] Buy Now [button_]",
        ]
    )
    env.step("click[22 inch]")
    observation, reward, terminated, truncated, info = env.step("click[Buy Now]")
    # clip in (1 of 1) + black (match) + 22 inch vs 16 inch (72.7, no match) + price ok = 3 of 4; type 1.0
    assert reward == 0.75 and terminated and not truncated and not info["success"]
    assert info["purchase"]["options"] == {"color": "black", "length": "22 inch"}
    assert info["metrics"]["score"] == 0.75 and info["metrics"]["option_fraction"] == 0.5
    assert observation == "Thank you for shopping with us!\nYour score (min 0, max 1): 0.75"


def test_leaving_the_item_forgets_options(make_env):
    env = make_env()
    env.step("search[hair extension]")
    env.step("click[b000000001]")
    env.step("click[black]")
    env.step("click[< prev]")
    env.step("click[b000000001]")
    assert env.session.options == {}


def test_visited_products_are_marked_in_text_rich(make_env):
    env = make_env(observation_mode="text_rich")
    env.step("search[hair extension]")
    env.step("click[b000000001]")
    observation = env.step("click[< prev]")[0]
    assert "[clicked button] B000000001 [clicked button_]" in observation.splitlines()


def test_success_needs_every_option(make_env):
    env = make_env()
    for action in ["search[hair extension]", "click[b000000001]", "click[black]", "click[16 inch]"]:
        env.step(action)
    _, reward, terminated, _, info = env.step("click[buy now]")
    assert (reward, terminated, info["success"]) == (1.0, True, True)


# --------------------------------------------------------------------------------------------------
# Bad actions
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["", "buy it", "search hair", "purchase[now]", "<answer></answer>"])
def test_malformed_text_gets_the_format_penalty_and_changes_nothing(make_env, action):
    env = make_env(format_penalty=0.25)
    observation, reward, terminated, truncated, info = env.step(action)
    assert reward == -0.25 and not terminated and info["action_is_valid"] is False
    assert (
        observation == "Invalid action: no action found; write search[keywords] or click[value].\n" + HEAD + "Search"
    )
    assert env.session.kind.value == "search"


@pytest.mark.parametrize(
    ("actions", "reason"),
    [
        (["click[buy now]"], "'buy now' is not a button, product or option on this page"),
        (["search[]"], "the keywords are empty"),
        (["search[hair]", "search[shampoo]"], "search only works on the search page"),
        (["search[hair]", "click[next >]"], "'next >' is not a button, product or option on this page"),
        (["search[hair]", "click[b000000002]"], "'b000000002' is not a button, product or option on this page"),
    ],
)
def test_unavailable_actions_change_nothing_and_score_zero(make_env, actions, reason):
    env = make_env()
    for action in actions[:-1]:
        env.step(action)
    before = env.render_text()
    observation, reward, terminated, truncated, info = env.step(actions[-1])
    assert (reward, terminated, info["action_is_valid"], info["action_available"]) == (0.0, False, True, False)
    assert info["invalid_reason"] == reason
    assert observation.startswith(f"Nothing happened: {reason}.\n") and env.render_text() == before


def test_last_action_in_the_text_counts_and_answer_tags(make_env):
    env = make_env()
    env.step("I could search[shampoo] but I will search[hair extension]")
    assert env.session.keywords == "hair extension"
    strict = make_env(require_answer_tag=True)
    assert strict.step("search[hair]")[4]["action_is_valid"] is False
    assert strict.step("<think>search[x]</think><answer>search[hair]</answer>")[4]["action_is_valid"] is True
    assert strict.session.keywords == "hair"


def test_turn_limit_truncates(make_env):
    env = make_env(max_turns=2)
    assert env.step("search[hair]")[3] is False
    _, _, terminated, truncated, _ = env.step("click[back to search]")
    assert (terminated, truncated) == (False, True)


# --------------------------------------------------------------------------------------------------
# Construction, registry, config
# --------------------------------------------------------------------------------------------------
def test_bad_arguments_fail_early(make_env):
    with pytest.raises(ValueError, match="split must be one of"):
        WebShopEnv(split="dev")
    with pytest.raises(ValueError, match="observation_mode"):
        WebShopEnv(observation_mode="html")
    with pytest.raises(ValueError, match="has no goals"):
        make_env().__class__(split="train")  # the tiny shop has one goal, all in test
    env = make_env()
    with pytest.raises(ValueError, match="goal_index"):
        env.reset(options={"goal_index": 5})


def test_check_env_through_the_registry():
    env = envs.make("webshop", split="validation")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    assert envs.spec("turngym/WebShop-v0").id == "webshop"


def test_same_seed_same_goal_and_goal_index_option():
    a, b = envs.make("webshop"), envs.make("webshop")
    assert a.reset(seed=7) == b.reset(seed=7)
    observation, info = a.reset(options={"goal_index": 3})
    assert info["goal_index"] == 3 and a.goal == a.goals[3] and a.goal.instruction_text in observation


def test_config_lists_every_option_with_its_default():
    config = yaml.safe_load(CONFIG.read_text())
    assert config.pop("id") == "webshop"
    defaults = {name: p.default for name, p in inspect.signature(WebShopEnv).parameters.items()}
    assert config == defaults
