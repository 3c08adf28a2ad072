"""A Ray cluster of three nodes on this machine loses the node that runs environment actors mid-run.

Ray's own cluster utilities (:class:`ray.cluster_utils.Cluster`) start a real head node (room for the
engine and the learner's models, which Ray keeps there) and two worker nodes, each a raylet of its own
with one CPU and the custom resource ``env_node``. The run joins the cluster (``trainer.ray_address``) and places its
environment actors with ``rollout.env_actor_resources={env_node:1}``, so they can only live on the
workers. After step 1 the worker node hosting them is killed outright (SIGKILL to its raylet, object
store and workers: a machine that vanished). The run must finish every step: the rollout manager
replaces the lost actors on the surviving worker node and plays their episodes again there, and no
step trains a partial group.
"""

from __future__ import annotations

import threading
import time

import learnable_env
import pytest
import ray
from ray.cluster_utils import Cluster

from trainer.config import compose_train_config, to_train_config
from trainer.metrics import read_metrics
from trainer.run import train

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # about 2 min: three Ray nodes and a run

STEPS = 3
GROUPS = 4
GROUP_SIZE = 2
# Ray notices a dead node by health checks (every 3 s, 5 misses by default); faster here so the test is short.
FAST_HEALTH_CHECKS = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}


@pytest.fixture
def cluster():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 8, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS},
    )
    workers = [cluster.add_node(num_cpus=1, resources={"env_node": 2}) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING")
    ray.cloudpickle.register_pickle_by_value(learnable_env)  # Ray workers cannot import tests/trainer
    learnable_env.register()
    yield cluster, workers
    ray.shutdown()
    cluster.shutdown()


def env_actors() -> dict[str, dict]:
    """Every environment actor the cluster knows of (alive or dead), by actor id."""
    return {
        actor_id: actor
        for actor_id, actor in ray._private.state.actors().items()
        if actor["ActorClassName"].endswith("EnvActor")
    }


def node_of(actor: dict) -> str:
    return actor["Address"]["NodeID"]


def test_the_run_survives_losing_the_node_of_its_environment_actors(tmp_path, cluster):
    cluster, workers = cluster
    config = to_train_config(
        compose_train_config(
            [
                f"env={learnable_env.ENV_ID}",
                "model=tiny",
                "algo=grpo",
                f"algo.group_size={GROUP_SIZE}",
                f"trainer.groups_per_step={GROUPS}",
                f"trainer.total_steps={STEPS}",
                f"trainer.ray_address={cluster.address}",
                "rollout.env_actor_resources={env_node:1}",
                "rollout.num_env_actors=2",
                "rollout.max_new_tokens=8",
                "rollout.max_total_tokens=256",
                "rollout.max_turns=null",
                "engine.num_cpus=1",
                "trainer.progress=false",
                "trainer.micro_batch_size=8",
                "evaluation.enabled=false",
                "logging.plot=false",
                f"trainer.run_dir={tmp_path / 'run'}",
            ]
        )
    )
    done: dict[str, object] = {}
    run = lambda: done.setdefault("run_dir", train(config, setup=learnable_env.register))  # noqa: E731
    thread = threading.Thread(target=run, daemon=True)  # a failed assertion must not wait for the run
    thread.start()
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 300  # start-up on a loaded 2-core machine takes minutes
    while not (metrics.exists() and metrics.read_text().count("\n") >= 1):
        assert thread.is_alive() and time.monotonic() < deadline, "the run did not finish step 1"
        time.sleep(0.05)

    before = {actor_id: a for actor_id, a in env_actors().items() if a["State"] == "ALIVE"}
    worker_ids = {node.node_id: node for node in workers}
    assert before and {node_of(a) for a in before.values()} <= set(worker_ids), "env actors left the env_node nodes"
    lost_id = node_of(next(iter(before.values())))
    [survivor_id] = set(worker_ids) - {lost_id}
    cluster.remove_node(worker_ids[lost_id], allow_graceful=False)
    lost = {actor_id for actor_id, a in before.items() if node_of(a) == lost_id}

    thread.join(timeout=300)
    assert "run_dir" in done, "the run did not finish after losing a node"
    records = read_metrics(done["run_dir"])
    assert [r["policy_version"] for r in records] == list(range(1, STEPS + 1))
    # Every step trained every group whole: the lost actors' episodes were played again, not dropped.
    assert all(r["episode/count"] == GROUPS * GROUP_SIZE for r in records)
    assert all(r["rollout/groups_dropped"] == 0 for r in records)
    assert sum(r["rollout/actors_died"] for r in records) == len(lost)
    after = env_actors()
    assert all(after[actor_id]["State"] == "DEAD" for actor_id in lost)
    replacements = [a for actor_id, a in after.items() if actor_id not in before]
    assert len(replacements) >= len(lost) and all(node_of(a) == survivor_id for a in replacements)
