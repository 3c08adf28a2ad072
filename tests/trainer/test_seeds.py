"""The seeds a training run derives (:mod:`trainer.seeds`): the numbers runs have always used."""

from __future__ import annotations

from trainer.seeds import (
    curriculum_draw_seed,
    evaluation_sampling_seed,
    rollout_sampling_seed,
    sft_shuffle_seed,
    training_level_seed,
    training_level_seeds,
    training_seed_range,
    update_shuffle_seed,
)


def test_training_levels_are_consecutive_and_disjoint_across_steps():
    # base 7, 4 groups a step: step 1 plays 7..10, step 2 plays 11..14, step 3 plays 15..18.
    assert training_level_seed(7, 1, 0, 4) == 7
    assert training_level_seed(7, 2, 3, 4) == 14
    assert list(training_level_seeds(7, 3, 4)) == [15, 16, 17, 18]
    assert training_seed_range(7, 3, 4) == range(7, 19)
    assert [s for step in (1, 2, 3) for s in training_level_seeds(7, step, 4)] == list(training_seed_range(7, 3, 4))


def test_per_step_streams():
    # base * 1_000_003 + step: 2 * 1_000_003 + 5 = 2_000_011.
    assert rollout_sampling_seed(2, 5) == 2_000_011
    assert curriculum_draw_seed(2, 5) == 2_000_011
    assert update_shuffle_seed(2, 5) == 2_000_011
    assert update_shuffle_seed(0, 1) == 1


def test_evaluation_sampling_seed():
    # base * 1_000_003 + 999_983: 0 -> 999_983; 3 -> 3_000_009 + 999_983 = 3_999_992.
    assert evaluation_sampling_seed(0) == 999_983
    assert evaluation_sampling_seed(3) == 3_999_992


def test_sft_shuffle_seed():
    # base * 1_000_003 + 17: 0 -> 17; 2 -> 2_000_023 (the number trainer.sft used before it had a name).
    assert sft_shuffle_seed(0) == 17 and sft_shuffle_seed(2) == 2_000_023
