"""The checks every command makes before starting anything heavy (:mod:`agents.preflight`, :mod:`agents.cli`)."""

from __future__ import annotations

import contextlib

import pytest
from toy_line_env import ToyLineEnv

import envs
from agents.cli import one_line, print_error
from agents.config import UsageError
from agents.models import tiny_model_path
from agents.preflight import check_agent_model, check_model, make_checked_env


class NoBackendEnv(ToyLineEnv):
    """Stands for an environment whose infrastructure is missing (the code env without a sandbox)."""

    def __init__(self) -> None:
        raise RuntimeError("no sandbox backend works here:\ninstall docker or bubblewrap")


class ResetFailsEnv(ToyLineEnv):
    def _reset(self, options):
        raise OSError("the level file is gone")


@pytest.fixture(scope="module", autouse=True)
def failing_envs():
    for env_id, cls in (("no-backend-test", NoBackendEnv), ("reset-fails-test", ResetFailsEnv)):
        with contextlib.suppress(ValueError):
            envs.register(env_id, cls)


@pytest.mark.parametrize(
    ("env_id", "options", "message"),
    [
        ("sokoban", {"dimm": 8}, "environment 'sokoban' does not accept 'dimm' (did you mean 'dim'?)"),
        ("sokoban", {"dim": 3}, "a 3x3 room (outer walls included) has 1 inner cells"),
        ("sokobn", {}, "Did you mean 'sokoban'?"),
        (
            "no-backend-test",
            {},
            "environment 'no-backend-test' cannot be built: RuntimeError: no sandbox backend works here:\n"
            "install docker or bubblewrap",
        ),
        ("reset-fails-test", {}, "environment 'reset-fails-test' fails to reset: OSError: the level file is gone"),
    ],
)
def test_an_env_that_cannot_work_is_a_usage_error(env_id, options, message):
    with pytest.raises(UsageError) as caught:
        make_checked_env(env_id, options)
    assert message in str(caught.value)
    if isinstance(caught.value.__cause__, (TypeError, ValueError)):
        assert str(caught.value).endswith("(set options with env.<option>=<value>)")


def test_a_good_env_comes_back_reset():
    env = make_checked_env("sokoban", {"dim": 7, "num_boxes": 2}, seed=3)
    assert env.shape == (7, 7) and env.render_text().count("X") + env.render_text().count("√") == 2
    env.close()


def test_model_names(tmp_path):
    check_model("tiny")
    check_model(str(tiny_model_path()))
    check_model("some-org/some-model")  # a hub id is left to from_pretrained
    with pytest.raises(UsageError, match=r"^model=/nonexistent is not a directory .*model=<a Hugging Face model"):
        check_model("/nonexistent")
    with pytest.raises(UsageError, match=r"holds no config\.json"):
        check_model(str(tmp_path))
    with pytest.raises(UsageError, match="is not a directory"):
        check_model("my-model")  # no slash: a local directory is meant
    check_agent_model("openai", "/nonexistent")  # the endpoint's model name, not a path
    with pytest.raises(UsageError):
        check_agent_model("sglang", "/nonexistent")  # its tokenizer loads here


def test_errors_print_as_one_line_with_the_shared_prefix(capsys):
    assert one_line("first\n\n  second  \n") == "first second"
    assert one_line(KeyError()) == "KeyError"
    assert print_error(RuntimeError("no sandbox:\nbuild the image")) == 2
    assert print_error("the run stopped", exit_code=1) == 1
    assert capsys.readouterr().err == "turngym: error: no sandbox: build the image\nturngym: error: the run stopped\n"
