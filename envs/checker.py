"""Conformance checks for turngym environments: Gymnasium's ``check_env`` plus the turngym contract.

    from envs.checker import check_text_env
    report = check_text_env(lambda: envs.make("sokoban"), seeds=(0, 1, 2))  # raises EnvCheckError on failures
    print(report.summary())

or, from a shell, ``python -m envs check sokoban dim=8 num_boxes=2``.

:func:`check_text_env` takes an environment or a function building one (with a function it also
checks that two fresh instances play the same episode from the same seed). It runs every check below,
collects every failure, and raises :class:`EnvCheckError` listing them; each message says what is
wrong and what to do, in the manner of Gymnasium's checker. A check that cannot apply (no oracle, an
episode that never ends within ``max_steps``) is reported as skipped, with the reason.

The checks (names as in :attr:`CheckReport.passed`):

* ``text_env``: the environment is an :class:`envs.TextEnv` with non-empty ``instructions`` and
  ``action_format``; ``instructions`` is the same for every seed (inference engines cache it).
* ``reset_info`` / ``step_info``: the standard info keys with their types on every reset and step:
  ``success`` and ``action_is_valid`` (bool), ``metrics`` (dict of str to float), ``turn`` (int, 0
  after reset, +1 per step).
* ``episode_end``: ``terminated`` and ``truncated`` are never both True; ``episode_over`` agrees
  with them; a step after the end raises (a programming error, reported clearly); a non-``str``
  action raises :class:`TypeError`.
* ``hostile_actions``: each of ``hostile_actions`` (empty, NULs, megabytes, unclosed tags, Unicode
  tricks) is a normal step: no exception, a bounded ``str`` observation, ``action_is_valid`` False
  and a reward no higher than ``-format_penalty``.
* ``determinism``: the same seed and the same actions give the same observations, rewards, flags and
  infos, whatever Python's and NumPy's global random states are; with a factory, on a fresh instance too.
* ``messages``: :meth:`TextEnv.messages` is the system prompt, then the observations and actions
  exactly as ``reset`` and ``step`` returned them.
* ``valid_actions``: an action :meth:`TextEnv.valid_actions` lists is accepted as valid.
* ``oracle``: where :meth:`TextEnv.oracle` gives a solution, following it (asking again every turn)
  solves the episode of every seed: each action valid, ``success`` True, ended as ``terminated``;
  afterwards ``oracle()`` is ``[]``.
* ``render``: ``render()`` and ``render_text()`` return text; ``render_text()`` has no ANSI codes.
* ``gymnasium``: :func:`gymnasium.utils.env_checker.check_env`, its warnings counted as failures
  (except the one about a missing spec, for environments built without the registry).
* ``state_info``: where the infos carry the optional ``state_key`` / ``distance_to_goal``, their types,
  a distance of 0 exactly on success, no faster fall than one per move, an exact fall along the oracle's
  plan (deterministic dynamics), equal distances for equal keys, and the same values in a fresh instance
  (:mod:`envs.state_checks`). Skipped for environments without them.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from envs.contract_checks import CHECKS, CONTRACT, HOSTILE_ACTIONS, Context, Failure, Skip, short
from envs.core import TextEnv
from envs.state_checks import STATE_CHECKS

__all__ = ["HOSTILE_ACTIONS", "CheckReport", "EnvCheckError", "check_text_env"]


class EnvCheckError(AssertionError):
    """One or more conformance checks failed; ``failures`` maps each check's name to its message."""

    def __init__(self, env_name: str, failures: dict[str, str]) -> None:
        self.env_name = env_name
        self.failures = dict(failures)
        lines = [f"{env_name} failed {len(failures)} conformance check(s):"]
        lines += [f"- {name}: {message}" for name, message in failures.items()]
        super().__init__("\n".join(lines))


@dataclass
class CheckReport:
    """What :func:`check_text_env` found: passed checks, skipped ones with the reason, failures, seconds taken."""

    env_name: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [f"{self.env_name}: {len(self.passed)} passed, {len(self.skipped)} skipped, "]
        lines[0] += f"{len(self.failures)} failed in {self.elapsed_s:.1f} s"
        lines += [f"  passed  {name}" for name in self.passed]
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped.items()]
        lines += [f"  FAILED  {name}: {message}" for name, message in self.failures.items()]
        return "\n".join(lines)


def check_text_env(
    env: gym.Env | Callable[[], gym.Env],
    *,
    seeds: Sequence[int] = (0, 1, 2),
    hostile_actions: Sequence[str] = HOSTILE_ACTIONS,
    max_steps: int = 100,
    gymnasium_check: bool = True,
    raise_on_failure: bool = True,
) -> CheckReport:
    """Check ``env`` (an environment, or a function with no arguments that builds one) against the contract.

    Args:
        seeds: reset seeds to play; the first is used for the determinism and hostile-action checks,
            all of them for the oracle.
        hostile_actions: texts each of which must be a normal, invalid step (see :data:`HOSTILE_ACTIONS`).
            An environment that reads some of them as valid actions passes its own list.
        max_steps: steps per episode before a check gives up waiting for its end (it is then skipped).
        gymnasium_check: also run Gymnasium's ``check_env``.
        raise_on_failure: raise :class:`EnvCheckError` if any check failed (else only report it).

    Returns the :class:`CheckReport`. Leaves Python's and NumPy's global random states as it found them.
    """
    if not seeds:
        raise ValueError("check_text_env needs at least one seed")
    start = time.perf_counter()
    factory = None if isinstance(env, gym.Env) else env
    instance = env if isinstance(env, gym.Env) else env()
    name = _env_name(instance)
    report = CheckReport(name)
    if not isinstance(instance.unwrapped, TextEnv):
        report.failures["text_env"] = (
            f"{type(instance.unwrapped).__name__} is not an envs.TextEnv: subclass envs.TextEnv and implement "
            f"_reset, _step and render_text ({CONTRACT})"
        )
    else:
        context = Context(instance.unwrapped, factory, tuple(seeds), tuple(hostile_actions), max_steps, name)
        checks = [
            (check_name, check)
            for check_name, check in (*CHECKS, *STATE_CHECKS)
            if gymnasium_check or check_name != "gymnasium"
        ]
        with _global_random_states_restored():
            for check_name, check in checks:
                _run_check(report, check_name, check, context)
    report.elapsed_s = time.perf_counter() - start
    if raise_on_failure and report.failures:
        raise EnvCheckError(name, report.failures)
    return report


def _run_check(report: CheckReport, name: str, check: Callable[[Context], None], context: Context) -> None:
    try:
        check(context)
    except Failure as failure:
        report.failures[name] = str(failure)
    except Skip as skip:
        report.skipped[name] = str(skip)
    except Exception as exc:  # an exception the environment raised where the contract allows none
        report.failures[name] = (
            f"raised {type(exc).__name__}: {short(str(exc))} during the {name!r} check; the environment must "
            f"not raise here ({CONTRACT})"
        )
    else:
        report.passed.append(name)


def _env_name(env: gym.Env) -> str:
    spec = getattr(env.unwrapped, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


@contextlib.contextmanager
def _global_random_states_restored() -> Iterator[None]:
    """Python's and NumPy's global random states as they were before the block (the checks perturb them)."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
