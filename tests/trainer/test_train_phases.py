"""The warm-up and held-out evaluation sections: defaults, checks, schedule, and what the env is told."""

from __future__ import annotations

import pytest
from test_train_config import train_config, usage_error

from agents.trajectory import Trajectory
from trainer.evaluation import evaluation_due, held_out_metrics
from trainer.progress import ProgressDisplay, progress_line


def test_defaults_warm_up_when_there_is_an_oracle_and_evaluate_64_held_out_seeds():
    config = train_config()
    assert (config.sft.warmup, config.sft.source, config.sft.episodes, config.sft.seed) == (
        "auto",
        "oracle",
        256,
        10**6,
    )
    evaluation = config.evaluation
    assert (evaluation.enabled, evaluation.episodes, evaluation.seed, evaluation.every) == (True, 64, 10_000, 4)


def test_the_env_is_told_the_runs_turn_limit():
    # configs/env/sokoban.yaml says 5 turns; the run plays 3 (rollout.max_turns): the env must know, so that its
    # levels fit 3 x 5 moves and its status line counts them.
    assert train_config().env["max_turns"] == 3
    assert train_config("rollout.max_turns=8").env["max_turns"] == 5  # the env's own, tighter limit stays
    assert train_config("rollout.max_turns=null").env["max_turns"] == 5


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["evaluation.seed=3"], ["training seeds [0, 256)", "evaluation seeds [3, 67)", "move evaluation.seed"]),
        (["sft.seed=10010"], ["sft seeds [10010, 10266)", "evaluation seeds [10000, 10064)"]),
        (["sft.warmup=maybe"], ["unknown sft.warmup 'maybe'"]),
        (["sft.source=files"], ["sft.files=[path.jsonl,...]"]),
        (["sft.epochs=0"], ["sft.epochs must be >= 1"]),
        (["evaluation.temperature=-1"], ["evaluation.temperature must be >= 0"]),
        (["algo.filter_groups=0"], ["algo.filter_groups is a fraction in (0, 1]"]),
        (["algo.filter_groups=0.5"], ["a group of one episode does not vary", "algo.group_size to 2 or more"]),
    ],
)
def test_bad_phase_settings_name_the_fix(overrides, fragments):
    message = usage_error(*overrides)
    assert all(fragment in message for fragment in fragments), message


def test_evaluation_runs_before_the_first_update_every_n_steps_and_after_the_last():
    config = train_config("trainer.total_steps=12", "evaluation.every=5")
    assert [s for s in range(13) if evaluation_due(config, s)] == [0, 5, 10, 12]
    config = train_config("trainer.total_steps=3", "evaluation.every=0")
    assert [s for s in range(4) if evaluation_due(config, s)] == [0, 3]
    assert not any(evaluation_due(train_config("evaluation.enabled=false"), s) for s in range(11))


def test_held_out_metrics_by_hand():
    def episode(seed, success, turns, invalid):
        return Trajectory("sokoban", seed, str(seed), success=success, num_turns=turns, num_invalid_actions=invalid)

    metrics = held_out_metrics(
        [episode(0, True, 1, 0), episode(1, False, 3, 1), episode(2, False, 2, 0), episode(3, True, 2, 0)]
    )
    # success 2/4; sample std of (1, 0, 0, 1) = sqrt(1/3), standard error sqrt(1/3) / 2 = 0.2887; invalid 1 of 8 turns.
    assert metrics["eval/success_rate"] == 0.5
    assert metrics["eval/success_stderr"] == pytest.approx(0.288675, abs=1e-6)
    assert metrics["eval/invalid_action_rate"] == 1 / 8 and metrics["eval/turns"] == 2.0


def test_the_progress_line_keeps_showing_the_last_held_out_figures():
    line = progress_line(5, 10, {"eval/success_rate": 0.3125, "eval/success_stderr": 0.058, "reward/mean": 1.0}, None)
    assert line == "step 5/10  held-out 31.2%±5.8  reward 1.00"
    lines = []

    class Console:
        is_terminal = False

        def print(self, text, **_):
            lines.append(text)

    progress = ProgressDisplay(10, console=Console(), clock=lambda: 0.0)
    progress.update(1, {"eval/success_rate": 0.25, "eval/success_stderr": 0.05, "actor/kl_ref": 0.00123})
    progress.update(2, {"episode/invalid_action_rate": 0.02})
    assert lines[0].startswith("step 1/10  held-out 25.0%±5.0  kl 0.0012")
    assert lines[1].startswith("step 2/10  held-out 25.0%±5.0  invalid 2.0%")  # the last evaluation stays shown


def test_the_group_filter_trains_the_groups_whose_returns_vary_most():
    """``algo.filter_groups``: of 4 groups, keep ceil(0.5 x 4) = 2 with the largest population std of returns
    (by hand: [0, 0] -> 0, [10, 0] -> 5, [10, 10] -> 0, [-1, 10] -> 5.5), in rollout order; an errored
    episode is dropped from its group first, and 1 keeps every group without filter metrics."""
    from dataclasses import replace

    from agents.trajectory import Trajectory
    from trainer.rollout_records import RolloutResult
    from trainer.train_step import trainable

    def episode(group: int, ret: float, termination: str = "terminated") -> Trajectory:
        return Trajectory(
            env_id="sokoban", seed=group, group_id=f"g{group}", prompt_ids=[1], response_ids=[2], response_mask=[1],
            rollout_logprobs=[-0.5], turn_rewards=[ret], turn_end_indices=[0], episode_return=ret,
            success=ret > 5, termination=termination, num_turns=1,
        )  # fmt: skip

    returns = [[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [-1.0, 10.0]]
    groups = [[episode(g, r) for r in group] for g, group in enumerate(returns)]
    groups[2].append(replace(episode(2, -50.0), termination="error"))  # never trained, never counted
    kept, metrics = trainable(RolloutResult(groups=groups), keep_fraction=0.5)
    assert [(t.group_id, t.episode_return) for t in kept] == [("g1", 10.0), ("g1", 0.0), ("g3", -1.0), ("g3", 10.0)]
    assert metrics == {"filter/kept_groups": 2.0, "filter/groups": 4.0}
    everything, metrics = trainable(RolloutResult(groups=groups), keep_fraction=1.0)
    assert len(everything) == 8 and metrics == {}
