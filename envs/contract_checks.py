"""The individual conformance checks run by :func:`envs.checker.check_text_env` (documented there).

Each check takes a :class:`Context` and raises :class:`Failure` with a message that says what is wrong
and what to do, or :class:`Skip` when it does not apply; returning normally means it passed.
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env, data_equivalence

from envs.core import TextEnv

__all__ = ["CHECKS", "CONTRACT", "HOSTILE_ACTIONS", "Context", "Failure", "Skip", "short"]

#: Model text a parser must survive: empty, NULs, 10,000 emoji, 400 kB of unclosed tags, 2 MB, bidi controls.
HOSTILE_ACTIONS: tuple[str, ...] = (
    "",
    "\x00" * 100,
    "😀" * 10_000,
    "<answer>" * 50_000,
    "A" * 2_000_000,
    "\u202e||\u200d||</answer>",
)

#: An observation after a hostile action longer than this echoes too much of it back.
MAX_HOSTILE_OBSERVATION_CHARS = 20_000

CONTRACT = "see the contract in envs/core.py"
_INFO_TYPES = {"success": bool, "action_is_valid": bool, "metrics": dict, "turn": int}
_PROBE_STEPS = 3


class Failure(Exception):
    """A check found a contract violation; the message says what is wrong and what to do."""


class Skip(Exception):
    """A check does not apply to this environment; the message says why."""


@dataclass
class Context:
    env: TextEnv
    factory: Callable[[], gym.Env] | None
    seeds: tuple[int, ...]
    hostile_actions: tuple[str, ...]
    max_steps: int
    name: str


def short(value: Any, limit: int = 120) -> str:
    """``value`` as text (``repr`` unless it is a str) cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def _probe_action(env: TextEnv, turn: int) -> str:
    """A deterministic action: the valid actions in turn where listed, else a sample of the (seeded) action space."""
    valid = env.valid_actions()
    return valid[turn % len(valid)] if valid else env.action_space.sample()


def _finishing_action(env: TextEnv, turn: int) -> str:
    """The oracle's next action where there is one, else a probe action: the likeliest way to reach the end."""
    plan = env.oracle()
    return plan[0] if plan else _probe_action(env, turn)


def _check_info(info: Any, where: str, turn: int) -> None:
    _require(isinstance(info, dict), f"{where} returned info of type {type(info).__name__}: return a dict")
    missing = [key for key in _INFO_TYPES if key not in info]
    _require(
        not missing,
        f"{where} returned info without the standard key(s) {missing}: every reset and step info holds success, "
        f"action_is_valid, metrics and turn; let envs.TextEnv build the info from a StepOutcome ({CONTRACT})",
    )
    for key, expected in _INFO_TYPES.items():
        _require(
            type(info[key]) is expected,
            f"{where} returned info[{key!r}] = {short(info[key])} of type {type(info[key]).__name__}: "
            f"it must be a {expected.__name__}",
        )
    bad = {k: v for k, v in info["metrics"].items() if not isinstance(k, str) or type(v) is not float}
    _require(not bad, f"{where}: info['metrics'] must map str to float, got {short(bad)}; convert with float(...)")
    _require(
        info["turn"] == turn,
        f"{where} returned info['turn'] = {info['turn']}, expected {turn}: turn counts the steps since reset",
    )


def check_text_env_attributes(context: Context) -> None:
    env = context.env
    for attribute in ("instructions", "action_format"):
        value = getattr(env, attribute, None)
        _require(
            isinstance(value, str) and bool(value.strip()),
            f"{attribute} is {short(value)}: set it to a non-empty str (the system prompt, and a short example "
            f"of the action format)",
        )
    prompts = set()
    for seed in context.seeds:
        env.reset(seed=seed)
        prompts.add(env.instructions)
    _require(
        len(prompts) == 1,
        f"instructions differ between seeds {list(context.seeds)}: keep the system prompt constant for a "
        "configuration (inference engines cache it) and put what changes per episode in the first observation",
    )


def check_reset_info(context: Context) -> None:
    env = context.env
    for seed in context.seeds:
        result = env.reset(seed=seed)
        _require(
            isinstance(result, tuple) and len(result) == 2,
            f"reset(seed={seed}) returned {short(result)}: return (observation, info)",
        )
        observation, info = result
        _require(
            isinstance(observation, str) and observation in env.observation_space,
            f"reset(seed={seed}) returned an observation of type {type(observation).__name__} "
            f"({short(observation)}): observations are text (str) within observation_space",
        )
        _check_info(info, f"reset(seed={seed})", 0)


