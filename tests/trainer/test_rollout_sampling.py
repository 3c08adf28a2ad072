"""What the training rollout and held-out evaluation ask of the engine: sampling settings, limits and seeds."""

from __future__ import annotations

import asyncio

from test_train_config import train_config

from trainer.evaluation import evaluate_held_out
from trainer.rollout_records import RolloutResult


class RecordingRollout:
    """Stands in for the rollout manager: records what ``collect`` is asked for and plays nothing."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def collect(self, requests, *, sampling, limits, policy_version, max_in_flight=None):
        self.calls.append({"requests": requests, "sampling": sampling, "limits": limits, "in_flight": max_in_flight})
        return RolloutResult()


def test_held_out_evaluation_samples_with_the_rollout_options_and_its_own_seed():
    config = train_config(
        "trainer.seed=3",
        "rollout.max_new_tokens=40",
        "rollout.max_total_tokens=900",
        "rollout.temperature=0.8",
        "rollout.step_timeout_s=12",
        "evaluation.temperature=0",
    )
    rollout = RecordingRollout()
    metrics, episodes = asyncio.run(evaluate_held_out(config, rollout, policy_version=2))
    [call] = rollout.calls
    sampling, limits = call["sampling"], call["limits"]
    assert sampling.max_new_tokens == limits.max_new_tokens == 40
    assert (sampling.temperature, sampling.top_p) == (0.0, 1.0)  # evaluation.temperature replaces 0.8
    assert sampling.seed == 3 * 1_000_003 + 999_983
    assert (limits.max_total_tokens, limits.max_turns, limits.step_timeout_s) == (900, 3, 12.0)
    assert [r.seed for r in call["requests"]] == list(range(10_000, 10_064))
    assert episodes == [] and metrics["eval/missing"] == 64.0
    assert call["in_flight"] == 16  # evaluation.max_concurrent_episodes: the engine's rows, not all 64 at once


def test_held_out_evaluation_can_play_every_episode_at_once():
    rollout = RecordingRollout()
    asyncio.run(evaluate_held_out(train_config("evaluation.max_concurrent_episodes=null"), rollout, policy_version=0))
    assert rollout.calls[0]["in_flight"] is None
