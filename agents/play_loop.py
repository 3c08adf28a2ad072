"""The interactive loop behind ``python -m agents.play``: episodes played by a person or a scripted agent.

Per episode: show the state, get an action (a line from the person, or the agent's choice), step
the :class:`~agents.session.EpisodeSession`, show the reward and info, and at the end append the
:class:`~agents.record.EpisodeRecord` to the output file. Each step is a small function so that
other front ends (evaluation, watching a model) can reuse the pieces.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Literal

from agents.base import Agent, NoOracleError
from agents.config import PlayConfig, env_options
from agents.display import Terminal, format_state, format_step
from agents.record import EpisodeRecord, TerminationReason, append_jsonl
from agents.session import EpisodeSession, NondeterministicEnvError, StepResult
from envs.core import TextEnv

__all__ = ["COMMANDS", "EpisodeEnd", "default_out_path", "parse_line", "play"]

#: How an episode was left: the environment ended it, or the person restarted, skipped or quit.
EpisodeEnd = Literal["over", "restart", "next", "quit"]

#: Commands a person types at the action prompt (after ':'), and what they do.
COMMANDS: dict[str, str] = {
    "u": "undo",
    "undo": "undo",
    "r": "restart",
    "restart": "restart",
    "n": "next",
    "next": "next",
    "q": "quit",
    "quit": "quit",
    "h": "help",
    "help": "help",
    "?": "help",
}


def default_out_path(env_id: str) -> str:
    """Where episodes go when ``out`` is not set: ``runs/play/<env id>.jsonl`` under the working directory."""
    return os.path.join("runs", "play", env_id.replace("/", "_") + ".jsonl")


def play(env: TextEnv, cfg: PlayConfig, agent: Agent | None, term: Terminal, *, help_text: str) -> int:
    """Play episodes until ``cfg.episodes`` are over or the person quits; ``agent=None`` is the person.

    Returns the exit code: 0 when the episodes are played or the person quits, 1 when the agent fails.
    """
    env_id = cfg.env["id"]
    out_path = cfg.out or default_out_path(env_id)
    show_header(env, cfg, term, out_path)
    # A person plays until they quit; a scripted agent, unless told otherwise, plays one episode.
    limit = cfg.episodes if cfg.episodes is not None or agent is None else 1
    index, finished, solved = 0, 0, 0
    seed = _seed_for(cfg.seed, index)
    while True:
        agent_name = agent.name if agent is not None else "human"
        session = EpisodeSession(env, env_id=env_id, env_options=env_options(cfg), seed=seed, agent=agent_name)
        term.rule(f"{env_id} · episode {index + 1} · seed {seed}")
        try:
            end = play_episode(session, agent, term, delay_s=cfg.delay, help_text=help_text)
        except KeyboardInterrupt:  # Ctrl-C while an agent plays: stop, as :q would
            term.say()
            end = "quit"
        except NoOracleError as exc:
            save(session, term, out_path, "error")
            term.say(f"error: {exc}", "red", "bold")
            return 1
        if end == "over":
            record = save(session, term, out_path, None)
            finished, solved = finished + 1, solved + int(record.success)
        elif session.actions:
            save(session, term, out_path, "abandoned")
        if end == "over" and limit is not None and finished >= limit:
            break
        if end == "over" and agent is None:
            end = ask_after_episode(term, _seed_for(cfg.seed, index + 1) if cfg.seed is not None else None)
        if end == "quit":
            break
        if end in ("over", "next"):
            index += 1
            seed = _seed_for(cfg.seed, index)
    term.say(f"{finished} episode(s) finished, {solved} solved; episodes saved to {out_path}", "bold")
    return 0


def play_episode(
    session: EpisodeSession, agent: Agent | None, term: Terminal, *, delay_s: float, help_text: str
) -> EpisodeEnd:
    """Start the session's episode and play it to its end, or until the person leaves it."""
    session.start()
    show_state(session, term)
    if agent is None:
        return play_person_turns(session, term, help_text=help_text)
    while not session.over:
        time.sleep(delay_s)
        action = agent.act(session.env, session.observation)
        term.say(f"{agent.name}> {action}", "cyan")
        show_step(session, session.step(action), term)
    return "over"


