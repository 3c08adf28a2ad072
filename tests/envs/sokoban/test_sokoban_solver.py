"""The exact solver: hand-derived optima, unsolvable levels, bounds, and agreement with a brute-force search."""

from __future__ import annotations

import numpy as np
import pytest

from envs.sokoban import Board, Level, generate_level, load_xsb, parse_xsb, push_lower_bound, solve
from envs.sokoban.env import LEVELS_DIR
from envs.sokoban.room import ACTIONS, PUSHED


def brute_force(level: Level, max_states: int = 200_000) -> tuple[int, int] | None:
    """(moves, pushes) of the best solution by plain breadth-first search over every (player, boxes) state:
    fewest moves, and among those the fewest pushes. ``None`` if unsolvable. Independent of the solver."""
    start = (level.player, frozenset(level.boxes))
    depth, pushes = {start: 0}, {start: 0}
    layer, moves = [start], 0
    while layer:
        best_goal = min((pushes[s] for s in layer if s[1] == level.targets), default=None)
        if best_goal is not None:
            return moves, best_goal
        following = []
        for state in layer:
            for action in ACTIONS:
                board = Board(level.with_state(state[1], state[0]))
                cost = pushes[state] + (board.move(action) == PUSHED)
                nxt = (board.player, frozenset(board.boxes))
                if nxt not in depth:
                    depth[nxt], pushes[nxt] = moves + 1, cost
                    following.append(nxt)
                elif depth[nxt] == moves + 1 and cost < pushes[nxt]:
                    pushes[nxt] = cost  # another way into the next layer with fewer pushes
        assert len(depth) < max_states, "brute force is for small levels only"
        layer, moves = following, moves + 1
    return None


def replay(level: Level, moves: tuple[str, ...]) -> Board:
    board = Board(level)
    for action in moves:
        board.move(action)
    return board


# --------------------------------------------------------------------------------------------------
# Hand-derived optima
# --------------------------------------------------------------------------------------------------
def test_corridor():
    # The player walks one cell (Right) and pushes the box twice (Right, Right): 3 moves, 2 pushes.
    result = solve(parse_xsb("#######\n#@ $ .#\n#######")[0])
    assert result.status == "solved"
    assert result.solution.moves == ("Right", "Right", "Right") and result.solution.pushes == 2


def test_around_the_corner():
    # Box at (2,2), target at (3,3): one push Right and one push Down are needed, in either order.
    # Right first: Down (to (2,1)), push Right (player at (2,2)), Up + Right to (1,3), push Down: 5 moves.
    # Down first: Right (to (1,2)), push Down (player at (2,2)), Left + Down to (3,1), push Right: 5 moves.
    # Every solution walks before its first push and needs two moves to get behind the box for the
    # second push, so 5 moves and 2 pushes are optimal.
    level = parse_xsb("######\n#@   #\n# $  #\n#  . #\n######")[0]
    result = solve(level)
    assert (result.solution.num_moves, result.solution.pushes) == (5, 2)
    assert replay(level, result.solution.moves).solved


def test_detour_through_a_door():
    # The player must walk from (3,6) around to (2,1), behind the box: 8 moves (right side, through the
    # gap at (2,4) or under it, then round the far side), then push Right four times: 12 moves, 4 pushes.
    level = parse_xsb("########\n#   #  #\n# $   .#\n#   # @#\n########")[0]
    result = solve(level)
    assert (result.solution.num_moves, result.solution.pushes) == (12, 4)


def test_walk_to_the_pushing_side_first():
    # Box at (1,2), target at (1,4): two pushes Right from (1,1). The player starts at (2,2), under the box
    # (pushing it Up is blocked by the wall), walks Left and Up to (1,1), then pushes twice: 4 moves.
    level = parse_xsb("######\n# $ .#\n# @  #\n######")[0]
    result = solve(level)
    assert result.solution.moves == ("Left", "Up", "Right", "Right") and result.solution.pushes == 2


def test_bound_on_moves():
    level = parse_xsb("########\n#   #  #\n# $   .#\n#   # @#\n########")[0]
    assert solve(level, max_moves=11).status == "no_solution"  # the optimum is 12 moves
    assert solve(level, max_moves=12).solution.num_moves == 12


def test_expansion_limit_is_reported():
    level = load_xsb(LEVELS_DIR / "tutorial.xsb")[-1]
    result = solve(level, max_expansions=2)
    assert result.status == "limit" and result.solution is None and result.expanded == 2


def test_solved_position_needs_nothing():
    level = parse_xsb("#####\n#@$.#\n#####")[0]
    solved = level.with_state(level.targets, level.player + 1)
    assert solve(solved).solution.moves == ()


# --------------------------------------------------------------------------------------------------
# Unsolvable levels
# --------------------------------------------------------------------------------------------------
def test_box_in_a_corner_is_unsolvable_without_search():
    level = parse_xsb("#####\n#$  #\n# @.#\n#####")[0]
    assert push_lower_bound(level) == float("inf")
    result = solve(level)
    assert result.status == "no_solution" and result.expanded == 0


def test_unsolvable_level_is_proven_by_search():
    # The left box can only go Up (pushed from below); the right box can then only go Right, and the
    # cells right of it are reachable only through its own cell, so it can never be pushed back Left.
    level = parse_xsb("#######\n#.   ##\n#.$$  #\n#  #@ #\n#######")[0]
    result = solve(level)
    assert result.status == "no_solution" and result.expanded > 0
    assert brute_force(level) is None


# --------------------------------------------------------------------------------------------------
# Agreement with brute force on many levels
# --------------------------------------------------------------------------------------------------
def test_shipped_levels_agree_with_brute_force():
    for level in load_xsb(LEVELS_DIR / "tutorial.xsb"):
        result = solve(level)
        assert (result.solution.num_moves, result.solution.pushes) == brute_force(level), level.name
        assert replay(level, result.solution.moves).solved


@pytest.mark.parametrize(("rows", "cols", "num_boxes", "seeds"), [(6, 6, 1, 40), (6, 6, 2, 25), (7, 7, 2, 10)])
def test_generated_levels_agree_with_brute_force(rows, cols, num_boxes, seeds):
    for seed in range(seeds):
        generated = generate_level(rows, cols, num_boxes, np.random.default_rng(seed), max_moves=30)
        solution = generated.solution
        assert (solution.num_moves, solution.pushes) == brute_force(generated.level), seed
        assert replay(generated.level, solution.moves).solved


def test_mid_game_positions_agree_with_brute_force():
    rng = np.random.default_rng(0)
    checked = 0
    for seed in range(30):
        level = generate_level(6, 6, 2, np.random.default_rng(seed), max_moves=30).level
        board = replay(level, tuple(ACTIONS[i] for i in rng.integers(4, size=6)))
        position = board.snapshot()
        if position.solved:
            continue
        result = solve(position)
        expected = brute_force(position)
        if expected is None:
            assert result.status == "no_solution"
        else:
            assert (result.solution.num_moves, result.solution.pushes) == expected
        checked += 1
    assert checked >= 20
