"""One episode being played: the environment, its seed and the actions so far, with undo by replay.

:class:`EpisodeSession` is the stepping that ``agents.play`` shares between a person and a scripted
agent. Undo and restart work for every environment because the :class:`envs.TextEnv` contract
guarantees that the same seed and the same actions give the same observations, rewards and infos:
undo resets with the episode's seed and replays all actions but the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.record import EpisodeRecord, TerminationReason, episode_return
from envs.core import TextEnv

__all__ = ["EpisodeSession", "NondeterministicEnvError", "StepResult"]


class NondeterministicEnvError(RuntimeError):
    """Replaying the same actions under the same seed gave a different result (a broken env contract)."""


@dataclass(frozen=True)
class StepResult:
    """What one ``env.step`` returned."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class EpisodeSession:
    """Plays one episode of ``env`` under ``seed`` and keeps what is needed to undo, restart and record it.

    ``start`` (or ``restart``) must be called before ``step``. ``over`` is True once the environment
    terminated or truncated the episode; ``step`` then raises, as ``env.step`` does.
    """

    def __init__(self, env: TextEnv, *, env_id: str, env_options: dict[str, Any], seed: int, agent: str) -> None:
        self.env = env
        self.env_id = env_id
        self.env_options = env_options
        self.seed = seed
        self.agent = agent
        self.observation = ""
        self.info: dict[str, Any] = {}
        self.actions: list[str] = []
        self.results: list[StepResult] = []

    @property
    def over(self) -> bool:
        return bool(self.results) and (self.results[-1].terminated or self.results[-1].truncated)

    @property
    def episode_return(self) -> float:
        return episode_return(r.reward for r in self.results)

    def start(self) -> str:
        """Reset the environment with the episode's seed; returns the first observation."""
        self.observation, self.info = self.env.reset(seed=self.seed)
        self.actions, self.results = [], []
        return self.observation

    restart = start

    def step(self, action: str) -> StepResult:
        """Send one action text to the environment and remember it."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        result = StepResult(observation, float(reward), bool(terminated), bool(truncated), info)
        self.actions.append(action)
        self.results.append(result)
        self.observation, self.info = observation, info
        return result

    def undo(self) -> bool:
        """Take back the last action (reset with the seed, replay the others); False if there was none.

        Raises :class:`NondeterministicEnvError` if the replay differs from what was played; the
        session is then in the replayed state.
        """
        if not self.actions:
            return False
        kept_actions, kept_results = self.actions[:-1], self.results[:-1]
        self.start()
        for turn, (action, before) in enumerate(zip(kept_actions, kept_results, strict=True), start=1):
            after = self.step(action)
            if (after.observation, after.reward) != (before.observation, before.reward):
                raise NondeterministicEnvError(
                    f"{type(self.env).__name__} replayed turn {turn} of seed {self.seed} differently; "
                    "envs must be deterministic under the same seed and actions"
                )
        return True

    def to_record(self, termination_reason: TerminationReason | None = None) -> EpisodeRecord:
        """The episode as an :class:`EpisodeRecord`; the reason defaults to how the environment ended it."""
        last = self.results[-1] if self.results else None
        if termination_reason is None:
            if last is None or not self.over:
                raise ValueError("the episode is not over: pass termination_reason='abandoned' or 'error'")
            termination_reason = "terminated" if last.terminated else "truncated"
        return EpisodeRecord(
            env_id=self.env_id,
            env_options=dict(self.env_options),
            seed=self.seed,
            agent=self.agent,
            messages=self.env.messages(),
            actions=list(self.actions),
            rewards=[r.reward for r in self.results],
            action_is_valid=[bool(r.info["action_is_valid"]) for r in self.results],
            success=bool(last is not None and last.info["success"]),
            terminated=bool(last is not None and last.terminated),
            truncated=bool(last is not None and last.truncated),
            termination_reason=termination_reason,
            metrics=dict(last.info["metrics"]) if last is not None else {},
        )
