"""Third-party environments found through the ``turngym.envs`` entry-point group of a really installed package.

tests/conftest.py pip-installs tests/plugins/turngym_example_plugin before collection. It declares a
class entry point (``countdown``), a function that registers two environments, and a broken one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from importlib import metadata

import gymnasium as gym
import pytest

import envs
from envs import registry

PLUGIN_DIST = "turngym-example-plugin"


def test_plugin_package_is_installed_with_its_entry_points():
    names = {ep.name for ep in metadata.entry_points(group="turngym.envs") if ep.dist.name == PLUGIN_DIST}
    assert names == {"countdown", "example-suite", "broken"}


def test_class_and_function_entry_points_register_environments():
    assert {"countdown", "countdown-long", "countdown-short"} <= set(envs.ids())
    assert envs.spec("countdown").source == PLUGIN_DIST
    description = "Count down from a number to zero by answering the next number each turn."
    assert envs.spec("countdown").description == description
    assert envs.make("countdown-long").start == 10
    assert envs.spec("example/CountdownShort-v1").id == "countdown-short"


def test_plugin_env_plays_to_the_end_with_its_oracle():
    env = envs.make("countdown")
    observation, info = env.reset(seed=4)
    total = 0.0
    for action in env.oracle():
        observation, reward, terminated, truncated, info = env.step(action)
        total += reward
    assert (total, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_plugin_envs_pass_the_conformance_checker():
    from envs.checker import check_text_env

    for env_id in ("countdown", "countdown-long", "countdown-short"):
        report = check_text_env(lambda env_id=env_id: envs.make(env_id))
        assert report.ok and "oracle" in report.passed and "gymnasium" in report.passed


def test_broken_plugin_is_reported_by_name_and_skipped():
    errors = envs.plugin_errors()
    assert errors == {
        f"{PLUGIN_DIST}:broken": "ModuleNotFoundError: No module named 'turngym_example_plugin_missing_dependency'"
    }
    with pytest.raises(envs.UnknownEnvironmentError, match=r"plugin 'turngym-example-plugin:broken' failed to load"):
        envs.make("broken")


def test_reloading_warns_about_the_broken_plugin_and_keeps_the_others():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.load_plugins(reload=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("skipped environment plugin 'broken' from 'turngym-example-plugin'" in m for m in messages)
    assert envs.make("countdown").start == 3


def test_a_plugin_that_registers_then_fails_leaves_nothing_half_registered(monkeypatch):
    def register_then_fail():
        envs.register("half-registered", "turngym_example_plugin:CountdownEnv")
        raise RuntimeError("failed after registering")

    entry_point = metadata.EntryPoint("half", "some_module:register_then_fail", "turngym.envs")
    monkeypatch.setattr(metadata.EntryPoint, "load", lambda self: register_then_fail)
    with pytest.raises(RuntimeError):
        registry._load_one_plugin(entry_point)
    registry._unregister({"half-registered"})
    assert "half-registered" not in envs.ids()
    assert "turngym/half-registered" not in gym.registry


@pytest.mark.parametrize(
    ("target", "message"),
    [(int, "not a gymnasium.Env subclass"), (42, "must be a gymnasium.Env subclass or a function")],
)
def test_entry_points_of_the_wrong_kind_are_rejected(monkeypatch, target, message):
    entry_point = metadata.EntryPoint("odd", "some_module:odd", "turngym.envs")
    monkeypatch.setattr(metadata.EntryPoint, "load", lambda self: target)
    with pytest.raises(TypeError, match=message):
        registry._load_one_plugin(entry_point)


FRESH_PROCESS_SCRIPT = """
import json, warnings
warnings.simplefilter("ignore")
import envs  # the plugin module itself is never imported by this script
env = envs.make("countdown-long")
observation, info = env.reset(seed=0)
print(json.dumps({"observation": observation, "start": env.start, "errors": sorted(envs.plugin_errors())}))
"""


def test_discovery_is_lazy_and_works_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS_SCRIPT], capture_output=True, text=True, check=True)
    payload = json.loads(result.stdout)
    assert payload["start"] == 10
    assert payload["observation"].startswith("The number is 1")
    assert payload["errors"] == [f"{PLUGIN_DIST}:broken"]


def test_gymnasium_make_of_a_builtin_in_a_fresh_process():
    script = "import gymnasium; print(type(gymnasium.make('envs:turngym/FrozenLake-v0').unwrapped).__name__)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "FrozenLakeEnv"


@pytest.mark.ray
def test_discovery_works_in_fresh_ray_worker_processes():
    ray = pytest.importorskip("ray", reason="the Ray test needs the [ray] extra: pip install -e '.[ray]'")
    ray.init(num_cpus=2, object_store_memory=80 * 1024**2, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote
        def play_countdown(seed: int) -> tuple[int, float, bool]:
            import os

            import envs as worker_envs

            env = worker_envs.make("countdown")
            env.reset(seed=seed)
            total = 0.0
            for action in env.oracle():
                _, reward, _, _, info = env.step(action)
                total += reward
            return os.getpid(), total, info["success"]

        results = ray.get([play_countdown.remote(seed) for seed in range(4)])
    finally:
        ray.shutdown()
    import os

    assert all(pid != os.getpid() for pid, _, _ in results)
    assert [(total, success) for _, total, success in results] == [(1.0, True)] * 4
