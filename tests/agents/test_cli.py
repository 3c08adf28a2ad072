"""The preamble every command shares (:func:`agents.cli.run_command`): --help, --cfg, flags, exit codes."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from agents.cli import FAILURE_EXIT, USAGE_EXIT, UsageError, one_line, run_command

USAGE = "usage: python -m toy env=<id>\n"


class Toy:
    """A command whose config is its overrides and whose work records the config and returns ``code``."""

    def __init__(self, code: int = 0, raises: Exception | None = None) -> None:
        self.code, self.raises, self.composed, self.worked = code, raises, [], []

    def compose(self, overrides: list[str]):
        self.composed.append(overrides)
        return OmegaConf.create(dict(o.split("=", 1) for o in overrides))

    def work(self, cfg) -> int:
        self.worked.append(dict(cfg))
        if self.raises is not None:
            raise self.raises
        return self.code

    def run(self, *argv: str, **kwargs) -> int:
        return run_command(USAGE, self.compose, self.work, list(argv), **kwargs)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_wins_over_everything_and_composes_nothing(flag, capsys):
    toy = Toy()
    assert toy.run("env=x", "--bogus", flag) == 0
    assert capsys.readouterr() == (USAGE, "")
    assert toy.composed == []


def test_the_work_gets_the_composed_config_and_its_code_is_the_exit_code(capsys):
    toy = Toy(code=7)
    assert toy.run("env=x", "seed=3") == 7
    assert toy.worked == [{"env": "x", "seed": "3"}]


def test_cfg_prints_the_composed_config_and_does_not_work(capsys):
    toy = Toy()
    assert toy.run("--cfg", "env=x") == 0
    out, err = capsys.readouterr()
    assert OmegaConf.create(out) == {"env": "x"} and err == ""
    assert toy.worked == []


@pytest.mark.parametrize(
    ("modes", "flags"), [(None, "--help and --cfg"), ({"--summarize": len}, "--help, --cfg and --summarize")]
)
def test_an_unknown_flag_is_one_line_and_exit_2(modes, flags, capsys):
    toy = Toy()
    assert toy.run("env=x", "--dry-run", "-v", modes=modes) == USAGE_EXIT == 2
    assert capsys.readouterr() == ("", f"turngym: error: unknown flag '--dry-run'; flags are {flags}\n")
    assert toy.composed == []


def test_a_mode_runs_on_the_arguments_after_it(capsys):
    seen = []
    assert Toy().run("--summarize", "a.jsonl", modes={"--summarize": lambda args: seen.append(args) or 5}) == 5
    assert seen == [["a.jsonl"]]


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (UsageError("env.dim must be >= 4;\n use a larger dim"), USAGE_EXIT),
        (ValueError("bad option"), USAGE_EXIT),  # one of usage_errors
        (OSError("no such model"), FAILURE_EXIT),  # one of failures
    ],
)
def test_mistakes_and_failures_are_one_line(raised, code, capsys):
    toy = Toy(raises=raised)
    assert toy.run("env=x", usage_errors=(ValueError,), failures=(OSError,)) == code
    assert capsys.readouterr() == ("", f"turngym: error: {one_line(raised)}\n")


def test_a_usage_error_while_composing_is_exit_2(capsys):
    def compose(overrides):
        raise UsageError("choose an environment with env=<id>")

    assert run_command(USAGE, compose, Toy().work, ["seed=1"]) == 2
    assert capsys.readouterr().err == "turngym: error: choose an environment with env=<id>\n"


def test_other_exceptions_propagate():
    with pytest.raises(RuntimeError):
        Toy(raises=RuntimeError("a bug")).run("env=x", usage_errors=(ValueError,), failures=(OSError,))