def check_step_info(context: Context) -> None:
    env = context.env
    seed = context.seeds[0]
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for turn in range(1, _PROBE_STEPS + 1):
        action = _probe_action(env, turn)
        observation, reward, terminated, truncated, info = env.step(action)
        where = f"step {turn} after reset(seed={seed})"
        _require(
            isinstance(observation, str) and observation in env.observation_space,
            f"{where} returned an observation of type {type(observation).__name__}: return text (str)",
        )
        _require(
            type(reward) is float and np.isfinite(reward),
            f"{where} returned reward {reward!r}: return a finite Python float",
        )
        _require(
            type(terminated) is bool and type(truncated) is bool,
            f"{where} returned terminated={terminated!r}, truncated={truncated!r}: both must be bool",
        )
        _check_info(info, where, turn)
        if terminated or truncated:
            break


def check_episode_end(context: Context) -> None:
    env = context.env
    env.reset(seed=context.seeds[0])
    try:
        env.step(42)  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise Failure("step(42) did not raise TypeError: a non-str action is a programming error; raise TypeError")
    env.reset(seed=context.seeds[0])
    env.action_space.seed(context.seeds[0])
    for turn in range(1, context.max_steps + 1):
        _, _, terminated, truncated, _ = env.step(_finishing_action(env, turn))
        _require(
            not (terminated and truncated),
            f"step {turn} returned terminated=True and truncated=True: when the task itself ends, report "
            "terminated only; truncated means a limit outside the task (max_turns) cut the episode short",
        )
        _require(
            env.episode_over == (terminated or truncated),
            f"after step {turn} episode_over is {env.episode_over} but terminated={terminated}, "
            f"truncated={truncated}: the episode is over exactly when one of them is True",
        )
        if terminated or truncated:
            break
    else:
        raise Skip(f"the episode did not end within {context.max_steps} steps, so a step after its end was not tried")
    try:
        env.step("")
    except Exception:
        return
    raise Failure(
        "step() after the episode ended returned normally: raise RuntimeError('... call reset() first'), "
        "as envs.TextEnv.step does, so that a runaway loop fails loudly"
    )


def check_hostile_actions(context: Context) -> None:
    env = context.env
    for action in context.hostile_actions:
        env.reset(seed=context.seeds[0])
        try:
            observation, reward, _, _, info = env.step(action)
        except Exception as exc:
            raise Failure(
                f"step({short(repr(action), 40)}) raised {type(exc).__name__}: {short(str(exc))}; parse model text "
                "leniently: an unreadable action is a normal step with an explanatory observation and "
                "StepOutcome(..., action_is_valid=False), never an exception"
            ) from exc
        where = f"step({short(repr(action), 40)})"
        _require(isinstance(observation, str), f"{where} returned a non-str observation: return text")
        _require(
            len(observation) <= MAX_HOSTILE_OBSERVATION_CHARS,
            f"{where} returned an observation of {len(observation)} characters: do not echo the action back "
            f"in full; quote at most a short prefix (observations must stay under {MAX_HOSTILE_OBSERVATION_CHARS})",
        )
        _require(
            info.get("action_is_valid") is False,
            f"{where} was marked action_is_valid={info.get('action_is_valid')!r}: text the environment cannot "
            "read must be flagged invalid (StepOutcome(action_is_valid=False)) so that it gets the format penalty; "
            "if your environment reads this text as a real action, pass your own hostile_actions",
        )
        _require(
            reward <= -env.format_penalty + 1e-9,
            f"{where} earned {reward}, more than -format_penalty = {-env.format_penalty}: an unreadable action "
            "must never be cheaper than a valid one; give it no reward of its own",
        )


def _play(env: TextEnv, seed: int, steps: int) -> list[Any]:
    observation, info = env.reset(seed=seed)
    record: list[Any] = [("reset", observation, info, env.instructions)]
    env.action_space.seed(seed)
    for turn in range(1, steps + 1):
        action = _probe_action(env, turn)
        result = env.step(action)
        record.append(("step", action, *result))
        if result[2] or result[3]:
            break
    return record


def _first_difference(first: list[Any], second: list[Any]) -> str | None:
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if not data_equivalence(a, b):
            where = "reset" if index == 0 else f"step {index}"
            return f"{where} gave {short(a, 200)} and then {short(b, 200)}"
    if len(first) != len(second):
        return f"the episodes lasted {len(first) - 1} and {len(second) - 1} steps"
    return None


def check_determinism(context: Context) -> None:
    seed, steps = context.seeds[0], 5
    random.seed(1)
    np.random.seed(1)
    first = _play(context.env, seed, steps)
    random.seed(2)
    np.random.seed(2)
    second = _play(context.env, seed, steps)
    replays = [("the same instance", second)]
    if context.factory is not None:
        replays.append(("a fresh instance", _play(context.factory().unwrapped, seed, steps)))
    for what, replay in replays:
        difference = _first_difference(first, replay)
        _require(
            difference is None,
            f"reset(seed={seed}) and the same actions played twice on {what} differ: {difference}. Draw every "
            "random number from self.np_random (seeded by reset), never from Python's random, numpy.random, "
            "the clock or set/dict iteration order, and reset all episode state in _reset",
        )


