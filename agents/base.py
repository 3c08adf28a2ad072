"""The :class:`Agent` protocol and the scripted agents that need no model: oracle and random.

An agent chooses the next action text of an episode in progress. Scripted agents look at the
environment itself (its oracle, its valid actions); a model-backed agent would read the observation
or ``env.messages()``. A person at a terminal is not an agent object: ``agents.play`` reads their
lines directly, because a person also undoes, restarts and quits.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from envs.core import TextEnv

__all__ = ["AGENTS", "Agent", "NoOracleError", "OracleAgent", "RandomAgent", "has_oracle", "make_agent"]


@runtime_checkable
class Agent(Protocol):
    """Chooses one action text per turn.

    Guarantees: ``act`` is called only while ``env`` is in an episode (after ``reset``, before the
    end), returns a ``str`` (possibly one the environment rejects) and does not step ``env`` itself.
    """

    name: str

    def act(self, env: TextEnv, observation: str) -> str:
        """The action text for the current turn of ``env``, whose latest observation is ``observation``."""
        ...


class NoOracleError(RuntimeError):
    """The environment has no oracle, or its oracle has no solution from the current state."""


def has_oracle(env: TextEnv) -> bool:
    """True if ``env``'s class overrides :meth:`envs.TextEnv.oracle` (it may still return ``None`` in some states)."""
    oracle = getattr(type(env), "oracle", None)
    return oracle is not None and oracle is not TextEnv.oracle


class OracleAgent:
    """Sends the first action of the environment's reference solution, asking again every turn.

    Re-asking keeps it correct under stochastic dynamics (a slippery lake), where only the first
    element of an oracle's plan is reliable. Raises :class:`NoOracleError` when there is none.
    """

    name = "oracle"

    def act(self, env: TextEnv, observation: str) -> str:
        plan = env.oracle()
        if plan is None:
            raise NoOracleError(f"{type(env).__name__} has no oracle; use agent=random or play it yourself")
        if not plan:
            raise NoOracleError(f"{type(env).__name__}.oracle() found no solution from the current state")
        return plan[0]


class RandomAgent:
    """Picks uniformly from ``env.valid_actions()``, or samples ``env.action_space`` where that is ``None``.

    All randomness comes from its own generator seeded by ``seed``, so a run is reproducible and the
    environment's RNG is left untouched.
    """

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, env: TextEnv, observation: str) -> str:
        choices = env.valid_actions()
        if choices is None:
            # Seed the space from our generator: sampling must not depend on the env's own seeding.
            env.action_space.seed(int(self.rng.integers(2**31)))
            return env.action_space.sample()
        if not choices:
            raise RuntimeError(f"{type(env).__name__}.valid_actions() returned an empty list mid-episode")
        return choices[int(self.rng.integers(len(choices)))]


#: Agents selectable with ``agent=<name>``; ``human`` is the person at the terminal.
AGENTS: tuple[str, ...] = ("human", "oracle", "random")


def make_agent(name: str, *, seed: int | None = None) -> Agent:
    """The scripted agent called ``name`` (``oracle`` or ``random``); ``seed`` seeds the random agent."""
    if name == "oracle":
        return OracleAgent()
    if name == "random":
        return RandomAgent(seed)
    raise ValueError(f"no scripted agent called {name!r}; choose one of: oracle, random")
