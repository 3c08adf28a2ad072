"""The pieces of the play loop that need no subprocess: line parsing, board display, terminal I/O."""

from __future__ import annotations

import io

from toy_line_env import ToyLineEnv

from agents.display import Terminal, format_state, format_step
from agents.play_loop import parse_line


def test_parse_line():
    assert parse_line(None) == ("quit", "")
    assert parse_line("  Up || Left ") == ("act", "  Up || Left ")
    assert parse_line("") == ("empty", "") and parse_line("   ") == ("empty", "")
    assert parse_line(":u") == ("undo", ":u") and parse_line(" :Q ") == ("quit", ":Q")
    assert parse_line(":r") == ("restart", ":r") and parse_line(":n") == ("next", ":n")
    assert parse_line(":help") == ("help", ":help")
    assert parse_line(":bogus") == ("unknown", ":bogus")
    assert parse_line("::u") == ("act", ":u")


def test_the_board_is_shown_once():
    env = ToyLineEnv(length=6)
    observation, _ = env.reset(seed=0)
    assert env.render_text() in observation
    assert format_state(env, observation, color=False) == observation
    coloured = format_state(env, observation, color=True)
    assert coloured.count("\x1b[33mP") == 1 and env.render_text() not in coloured
    # An observation without the board (an invalid action's explanation) gets the board below it.
    explained = format_state(env, "Invalid action.", color=False)
    assert explained == f"Invalid action.\n\n{env.render_text()}"


def test_format_step_lists_standard_info_metrics_and_extra_keys():
    term = Terminal(io.StringIO(), io.StringIO(), color=False)
    info = {"success": False, "action_is_valid": False, "metrics": {"distance": 2.0}, "turn": 1, "goal": 3}
    text = format_step(1, -0.1, -0.1, info, term)
    assert text.splitlines() == [
        "turn 1 · reward -0.10 · return -0.10 · action INVALID · success no",
        "metrics: distance=2",
        "info: goal=3",
    ]


def test_terminal_echoes_piped_input_and_reports_end_of_input():
    out = io.StringIO()
    term = Terminal(out, io.StringIO("Up\r\n"), color=False)
    assert term.ask("> ") == "Up"
    assert term.ask("> ") is None
    assert out.getvalue() == "> Up\n> \n"