def play_person_turns(session: EpisodeSession, term: Terminal, *, help_text: str) -> EpisodeEnd:
    """Read and apply the person's lines until the episode is over or they restart, skip or quit."""
    while not session.over:
        command, text = parse_line(term.ask("action (:h help)> "))
        if command == "act":
            show_step(session, session.step(text), term)
        elif command == "undo":
            undo(session, term)
        elif command == "help":
            term.say(help_text)
        elif command == "unknown":
            term.say(f"unknown command {text!r}; type :h for the keys, or ::text to send ':text'", "yellow")
        elif command in ("restart", "next", "quit"):
            return command
    return "over"


def parse_line(line: str | None) -> tuple[str, str]:
    """``(command, text)``: ``("act", action text)``, a command of :data:`COMMANDS`, ``empty`` or ``unknown``.

    ``None`` (end of input) is ``quit``. A line starting with ``::`` sends the rest with one ``:``.
    """
    if line is None:
        return "quit", ""
    stripped = line.strip()
    if stripped.startswith("::"):
        return "act", stripped[1:]
    if stripped.startswith(":"):
        return COMMANDS.get(stripped[1:].strip().lower(), "unknown"), stripped
    return ("act", line) if stripped else ("empty", "")


def undo(session: EpisodeSession, term: Terminal) -> None:
    """Take back the last action and show the state before it."""
    if not session.actions:
        term.say("nothing to undo", "yellow")
        return
    undone = session.actions[-1]
    try:
        session.undo()
    except NondeterministicEnvError as exc:  # the replayed state is shown; the person decides what to do
        term.say(f"error: {exc}", "red")
    term.say(f"undid {undone!r}", "yellow")
    show_state(session, term)


def ask_after_episode(term: Terminal, next_seed: int | None) -> EpisodeEnd:
    """Ask whether to play the next seed, the same seed again, or quit."""
    which = f"seed {next_seed}" if next_seed is not None else "a new seed"
    while True:
        command, _ = parse_line(term.ask(f"Enter: next episode ({which}) · :r same seed again · :q quit> "))
        if command in ("empty", "next"):
            return "next"
        if command in ("restart", "quit"):
            return command
        term.say("type Enter, :r or :q", "yellow")


def show_header(env: TextEnv, cfg: PlayConfig, term: Terminal, out_path: str) -> None:
    term.rule(f"turngym · {cfg.env['id']} · agent {cfg.agent}")
    if env.instructions:
        term.say(env.instructions.strip(), "dim")
    if env.action_format:
        term.say(f"Action format: {env.action_format}")
    if cfg.agent == "human":
        term.say("Commands: :u undo · :r restart · :n next · :q quit · :h help")
    term.say(f"Episodes are appended to {out_path}")


def show_state(session: EpisodeSession, term: Terminal) -> None:
    term.say(format_state(session.env, session.observation, color=term.color))


def show_step(session: EpisodeSession, result: StepResult, term: Terminal) -> None:
    """The new state, the turn's reward and info, and how the episode ended if it did."""
    show_state(session, term)
    term.say(format_step(len(session.actions), result.reward, session.episode_return, result.info, term))
    if result.terminated or result.truncated:
        how = "terminated" if result.terminated else "truncated"
        verdict = term.style("solved", "green", "bold") if result.info["success"] else term.style("not solved", "red")
        turns, episode_return = len(session.actions), session.episode_return
        term.say(f"Episode over ({how}): {verdict} in {turns} turn(s), return {episode_return:+.2f}")


def save(session: EpisodeSession, term: Terminal, out_path: str, reason: TerminationReason | None) -> EpisodeRecord:
    """Append the session's record to ``out_path`` (``reason=None``: the episode is over) and say so."""
    record = session.to_record(reason)
    append_jsonl(out_path, record)
    term.say(f"saved episode ({record.termination_reason}, {record.num_turns} turn(s)) to {out_path}", "dim")
    return record


def _seed_for(base: int | None, index: int) -> int:
    """Episode ``index``'s seed: ``base + index``, or a fresh random one when ``base`` is ``None``."""
    return base + index if base is not None else secrets.randbelow(2**31)
