"""The conformance check of the optional state information: ``info["state_key"]`` and ``info["distance_to_goal"]``.

Run by :func:`envs.checker.check_text_env` as ``state_info`` (the contract is in :mod:`envs.core`); skipped
when reset's info carries neither key. On an oracle episode and a random episode of every seed:

* presence and types: a key given after reset is given after every step; ``state_key`` is a ``str``;
  ``distance_to_goal`` is an ``int >= 0`` or ``None``, and ``0`` exactly when ``info["success"]``;
* a step of ``k`` moves lowers the distance by at most ``k`` (an optimal distance obeys the triangle
  inequality: otherwise the earlier distance was not optimal). It may rise by more than ``k``: an
  irreversible move (a Sokoban push) can make the goal much further, or unreachable (``None``);
* following the oracle lowers it by exactly the moves each turn made (deterministic dynamics only: with
  :attr:`~envs.core.TextEnv.stochastic_dynamics` a slip takes the agent off the plan, so only the bound
  above applies);
* the distance is a function of the state: equal keys come with equal distances;
* with a factory, a fresh instance gives the same keys and distances for the same seed and actions.

Moves per step: ``len(info["actions_executed"])`` where the info reports the moves made, else one.

Where a step's info gives the per-move keys (``move_distances``, ``move_spans``): one entry per move made; each
move obeys the progress rules above as a step of one move (exactly one lower along the oracle); the last distance
is the step's ``distance_to_goal``; the spans are ``[start, end)`` pairs inside the action text, in order, apart.
"""

from __future__ import annotations

import random
from typing import Any

from envs.contract_checks import CONTRACT, Context, Failure, Skip, short
from envs.core import TextEnv

__all__ = ["STATE_CHECKS", "check_state_info"]

_KEYS = ("state_key", "distance_to_goal")


class _StateRecord:
    """The keys and distances one check has seen, to compare distances of equal keys."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.distance_of: dict[str, Any] = {}

    def check(self, info: dict[str, Any], where: str) -> tuple[Any, Any]:
        """``(state_key, distance_to_goal)`` of one info, checked (``None`` for a key the environment lacks)."""
        missing = [key for key in self.keys if key not in info]
        if missing:
            raise Failure(
                f"{where} returned no info{missing}, which reset gave: give the state information after reset "
                f"and after every step ({CONTRACT})"
            )
        key, distance = info.get("state_key"), info.get("distance_to_goal")
        if "state_key" in self.keys and not isinstance(key, str):
            raise Failure(
                f"{where} returned info['state_key'] = {short(key)} of type {type(key).__name__}: it must be a str, "
                "a canonical key of the whole state (equal strings exactly when the states are equal)"
            )
        if "distance_to_goal" in self.keys:
            if distance is not None and (type(distance) is not int or distance < 0):
                raise Failure(
                    f"{where} returned info['distance_to_goal'] = {short(distance)} of type "
                    f"{type(distance).__name__}: it must be an int >= 0 (the optimal number of moves left) or "
                    "None (unsolvable or unknown); convert with int(...)"
                )
            if (distance == 0) != info["success"]:
                raise Failure(
                    f"{where} returned distance_to_goal = {distance} with success = {info['success']}: the distance "
                    "is 0 exactly when the task is solved"
                )
        if key is not None and "distance_to_goal" in self.keys:
            seen = self.distance_of.setdefault(key, distance)
            if seen != distance:
                raise Failure(
                    f"{where}: state_key {short(key)} came with distance_to_goal {seen} before and {distance} now: "
                    "equal keys mean equal states, so their distances are equal; put everything the distance "
                    "depends on into the key"
                )
        return key, distance


def _moves_made(info: dict[str, Any]) -> int:
    executed = info.get("actions_executed")
    return len(executed) if isinstance(executed, (list, tuple)) else 1


def _check_progress(before: Any, after: Any, moves: int, where: str, *, exact: bool) -> None:
    """The distance after ``moves`` moves: at least ``before - moves``, and exactly that along an optimal plan."""
    if before is None or after is None:
        return
    if after < before - moves:
        raise Failure(
            f"{where}: distance_to_goal fell from {before} to {after} in {moves} move(s): an optimal distance falls "
            "by at most one per move (else the earlier distance was not optimal); compute it with an exact solver"
        )
    if exact and after != before - moves:
        raise Failure(
            f"{where}: following the oracle took distance_to_goal from {before} to {after} in {moves} move(s): an "
            "optimal plan lowers the optimal distance by exactly the moves it makes; fix the distance or the oracle, "
            "or, if a move's outcome is random, set stochastic_dynamics = True"
        )


def _check_moves(info: dict[str, Any], before: Any, action: str, where: str, *, exact: bool) -> None:
    """The optional per-move keys of one step's info, against the distance ``before`` it and its action text."""
    if "move_distances" not in info and "move_spans" not in info:
        return
    distances, spans = info.get("move_distances"), info.get("move_spans")
    moves = _moves_made(info)
    if not (isinstance(distances, list) and isinstance(spans, list) and len(distances) == len(spans) == moves):
        raise Failure(
            f"{where}: move_distances {short(distances)} and move_spans {short(spans)} must be lists with one entry "
            f"per move made ({moves}), both given or neither"
        )
    if distances and distances[-1] != info.get("distance_to_goal"):
        raise Failure(
            f"{where}: the last of move_distances {short(distances)} is not the step's distance_to_goal "
            f"{info.get('distance_to_goal')}"
        )
    for move, after in enumerate(distances, start=1):
        _check_progress(before, after, 1, f"{where}, move {move}", exact=exact)
        before = after
    end = 0
    for span in spans:
        if not (isinstance(span, (list, tuple)) and len(span) == 2 and end <= span[0] < span[1] <= len(action)):
            raise Failure(
                f"{where}: move_spans {short(spans)} must be [start, end) pairs inside the action text "
                f"({len(action)} characters), in order and apart"
            )
        end = span[1]


