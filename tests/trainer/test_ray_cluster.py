"""A local Ray started by :func:`trainer.ray_cluster.init_ray` runs without the processes a single node does not
use (the autoscaler's monitor, the dashboard's API server, a worker started ahead of need), and everything the
trainer relies on still works: actors, their output in the driver's console, the log monitor that carries it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# The driver starts Ray, runs an actor that prints, then reports every process of its session: the raylet's
# children (the workers and the raylet's agents) by their titles, and the head's other processes by command line.
PROBE = r"""
import json, os, time
import ray
from trainer.ray_cluster import init_ray

init_ray(num_cpus=1, object_store_memory=80 * 1024**2)

@ray.remote
class Echo:
    def shout(self, text):
        print(text, flush=True)
        return os.getpid()

echo = Echo.remote()
actor_pid = ray.get(echo.shout.remote("actor output reaches the driver"))
node = ray._private.worker._global_node
session = node.get_session_dir_path()
raylet = node.all_processes["raylet"][0].process.pid

def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""

def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1

time.sleep(2)  # time for a worker Ray would start ahead of need to show up
pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
print("PROBE " + json.dumps({
    "actor_pid": actor_pid,
    "session": [cmdline(p) for p in pids if session in cmdline(p)],
    "raylet_children": [cmdline(p) for p in pids if parent(p) == raylet],
    "webui_url": node.webui_url,
}), flush=True)
time.sleep(1)  # the log monitor polls the workers' files about once a second
ray.shutdown()
"""


@pytest.mark.ray
def test_a_local_ray_runs_no_monitor_no_api_server_and_no_idle_worker_and_actors_still_print() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("PROBE "))[6:])
    session = " ".join(report["session"])
    assert "log_monitor.py" in session  # the workers' output still reaches the console
    assert "autoscaler/_private/monitor.py" not in session
    assert "dashboard/dashboard.py" not in session
    assert report["webui_url"] is None
    children = report["raylet_children"]
    assert any(title.startswith("ray::Echo") for title in children), children
    assert not any(title.startswith("ray::IDLE") for title in children), children
    assert "actor output reaches the driver" in done.stdout + done.stderr


def test_the_trim_applies_only_while_ray_starts_and_steps_aside_for_a_ray_without_its_seams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray._private import node as ray_node
    from ray._private import parameter as ray_parameter

    from trainer.ray_cluster import _local_head_trimmed

    params, node = ray_parameter.RayParams, ray_node.Node
    with pytest.raises(KeyError), _local_head_trimmed() as trimmed:
        assert trimmed
        assert issubclass(ray_parameter.RayParams, params) and ray_parameter.RayParams is not params
        assert ray_parameter.RayParams(num_cpus=1).no_monitor is True
        assert issubclass(ray_node.Node, node) and ray_node.Node is not node
        raise KeyError("Ray failed to start")
    assert (ray_parameter.RayParams, ray_node.Node) == (params, node)  # restored, even after a failure

    class RenamedParams:  # a Ray whose parameters no longer take ``no_monitor``
        def __init__(self, num_cpus: int | None = None) -> None:
            self.num_cpus = num_cpus

    monkeypatch.setattr(ray_parameter, "RayParams", RenamedParams)
    with _local_head_trimmed() as trimmed:
        assert trimmed is False
        assert ray_parameter.RayParams is RenamedParams and ray_node.Node is node
