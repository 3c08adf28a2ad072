"""Every command (``agents.play``, ``agents.eval``, ``trainer.run``, ``trainer.sft``) runs the same preamble
(:func:`agents.cli.run_command`): the same --help, flags, one-line errors and exit codes."""

from __future__ import annotations

import importlib
import warnings

import pytest

COMMANDS = ["agents.play", "agents.eval", "trainer.run", "trainer.sft"]


@pytest.fixture(autouse=True)
def keep_the_warning_format(monkeypatch):
    """``agents.play`` formats warnings as one line for the rest of its process: not for the test session's."""
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_prints_the_usage_and_exits_0(name, capsys):
    command = importlib.import_module(name)
    assert command.main(["--help", "env=sokoban"]) == 0
    assert capsys.readouterr() == (command.USAGE, "")


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("agents.play", "--help and --cfg"),
        ("agents.eval", "--help, --cfg and --summarize"),
        ("trainer.run", "--help and --cfg"),
        ("trainer.sft", "--help and --cfg"),
    ],
)
def test_an_unknown_flag_exits_2_with_one_error_line(name, flags, capsys):
    command = importlib.import_module(name)
    assert command.main(["env=sokoban", "--dry-run"]) == 2
    assert capsys.readouterr() == ("", f"turngym: error: unknown flag '--dry-run'; flags are {flags}\n")


@pytest.mark.parametrize("name", COMMANDS)
def test_a_bad_option_exits_2_with_one_error_line(name, capsys):
    command = importlib.import_module(name)
    assert command.main(["env=sokobn"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("turngym: error: ") and "Did you mean 'sokoban'" in err
