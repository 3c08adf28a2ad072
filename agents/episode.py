"""The episode loop: one environment, one LLM policy, one :class:`~agents.trajectory.Trajectory`.

:func:`run_episode` is the only place where a model plays an environment; training rollouts,
evaluation and ``python -m agents.play agent=llm`` all go through it. Each turn:

1. the engine samples a response to ``prompt_ids + response_ids`` (the whole conversation so far, as
   tokens; an engine with prefix caching prefills only what is new since the last turn);
2. the sampled ids are appended exactly as returned (mask 1, with their logprobs), and decoded into
   the action text the environment receives;
3. the environment steps (in a worker thread, so a slow environment never blocks other episodes
   sharing the event loop, and a hung one is abandoned after ``step_timeout_s``);
4. unless the episode ended, the chat template's continuation (end-of-turn glue, the observation
   messages, the next generation prompt) is appended with mask 0.

Limits (:class:`EpisodeLimits`): ``max_turns`` (environment steps), ``max_new_tokens`` per turn, and
``max_total_tokens``, the context budget for prompt plus response. A turn's ``max_new_tokens`` is
lowered to what is left of the budget. When the next observation's tokens (plus room for at least
one sampled token) do not fit, the episode ends with ``termination == "max_tokens"``: the
observation is not appended, the last step's reward stands, and the trajectory is trainable (a
learner treats it like a truncation). A prompt that does not fit at all ends the episode the same
way with nothing sampled.

Failures never raise out of :func:`run_episode`: an exception from the environment or the engine, or
a step that exceeds its timeout, ends the episode with ``termination == "error"`` and the message in
``Trajectory.error``; what was collected so far is kept for the logs (a learner skips it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agents.engines.base import Engine, ForgetsPrefixes, Generation, SamplingParams
from agents.record import episode_return
from agents.trajectory import Trajectory
from envs.core import Message, TextEnv

__all__ = ["EpisodeLimits", "EpisodeSpec", "Observer", "Renderer", "StepEvent", "run_chat_episode", "run_episode"]

T = TypeVar("T")


class Renderer(Protocol):
    """What the loop needs from :class:`agents.chat.ChatRenderer` (see there for the guarantees)."""

    stop_token_ids: tuple[int, ...]

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]: ...

    def continuation_ids(
        self,
        history: Sequence[Message],
        new_messages: Sequence[Message],
        sampled_ids: Sequence[int],
        finish_reason: str,
    ) -> list[int]: ...

    def decode_action(self, sampled_ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play: picklable, so a rollout manager can send it to an environment actor.

    ``group_id`` is shared by the episodes that start from the same seed (GRPO's group);
    ``sample_index`` tells them apart and, with the group, makes the engine's affinity key.
    ``env_options`` build the environment (``envs.make(env_id, **env_options)``); ``reset_options`` go to
    ``env.reset(seed=seed, options=reset_options)`` (a curriculum's ``{"difficulty": d}``, say).
    """

    env_id: str
    seed: int
    group_id: str = ""
    sample_index: int = 0
    env_options: Mapping[str, Any] = field(default_factory=dict)
    reset_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def affinity_key(self) -> str:
        return f"{self.env_id}/{self.group_id or self.seed}/{self.sample_index}"


@dataclass(frozen=True)
class EpisodeLimits:
    """Per-episode limits. ``max_turns=None`` leaves the environment's own turn limit alone."""

    max_turns: int | None = None
    max_new_tokens: int = 256
    max_total_tokens: int = 4096
    step_timeout_s: float | None = 60.0

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1 or None, got {self.max_turns}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.max_total_tokens < 2:
            raise ValueError(f"max_total_tokens must be >= 2, got {self.max_total_tokens}")
        if self.step_timeout_s is not None and self.step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s must be > 0 or None, got {self.step_timeout_s}")


class StepTimeoutError(TimeoutError):
    """An environment call did not return within ``EpisodeLimits.step_timeout_s``."""


# Environment calls run here rather than in asyncio's default executor, which has only a handful of
# threads on a small machine: a few hung environments must not starve every other episode.
_ENV_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None


def _env_executor() -> concurrent.futures.ThreadPoolExecutor:
    global _ENV_EXECUTOR
    if _ENV_EXECUTOR is None:
        _ENV_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="turngym-env")
    return _ENV_EXECUTOR


