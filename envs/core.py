"""The contract every turngym environment keeps.

A turngym environment is a :class:`gymnasium.Env` whose observations are text for a language model
and whose actions are the raw text a model produced. Subclass :class:`TextEnv`, implement
:meth:`TextEnv._reset`, :meth:`TextEnv._step` and :meth:`TextEnv.render_text`, and declare
:attr:`TextEnv.instructions` and :attr:`TextEnv.action_format`. The base class owns everything that
must be identical across environments:

* Gymnasium's meaning of the episode end. ``terminated``: the task itself ended (solved, failed,
  bought, fell in a hole). ``truncated``: a limit outside the task ended it (``max_turns`` here, or a
  step limit an environment declares). Both can be checked by a trainer to decide on bootstrapping.
* Lenient actions. ``step`` accepts any ``str`` (empty, megabytes long, any Unicode) and never raises
  because of its content: an action the environment cannot parse is a normal transition whose
  observation explains the problem, whose reward carries the configurable ``format_penalty`` and
  whose ``info["action_is_valid"]`` is ``False``. Only programming errors raise: a non-``str``
  action, or ``step`` before ``reset`` or after the episode ended.
* Standard ``info`` keys on every ``reset`` and ``step``: ``success`` (bool, the task is solved),
  ``action_is_valid`` (bool), ``metrics`` (dict of str to float, for logging), ``turn`` (int, turns
  taken so far). Environments may add their own keys; ``info`` is for logging and tests, typed
  records carry data across process boundaries.
* Randomness only through ``self.np_random``, seeded by ``reset(seed=...)``: the same seed and the
  same actions give the same observations, rewards and infos.
* The conversation. :attr:`TextEnv.instructions` is the system prompt (constant for a given
  configuration, so that inference engines can cache it across episodes); every observation is a
  user message and every action an assistant message. :meth:`TextEnv.messages` returns the whole
  list so far; an agent may also build it itself from the same pieces.
* Rendering. ``render()`` returns the current state as text with ANSI colours (``render_mode`` is
  ``"ansi"``); :meth:`TextEnv.render_text` gives the same without colours.
* An optional oracle: :meth:`TextEnv.oracle` returns the action texts of a reference solution from
  the current state, one per turn, or ``None`` where the environment cannot compute one.
* Optional state information, for the learner and the curriculum: never shown to the model, never part
  of success or return. Where an environment gives these keys, it gives them after reset and after every
  step. ``info["state_key"]``: a ``str`` that keys the whole state, equal strings exactly when the states
  are equal; counters (moves or turns taken) are not part of it, since it keys the position, which is what
  step-level credit assignment groups by. ``info["distance_to_goal"]``: an ``int``, the optimal number of
  moves left from an exact solver, ``0`` exactly when ``success``, or ``None`` when the state is unsolvable
  or the solver does not know (its budget ran out). A move is one action: a turn makes
  ``len(info["actions_executed"])`` moves where the environment reports them, else one. Where a move's
  outcome is random (:attr:`TextEnv.stochastic_dynamics`), the environment documents the deterministic
  quantity it reports (FrozenLake: the moves left if nothing slips). :mod:`envs.checker` verifies both keys.
  Per move, where a turn may hold several (optional, after a step, with the two keys above):
  ``info["move_distances"]``, a list with the distance after each move the turn made (its last equals
  ``info["distance_to_goal"]``), and ``info["move_spans"]``, one ``[start, end)`` pair per move, the characters
  of the action text that wrote it, in order: a learner then credits each move's own tokens.
* An optional difficulty, for curricula: ``reset(options={"difficulty": d})`` generates a task whose optimal
  solution from the start takes exactly ``d`` moves (the seed and ``d`` fix the task), for ``d`` within the
  read-only property ``difficulty_range -> (lowest, highest)`` (inclusive); any other ``d`` raises
  ``ValueError`` naming the range.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["Message", "StepOutcome", "TextEnv", "TextSpace"]

Message = dict[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

# What TextSpace.sample draws from: ASCII printable characters, the board symbols the built-in
# environments use, and a few characters that tend to break naive parsers (combining marks,
# right-to-left text, zero-width joiners, emoji outside the BMP, NUL).
_SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127)) + "\n\t|<>/√_#" + "éßøЖ中文مرحبا\u0301\u200d\u202e\x00😀🚀"


class TextSpace(spaces.Text):
    """Any Python ``str`` whose length lies in ``[min_length, max_length]``; every Unicode character is allowed.

    Gymnasium's :class:`~gymnasium.spaces.Text` only admits characters of a fixed charset, which
    cannot describe free model output. Membership here depends on type and length alone.
    :meth:`sample` draws strings of at most ``sample_max_length`` characters from a charset that
    mixes ASCII with awkward Unicode, which is what a robustness check should throw at a parser.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        sample_max_length: int = 64,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)
        self.sample_max_length = min(sample_max_length, max_length)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        chars = self.np_random.choice(len(self.character_list), size=length)
        return "".join(self.character_list[i] for i in chars)

    def __repr__(self) -> str:
        return f"TextSpace({self.min_length}, {self.max_length})"


