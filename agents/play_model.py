"""Watching a model play: ``python -m agents.play env=<id> agent=llm`` (or ``hf``, ``openai``, ``sglang``).

The model plays through the same episode loop as evaluation and training (:mod:`agents.episode`);
an observer prints the state, the model's action, the reward and the info after every turn, waiting
``delay`` seconds so a person can follow. Every episode's :class:`~agents.trajectory.Trajectory`
(token ids, masks, logprobs, messages) is appended to ``out``, by default
``runs/play/<env id>.trajectories.jsonl``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time

from agents.config import PlayConfig, env_options
from agents.display import Terminal, format_state, format_step
from agents.episode import EpisodeSpec, StepEvent
from agents.trajectory import write_trajectories
from envs.core import TextEnv

__all__ = ["default_trajectory_path", "play_model"]


def default_trajectory_path(env_id: str) -> str:
    return os.path.join("runs", "play", env_id.replace("/", "_") + ".trajectories.jsonl")


def play_model(env: TextEnv, cfg: PlayConfig, term: Terminal) -> int:
    """Let the model ``cfg.agent`` play ``cfg.episodes`` episodes (default 1) of ``env``, shown turn by turn."""
    from agents.engines.registry import engine_kind
    from agents.policy import make_policy

    kind = engine_kind(cfg.agent).name  # llm is the hf engine
    env_id = cfg.env["id"]
    out = cfg.out or default_trajectory_path(env_id)
    term.rule(f"turngym · {env_id} · agent {kind} · model {cfg.model}")
    term.say(f"Loading {cfg.model} ...", "dim")
    policy = make_policy(kind, cfg, tools=env.tools, batch_size=1)
    episodes = cfg.episodes or 1
    solved = 0
    try:
        for index in range(episodes):
            seed = cfg.seed + index if cfg.seed is not None else secrets.randbelow(2**31)
            term.rule(f"{env_id} · episode {index + 1} · seed {seed}")
            spec = EpisodeSpec(env_id, seed, group_id=f"play/{seed}", env_options=env_options(cfg))
            observer = _Observer(term, cfg.delay, policy.name)
            trajectory = asyncio.run(policy.play(env, spec, observer=observer))
            write_trajectories(out, [trajectory])
            solved += trajectory.success
            if trajectory.termination == "error":
                term.say(f"error: {trajectory.error}", "red", "bold")
            else:
                verdict = (
                    term.style("solved", "green", "bold") if trajectory.success else term.style("not solved", "red")
                )
                term.say(
                    f"Episode over ({trajectory.termination}): {verdict} in {trajectory.num_turns} turn(s), "
                    f"return {trajectory.episode_return:+.2f}, {trajectory.num_sampled_tokens} sampled tokens"
                )
    except KeyboardInterrupt:
        term.say()
    finally:
        asyncio.run(policy.close())
    term.say(f"{solved} of {episodes} episode(s) solved; trajectories appended to {out}", "bold")
    return 0


class _Observer:
    """Prints every event of an episode as it happens."""

    def __init__(self, term: Terminal, delay_s: float, name: str) -> None:
        self.term, self.delay_s, self.name = term, delay_s, name
        self.episode_return = 0.0

    def __call__(self, event: StepEvent) -> None:
        if event.action is None:
            self.term.say(format_state(event.env, event.observation, color=self.term.color))
            return
        self.episode_return += event.reward
        self.term.say(f"{self.name}> {event.action}", "cyan")
        self.term.say(format_state(event.env, event.observation, color=self.term.color))
        self.term.say(format_step(event.turn, event.reward, self.episode_return, dict(event.info), self.term))
        time.sleep(self.delay_s)