def _random_turns(env: TextEnv, seed: int, steps: int) -> list[str]:
    """Up to ``steps`` actions drawn from the valid actions (or the action space), seeded by ``seed``."""
    valid = env.valid_actions()
    if valid:
        draw = random.Random(seed)
        return [draw.choice(valid) for _ in range(steps)]
    env.action_space.seed(seed)
    return [env.action_space.sample() for _ in range(steps)]


def _play_random(env: TextEnv, seed: int, actions: list[str], record: _StateRecord) -> list[tuple[Any, Any]]:
    """The (key, distance) after reset and after each of ``actions`` until the episode ends, checked as it goes."""
    _, info = env.reset(seed=seed)
    states = [record.check(info, f"reset(seed={seed})")]
    for turn, action in enumerate(actions, start=1):
        where = f"seed {seed}, random step {turn} ({short(action, 40)})"
        _, _, terminated, truncated, info = env.step(action)
        states.append(record.check(info, where))
        _check_progress(states[-2][1], states[-1][1], _moves_made(info), where, exact=False)
        _check_moves(info, states[-2][1], action, where, exact=False)
        if terminated or truncated:
            break
    return states


def _play_oracle(env: TextEnv, seed: int, max_steps: int, record: _StateRecord) -> None:
    _, info = env.reset(seed=seed)
    before = record.check(info, f"reset(seed={seed})")[1]
    for turn in range(1, max_steps + 1):
        plan = env.oracle()
        if not plan:
            return  # no oracle here (the oracle check reports a broken one)
        where = f"seed {seed}, oracle turn {turn} ({short(plan[0], 40)})"
        _, _, terminated, truncated, info = env.step(plan[0])
        after = record.check(info, where)[1]
        _check_progress(before, after, _moves_made(info), where, exact=not env.stochastic_dynamics)
        _check_moves(info, before, plan[0], where, exact=not env.stochastic_dynamics)
        before = after
        if terminated or truncated:
            return


def check_state_info(context: Context) -> None:
    env = context.env
    _, info = env.reset(seed=context.seeds[0])
    keys = tuple(key for key in _KEYS if key in info)
    if not keys:
        raise Skip("reset's info has neither state_key nor distance_to_goal (optional state information)")
    record = _StateRecord(keys)
    played = {}
    for seed in context.seeds:
        if "distance_to_goal" in keys:
            _play_oracle(env, seed, context.max_steps, record)
        actions = _random_turns(env, seed, context.max_steps)
        played[seed] = (actions, _play_random(env, seed, actions, record))
    if context.factory is None:
        return
    fresh = context.factory().unwrapped
    for seed, (actions, states) in played.items():
        again = _play_random(fresh, seed, actions, _StateRecord(keys))
        for index, (first, second) in enumerate(zip(states, again, strict=False)):
            if first != second:
                where = "reset" if index == 0 else f"random step {index}"
                raise Failure(
                    f"seed {seed}, {where}: a fresh instance gave (state_key, distance_to_goal) = {short(second)}, "
                    f"the first {short(first)}: the same seed and actions must give the same state information"
                )


STATE_CHECKS = (("state_info", check_state_info),)