@dataclass(frozen=True)
class StepOutcome:
    """What a :class:`TextEnv` subclass returns from :meth:`TextEnv._step`: one turn's result.

    ``reward`` is the environment's own reward for the turn, *before* the format penalty, which the
    base class applies when ``action_is_valid`` is False; it then rounds to ``REWARD_DECIMALS``.
    ``truncated`` is for limits an environment tracks itself (a step limit counted in moves, say);
    the base class adds ``max_turns``.
    ``extra_info`` holds environment-specific info keys; it must not use the standard ones.
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    action_is_valid: bool = True
    metrics: Mapping[str, float] = field(default_factory=dict)
    extra_info: Mapping[str, Any] = field(default_factory=dict)
    #: The observation as chat messages, for environments whose feedback is not a plain user message
    #: (one ``{"role": "tool", "content": ..., "name": ...}`` message per tool call, say). ``None``
    #: (the default) means one user message whose content is ``observation``.
    observation_messages: tuple[Message, ...] | None = None


_STANDARD_INFO_KEYS = frozenset({"success", "action_is_valid", "metrics", "turn"})

#: Step rewards are rounded to this many decimals (see TextEnv.step).
REWARD_DECIMALS = 10


def _check_messages(messages: tuple[Message, ...], env_name: str) -> list[Message]:
    """Copies of observation messages, checked: a non-empty sequence of dicts with str role and content."""
    if not messages:
        raise ValueError(f"{env_name} returned empty observation_messages; use None for a plain user message")
    checked = []
    for message in messages:
        if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise ValueError(f"{env_name}: every observation message needs str 'role' and 'content', got {message!r}")
        checked.append(dict(message))
    return checked


def _copy_info(value: Any) -> Any:
    """A copy of JSON-like data with new containers; other objects go through ``copy.deepcopy``.

    Info values are mostly small dicts, lists and scalars: this is several times faster than
    ``deepcopy`` on them, which matters at a few microseconds per step.
    """
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, Mapping):
        return {k: _copy_info(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_info(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy_info(v) for v in value)
    return copy.deepcopy(value)


class TextEnv(gym.Env[str, str], abc.ABC):
    """Base class of turngym's multi-turn text environments (the contract is in this module's docstring).

    Args:
        max_turns: the episode is truncated after this many ``step`` calls (``None``: no turn limit).
        format_penalty: subtracted from the reward of a turn whose action could not be parsed
            (``info["action_is_valid"] is False``). A magnitude: 0.1 means a reward of -0.1.
        render_mode: ``"ansi"`` (the default) or ``None``.
        max_observation_chars, max_action_chars: bounds of the observation and action spaces.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}

    #: The system prompt: the task, the rules and the action format. Constant for a configuration.
    instructions: str = ""
    #: A short description of the action format, e.g. "<answer>Up || Left</answer>".
    action_format: str = ""
    #: Tools the agent may call, as JSON schemas in the OpenAI function format
    #: (``{"type": "function", "function": {"name", "description", "parameters"}}``), or ``None``.
    #: Agents pass them to the chat template's ``tools`` argument where the tokenizer supports it.
    tools: list[dict[str, Any]] | None = None
    #: True when a step's outcome is random (drawn from ``self.np_random``: slippery ice, say). An oracle's plan
    #: is then a guide, and following it need not lower ``info["distance_to_goal"]`` by the moves it makes.
    stochastic_dynamics: bool = False

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        format_penalty: float = 0.1,
        render_mode: str | None = "ansi",
        max_observation_chars: int = 1 << 20,
        max_action_chars: int = 1 << 24,
    ) -> None:
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer or None, got {max_turns!r}")
        if format_penalty < 0:
            raise ValueError(
                f"format_penalty is a magnitude subtracted from the reward and must be >= 0, got {format_penalty!r}"
            )
        if render_mode not in (None, *self.metadata["render_modes"]):
            modes = self.metadata["render_modes"]
            raise ValueError(f"render_mode must be one of {modes} or None, got {render_mode!r}")
        self.max_turns = max_turns
        self.format_penalty = float(format_penalty)
        self.render_mode = render_mode
        self.observation_space = TextSpace(max_observation_chars)
        self.action_space = TextSpace(max_action_chars)
        self._turn = 0
        self._episode_over = True
        self._messages: list[Message] = []
        self._observation_start = 0

    # ----------------------------------------------------------------------------------------------
    # What a subclass implements
    # ----------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start an episode using ``self.np_random`` (already seeded); return the first observation and extra info."""

    @abc.abstractmethod
    def _step(self, action: str) -> StepOutcome:
        """Apply one action text (any ``str``; never raise because of its content)."""

    @abc.abstractmethod
    def render_text(self, color: bool = False) -> str:
        """The current state as text; with ``color``, decorated with ANSI escape codes."""

    def oracle(self) -> list[str] | None:
        """A reference solution from the current state: the action texts an agent would send, one per turn.

        ``None`` where the environment has no oracle or cannot compute a solution from this state
        (a deadlocked Sokoban box, an unreachable goal); ``[]`` once the episode is over. With
        stochastic dynamics only the first element is reliable: an agent following the oracle
        should ask again every turn.
        """
        return None

    def valid_actions(self) -> list[str] | None:
        """Action texts that are well-formed now (each a full turn), or ``None`` if the set is open-ended."""
        return None

    # ----------------------------------------------------------------------------------------------
    # The Gymnasium API, implemented once for every environment
    # ----------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._turn = 0
        self._episode_over = False
        observation, extra_info = self._reset(dict(options or {}))
        self._messages = [{"role": "system", "content": self.instructions}, {"role": "user", "content": observation}]
        self._observation_start = 1
        info = self._make_info(success=False, action_is_valid=True, metrics={}, extra_info=extra_info)
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"{type(self).__name__}.step expects the model's text (str), got {type(action).__name__}")
        if self._episode_over:
            raise RuntimeError(
                f"{type(self).__name__}.step called before reset() or after the episode ended; call reset() first"
            )
        outcome = self._step(action)
        self._turn += 1
        reward = float(outcome.reward)
        if not outcome.action_is_valid:
            reward -= self.format_penalty
        # Rewards are sums of decimal constants (-0.1 per move, ...): rounding makes -0.2 - 0.1 equal
        # -0.3 exactly, so returns compare and aggregate without float noise.
        reward = round(reward, REWARD_DECIMALS)
        terminated = bool(outcome.terminated)
        out_of_turns = self.max_turns is not None and self._turn >= self.max_turns
        truncated = not terminated and (bool(outcome.truncated) or out_of_turns)
        self._episode_over = terminated or truncated
        self._messages.append({"role": "assistant", "content": action})
        self._observation_start = len(self._messages)
        if outcome.observation_messages is None:
            self._messages.append({"role": "user", "content": outcome.observation})
        else:
            self._messages.extend(_check_messages(outcome.observation_messages, type(self).__name__))
        info = self._make_info(
            success=outcome.success,
            action_is_valid=outcome.action_is_valid,
            metrics=outcome.metrics,
            extra_info=outcome.extra_info,
        )
        return outcome.observation, reward, terminated, truncated, info

    def render(self) -> str | None:
        """The state as ANSI text (``render_mode="ansi"``) or ``None``; raises before the first ``reset``."""
        if self.render_mode is None:
            return None
        if not self._messages:
            raise RuntimeError(f"{type(self).__name__}: call reset() before render()")
        return self.render_text(color=True)

    # ----------------------------------------------------------------------------------------------
    # Helpers for agents
    # ----------------------------------------------------------------------------------------------
    @property
    def turn(self) -> int:
        """Number of ``step`` calls since the last ``reset``."""
        return self._turn

    @property
    def episode_over(self) -> bool:
        """True before the first ``reset`` and once the episode terminated or was truncated."""
        return self._episode_over

    def messages(self) -> list[Message]:
        """The conversation so far (a copy): system = instructions, user = observations, assistant = actions.

        Observations given as ``StepOutcome.observation_messages`` appear as those messages.
        """
        return [dict(m) for m in self._messages]

    def observation_messages(self) -> list[Message]:
        """The latest observation as chat messages (a copy): what an agent appends after its own turn."""
        return [dict(m) for m in self._messages[self._observation_start :]]

    def _make_info(
        self,
        *,
        success: bool,
        action_is_valid: bool,
        metrics: Mapping[str, float],
        extra_info: Mapping[str, Any],
    ) -> dict[str, Any]:
        clash = _STANDARD_INFO_KEYS.intersection(extra_info)
        if clash:
            raise ValueError(f"{type(self).__name__} put standard info keys {sorted(clash)} into extra_info")
        # Fresh containers: Gymnasium requires that no two infos share a mutable object.
        info: dict[str, Any] = _copy_info(extra_info)
        info.update(
            success=bool(success),
            action_is_valid=bool(action_is_valid),
            metrics={str(k): float(v) for k, v in metrics.items()},
            turn=self._turn,
        )
        return info
