"""SGLangEngine launching servers as processes, with the launch command pointed at the compat server.

sglang_compat_server.py takes ``python -m sglang.launch_server``'s ``--model-path/--host/--port`` flags,
so these tests run the engine's real launch path (ports, log files, health wait, process-group
shutdown) without SGLang, which cannot run here.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from agents.engines.base import SamplingParams
from agents.engines.sglang import SGLangConfig, SGLangEngine, SGLangUnreachableError
from agents.models import tiny_model_path

COMPAT_SERVER = Path(__file__).with_name("sglang_compat_server.py")
LAUNCH = ("{python}", str(COMPAT_SERVER), "--model-path", "{model_path}", "--host", "{host}", "--port", "{port}")
REPO_ROOT = Path(__file__).resolve().parents[3]
GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0)


@pytest.fixture(autouse=True)
def importable_repo(monkeypatch):
    """The servers run as plain scripts: let them import the repository's packages."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))


def _config(tmp_path: Path, **options) -> SGLangConfig:
    return SGLangConfig(
        model_path=str(tiny_model_path()),
        launch_command=LAUNCH,
        log_dir=str(tmp_path),
        retry_backoff_s=0.05,
        **options,
    )


async def test_launch_health_wait_kill_and_shutdown(tmp_path):
    # /health answers 503 for the first second, as SGLang does while it loads; generations take >= 1 s
    server_args = ("--startup-delay-s", "1", "--response-delay-s", "1")
    engine = await SGLangEngine.create(_config(tmp_path, server_args=server_args))
    (server,) = engine.launched_servers
    try:
        assert len((await engine.generate([1, 2, 3, 4], GREEDY, affinity_key="a")).output_ids) == 6
        assert (await engine.model_info())[0]["model_path"] == str(tiny_model_path())
        running = asyncio.ensure_future(engine.generate([1, 2, 3, 4, 5], GREEDY, "a"))
        await asyncio.sleep(0.5)  # the request is now inside the server's response delay
        os.killpg(server.process.pid, signal.SIGKILL)
        # the client sees the process gone and fails at once, with the server's log, instead of hanging
        with pytest.raises(SGLangUnreachableError, match=r"process has exited \(exit code -9(.|\n)*serving"):
            await asyncio.wait_for(running, 30)
        assert server.log_path.parent == tmp_path
    finally:
        await engine.close()
    assert server.process.poll() is not None


@pytest.mark.slow
async def test_two_launched_servers_fail_over_after_a_kill(tmp_path):
    server_args = ("--response-delay-s", "1")
    engine = await SGLangEngine.create(_config(tmp_path, num_servers=2, server_args=server_args))
    servers = engine.launched_servers
    try:
        assert len({server.url for server in servers}) == 2
        first = await engine.generate([1, 2, 3, 4], GREEDY, affinity_key="a")
        home = engine.server_of("a")
        second_turn = asyncio.ensure_future(engine.generate([1, 2, 3, 4, *first.output_ids], GREEDY, "a"))
        await asyncio.sleep(0.5)
        os.killpg(servers[home].process.pid, signal.SIGKILL)
        generation = await asyncio.wait_for(second_turn, 60)
        assert len(generation.output_ids) == 6 and engine.server_of("a") == 1 - home
        assert engine.stats().extra["failovers"] == 1.0
        assert servers[home].log_path != servers[1 - home].log_path
    finally:
        await engine.close()
    assert all(server.process.poll() is not None for server in servers)


async def test_start_up_failures_are_reported_with_the_log(tmp_path):
    with pytest.raises(RuntimeError, match=r"exited during start-up(.|\n)*unrecognized arguments: --no-such-flag"):
        await SGLangEngine.create(_config(tmp_path / "bad-flag", server_args=("--no-such-flag",)))
    with pytest.raises(TimeoutError, match=r"not healthy after 0\.5 s"):
        await SGLangEngine.create(
            _config(tmp_path / "slow", server_args=("--startup-delay-s", "600"), startup_timeout_s=0.5)
        )
    assert all(p.suffix == ".log" for p in (tmp_path / "slow").iterdir())


async def test_default_command_needs_sglang(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real_find_spec(name, *a)
    )
    with pytest.raises(ImportError, match="pip install sglang"):
        await SGLangEngine.create(SGLangConfig(model_path="any/model"))


def test_config_errors():
    with pytest.raises(ValueError, match="either urls"):
        SGLangConfig()
    with pytest.raises(ValueError, match="either urls"):
        SGLangConfig(urls=("http://h:1",), model_path="m")
    with pytest.raises(ValueError, match="2 ports for 3 servers"):
        SGLangConfig(model_path="m", num_servers=3, ports=(1, 2))
    assert sys.executable  # the launch template's {python}
