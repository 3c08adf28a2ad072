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
import dataclasses
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agents.engines.base import Engine, Generation, SamplingParams
from agents.record import episode_return
from agents.trajectory import Trajectory
from envs.core import Message, TextEnv

__all__ = ["EpisodeLimits", "EpisodeSpec", "Renderer", "run_episode"]

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
    """

    env_id: str
    seed: int
    group_id: str = ""
    sample_index: int = 0
    env_options: Mapping[str, Any] = field(default_factory=dict)

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


@dataclass
class _Clock:
    started: float = field(default_factory=time.perf_counter)
    generate_s: float = 0.0
    env_s: float = 0.0

    def timings(self) -> dict[str, float]:
        return {"generate_s": self.generate_s, "env_s": self.env_s, "total_s": time.perf_counter() - self.started}


async def run_episode(
    env: TextEnv,
    engine: Engine,
    renderer: Renderer,
    spec: EpisodeSpec,
    *,
    sampling: SamplingParams | None = None,
    limits: EpisodeLimits | None = None,
    policy_version: int | None = None,
) -> Trajectory:
    """Play one episode of ``env`` (reset here with ``spec.seed``) and return its trajectory.

    ``policy_version`` defaults to the engine's (``engine.stats().policy_version``) when the episode
    starts. See the module docstring for the turn structure, the limits and failure handling.
    """
    sampling = sampling or SamplingParams()
    limits = limits or EpisodeLimits()
    if policy_version is None:
        policy_version = engine.stats().policy_version
    trajectory = Trajectory(
        env_id=spec.env_id,
        seed=spec.seed,
        group_id=spec.group_id,
        policy_version=policy_version,
        env_options=dict(spec.env_options),
    )
    clock = _Clock()
    try:
        await _play(env, engine, renderer, spec, sampling, limits, trajectory, clock)
    except Exception as exc:  # every failure becomes a well-formed, untrainable trajectory
        trajectory.termination = "error"
        trajectory.error = f"{type(exc).__name__}: {exc}"
        trajectory.metrics["error_traceback_lines"] = float(len(traceback.format_exception(exc)))
    trajectory.timings = clock.timings()
    trajectory.metrics.update(
        num_turns=float(trajectory.num_turns),
        num_invalid_actions=float(trajectory.num_invalid_actions),
        num_sampled_tokens=float(trajectory.num_sampled_tokens),
        num_tokens=float(trajectory.num_tokens),
    )
    return trajectory


async def _play(
    env: TextEnv,
    engine: Engine,
    renderer: Renderer,
    spec: EpisodeSpec,
    sampling: SamplingParams,
    limits: EpisodeLimits,
    trajectory: Trajectory,
    clock: _Clock,
) -> None:
    started = time.perf_counter()
    await _call_env(env.reset, limits.step_timeout_s, seed=spec.seed)
    clock.env_s += time.perf_counter() - started
    trajectory.messages = env.messages()
    trajectory.prompt_ids = list(renderer.prompt_ids(trajectory.messages))
    stop_ids = tuple(dict.fromkeys((*renderer.stop_token_ids, *sampling.stop_token_ids)))
    rewards: list[float] = []
    while True:
        budget = limits.max_total_tokens - trajectory.num_tokens
        if budget < 1:
            trajectory.termination = "max_tokens"
            break
        turn_sampling = dataclasses.replace(
            sampling, max_new_tokens=min(limits.max_new_tokens, budget), stop_token_ids=stop_ids
        )
        started = time.perf_counter()
        generation = await engine.generate(
            trajectory.prompt_ids + trajectory.response_ids, turn_sampling, affinity_key=spec.affinity_key
        )
        clock.generate_s += time.perf_counter() - started
        _append_generation(trajectory, generation)
        action = renderer.decode_action(generation.output_ids)

        started = time.perf_counter()
        _, reward, terminated, truncated, info = await _call_env(env.step, limits.step_timeout_s, action)
        clock.env_s += time.perf_counter() - started
        rewards.append(float(reward))
        _record_step(trajectory, rewards, info, len(generation.output_ids) > 0)
        # The conversation up to and including this turn's action; the observation follows it.
        history = env.messages()[: len(trajectory.messages) + 1]
        trajectory.messages = env.messages()
        if terminated or truncated:
            trajectory.termination = "terminated" if terminated else "truncated"
            break
        if limits.max_turns is not None and trajectory.num_turns >= limits.max_turns:
            trajectory.termination = "truncated"
            break
        new_messages = env.observation_messages()
        continuation = renderer.continuation_ids(
            history, new_messages, generation.output_ids, generation.finish_reason
        )
        # The observation must fit with room for at least one sampled token; otherwise the episode
        # ends here (the observation is dropped, the rewards so far stand).
        if trajectory.num_tokens + len(continuation) + 1 > limits.max_total_tokens:
            trajectory.termination = "max_tokens"
            trajectory.messages = history
            break
        trajectory.response_ids.extend(continuation)
        trajectory.response_mask.extend([0] * len(continuation))
        trajectory.rollout_logprobs.extend([0.0] * len(continuation))


def _append_generation(trajectory: Trajectory, generation: Generation) -> None:
    if generation.finish_reason == "abort":
        raise RuntimeError("the engine aborted the request (shut down or weights changed mid-request)")
    trajectory.response_ids.extend(int(i) for i in generation.output_ids)
    trajectory.response_mask.extend([1] * len(generation.output_ids))
    trajectory.rollout_logprobs.extend(float(lp) for lp in generation.logprobs)
    trajectory.finish_reasons.append(generation.finish_reason)


def _record_step(trajectory: Trajectory, rewards: list[float], info: Mapping[str, Any], sampled: bool) -> None:
    trajectory.num_turns += 1
    if not info.get("action_is_valid", True):
        trajectory.num_invalid_actions += 1
    if sampled:
        trajectory.turn_rewards.append(rewards[-1])
        trajectory.turn_end_indices.append(len(trajectory.response_ids) - 1)
    trajectory.episode_return = episode_return(rewards)
    trajectory.success = bool(info.get("success", False))
    trajectory.metrics.update({f"env/{k}": float(v) for k, v in info.get("metrics", {}).items()})
