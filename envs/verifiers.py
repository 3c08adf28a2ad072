"""verifiers environments (``load_environment`` convention, classic API) as turngym environments.

Which verifiers. verifiers 0.4 replaced the classic ``Environment`` / ``MultiTurnEnv`` /
``SingleTurnEnv`` API (dataset rows, ``env_response``, stop conditions, a ``Rubric`` of reward
functions) with ``verifiers.v1`` (tasksets, harnesses, agents); 0.4.0 ships ``verifiers.v1`` only.
Most published environments, and the ``load_environment`` convention, use the classic API, so this
adapter supports that one, pinned to verifiers 0.3.1, installed with
``pip install --no-deps verifiers==0.3.1 && pip install "turngym[verifiers]"`` (without ``--no-deps``
its dependency openai-agents installs a top-level ``agents`` package that shadows turngym's), whose
top-level ``verifiers`` names (``vf.MultiTurnEnv``, ``vf.Rubric``, ...) are the classic API.
verifiers 0.4's ``v1`` environments are not supported. 0.3.1 also works with openai 3.x, which
0.4.0 does not (it requires openai < 3).

What it does. ``VerifiersEnv(environment="my_env", env_args={...})`` calls ``load_environment(**env_args)``
of the module or installed package ``environment`` (verifiers' ``vf.load_environment`` rules:
``my-env`` is the module ``my_env``; ``"package.module:function"`` names another factory), or
takes a factory callable or a built environment directly. Each ``reset`` picks one dataset row
(seeded by ``self.np_random``, or ``example_index``) and runs the environment's own rollout with the
turngym agent as the model (:mod:`envs.verifiers_driver`): stop conditions, ``env_response`` and
cleanup handlers run as verifiers runs them. At the end the rubric scores the rollout (async
reward functions awaited, group rubrics scored as a group of one).

* Observations: the first is the row's prompt without its system message (the system message is
  :attr:`instructions`; a row whose system message differs gets it prepended); later ones are the
  messages ``env_response`` returned, as text (``observation_messages`` keep their roles).
* Actions: the text goes to the environment as the assistant message, cut at ``max_action_chars``
  (third-party parsers use regular expressions that go quadratic on huge texts). A turn whose
  text the environment's parser cannot read (``parser.parse_answer`` gives nothing) is invalid:
  ``format_penalty`` is subtracted; the environment still sees the text. Tool calls are not parsed:
  tool-calling environments (``ToolEnv``) see plain text.
* Reward: the rubric's weighted reward at the final step (0 before, apart from format penalties);
  ``success``: reward >= ``success_threshold`` (``None``: the environment's ``pass_threshold``).
  ``info["metrics"]`` holds the rubric's individual scores at the end.
* Episode end: every verifiers stop condition (the environment's own ``max_turns`` included) ends
  the episode as ``terminated``; turngym's ``max_turns`` truncates. ``info["stop_condition"]`` says
  which; a rollout error ends it as terminated with ``info["error"]``.
* Oracle: the row's reference ``answer``, formatted by the parser where it can (``XMLParser``), for
  environments whose rows have one (right where answering correctly ends the episode).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from envs.core import Message, StepOutcome, TextEnv
from envs.verifiers_driver import RolloutDriver, Turn, import_verifiers, message_role, message_text

__all__ = ["DEFAULT_INSTRUCTIONS", "VerifiersEnv", "load_verifiers_environment"]

DEFAULT_INSTRUCTIONS = "Solve the task given in the user message."


def load_verifiers_environment(environment: Any, env_args: Mapping[str, Any] | None = None) -> Any:
    """A verifiers ``Environment`` from a module/package name, ``"module:function"``, a factory or an instance."""
    vf = import_verifiers()
    args = dict(env_args or {})
    if isinstance(environment, vf.Environment):
        if args:
            raise ValueError("env_args cannot be applied to an environment that is already built")
        return environment
    if isinstance(environment, str) and ":" in environment:
        module_name, _, attr = environment.partition(":")
        environment = getattr(importlib.import_module(module_name), attr)
    if isinstance(environment, str):
        built = vf.load_environment(environment, **args)
    elif callable(environment):
        built = environment(**args)
    else:
        raise TypeError(
            f"environment must be a name, 'module:function', a callable or a verifiers Environment, "
            f"got {type(environment).__name__}"
        )
    if not isinstance(built, vf.Environment):
        raise TypeError(f"load_environment returned {type(built).__name__}, not a verifiers Environment")
    return built


class VerifiersEnv(TextEnv):
    """A verifiers environment (classic API) played turn by turn; its rubric gives the final reward.

    Args:
        environment: a module or installed package exposing ``load_environment``, ``"module:function"``,
            a factory callable, or a built ``verifiers.Environment``.
        env_args: keyword arguments for ``load_environment``.
        split: ``"train"`` (the environment's dataset) or ``"eval"`` (its eval dataset).
        example_index: always play this row (``None``: a row drawn with the reset's seed).
            ``reset(options={"example_index": i})`` overrides it for one episode.
        success_threshold: ``success`` is reward >= this; ``None``: the environment's ``pass_threshold``.
        max_turns: turngym's turn limit (truncation); the environment's own limit ends it as terminated.
        format_penalty: subtracted from the reward of a turn the parser cannot read.
        max_action_chars: action text beyond this is cut before the environment sees it.
        render_mode: ``"ansi"`` or ``None``.
    """

    def __init__(
        self,
        *,
        environment: Any = "envs.verifiers_example",
        env_args: Mapping[str, Any] | None = None,
        split: str = "train",
        example_index: int | None = None,
        success_threshold: float | None = None,
        max_turns: int | None = None,
        format_penalty: float = 0.1,
        max_action_chars: int = 16384,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        if max_action_chars < 1:
            raise ValueError(f"max_action_chars must be positive, got {max_action_chars}")
        self.vf_env = load_verifiers_environment(environment, env_args)
        self.dataset = self.vf_env.get_dataset() if split == "train" else self.vf_env.get_eval_dataset()
        if len(self.dataset) == 0:
            raise ValueError(f"the verifiers environment {environment!r} has an empty {split} dataset")
        self.example_index = self._check_index(example_index)
        self.success_threshold = float(self.vf_env.pass_threshold if success_threshold is None else success_threshold)
        self.max_action_chars = int(max_action_chars)
        self.instructions = self.vf_env.system_prompt or DEFAULT_INSTRUCTIONS
        self.action_format = self._action_format()
        self._driver: RolloutDriver | None = None
        self._row: dict[str, Any] = {}
        self._seen = 0  # messages of the current prompt already shown or sent
        self._transcript: list[str] = []

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        index = options.get("example_index", self.example_index)
        if index is None:
            index = int(self.np_random.integers(len(self.dataset)))
        index = self._check_index(index)
        self._row = dict(self.dataset[index])
        self.close()
        self._driver = RolloutDriver(self.vf_env, self._row)
        turn = self._driver.start()
        if turn.finished:
            raise RuntimeError(f"the verifiers rollout of row {index} ended before asking for any response")
        prompt = turn.prompt or []
        self._seen = len(prompt)
        parts = []
        for message in prompt:
            if message_role(message) == "system" and message_text(message) == self.instructions:
                continue
            parts.append(message_text(message))
        observation = "\n\n".join(parts)
        self._transcript = [observation]
        return observation, {"example_index": index, "example_id": self._row.get("example_id", index)}

    def _step(self, action: str) -> StepOutcome:
        assert self._driver is not None
        text = action[: self.max_action_chars]
        answer = self.vf_env.parser.parse_answer([{"role": "assistant", "content": text}])
        valid = answer is not None and str(answer).strip() != ""
        extra: dict[str, Any] = {"action_truncated": len(action) > len(text)}
        self._transcript.append(f"> {text}")
        turn = self._driver.respond(text)
        if not turn.finished:
            return self._continue(turn, valid, extra)
        return self._finish(turn, valid, extra)

    def render_text(self, color: bool = False) -> str:
        header = (
            f"verifiers {type(self.vf_env).__name__}, example {self._row.get('example_id', '?')}, turn {self.turn}"
        )
        if color:
            header = f"\x1b[1m{header}\x1b[0m"
        return "\n".join([header, *self._transcript[-6:]])

    def oracle(self) -> list[str] | None:
        if self.episode_over:
            return [] if self._driver is not None else None
        answer = self._row.get("answer")
        if not answer:
            return None
        parser = self.vf_env.parser
        if hasattr(parser, "format") and hasattr(parser, "answer_field"):
            return [parser.format(**{parser.answer_field: answer})]
        return [str(answer)]

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    # ----------------------------------------------------------------------------------------------
    # Helpers
    # ----------------------------------------------------------------------------------------------
    def _continue(self, turn: Turn, valid: bool, extra: dict[str, Any]) -> StepOutcome:
        prompt = turn.prompt or []
        new = prompt[self._seen + 1 :]  # after the assistant message we just sent
        self._seen = len(prompt)
        messages: list[Message] = [{"role": message_role(m), "content": message_text(m)} for m in new]
        observation = "\n\n".join(m["content"] for m in messages)
        self._transcript.append(observation)
        return StepOutcome(
            observation, action_is_valid=valid, extra_info=extra, observation_messages=tuple(messages) or None
        )

    def _finish(self, turn: Turn, valid: bool, extra: dict[str, Any]) -> StepOutcome:
        state = turn.state
        reward = float(state.get("reward") or 0.0)
        final = state.get("final_env_response")
        final_text = "\n\n".join(message_text(m) for m in final) if final else ""
        stop = str(state.get("stop_condition") or "")
        observation = final_text or f"[episode over: {stop or 'completed'}]"
        self._transcript.append(observation)
        extra.update(
            stop_condition=stop, reward_breakdown={k: float(v) for k, v in (state.get("metrics") or {}).items()}
        )
        if state.get("error") is not None:
            extra["error"] = f"{type(state['error']).__name__}: {state['error']}"
        metrics = {k: float(v) for k, v in (state.get("metrics") or {}).items() if isinstance(v, (int, float))}
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
        if index is not None and not 0 <= int(index) < len(self.dataset):
            raise ValueError(f"example_index must be in [0, {len(self.dataset)}), got {index}")
        return None if index is None else int(index)

    def _action_format(self) -> str:
        get_format = getattr(self.vf_env.parser, "get_format_str", None)
        return get_format() if callable(get_format) else "free text"
