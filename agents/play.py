"""``python -m agents.play``: play a turngym environment in the terminal, or watch a scripted agent play it.

:data:`USAGE` is the reference for users. This module is the thin entry point: it parses the
arguments, composes and checks the config (every mistake exits with code 2 and one line on stderr,
before anything interactive), builds the environment and the agent, and hands over to
:func:`agents.play_loop.play`. Heavy imports happen after argument parsing so ``--help`` is instant.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["KEYS", "USAGE", "main"]

KEYS = """\
Keys (at the action prompt):
  <text>    send the text as your action, e.g.  Up || Left  or  <answer>Up</answer>
  :u        undo the last action (the episode is replayed without it)
  :r        restart this episode (same seed)
  :n        skip to the next episode (next seed)
  :q        quit (also Ctrl-D / end of input, or Ctrl-C)
  :h        show this help
  ::text    send the text ':text' as your action
After an episode: Enter or :n plays the next seed, :r the same seed again, :q quits.
"""

USAGE = f"""\
usage: python -m agents.play env=<id> [key=value ...]    (or: turngym-play env=<id> ...)
       python -m agents.play --cfg env=<id> [key=value ...]    print the composed config and exit
       python -m agents.play --help

Play a turngym environment in the terminal, or watch a scripted agent play it. Options are Hydra
overrides of configs/play.yaml:
  env=<id>           configs/env/<id>.yaml, or any registered environment id (plugins too)
  env.<option>=<v>   an option of the environment, e.g. env.dim=8 env.num_boxes=2 (unknown ones fail early)
  agent=human        human (you type the actions) | oracle | random | llm (a model; also hf, openai, sglang)
  model=smollm2      the model of agent=llm: smollm2 (embedded) | tiny | a Hugging Face model dir
  base_url=null      agent=openai: an OpenAI-compatible URL (.../v1); agent=sglang: http://host:port
  temperature=0.7    and top_p, max_new_tokens, max_total_tokens, max_turns, device, dtype (see agents.eval --help)
  seed=null          first episode's seed, seed+1 for the next one; null: a fresh random seed each episode
  episodes=null      episodes to play; null: a person plays until :q, a scripted agent plays one
  delay=0.5          seconds a scripted agent waits before each action
  out=null           JSONL file every episode is appended to; null: runs/play/<env id>.jsonl
                     (a model's trajectories: runs/play/<env id>.trajectories.jsonl)
  color=null         true | false; null: colours only when stdout is a terminal and NO_COLOR is unset

{KEYS}
Every episode with at least one action is appended to `out` as one JSON line (env id and options,
seed, agent, messages, actions, rewards, validity, return, success, termination_reason); one left
before its end (:r, :n, :q, end of input) has termination_reason "abandoned".

Examples:
  python -m agents.play env=sokoban seed=3 env.dim=8
  python -m agents.play env=sokoban agent=oracle episodes=3 delay=0.2 out=episodes.jsonl
  python -m agents.play env=frozenlake agent=random env.is_slippery=true color=false
  python -m agents.play env=sokoban agent=llm model=smollm2 episodes=2 delay=0
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m agents.play`` and ``turngym-play``; returns the exit code.

    The preamble is :func:`agents.cli.run_command`'s; a missing optional package exits 2, a model that does not
    load exits 1.
    """
    from agents.cli import WARNING_PREFIX, one_line, run_command

    # One line per warning (a plugin that failed to load, say) instead of Python's two-line format.
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"{WARNING_PREFIX}{one_line(message)}\n"
    return run_command(USAGE, _compose, _play, argv, usage_errors=(ImportError,), failures=(OSError,))


def _compose(overrides: list[str]) -> DictConfig:
    """The composed config, checked: ``--cfg`` prints only a config that plays."""
    from agents.config import compose_play_config, to_play_config

    cfg = compose_play_config(overrides)
    to_play_config(cfg)
    return cfg


def _play(cfg: DictConfig) -> int:
    """Check everything else (a mistake raises UsageError before anything interactive), then play."""
    from agents.base import has_oracle, make_agent
    from agents.config import MODEL_AGENTS, UsageError, env_options, to_play_config
    from agents.display import Terminal, wants_color
    from agents.play_loop import play
    from agents.preflight import check_agent_model, make_checked_env

    play_cfg = to_play_config(cfg)
    env_id = play_cfg.env["id"]
    env = make_checked_env(env_id, env_options(play_cfg), seed=play_cfg.seed)
    if play_cfg.agent == "oracle" and not has_oracle(env):
        raise UsageError(f"environment {env_id!r} has no oracle; use agent=random or agent=human")
    check_agent_model(play_cfg.agent, play_cfg.model)
    term = Terminal(sys.stdout, sys.stdin, color=wants_color(sys.stdout, play_cfg.color))
    if play_cfg.agent in MODEL_AGENTS:
        from agents.play_model import play_model

        return play_model(env, play_cfg, term)
    agent = None if play_cfg.agent == "human" else make_agent(play_cfg.agent, seed=play_cfg.seed)
    return play(env, play_cfg, agent, term, help_text=KEYS)


if __name__ == "__main__":
    sys.exit(main())
