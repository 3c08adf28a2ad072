"""The shared SIGTERM handling of the commands (:mod:`agents.cli`), in this process: a signal sent to itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agents.cli import UsageError, run_command, sigterm_interrupts, sigterm_reclaimed

REPO_ROOT = Path(__file__).resolve().parents[2]


def compose(overrides: list[str]):
    return OmegaConf.create({})


def sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs in this thread before the next line


def test_sigterm_in_the_work_is_one_line_and_143(capsys):
    closed = []

    def work(config) -> int:
        try:
            sigterm_self()
        finally:
            closed.append("engine")  # what the work started is closed on the way out
        return 0

    assert run_command("usage", compose, work, [], stopped_hint="resume later") == 143
    assert closed == ["engine"]
    assert capsys.readouterr().err == "turngym: error: stopped by SIGTERM; resume later\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the command's only


def test_a_work_that_caught_the_stop_still_exits_143(capsys):
    def work(config) -> int:
        try:
            sigterm_self()
        except KeyboardInterrupt:  # agents.play ends the episode as :q would
            return 0
        return 0

    assert run_command("usage", compose, work, []) == 143
    assert capsys.readouterr().err == "turngym: error: stopped by SIGTERM\n"


@pytest.mark.parametrize("error", [ValueError, UsageError], ids=["library-error", "usage-error"])
@pytest.mark.parametrize("where", ["compose", "work"])
def test_an_error_a_library_raises_once_the_signal_came_is_still_the_stop(capsys, error, where):
    """Hydra, interrupted while it composes, raises its own error, which compose turns into a UsageError."""

    def interrupted(*_args):
        try:
            sigterm_self()
        except KeyboardInterrupt as exc:
            raise error("could not load the config") from exc
        return 0

    steps = {"compose": compose, "work": lambda config: 0, where: interrupted}
    assert run_command("usage", steps["compose"], steps["work"], [], usage_errors=(ValueError,)) == 143
    assert capsys.readouterr().err == "turngym: error: stopped by SIGTERM\n"


def test_errors_without_a_signal_keep_their_exit_codes_and_others_propagate(capsys):
    def failing(error):
        def work(config):
            raise error("no sandbox")

        return work

    assert run_command("usage", compose, failing(UsageError), []) == 2
    assert run_command("usage", compose, failing(OSError), [], failures=(OSError,)) == 1
    assert capsys.readouterr().err == "turngym: error: no sandbox\n" * 2
    with pytest.raises(ZeroDivisionError):
        run_command("usage", compose, failing(ZeroDivisionError), [])
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ctrl_c_is_one_line_and_130_and_a_caught_one_is_the_works_own_exit(capsys):
    def interrupted(config) -> int:
        raise KeyboardInterrupt

    def caught(config) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:  # a person pressing Ctrl-C at a prompt leaves: not a stop
            return 0

    assert run_command("usage", compose, interrupted, []) == 130
    assert capsys.readouterr().err == "turngym: error: stopped by SIGINT\n"
    assert run_command("usage", compose, caught, []) == 0


def test_a_library_that_exits_on_sigterm_is_turned_into_the_stop_and_its_handler_replaced():
    def libraries_handler(signum, frame):  # what ray.init installs: sys.exit(signum)
        raise SystemExit(signum)

    with sigterm_interrupts() as stop:
        with pytest.raises(KeyboardInterrupt) as stopped, sigterm_reclaimed():
            signal.signal(signal.SIGTERM, libraries_handler)
            sigterm_self()
        assert stopped.value.args == (signal.SIGTERM,) and stop.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is stop  # taken back for what follows
        with pytest.raises(KeyboardInterrupt):
            sigterm_self()


def test_a_librarys_exit_swallowed_where_python_cannot_raise_is_sent_again_and_still_stops():
    """Ray's handler (``sys.exit(15)``) can run inside a fork handler or a finalizer while Ray starts: Python prints
    ``Exception ignored`` and the start goes on. The signal is sent again and stops the block's next line."""

    def libraries_handler(signum, frame):
        raise SystemExit(signum)

    class SignalsWhenCollected:
        def __del__(self):
            sigterm_self()  # the library's handler runs here: its SystemExit is swallowed

    reached = []
    with sigterm_interrupts() as stop:
        with pytest.raises(KeyboardInterrupt) as stopped, sigterm_reclaimed():
            signal.signal(signal.SIGTERM, libraries_handler)
            SignalsWhenCollected()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the signal sent again lands in this loop
                time.sleep(0.001)
            reached.append("after the loop")
        assert stopped.value.args == (signal.SIGTERM,) and stop.signum == signal.SIGTERM and reached == []
        assert signal.getsignal(signal.SIGTERM) is stop


def test_outside_a_command_sigterm_reclaimed_lets_system_exit_through():
    with pytest.raises(SystemExit), sigterm_reclaimed():
        raise SystemExit(3)


@pytest.mark.parametrize("caught", [False, True], ids=["raised-to-the-command", "caught-by-the-work"])
def test_a_stop_inside_exec_of_source_text_still_exits_143_under_python_m(tmp_path, caught):
    """``exec`` of a string (``dataclasses`` builds ``__init__`` so while modules import) records an interrupt
    that leaves it in a CPython flag that makes ``python -m`` end with SIGINT (-2) at exit, whatever code it
    exits with: the command clears it. Without the clearing this exits -2 every time."""
    work = "exec('import os, signal\\nos.kill(os.getpid(), signal.SIGTERM)\\nfor _ in range(100): pass')"
    if caught:
        work = f"try:\n        {work}\n    except KeyboardInterrupt:\n        pass"
    (tmp_path / "stop_in_exec.py").write_text(
        textwrap.dedent(
            """\
            import sys
            from omegaconf import OmegaConf
            from agents.cli import run_command

            def work(config):
                WORK
                return 0

            sys.exit(run_command("usage", lambda overrides: OmegaConf.create({}), work, []))
            """
        ).replace("WORK", work)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "stop_in_exec"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (143, "turngym: error: stopped by SIGTERM\n")


def test_a_stop_swallowed_by_a_finalizer_is_sent_again_and_stops_the_command(capsys):
    """The handler's interrupt raised inside ``__del__`` cannot propagate: Python would print ``Exception ignored``
    and the work would go on. The signal is sent again and interrupts the work's next line."""
    reached = []

    class SignalsWhenCollected:
        def __del__(self):
            sigterm_self()  # the handler runs here, inside the finalizer

    def work(config) -> int:
        SignalsWhenCollected()  # collected at once: the interrupt is raised in __del__ and swallowed
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the signal sent again lands in this loop
            time.sleep(0.001)
        reached.append("after the loop")
        return 0

    hook = sys.unraisablehook
    assert run_command("usage", compose, work, []) == 143
    assert reached == []
    assert capsys.readouterr().err == "turngym: error: stopped by SIGTERM\n"  # no "Exception ignored" report
    assert sys.unraisablehook is hook  # the command's hook lasted as long as the command
