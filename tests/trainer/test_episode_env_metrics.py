"""Per-step env metrics: every numeric metric of the episodes' envs, averaged into ``env/<name>``."""

from __future__ import annotations

import pytest

from agents.trajectory import Trajectory
from trainer.rollout_records import RolloutResult
from trainer.train_step import episode_metrics


def episode(episode_return: float, metrics: dict) -> Trajectory:
    return Trajectory(
        env_id="code",
        seed=0,
        group_id="step1/g0",
        prompt_ids=[1, 2],
        response_ids=[3, 4],
        response_mask=[1, 1],
        rollout_logprobs=[-0.5, -0.5],
        turn_rewards=[episode_return],
        turn_end_indices=[1],
        episode_return=episode_return,
        num_turns=1,
        finish_reasons=["stop"],
        metrics=metrics,
    )


def test_env_metrics_are_averaged_over_the_episodes_that_report_them():
    groups = [
        [episode(1.0, {"judge_tamper": 0.0, "pass_fraction": 1.0}), episode(0.0, {"judge_tamper": 1.0})],
        [
            episode(0.0, {"judge_tamper": 1.0, "pass_fraction": 0.25, "note": "text"}),
            episode(0.0, {"judge_tamper": 0.0}),
        ],
    ]
    metrics = episode_metrics(RolloutResult(groups=groups))
    # judge_tamper: (0 + 1 + 1 + 0) / 4 = 0.5; pass_fraction only in two episodes: (1 + 0.25) / 2 = 0.625;
    # the text value is not a number and is left out.
    assert metrics["env/judge_tamper"] == pytest.approx(0.5)
    assert metrics["env/pass_fraction"] == pytest.approx(0.625)
    assert "env/note" not in metrics
    assert metrics["reward/mean"] == pytest.approx(0.25)


def test_no_episodes_no_env_metrics():
    assert episode_metrics(RolloutResult(groups=[])) == {}


def test_the_share_of_episodes_lost_is_logged_where_the_env_reports_distances():
    lost, solvable, solved = episode(0.0, {}), episode(0.0, {}), episode(1.0, {})
    for trajectory, after in ((lost, None), (solvable, 2), (solved, 0)):
        trajectory.turn_state_keys, trajectory.turn_distances_before = ["k"], [3]
        trajectory.turn_distances_after = [after]
    solved.success = True
    metrics = episode_metrics(RolloutResult(groups=[[lost, solvable, solved, episode(0.0, {})]]))
    assert metrics["episode/lost_fraction"] == pytest.approx(1 / 4)  # one of four episodes ended unsolvable
    assert "episode/lost_fraction" not in episode_metrics(RolloutResult(groups=[[episode(0.0, {})]]))
