"""``algo.placebo``: every episode's reward swapped for another's of the same step, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_state_credit_step import TRAJECTORIES, TURN0, TURN1

from trainer.algos.placebo import placebo_rewards
from trainer.batch import build_batch
from trainer.config import AlgoConfig
from trainer.train_step import estimate_advantages


def test_each_last_turn_gets_another_episodes_return_in_the_seeds_order() -> None:
    # returns 3, 5, (none), -1; random.Random(1) orders [0, 1, 2] as [1, 2, 0]: the first episode gets the second's
    # 5, the second the fourth's -1, the fourth the first's 3; the episode without turns stays empty
    rows = [[1.0, 2.0], [5.0], [], [0.0, 0.0, -1.0]]
    assert placebo_rewards(rows, seed=1) == [[0.0, 5.0], [-1.0], [], [0.0, 0.0, 3.0]]
    assert rows == [[1.0, 2.0], [5.0], [], [0.0, 0.0, -1.0]]  # the input is left as it was


@given(st.lists(st.lists(st.integers(-20, 20).map(float), max_size=4), max_size=12), st.integers(0, 10**6))
def test_the_step_keeps_its_returns_only_their_owners_change(rows, seed) -> None:
    swapped = placebo_rewards(rows, seed=seed)
    assert [len(row) for row in swapped] == [len(row) for row in rows]
    assert all(value == 0.0 for row in swapped for value in row[:-1])
    assert sorted(sum(row) for row in swapped if row) == sorted(sum(row) for row in rows if row)
    assert placebo_rewards(rows, seed=seed) == swapped  # the same step, the same permutation


def test_the_placebo_step_trains_on_swapped_outcomes() -> None:
    # two episodes of one group, returns 1 (solved) and 0; Dr.GRPO's advantages +0.5 and -0.5 on every sampled
    # token. random.Random(step) orders [0, 1] as [1, 0] at step 1 (swapped) and [0, 1] at step 5 (kept).
    algo = AlgoConfig(name="grpo", advantage="grpo", critic=False, group_size=2, normalize_std=False)
    columns = TURN0 + TURN1
    results = {}
    for placebo, step in ((False, 1), (True, 1), (True, 5)):
        batch = build_batch(TRAJECTORIES, pad_id=0)
        estimate_advantages(batch, TRAJECTORIES, replace(algo, placebo=placebo), step=step)
        results[placebo, step] = (batch.advantages[0, columns].tolist(), batch.advantages[1, columns].tolist())
    assert results[False, 1] == (pytest.approx([0.5] * 3), pytest.approx([-0.5] * 3))
    assert results[True, 1] == (pytest.approx([-0.5] * 3), pytest.approx([0.5] * 3))  # the outcomes swapped
    assert results[True, 5] == results[False, 1]  # the permutation kept both in place
    assert TRAJECTORIES[0].turn_rewards == [0.0, 1.0]  # the trajectories keep their own rewards
