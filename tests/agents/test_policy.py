"""Sampling settings and episode limits from the options (:func:`agents.policy.sampling_and_limits`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agents.config import LLMOptions
from agents.engines.base import SamplingParams
from agents.episode import EpisodeLimits
from agents.policy import sampling_and_limits


def test_max_new_tokens_given_once_bounds_both_the_sampling_and_the_episode_loop():
    options = LLMOptions(temperature=0.3, top_p=0.9, max_new_tokens=37, max_total_tokens=500, max_turns=4)
    sampling, limits = sampling_and_limits(options, seed=11)
    assert sampling == SamplingParams(max_new_tokens=37, temperature=0.3, top_p=0.9, seed=11)
    assert limits == EpisodeLimits(max_turns=4, max_new_tokens=37, max_total_tokens=500, step_timeout_s=60.0)


def test_unseeded_by_default():
    sampling, _ = sampling_and_limits(LLMOptions())
    assert sampling.seed is None


@dataclass
class TrainingRollout:  # the fields of trainer.config.RolloutOptions that sampling_and_limits reads
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    max_total_tokens: int = 1024
    max_turns: int | None = None


@pytest.mark.parametrize(("temperature", "expected"), [(None, 1.0), (0.0, 0.0)])
def test_a_temperature_of_its_own_and_a_step_timeout(temperature, expected):
    sampling, limits = sampling_and_limits(TrainingRollout(), temperature=temperature, step_timeout_s=None)
    assert (sampling.temperature, sampling.max_new_tokens) == (expected, 64)
    assert limits == EpisodeLimits(max_turns=None, max_new_tokens=64, max_total_tokens=1024, step_timeout_s=None)
