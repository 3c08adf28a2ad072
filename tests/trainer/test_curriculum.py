"""The adaptive difficulty curriculum (trainer.curriculum): draws, ceiling moves, buckets."""

from __future__ import annotations

import pytest

from agents.eval import difficulty_bucket
from trainer.curriculum import DifficultyCurriculum, difficulty_mix


def test_the_ceiling_starts_at_the_easiest_level_and_follows_the_success_band():
    curriculum = DifficultyCurriculum(1, 4, (0.3, 0.7))
    assert curriculum.ceiling == 1 and set(curriculum.draw(50, seed=0)) == {1}
    assert curriculum.update(0.8) == 2  # above the band: one harder
    assert curriculum.update(0.9) == 3
    assert curriculum.update(0.5) == 3  # inside the band: stays
    assert curriculum.update(0.7) == 3  # the band's edges are inside it
    assert curriculum.update(0.1) == 2  # below: one easier
    for _ in range(5):
        curriculum.update(1.0)
    assert curriculum.ceiling == 4  # never above the hardest
    for _ in range(10):
        curriculum.update(0.0)
    assert curriculum.ceiling == 1  # never below the easiest


def test_draws_are_uniform_up_to_the_ceiling_and_reproducible():
    curriculum = DifficultyCurriculum(2, 9, (0.3, 0.7), ceiling=5)
    draws = curriculum.draw(4000, seed=7)
    assert draws == curriculum.draw(4000, seed=7) and draws != curriculum.draw(4000, seed=8)
    assert set(draws) == {2, 3, 4, 5}
    for d in (2, 3, 4, 5):  # 1000 expected each; 5 standard deviations is about 137
        assert abs(draws.count(d) - 1000) < 140
    assert DifficultyCurriculum(2, 9, (0.3, 0.7), ceiling=20).ceiling == 9  # a saved ceiling is clamped
    assert DifficultyCurriculum(2, 9, (0.3, 0.7), ceiling=0).ceiling == 2


def test_a_floor_keeps_the_easy_levels_out_of_the_draw():
    from trainer.components import _curriculum
    from trainer.config import compose_train_config, to_train_config

    def curriculum(*overrides):
        base = ["env=sokoban", "model=tiny", "env.max_moves=null", "curriculum=adaptive"]
        return _curriculum(to_train_config(compose_train_config([*base, *overrides])), None)

    plain = curriculum()
    assert (plain.lowest, plain.highest, plain.ceiling) == (2, 15, 2)  # 3 turns x 5 moves, the full range
    floored = curriculum("curriculum.floor=4", "curriculum.start=9")
    assert (floored.lowest, floored.highest, floored.ceiling) == (4, 15, 9)
    assert set(floored.draw(500, seed=0)) == set(range(4, 10))
    for _ in range(10):
        floored.update(0.0)
    assert floored.ceiling == 4  # failing steps lower the ceiling to the floor, not below it
    assert curriculum("curriculum.floor=6").ceiling == 6  # no start: the floor is the first ceiling too


def test_bad_ranges_and_bands_are_refused():
    with pytest.raises(ValueError, match="lowest <= highest"):
        DifficultyCurriculum(3, 2, (0.3, 0.7))
    with pytest.raises(ValueError, match="low < high"):
        DifficultyCurriculum(1, 2, (0.7, 0.3))


def test_buckets_and_mix():
    assert [difficulty_bucket(d) for d in (1, 3, 4, 6, 7, 15)] == ["1-3", "1-3", "4-6", "4-6", "7-9", "13-15"]
    assert difficulty_mix([1, 2, 6]) == {
        "curriculum/difficulty_mean": 3.0,
        "curriculum/difficulty_min": 1.0,
        "curriculum/difficulty_max": 6.0,
    }
    assert difficulty_mix([]) == {}


def test_held_out_success_is_reported_per_difficulty_bucket():
    from agents.trajectory import Trajectory
    from trainer.evaluation import held_out_metrics

    def episode(distance, success):
        return Trajectory(env_id="sokoban", seed=0, group_id="g", initial_distance=distance, success=success)

    metrics = held_out_metrics([episode(1, True), episode(3, False), episode(5, True), episode(14, False)])
    assert metrics["eval/success_moves_1-3"] == 0.5 and metrics["eval/episodes_moves_1-3"] == 2.0
    assert metrics["eval/success_moves_4-6"] == 1.0 and metrics["eval/success_moves_13-15"] == 0.0
    assert "eval/success_moves_7-9" not in metrics
    assert metrics["eval/success_rate"] == 0.5
    assert not any("moves" in k for k in held_out_metrics([episode(None, True)]))


def test_the_eval_table_shows_success_by_difficulty():
    from agents.eval import summarize
    from agents.trajectory import Trajectory

    episodes = [Trajectory(env_id="s", seed=i, group_id="g", initial_distance=d, success=w) for i, (d, w) in
                enumerate([(2, True), (2, False), (9, True)])]  # fmt: skip
    summary = summarize(episodes)
    assert summary.by_difficulty == (("1-3", 0.5, 2), ("7-9", 1.0, 1))
    assert ("success, 7-9 optimal moves", "100.0% of 1") in summary.rows()
    assert summary.failed_lost is None  # no episode reports a distance per turn


def test_the_eval_table_and_metrics_split_the_failures_into_lost_and_still_solvable():
    from agents.eval import summarize
    from agents.trajectory import Trajectory
    from trainer.evaluation import held_out_metrics

    def episode(seed, after, success):
        return Trajectory(env_id="s", seed=seed, group_id="g", success=success, turn_rewards=[0.0] * len(after),
                          turn_state_keys=["k"] * len(after), turn_distances_before=[1] * len(after),
                          turn_distances_after=after)  # fmt: skip

    # a success; a failure ending unsolvable (even after a solvable turn); two out of turns, still solvable
    episodes = [episode(0, [0], True), episode(1, [2, None], False), episode(2, [3, 3], False), episode(3, [1], False)]
    summary = summarize(episodes)
    assert (summary.failed_lost, summary.failed_solvable) == (1, 2)
    assert ("failures: no solution left / solvable", "1 / 2") in summary.rows()
    metrics = held_out_metrics(episodes)
    assert (metrics["eval/failed_lost"], metrics["eval/failed_solvable"]) == (1.0, 2.0)
    assert "eval/failed_lost" not in held_out_metrics([Trajectory(env_id="s", seed=0, group_id="g")])