def check_messages(context: Context) -> None:
    env = context.env
    observation, _ = env.reset(seed=context.seeds[0])
    expected = [{"role": "system", "content": env.instructions}, {"role": "user", "content": observation}]
    _require(
        env.messages() == expected,
        f"after reset, messages() is {short(env.messages(), 200)}: it must be [system: instructions, user: the "
        "observation reset returned]; do not override messages() or change the observation after reset",
    )
    env.action_space.seed(context.seeds[0])
    for turn in range(1, _PROBE_STEPS + 1):
        before = len(env.messages())
        action = _probe_action(env, turn)
        observation, _, terminated, truncated, _ = env.step(action)
        messages, latest = env.messages(), env.observation_messages()
        _require(
            messages[before] == {"role": "assistant", "content": action} and messages[before + 1 :] == latest,
            f"after step {turn}, messages() does not end with the action as an assistant message followed by "
            "observation_messages(); let envs.TextEnv record the conversation",
        )
        if len(latest) == 1 and latest[0]["role"] == "user":
            _require(
                latest[0]["content"] == observation,
                f"step {turn} returned the observation {short(observation)} but messages() recorded "
                f"{short(latest[0]['content'])}: return the observation exactly as the StepOutcome gives it",
            )
        if terminated or truncated:
            break


def check_valid_actions(context: Context) -> None:
    env = context.env
    env.reset(seed=context.seeds[0])
    valid = env.valid_actions()
    if valid is None:
        raise Skip("valid_actions() is None (an open-ended action set)")
    _require(
        isinstance(valid, list) and bool(valid) and all(isinstance(a, str) for a in valid),
        f"valid_actions() returned {short(valid)}: return a non-empty list of action texts, or None",
    )
    _, _, _, _, info = env.step(valid[0])
    _require(
        info["action_is_valid"] is True,
        f"valid_actions() listed {short(valid[0])} but step marked it invalid: list only actions step accepts",
    )


def check_oracle(context: Context) -> None:
    env = context.env
    solved = 0
    for seed in context.seeds:
        env.reset(seed=seed)
        if env.oracle() is None:
            continue
        info: dict[str, Any] = {}
        terminated = truncated = False
        for turn in range(1, context.max_steps + 1):
            plan = env.oracle()
            _require(bool(plan), f"seed {seed}: oracle() returned {plan!r} at turn {turn} of an unfinished episode")
            _, _, terminated, truncated, info = env.step(plan[0])
            _require(info["action_is_valid"], f"seed {seed}: the oracle's action {short(plan[0])} was marked invalid")
            if terminated or truncated:
                break
        _require(env.episode_over, f"seed {seed}: the oracle did not finish the episode in {context.max_steps} steps")
        _require(
            info["success"] and terminated and not truncated,
            f"seed {seed}: following the oracle ended with success={info['success']}, terminated={terminated}, "
            f"truncated={truncated}: a solved task ends the episode with terminated=True and info['success'] True "
            "(truncated is only for limits outside the task); or fix the oracle",
        )
        _require(env.oracle() == [], f"seed {seed}: oracle() after the end is {short(env.oracle())}: return []")
        solved += 1
    if not solved:
        raise Skip("oracle() is None after reset for every seed (no oracle)")


def check_render(context: Context) -> None:
    env = context.env
    env.reset(seed=context.seeds[0])
    rendered = env.render()
    if env.render_mode == "ansi":
        _require(isinstance(rendered, str), f"render() returned {type(rendered).__name__} in 'ansi' mode: return str")
    plain = env.render_text()
    _require(isinstance(plain, str) and bool(plain.strip()), "render_text() returned no text: describe the state")
    _require("\x1b[" not in plain, "render_text() contains ANSI escape codes: add colours only when color=True")


def check_gymnasium(context: Context) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_env(context.env)
        except Exception as exc:
            raise Failure(f"Gymnasium's check_env failed: {type(exc).__name__}: {short(str(exc), 300)}") from exc
    # Gymnasium's checker warns with UserWarning; others (a library's ResourceWarning, say) are not its findings.
    relevant = [
        re.sub(r"\x1b\[[0-9;]*m", "", str(w.message))  # Gymnasium colours its warnings
        for w in caught
        if issubclass(w.category, UserWarning) and "not having a spec" not in str(w.message)
    ]
    _require(not relevant, f"Gymnasium's check_env warned: {short(relevant, 300)}; fix what it names")


CHECKS: tuple[tuple[str, Callable[[Context], None]], ...] = (
    ("text_env", check_text_env_attributes),
    ("reset_info", check_reset_info),
    ("step_info", check_step_info),
    ("episode_end", check_episode_end),
    ("hostile_actions", check_hostile_actions),
    ("determinism", check_determinism),
    ("messages", check_messages),
    ("valid_actions", check_valid_actions),
    ("oracle", check_oracle),
    ("render", check_render),
    ("gymnasium", check_gymnasium),
)
