"""Readable samples: the fields of an episode without token ids, written as one JSON object per line."""

from __future__ import annotations

import json
import math

import pytest

from agents.trajectory import Trajectory
from trainer.samples import readable_sample, sample_path, write_samples


def trajectory(seed: int = 3) -> Trajectory:
    return Trajectory(
        env_id="sokoban",
        seed=seed,
        group_id="step2/g1",
        prompt_ids=[5, 6, 7],
        response_ids=[10, 11, 2, 20, 21, 12, 2],
        response_mask=[1, 1, 1, 0, 0, 1, 1],
        rollout_logprobs=[-0.1, -2.5, -0.01, 0.0, 0.0, -1e-9, -30.0],
        turn_rewards=[-0.1, 10.9],
        turn_end_indices=[2, 6],
        episode_return=10.8,
        success=True,
        policy_version=2,
        num_turns=2,
        num_invalid_actions=1,
        finish_reasons=["stop", "stop"],
        messages=[
            {"role": "system", "content": "Push the boxes. é 😀"},
            {"role": "user", "content": "#####\n#@$.#\n#####"},
            {"role": "assistant", "content": "<answer>Right</answer>", "tool_calls": []},
        ],
        timings={"total_s": 0.25},
    )


def test_readable_sample_has_the_readable_fields():
    trajectory_ = trajectory()
    trajectory_.validate()
    assert readable_sample(trajectory_) == {
        "env_id": "sokoban",
        "seed": 3,
        "group_id": "step2/g1",
        "policy_version": 2,
        "episode_return": 10.8,
        "success": True,
        "termination": "terminated",
        "error": None,
        "num_turns": 2,
        "turn_rewards": [-0.1, 10.9],
        "reset_options": {},
        "initial_distance": None,  # an env without state info
        "turn_distances_after": [],
        "num_invalid_actions": 1,
        "finish_reasons": ["stop", "stop"],
        "prompt_tokens": 3,  # len(prompt_ids)
        "response_tokens": 7,  # len(response_ids)
        "sampled_tokens": 5,  # sum(response_mask) = 1+1+1+0+0+1+1
        "messages": [  # role and content only: the assistant's empty tool_calls is dropped
            {"role": "system", "content": "Push the boxes. é 😀"},
            {"role": "user", "content": "#####\n#@$.#\n#####"},
            {"role": "assistant", "content": "<answer>Right</answer>"},
        ],
    }


def test_non_finite_numbers_become_null():
    broken = trajectory()
    broken.episode_return = math.nan
    broken.turn_rewards = [math.inf, 1.0]
    sample = readable_sample(broken)
    assert sample["episode_return"] is None and sample["turn_rewards"] == [None, 1.0]
    json.dumps(sample, allow_nan=False)  # strict JSON


def test_write_samples_keeps_the_first_limit_one_json_per_line(tmp_path):
    batch = (trajectory(seed) for seed in range(10))  # any iterable, a generator too
    path = write_samples(tmp_path, 3, batch, limit=8)
    assert path == tmp_path / "samples" / "step_000003.jsonl" == sample_path(tmp_path, 3)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8
    samples = [json.loads(line) for line in lines]
    assert [s["seed"] for s in samples] == list(range(8))  # the first eight, in order
    assert samples[0] == readable_sample(trajectory(0))
    assert "😀" in lines[0]  # written as text, not \u escapes
    assert not list(path.parent.glob("*.tmp"))


def test_rewriting_a_step_replaces_its_file(tmp_path):
    write_samples(tmp_path, 12, [trajectory(1), trajectory(2)])
    path = write_samples(tmp_path, 12, [trajectory(5)])
    assert [json.loads(line)["seed"] for line in path.read_text().splitlines()] == [5]
    assert write_samples(tmp_path, 13, [trajectory()], limit=0).read_text() == ""


def test_negative_limit_is_refused(tmp_path):
    with pytest.raises(ValueError, match="limit"):
        write_samples(tmp_path, 1, [trajectory()], limit=-1)
