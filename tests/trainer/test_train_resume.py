"""A training run killed with SIGKILL and resumed with ``trainer.resume=true`` ends where an uninterrupted run ends.

Both runs are real ``python -m trainer.run`` processes attached to one local Ray cluster (so the
killed driver's actors are reaped by Ray, as on a real cluster). The killed run is stopped as soon as
its step-2 checkpoint is complete, while it is already playing step 3; the resumed run starts from
that checkpoint. Episode seeds and sampling seeds are functions of the step, so the resumed run plays
the same episodes: its metrics rows (wall times aside) and its final weights equal the uninterrupted run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import torch
from safetensors.torch import load_file

from trainer.metrics import read_metrics
from trainer.ray_cluster import init_ray

pytestmark = pytest.mark.ray

COMMON = [
    "env=frozenlake",
    "algo=ppo",
    "model=tiny",
    "rollout.max_new_tokens=8",
    "rollout.max_total_tokens=640",  # two turns of the tiny tokenizer's FrozenLake prompt (396 tokens) and answers
    "rollout.max_turns=2",
    "rollout.num_env_actors=1",
    "trainer.total_steps=4",
    "trainer.groups_per_step=3",
    "algo.mini_batches=1",
    "trainer.checkpoint_every=1",
    "trainer.keep_checkpoints=4",
    "trainer.progress=false",
    "logging.plot=false",
    "logging.tensorboard=false",
    "sft.warmup=false",
    "evaluation.episodes=4",  # held out before step 1 and after step 4: the resumed run evaluates the same
]


@pytest.fixture(scope="module")
def address():
    init_ray(num_cpus=8, object_store_memory=300 * 1024**2)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def start(run_dir: Path, address: str, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "trainer.run",
        *COMMON,
        f"trainer.run_dir={run_dir}",
        f"trainer.ray_address={address}",
    ]
    return subprocess.Popen([*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, timeout_s: float = 300) -> None:
    output, _ = process.communicate(timeout=timeout_s)
    assert process.returncode == 0, output[-3000:]


def without_wall_time(records: list[dict]) -> list[dict]:
    timing = ("wall_time", "time/", "throughput/", "rollout/collect_s", "rollout/episodes_per_s")
    return [{k: v for k, v in r.items() if not k.startswith(timing)} for r in records]


@pytest.mark.slow  # about 2 minutes: three runs; the default suite must stay well inside 15 minutes on 2 cores
def test_resume_after_kill_matches_an_uninterrupted_run(tmp_path, address):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    finish(start(straight, address))

    process = start(killed, address)
    marker = killed / "checkpoints" / "step_000002" / "COMPLETE"
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the run did not reach its step-2 checkpoint"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    assert not (killed / "checkpoints" / "step_000004").exists()

    finish(start(killed, address, "trainer.resume=true"))
    first, second = read_metrics(straight), read_metrics(killed)
    assert [r["step"] for r in second] == [0, 1, 2, 3, 4]  # step 0: the held-out evaluation before any update
    for a, b in zip(without_wall_time(first), without_wall_time(second), strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (a["step"], key)
    final = "checkpoints/step_000004/policy/model.safetensors"
    weights_a, weights_b = load_file(straight / final), load_file(killed / final)
    for name, tensor in weights_a.items():
        torch.testing.assert_close(weights_b[name], tensor, atol=1e-5, rtol=0, msg=name)
