"""verifiers 0.4 (``verifiers.v1``) tasksets and environments as turngym environments.

Which verifiers. verifiers 0.4.0 replaced the classic API (``MultiTurnEnv``, ``Rubric``, parsers,
``load_environment``) with ``verifiers.v1`` and ships nothing else: its wheel has no classic classes
and no ``verifiers.legacy`` module, and 0.3.1 (the last classic release) cannot be installed beside
it. This adapter is pinned to 0.4.0 (``pip install "turngym[verifiers]"``); classic environments
need verifiers 0.3.1 and are not supported.

What it does. ``VerifiersEnv(taskset="my_taskset", taskset_args={...})`` loads a v1 taskset the way
``vf eval`` does: a module (or installed package) whose ``__all__`` exports one ``vf.Taskset``
subclass, configured by its ``TasksetConfig`` subclass from ``taskset_args``, and optionally one
``vf.Env`` subclass (the multi-turn control flow; else ``vf.SingleAgentEnv``). Each ``reset`` takes
one task (seeded by ``self.np_random``, or ``task_index``) and runs ``Env.run(task, agents)`` with
the turngym agent playing the env's seat (:mod:`envs.adapters.verifiers_driver`).

* Observations: the task's prompt (its system prompt is :attr:`instructions`; a task whose system
  prompt differs gets it prepended), then each user message the env sends with ``turn(message)``.
* Actions: the reply text, cut at ``max_action_chars``. v1 has no parser, so the format check is
  turngym's: with ``answer_tag`` (``"answer"``) a reply without a non-empty ``<answer>...</answer>``
  is invalid (``format_penalty``); the env still sees it. ``answer_tag=None`` accepts any text.
* Reward: at the end, the seat's ``Trace`` reward, i.e. the task's ``@vf.reward`` functions
  (weighted) plus what the env records itself; ``info["metrics"]`` holds each reward's score and
  the ``@vf.metric`` values; ``success``: reward >= ``success_threshold``.
* Oracle: the task's ``answer`` field, where its data has one, in the answer tag.
* Episode end: ``Env.run`` returning (after an ``agent_completed`` or ``user_closed`` exchange, or a
  task ``@vf.stop``) is ``terminated``, with ``info["stop_condition"]``; turngym's ``max_turns``
  truncates.

Supported from v1: tasksets (finite or infinite, by module), their ``Task`` data, system prompts,
``@vf.reward`` / ``@vf.metric`` scoring (async, as v1 requires), trace-level ``@vf.stop`` hooks, and
single-seat envs, multi-turn ones included (``agent.run`` and ``agent.interaction`` /
``turn``). Not supported: tool use (MCP toolsets), harness programs and runtimes (subprocess,
docker, sandboxes), request/response interceptors and stops, judges that call a model, multi-agent
envs (user-sim, judges as agents); a taskset that declares toolsets is refused when loaded.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Mapping
from typing import Any

from envs.adapters.verifiers_driver import EpisodeDriver, Turn, import_verifiers, message_text
from envs.core import Message, StepOutcome, TextEnv

__all__ = ["DEFAULT_INSTRUCTIONS", "VerifiersEnv", "load_taskset_env"]

DEFAULT_INSTRUCTIONS = "Solve the task given in the user message."


def load_taskset_env(
    taskset: str,
    taskset_args: Mapping[str, Any] | None = None,
    env: str = "",
    env_args: Mapping[str, Any] | None = None,
) -> Any:
    """A v1 ``Env`` over the taskset module ``taskset`` (config fields ``taskset_args``), configured by ``env_args``.

    ``env`` pairs another v1 env id with the taskset (``""``: the taskset module's own env, else single-agent).

    Dotted module paths work as well as verifiers' plain ids (``textarena``, installed packages). The
    env's constructor is not called: it loads the harness programs that the turngym agent replaces;
    ``run`` gets its ``config`` and ``taskset`` as usual.
    """
    vf = import_verifiers()
    from verifiers.v1.utils.generic import concrete_type
    from verifiers.v1.utils.loaders import environment_class, taskset_class

    module = importlib.import_module(taskset) if "." in taskset else None
    taskset_cls = _exported(module, vf.Taskset) if module is not None else taskset_class(taskset)
    taskset_config_cls = concrete_type(taskset_cls, vf.TasksetConfig) or vf.TasksetConfig
    taskset_config = taskset_config_cls(id=taskset, **dict(taskset_args or {}))
    if taskset_cls.toolsets(taskset_config) or taskset_cls.task_type().toolsets(taskset_config.task):
        raise NotImplementedError(f"the taskset {taskset!r} uses tools (MCP toolsets), which turngym does not serve")
    if env or module is None:
        env_cls = environment_class(taskset, env)
    else:
        env_cls = _exported(module, vf.Env, required=False) or vf.SingleAgentEnv
    env_config_cls = concrete_type(env_cls, vf.EnvConfig, origin=vf.Env) or vf.EnvConfig
    built = object.__new__(env_cls)
    # Validated without the taskset (its validator resolves plain ids only), then given the loaded one.
    built.config = env_config_cls(id=env, **dict(env_args or {})).model_copy(update={"taskset": taskset_config})
    built.taskset = taskset_cls(taskset_config)
    return built


def _exported(module: Any, base: type, *, required: bool = True) -> Any:
    """The one ``base`` subclass a v1 plugin module exports in ``__all__`` (verifiers' convention)."""
    names = getattr(module, "__all__", None) or []
    found = [obj for n in names if isinstance(obj := getattr(module, n, None), type) and issubclass(obj, base)]
    found = [obj for obj in found if obj is not base]
    if len(found) > 1 or (required and not found):
        raise TypeError(f"{module.__name__} must export one {base.__name__} subclass in __all__, found {found}")
    return found[0] if found else None


class VerifiersEnv(TextEnv):
    """A verifiers v1 taskset played turn by turn; its rewards give the final reward.

    Args:
        taskset: a module or installed package exporting one ``vf.Taskset`` subclass in ``__all__``.
        taskset_args: fields of the taskset's config (its ``TasksetConfig`` subclass).
        env: a v1 env id to pair with the taskset (``""``: the taskset's own env, else single-agent).
        env_args: fields of the env's config (its ``EnvConfig`` subclass), e.g. ``{"max_tries": 5}``.
        task_index: always play this task (``None``: one drawn with the reset's seed among
            ``num_tasks``). ``reset(options={"task_index": i})`` overrides it for one episode.
        num_tasks: tasks read from the taskset (the first ones; infinite tasksets need it).
        success_threshold: ``success`` is reward >= this.
        answer_tag: a reply without a non-empty ``<tag>...</tag>`` is invalid (``None``: no check).
        max_turns: turngym's turn limit (truncation).
        format_penalty: subtracted from the reward of an invalid reply.
        max_action_chars: reply text beyond this is cut before the env sees it.
        render_mode: ``"ansi"`` or ``None``.
    """

    def __init__(
        self,
        *,
        taskset: str = "envs.adapters.verifiers_example",
        taskset_args: Mapping[str, Any] | None = None,
        env: str = "",
        env_args: Mapping[str, Any] | None = None,
        task_index: int | None = None,
        num_tasks: int = 1000,
        success_threshold: float = 1.0,
        answer_tag: str | None = "answer",
        max_turns: int | None = None,
        format_penalty: float = 0.1,
        max_action_chars: int = 16384,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if max_action_chars < 1 or num_tasks < 1:
            raise ValueError(f"max_action_chars and num_tasks must be positive, got {max_action_chars}, {num_tasks}")
        self.vf_env = load_taskset_env(taskset, taskset_args, env, env_args)
        self.tasks = list(self.vf_env.taskset.take(num_tasks))
        if not self.tasks:
            raise ValueError(f"the verifiers taskset {taskset!r} has no tasks")
        self.task_index = self._check_index(task_index)
        self.success_threshold = float(success_threshold)
        self.answer_tag = answer_tag
        self.max_action_chars = int(max_action_chars)
        self.instructions = self.tasks[0].data.system_prompt or DEFAULT_INSTRUCTIONS
        self.action_format = f"<{answer_tag}>...</{answer_tag}>" if answer_tag else "free text"
        self._episode = _EpisodeSlot()
        # An env dropped mid-episode, or still open at interpreter exit, ends its episode as close() does: the
        # finalizer holds the slot, never the env, and weakref.finalize also runs at exit, before module
        # globals are cleared (a pending episode then would print "Task was destroyed but it is pending!").
        weakref.finalize(self, self._episode.close_when_dropped)
        self._task: Any = None
        self._transcript: list[str] = []

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        index = options.get("task_index", self.task_index)
        index = self._check_index(int(self.np_random.integers(len(self.tasks))) if index is None else index)
        self._task = self.tasks[index]
        self.close()
        self._episode.driver = EpisodeDriver(self.vf_env, self._task)
        turn = self._episode.driver.start()
        if turn.finished:
            raise RuntimeError(f"the verifiers episode of task {index} ended before asking for any reply")
        parts = [
            message_text(m)
            for m in turn.new_messages
            if not (getattr(m, "role", "") == "system" and message_text(m) == self.instructions)
        ]
        observation = "\n\n".join(parts)
        self._transcript = [observation]
        return observation, {"task_index": index, "task_name": self._task.data.name or ""}

    def _step(self, action: str) -> StepOutcome:
        assert self._driver is not None
        text = action[: self.max_action_chars]
        extra: dict[str, Any] = {"action_truncated": len(action) > len(text)}
        self._transcript.append(f"> {text}")
        turn = self._driver.respond(text)
        valid = self._readable(text)
        if not turn.finished:
            return self._continue(turn, valid, extra)
        return self._finish(valid, extra)

    def render_text(self, color: bool = False) -> str:
        name = self._task.data.name if self._task is not None else None
        header = f"verifiers {type(self.vf_env).__name__}, task {name or '?'}, turn {self.turn}"
        if color:
            header = f"\x1b[1m{header}\x1b[0m"
        return "\n".join([header, *self._transcript[-6:]])

    def oracle(self) -> list[str] | None:
        """The task's ``answer`` field (a common v1 convention for scoring-side data), in the answer tag."""
        if self.episode_over:
            return [] if self._driver is not None else None
        answer = getattr(self._task.data, "answer", None) if self._task is not None else None
        if answer is None or str(answer) == "":
            return None
        return [f"<{self.answer_tag}>{answer}</{self.answer_tag}>" if self.answer_tag else str(answer)]

    def close(self) -> None:
        self._episode.close()

    @property
    def _driver(self) -> EpisodeDriver | None:
        return self._episode.driver

    # ----------------------------------------------------------------------------------------------
    # Helpers
    # ----------------------------------------------------------------------------------------------
    def _readable(self, text: str) -> bool:
        if self.answer_tag is None:
            return bool(text.strip())
        opening, closing = f"<{self.answer_tag}>", f"</{self.answer_tag}>"
        start, end = text.find(opening), text.rfind(closing)
        return start >= 0 and start + len(opening) <= end and bool(text[start + len(opening) : end].strip())

    def _continue(self, turn: Turn, valid: bool, extra: dict[str, Any]) -> StepOutcome:
        messages: list[Message] = [{"role": str(m.role), "content": message_text(m)} for m in turn.new_messages]
        observation = "\n\n".join(m["content"] for m in messages)
        self._transcript.append(observation)
        return StepOutcome(
            observation, action_is_valid=valid, extra_info=extra, observation_messages=tuple(messages) or None
        )

    def _finish(self, valid: bool, extra: dict[str, Any]) -> StepOutcome:
        assert self._driver is not None
        (trace,) = self._driver.traces
        reward = float(trace.reward)
        scores = {name: r.score for name, r in trace.rewards.items() if r is not None}
        metrics = {**scores, **{k: float(v) for k, v in trace.metrics.items() if v is not None}}
        observation = f"[episode over: {trace.stop_condition}]"
        self._transcript.append(observation)
        extra.update(stop_condition=str(trace.stop_condition), reward_breakdown=scores)
        return StepOutcome(
            observation,
            reward=reward,
            terminated=True,
            success=reward >= self.success_threshold,
            action_is_valid=valid,
            metrics=metrics,
            extra_info=extra,
        )

    def _check_index(self, index: int | None) -> int | None:
        if index is not None and not 0 <= int(index) < len(self.tasks):
            raise ValueError(f"task_index must be in [0, {len(self.tasks)}), got {index}")
        return None if index is None else int(index)


class _EpisodeSlot:
    """An env's current episode, apart from the env, so that the env's finalizer can end it."""

    def __init__(self) -> None:
        self.driver: EpisodeDriver | None = None

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None

    def close_when_dropped(self) -> None:
        if self.driver is not None:
            self.driver.close_when_dropped()
            self.driver = None