async def _call_env(fn: Callable[..., T], timeout_s: float | None, *args: Any, **kwargs: Any) -> T:
    future = asyncio.get_running_loop().run_in_executor(_env_executor(), lambda: fn(*args, **kwargs))
    try:
        return await asyncio.wait_for(future, timeout_s)
    except asyncio.TimeoutError:
        name = getattr(fn, "__qualname__", repr(fn))
        raise StepTimeoutError(f"{name} did not return within {timeout_s} s") from None


@dataclass(frozen=True)
class StepEvent:
    """What an observer of :func:`run_episode` sees after the reset (``turn == 0``, ``action is None``) and
    after every environment step (e.g. ``agents.play`` showing a model play)."""

    env: TextEnv
    turn: int
    action: str | None
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any]
    generation: Generation | None


Observer = Callable[[StepEvent], None]


class _Episode:
    """The bookkeeping both loops share: env calls with timeouts, rewards, counters, timings, observers."""

    def __init__(self, env: TextEnv, trajectory: Trajectory, limits: EpisodeLimits, observer: Observer | None):
        self.env, self.trajectory, self.limits, self.observer = env, trajectory, limits, observer
        self.rewards: list[float] = []
        self.reports_state = False  # the env's infos carry state_key / distance_to_goal
        self.reports_moves = False  # and move_distances / move_spans after its steps
        self.state: tuple[str | None, int | None] = (None, None)  # the position the next turn starts from
        self.started = time.perf_counter()
        self.generate_s = 0.0
        self.env_s = 0.0

    async def reset(self, seed: int, options: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        observation, info = await _call_env(
            self.env.reset, self.limits.step_timeout_s, seed=seed, options=dict(options) or None
        )
        self.env_s += time.perf_counter() - started
        self.trajectory.messages = self.env.messages()
        self.reports_state = "state_key" in info or "distance_to_goal" in info
        self.state = _state_of(info)
        self.trajectory.initial_distance = self.state[1]
        if self.observer is not None:
            self.observer(StepEvent(self.env, 0, None, observation, 0.0, False, False, info, None))

    async def step(self, action: str, generation: Generation | None, char_ends: Sequence[int] | None = None) -> bool:
        """Step the env with ``action``; record the outcome; True when the episode is over.

        ``char_ends``: where each sampled token of ``generation`` ends in ``action`` (:func:`token_char_ends`),
        to place the env's per-move information on the tokens that wrote each move."""
        started = time.perf_counter()
        observation, reward, terminated, truncated, info = await _call_env(
            self.env.step, self.limits.step_timeout_s, action
        )
        self.env_s += time.perf_counter() - started
        t = self.trajectory
        self.rewards.append(float(reward))
        t.num_turns += 1
        t.num_invalid_actions += not info.get("action_is_valid", True)
        if generation is not None and generation.output_ids:
            t.turn_rewards.append(float(reward))
            t.turn_end_indices.append(len(t.response_ids) - 1)
            if self.reports_state:
                t.turn_state_keys.append(self.state[0])
                t.turn_distances_before.append(self.state[1])
                t.turn_distances_after.append(_state_of(info)[1])
                self.reports_moves = self.reports_moves or "move_distances" in info
                ends, distances = _move_tokens(info, char_ends, len(t.response_ids) - len(generation.output_ids))
                t.turn_move_end_indices.append(ends)
                t.turn_move_distances.append(distances)
        self.state = _state_of(info)
        t.episode_return = episode_return(self.rewards)
        t.success = bool(info.get("success", False))
        t.metrics.update({f"env/{k}": float(v) for k, v in info.get("metrics", {}).items()})
        t.messages = self.env.messages()
        if self.observer is not None:
            self.observer(
                StepEvent(self.env, t.num_turns, action, observation, reward, terminated, truncated, info, generation)
            )
        if terminated or truncated:
            t.termination = "terminated" if terminated else "truncated"
            return True
        if self.limits.max_turns is not None and t.num_turns >= self.limits.max_turns:
            t.termination = "truncated"
            return True
        return False

    async def generate(self, call: Awaitable[Generation]) -> Generation:
        started = time.perf_counter()
        generation = await call
        self.generate_s += time.perf_counter() - started
        if generation.finish_reason == "abort":
            raise RuntimeError("the engine aborted the request (shut down or weights changed mid-request)")
        self.trajectory.finish_reasons.append(generation.finish_reason)
        return generation

    def finish(self, error: BaseException | None) -> Trajectory:
        t = self.trajectory
        if not self.reports_moves:
            t.turn_move_end_indices.clear()
            t.turn_move_distances.clear()
        if error is not None:  # every failure becomes a well-formed, untrainable trajectory
            t.termination = "error"
            t.error = f"{type(error).__name__}: {error}"
        t.timings = {
            "generate_s": self.generate_s,
            "env_s": self.env_s,
            "total_s": time.perf_counter() - self.started,
        }
        t.metrics.update(
            num_turns=float(t.num_turns),
            num_invalid_actions=float(t.num_invalid_actions),
            num_sampled_tokens=float(t.num_sampled_tokens),
            num_tokens=float(t.num_tokens),
        )
        return t


def _state_of(info: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """``(state_key, distance_to_goal)`` of an env's info; ``None`` for a key it does not report."""
    key, distance = info.get("state_key"), info.get("distance_to_goal")
    return (None if key is None else str(key)), (None if distance is None else int(distance))


def token_char_ends(renderer: Renderer, sampled_ids: Sequence[int], action: str) -> list[int] | None:
    """Where each sampled token ends in ``action`` (its text, ``renderer.decode_action(sampled_ids)``): the length
    of the text the first ``i + 1`` tokens decode to; ``None`` where a prefix does not decode to a prefix of the
    whole (a character split across tokens), so no position can be trusted."""
    ends = []
    for i in range(len(sampled_ids)):
        text = renderer.decode_action(sampled_ids[: i + 1])
        if not action.startswith(text):
            return None
        ends.append(len(text))
    return ends


def _move_tokens(
    info: Mapping[str, Any], char_ends: Sequence[int] | None, first_index: int
) -> tuple[list[int], list[int | None]]:
    """The response index of the last token of each move the env reports (``info["move_spans"]``), and the
    distance after each move; two empty lists when the env reports none, or they cannot be placed (no
    ``char_ends``, a span past the text, two moves ending in one token)."""
    spans, distances = info.get("move_spans"), info.get("move_distances")
    if char_ends is None or not isinstance(spans, list) or not isinstance(distances, list):
        return [], []
    if len(spans) != len(distances):
        return [], []
    ends = []
    for _, end in spans:
        token = next((i for i, char_end in enumerate(char_ends) if char_end >= end), None)
        if token is None or (ends and token <= ends[-1] - first_index):
            return [], []
        ends.append(first_index + token)
    return ends, [None if d is None else int(d) for d in distances]


def _new_trajectory(spec: EpisodeSpec, policy_version: int) -> Trajectory:
    return Trajectory(
        env_id=spec.env_id,
        seed=spec.seed,
        group_id=spec.group_id,
        policy_version=policy_version,
        env_options=dict(spec.env_options),
        reset_options=dict(spec.reset_options),
    )


async def run_episode(
    env: TextEnv,
    engine: Engine,
    renderer: Renderer,
    spec: EpisodeSpec,
    *,
    sampling: SamplingParams | None = None,
    limits: EpisodeLimits | None = None,
    policy_version: int | None = None,
    observer: Observer | None = None,
) -> Trajectory:
    """Play one episode of ``env`` (reset here with ``spec.seed``) with a token-level engine.

    ``policy_version`` defaults to the engine's (``engine.stats_async()``'s ``policy_version``) when the episode
    starts. ``observer`` is called after every step (in the event loop; keep it quick). See the
    module docstring for the turn structure, the limits and failure handling.
    """
    sampling = sampling or SamplingParams()
    limits = limits or EpisodeLimits()
    if policy_version is None:
        policy_version = (await engine.stats_async()).policy_version
    episode = _Episode(env, _new_trajectory(spec, policy_version), limits, observer)
    error: Exception | None = None
    try:
        await _play_tokens(episode, engine, renderer, spec, sampling)
    except Exception as exc:
        error = exc
    trajectory = episode.finish(error)
    await _forget(engine, trajectory)
    return trajectory


async def _forget(engine: Engine, t: Trajectory) -> None:
    """Tell an engine that caches prefixes that this episode's are no use any more (no turn will extend them):
    ``ForgetsPrefixes``. Memory only; an engine that fails here has failed the next request anyway."""
    if isinstance(engine, ForgetsPrefixes) and t.prompt_ids:
        with contextlib.suppress(Exception):
            await engine.forget_prefix(t.prompt_ids + t.response_ids)


def renderer_for(renderer: Renderer, env: TextEnv) -> Renderer:
    """``renderer`` showing ``env``'s tools (``env.tools``, read after its reset) to the chat template, when it
    can (:meth:`agents.chat.ChatRenderer.with_tools`): training, evaluation and the warm-up then render the same
    prompt for the same level, whichever tools their renderer was built with."""
    with_tools = getattr(renderer, "with_tools", None)
    return renderer if with_tools is None else with_tools(getattr(env, "tools", None))


def turn_seed(base_seed: int | None, spec: EpisodeSpec, turn: int) -> int | None:
    """The sampling seed of one turn: a function of ``base_seed``, the episode and the turn, or ``None``.

    With ``SamplingParams.seed`` set, every turn of every episode draws from its own stream, so an
    episode's tokens do not depend on which other requests the engine batched it with (nor on the
    group id the rollout manager made up); the same seed replays the same episodes.
    """
    if base_seed is None:
        return None
    key = f"{base_seed}|{spec.env_id}|{spec.seed}|{spec.sample_index}|{turn}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


async def _play_tokens(
    episode: _Episode, engine: Engine, renderer: Renderer, spec: EpisodeSpec, sampling: SamplingParams
) -> None:
    t, limits = episode.trajectory, episode.limits
    await episode.reset(spec.seed, spec.reset_options)
    renderer = renderer_for(renderer, episode.env)
    t.prompt_ids = list(renderer.prompt_ids(t.messages))
    stop_ids = tuple(dict.fromkeys((*renderer.stop_token_ids, *sampling.stop_token_ids)))
    values_kept = True
    while True:
        budget = limits.max_total_tokens - t.num_tokens
        if budget < 1:
            t.termination = "max_tokens"
            return
        turn_sampling = dataclasses.replace(
            sampling,
            max_new_tokens=min(limits.max_new_tokens, budget),
            stop_token_ids=stop_ids,
            seed=turn_seed(sampling.seed, spec, len(t.turn_rewards)),
        )
        generation = await episode.generate(
            engine.generate(t.prompt_ids + t.response_ids, turn_sampling, affinity_key=spec.affinity_key)
        )
        t.response_ids.extend(int(i) for i in generation.output_ids)
        t.response_mask.extend([1] * len(generation.output_ids))
        t.rollout_logprobs.extend(float(lp) for lp in generation.logprobs)
        # the engine's values while every turn so far had them; a turn without them leaves the trajectory without
        values_kept = values_kept and generation.values is not None
        if values_kept:
            t.rollout_values.extend(float(v) for v in generation.values)
        else:
            t.rollout_values.clear()
        # The conversation up to and including this turn's action; the observation follows it.
        history = [*t.messages, {"role": "assistant", "content": renderer.decode_action(generation.output_ids)}]
        action = history[-1]["content"]
        char_ends = token_char_ends(renderer, generation.output_ids, action) if episode.reports_state else None
        if await episode.step(action, generation, char_ends):
            return
        continuation = renderer.continuation_ids(
            history, episode.env.observation_messages(), generation.output_ids, generation.finish_reason
        )
        # The observation must fit with room for at least one sampled token; otherwise the episode
        # ends here (the observation is dropped, the rewards so far stand).
        if t.num_tokens + len(continuation) + 1 > limits.max_total_tokens:
            t.termination = "max_tokens"
            t.messages = history
            return
        t.response_ids.extend(continuation)
        t.response_mask.extend([0] * len(continuation))
        t.rollout_logprobs.extend([0.0] * len(continuation))
        if values_kept:
            t.rollout_values.extend([0.0] * len(continuation))


ChatFn = Callable[[list[Message], SamplingParams], Awaitable[Generation]]


async def run_chat_episode(
    env: TextEnv,
    chat: ChatFn,
    spec: EpisodeSpec,
    *,
    sampling: SamplingParams | None = None,
    limits: EpisodeLimits | None = None,
    policy_version: int = 0,
    observer: Observer | None = None,
) -> Trajectory:
    """Play one episode with a text-level policy: ``chat(messages, sampling)`` returns a Generation with ``text``.

    For API-served models (``agents.engines.openai``) and scripted agents. The trajectory has
    messages, rewards and counters but no token ids (``trainable`` is False): evaluation only.
    ``limits.max_total_tokens`` does not apply (there are no tokens to count).
    """
    sampling = sampling or SamplingParams()
    limits = limits or EpisodeLimits()
    episode = _Episode(env, _new_trajectory(spec, policy_version), limits, observer)
    try:
        await episode.reset(spec.seed, spec.reset_options)
        while True:
            generation = await episode.generate(chat(episode.trajectory.messages, sampling))
            if generation.text is None:
                raise TypeError("a chat policy must return a Generation with text")
            if await episode.step(generation.text, None):
                break
    except Exception as exc:
        return episode.finish(exc)
    return episode.finish(None)
