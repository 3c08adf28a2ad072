"""The oracle buys the goal's product with the goal's options: reward 1, from any page."""

from __future__ import annotations

import pytest

import envs


@pytest.fixture(scope="module")
def env():
    return envs.make("webshop", split="test", max_turns=None)


def _play_oracle(env) -> tuple[float, bool, int]:
    reward, info = 0.0, {}
    while not env.episode_over:
        plan = env.oracle()
        assert plan, "the oracle found no plan"
        _, reward, _, _, info = env.step(plan[0])
    return reward, info["success"], env.turn


def test_oracle_scores_one_on_200_test_goals(env):
    turns = []
    for index in range(200):
        env.reset(options={"goal_index": index})
        reward, success, taken = _play_oracle(env)
        assert (reward, success) == (1.0, True), f"goal {index}: {env.goal.instruction_text}"
        turns.append(taken)
    assert max(turns) <= 15  # the default turn limit: search, (pages), open, options, buy


@pytest.mark.parametrize(
    "detour",
    [
        ["search[zzzz]"],  # an empty results page
        ["search[usb c cable]", "click[next >]"],  # another search, page 2
        ["search[{title}]", "click[{asin}]", "click[description]"],  # the right product's sub-page
        ["search[{title}]", "click[{asin}]", "click[{wrong}]"],  # the right product with a wrong option chosen
        ["search[phone case]", "click[{first}]", "click[reviews]"],  # another product's sub-page
    ],
)
def test_oracle_recovers_from_any_page(env, detour):
    env.reset(options={"goal_index": 11})
    product = env.shop.catalogue.by_asin[env.goal.asin]
    wanted = dict(env.goal.options)
    wrong = next(
        (v for name, values in product.options.items() for v in values if v != wanted.get(name)), "description"
    )
    for action in detour:
        first = env.session.page_results[0].asin.lower() if env.session.page_results else ""
        env.step(action.format(title=product.title.lower(), asin=product.asin.lower(), wrong=wrong, first=first))
    assert _play_oracle(env)[:2] == (1.0, True)


def test_oracle_is_empty_after_the_episode(env):
    env.reset(seed=0)
    _play_oracle(env)
    assert env.oracle() == []
