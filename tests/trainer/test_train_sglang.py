"""``engine=sglang``: a training run against a server that speaks SGLang's HTTP API. NOT SGLang itself.

SGLang needs CUDA; the server here is the test double ``tests/agents/engines/sglang_compat_server.py``
(SGLang 0.5.23's JSON, answered by the tiny model on CPU). What this proves: the environment actors
build their own SGLang clients from the engine config, every step's weights reach the server through
an exported Hugging Face directory and ``/update_weights_from_disk`` (the engine's logprobs then agree
with the learner's), and the policy version follows. What it cannot prove: SGLang's own behaviour.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import ray

from agents.models import tiny_model_path
from trainer.config import compose_train_config, to_train_config
from trainer.metrics import read_metrics
from trainer.ray_cluster import init_ray
from trainer.run import train

pytestmark = pytest.mark.ray

SERVER = Path(__file__).resolve().parents[1] / "agents" / "engines" / "sglang_compat_server.py"


@pytest.fixture(scope="module")
def server_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, str(SERVER), "--model-path", str(tiny_model_path()), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the compat server did not start"
            time.sleep(0.2)
    init_ray(num_cpus=8, object_store_memory=300 * 1024**2)
    yield url
    ray.shutdown()
    process.terminate()
    process.wait(timeout=30)


def test_training_against_an_sglang_api_server_syncs_weights_through_disk(tmp_path, server_url):
    config = to_train_config(
        compose_train_config(
            [
                "env=frozenlake",
                "env.relative=false",  # the grid alone: two turns of the tiny tokenizer's prompt fit in 384 tokens
                "algo=grpo",
                "algo.group_size=2",
                "model=tiny",
                "engine=sglang",
                f"engine.urls=[{server_url}]",
                "rollout.max_new_tokens=8",
                "rollout.max_total_tokens=384",
                "rollout.max_turns=2",
                "rollout.num_env_actors=1",
                "trainer.total_steps=2",
                "trainer.groups_per_step=2",
                "trainer.progress=false",
                "logging.plot=false",
                "sft.warmup=false",
                "evaluation.enabled=false",
                f"trainer.run_dir={tmp_path / 'run'}",
            ]
        )
    )
    run_dir = train(config)
    records = read_metrics(run_dir)
    assert [r["policy_version"] for r in records] == [1, 2]
    assert all(r["reward/mean"] == r["reward/mean"] for r in records)  # episodes were played (not NaN)
    # Step 2 sampled from the weights step 1 wrote to disk: the server's logprobs equal the learner's.
    assert records[1]["rollout/logprob_mismatch"] < 1e-4
    assert (run_dir / "engine_weights" / "model.safetensors").is_file()
    with urllib.request.urlopen(f"{server_url}/get_model_info", timeout=5) as response:
        assert response.status == 200
