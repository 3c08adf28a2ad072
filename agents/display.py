"""Terminal input and output of ``agents.play``: plain text, with ANSI colours only where asked for.

Output goes through :class:`Terminal` so the same code serves a person at a terminal (colours, line
editing) and a pipe (plain text; the lines read are echoed so a transcript reads like the session).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, TextIO

from envs.core import TextEnv

__all__ = ["Terminal", "format_state", "format_step", "wants_color"]

_ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")
_STANDARD_KEYS = ("success", "action_is_valid", "metrics", "turn")
_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def wants_color(stream: TextIO, setting: bool | None) -> bool:
    """``setting`` if given, else colours only on a terminal, and never with ``NO_COLOR`` or ``TERM=dumb``."""
    if setting is not None:
        return setting
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class Terminal:
    """Writes to ``out`` and reads lines from ``inp``; ``ask`` returns ``None`` at end of input."""

    def __init__(self, out: TextIO = sys.stdout, inp: TextIO = sys.stdin, *, color: bool = False) -> None:
        self.out = out
        self.inp = inp
        self.color = color
        self.interactive = inp.isatty()
        if self.interactive:
            import readline  # noqa: F401  (line editing and history for input())

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return "\x1b[" + ";".join(_CODES[s] for s in styles) + "m" + text + "\x1b[0m"

    def say(self, text: str = "", *styles: str) -> None:
        self.out.write(self.style(text, *styles) + "\n")
        self.out.flush()

    def rule(self, title: str) -> None:
        self.say(f"── {title} " + "─" * max(0, 70 - len(title)), "bold")

    def ask(self, prompt: str) -> str | None:
        """One line from the input without its newline; ``None`` at end of input or on Ctrl-C."""
        if self.interactive and self.inp is sys.stdin and self.out is sys.stdout:
            # \001 and \002 tell readline that the escape codes take no room, so line editing stays aligned.
            styled = _ANSI_CODE.sub("\001\\g<0>\002", self.style(prompt, "bold"))
            try:
                return input(styled)
            except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C at a prompt: the person leaves
                self.out.write("\n")
                return None
        self.out.write(self.style(prompt, "bold"))
        self.out.flush()
        try:
            line = self.inp.readline()
        except KeyboardInterrupt:
            line = ""
        if not line:
            self.out.write("\n")
            return None
        line = line.removesuffix("\n").removesuffix("\r")
        self.out.write(line + "\n")  # echo, so that a piped session reads like a typed one
        return line


def format_state(env: TextEnv, observation: str, *, color: bool) -> str:
    """The observation, with the rendered board shown once: coloured in place if the observation contains it."""
    board = env.render_text(color=False).strip("\n")
    if not board.strip():
        return observation
    if board in observation:
        if not color:
            return observation
        return observation.replace(board, env.render_text(color=True).strip("\n"), 1)
    return f"{observation}\n\n{env.render_text(color=color).strip(chr(10))}"


def format_step(turn: int, reward: float, episode_return: float, info: dict[str, Any], term: Terminal) -> str:
    """The turn's reward and standard info on one line, then the metrics and the environment's own info keys."""
    valid = term.style("valid", "green") if info["action_is_valid"] else term.style("INVALID", "red", "bold")
    success = term.style("yes", "green", "bold") if info["success"] else "no"
    lines = [f"turn {turn} · reward {reward:+.2f} · return {episode_return:+.2f} · action {valid} · success {success}"]
    metrics = info["metrics"]
    if metrics:
        lines.append(term.style("metrics: " + ", ".join(f"{k}={_short(v)}" for k, v in metrics.items()), "dim"))
    extra = {k: v for k, v in info.items() if k not in _STANDARD_KEYS and k not in metrics}
    if extra:
        lines.append(term.style("info: " + ", ".join(f"{k}={_short(v)}" for k, v in extra.items()), "dim"))
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
