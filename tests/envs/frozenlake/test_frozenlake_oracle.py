"""The oracle and slippery dynamics: shortest paths solve every map, the slippery policy beats chance."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from envs.frozenlake import FrozenLakeEnv
from envs.frozenlake.maps import SLIP_OUTCOMES, LakeMap, distances_to_goal
from envs.frozenlake.planning import SlipperyPlanner


@pytest.mark.parametrize(("size", "ratio"), [(4, 0.8), ([5, 7], 0.7), (8, 0.6)])
def test_deterministic_oracle_solves_every_episode(size, ratio):
    env = FrozenLakeEnv(size=size, frozen_ratio=ratio, max_turns=None)
    for seed in range(150):
        env.reset(seed=seed)
        distance = distances_to_goal(env.lake)[env.lake.start]
        plan = env.oracle()
        assert plan is not None and len(plan) == -(-distance // env.max_actions_per_turn)
        for action in plan:
            _, reward, terminated, truncated, info = env.step(action)
            assert info["action_is_valid"]
        assert (reward, terminated, truncated, info["success"], info["steps"]) == (1.0, True, False, True, distance)


def test_oracle_packs_moves_per_turn_and_wraps_answers():
    env = FrozenLakeEnv(desc=["SFFF", "FHFH", "FFFH", "HFFG"], require_answer_tag=True)
    env.reset(seed=0)
    assert env.oracle() == ["<answer>Down || Down || Right || Down || Right</answer>", "<answer>Right</answer>"]
    env = FrozenLakeEnv(desc=["SHG"])
    env.reset(seed=0)
    assert env.oracle() is None
    assert FrozenLakeEnv().oracle() is None  # before reset


# 2x2 map, hole at bottom left: from the start, Right and Down can slip into the hole, Up cannot.
#   S F
#   H G
CORNER = LakeMap.parse(["SF", "HG"])


def test_planner_values_match_hand_derivation():
    planner = SlipperyPlanner(CORNER)
    # From the top-right tile, Right (slips: Up stays, Down reaches G) or Down (Down: G, Left: S, Right: stays)
    # reach G in one move with probability 1/3; over two: Right 1/3 + 2/3 * 1/3 = 5/9.
    assert planner.success_probability((0, 1), 1) == pytest.approx(1 / 3)
    assert planner.success_probability((0, 1), 2) == pytest.approx(5 / 9)
    # From S nothing reaches G in one move; in two: Up or Right get to (0,1) with 1/3, then 1/3: 1/9 (a tie).
    # In three: Up 1/3 * 5/9 + 2/3 * 1/9 = 7/27 beats Right 1/3 * 5/9 + 1/3 * 1/9 + 1/3 * 0 = 6/27.
    assert planner.success_probability((0, 0), 2) == pytest.approx(1 / 9)
    assert planner.success_probability((0, 0), 3) == pytest.approx(7 / 27)
    assert planner.best_action((0, 0), 3) == "Up"
    assert planner.best_action((0, 0), 50) == "Up"
    # Ties go to the move aimed closest to the goal: at horizon 2 Right and Up both give 1/9.
    assert planner.best_action((0, 0), 2) == "Right"
    assert planner.best_action((0, 1), 1) == "Down"
    assert planner.success_probability((0, 0), 10_000) == pytest.approx(1.0, abs=1e-6)


def test_slippery_moves_split_in_thirds():
    env = FrozenLakeEnv(desc=["GFFFF", "FFFFF", "FFSFF", "FFFFF", "FFFFF"], is_slippery=True)
    env.reset(seed=0)
    counts = {"Up": 0, "Down": 0, "Left": 0, "Right": 0}
    n = 3000
    for _ in range(n):
        env.reset()
        _, _, _, _, info = env.step("Up")
        counts[info["directions_taken"][0]] += 1
        assert info["slips"] == (info["directions_taken"][0] != "Up")
    assert counts["Down"] == 0
    for direction in ("Up", "Left", "Right"):
        assert abs(counts[direction] / n - 1 / 3) < 0.04, counts


def play_slippery(policy: str, episodes: int) -> float:
    env = FrozenLakeEnv(is_slippery=True, max_turns=None, max_steps=100)
    rng = np.random.default_rng(123)
    successes = 0
    for seed in range(episodes):
        env.reset(seed=seed)
        info = {"success": False}
        while not env.episode_over:
            action = env.oracle()[0] if policy == "oracle" else ["Up", "Down", "Left", "Right"][rng.integers(4)]
            _, _, _, _, info = env.step(action)
        successes += info["success"]
    return successes / episodes


def test_slippery_oracle_beats_random_play():
    oracle_rate, random_rate = play_slippery("oracle", 150), play_slippery("random", 150)
    assert oracle_rate > random_rate + 0.3, (oracle_rate, random_rate)


def test_slippery_oracle_plans_for_the_turns_left():
    env = FrozenLakeEnv(desc=["SF", "HG"], is_slippery=True, max_turns=2, max_actions_per_turn=1)
    env.reset(seed=0)
    assert env.oracle() == ["Right"]  # two moves left: Right ties with Up and aims closer (see above)
    env = FrozenLakeEnv(desc=["SF", "HG"], is_slippery=True, max_turns=3, max_actions_per_turn=1)
    env.reset(seed=0)
    assert env.oracle() == ["Up"]
    # One turn of up to two moves: see test_a_turn_of_several_moves_reaches_the_goal_more_often.
    env = FrozenLakeEnv(desc=["SF", "HG"], is_slippery=True, max_turns=1, max_actions_per_turn=2)
    env.reset(seed=0)
    assert env.oracle() == ["Right || Down"]
    # The move limit cuts the planned turn: one move left.
    env = FrozenLakeEnv(desc=["SF", "HG"], is_slippery=True, max_turns=1, max_actions_per_turn=2, max_steps=1)
    env.reset(seed=0)
    assert env.oracle() == ["Right"]


def test_a_turn_of_several_moves_reaches_the_goal_more_often():
    # From S one move never reaches G. One turn of two moves, made blind: Right lands on (0,1) with 1/3 (Up:
    # stays, Down: the hole), then Right or Down reaches G with 1/3: 1/9. Up then Right or Down gives 1/9 too (Up
    # reaches (0,1) only by slipping right); the tie goes to the first move aimed nearer the goal (Right), then the
    # second (Down aims at G itself).
    assert SlipperyPlanner(CORNER, moves_per_turn=1).success_probability((0, 0), 1) == 0.0
    two = SlipperyPlanner(CORNER, moves_per_turn=2)
    assert two.success_probability((0, 0), 1) == pytest.approx(1 / 9)
    assert two.best_turn((0, 0), 1) == ("Right", "Down")
    # From (0,1) one move already gets 1/3; a second move in the same turn adds 2/3 * 1/3 (Right stays put
    # on its two misses, so the second move starts where the first did): 5/9, the two-move value.
    assert two.success_probability((0, 1), 1) == pytest.approx(5 / 9)


def _brute_force(lake: LakeMap, moves_per_turn: int):
    """``value(position, turns)`` and ``play(position, sequence, turns)`` (a sequence, then the best turns) by plain
    recursion over every sequence and every slip outcome: no vectorising, no reuse between lengths."""
    sequences = [s for n in range(1, moves_per_turn + 1) for s in itertools.product(SLIP_OUTCOMES, repeat=n)]

    @functools.cache
    def value(position, turns: int) -> float:
        tile = lake.tile(position)
        if tile in "GH" or turns == 0:
            return float(tile == "G")
        return max(play(position, sequence, turns - 1) for sequence in sequences)

    def play(position, sequence, turns: int) -> float:
        if lake.tile(position) in "GH" or not sequence:
            return value(position, turns)
        return sum(play(lake.move(position, d), sequence[1:], turns) for d in SLIP_OUTCOMES[sequence[0]]) / 3

    return value, play


@pytest.mark.parametrize("moves_per_turn", [1, 2, 3])
def test_planner_values_and_turns_match_brute_force_on_random_maps(moves_per_turn):
    env = FrozenLakeEnv(size=3, frozen_ratio=0.7, is_slippery=True)
    for seed in range(6):
        env.reset(seed=seed)
        lake, planner = env.lake, SlipperyPlanner(env.lake, moves_per_turn=moves_per_turn)
        value, play = _brute_force(lake, moves_per_turn)
        for turns in (1, 2, 3):
            for position in [(r, c) for r in range(3) for c in range(3) if lake.tile((r, c)) not in "GH"]:
                best = value(position, turns)
                assert planner.success_probability(position, turns) == pytest.approx(best, abs=1e-12)
                chosen = planner.best_turn(position, turns)  # attains it
                assert 1 <= len(chosen) <= moves_per_turn
                assert play(position, chosen, turns - 1) == pytest.approx(best, abs=1e-12)


def test_three_turns_of_five_moves_beat_three_single_moves_on_random_4x4_maps():
    # Exact probabilities (no sampling): the default episode's three turns of up to five moves against the
    # planner that sends one move a turn, from the start of 40 random maps.
    env = FrozenLakeEnv(is_slippery=True)
    single, turns_of_five = [], []
    for seed in range(40):
        env.reset(seed=seed)
        single.append(SlipperyPlanner(env.lake, 1).success_probability(env.lake.start, 3))
        turns_of_five.append(SlipperyPlanner(env.lake, 5).success_probability(env.lake.start, 3))
    assert all(b >= a - 1e-12 for a, b in zip(single, turns_of_five, strict=True))
    assert np.mean(turns_of_five) > 2 * np.mean(single), (np.mean(single), np.mean(turns_of_five))
