"""Map generation and shortest paths: invariants over many seeds, checked with an independent search."""

from __future__ import annotations

import numpy as np
import pytest

from envs.frozenlake.maps import LakeMap, count_holes, distances_to_goal, generate_map, shortest_path

SHAPES = [(4, 4), (1, 2), (2, 2), (3, 5), (6, 6), (8, 8)]
RATIOS = [1.0, 0.8, 0.6, 0.3]


def holes_or_none(shape: tuple[int, int], ratio: float) -> int | None:
    try:
        return count_holes(shape, ratio)
    except ValueError:
        return None


# Every combination with room for a start and a goal (1x2 and 2x2 maps cannot take the hole-heavy ratios).
CONFIGS = [(shape, ratio) for shape in SHAPES for ratio in RATIOS if holes_or_none(shape, ratio) is not None]


def reachable(lake: LakeMap) -> bool:
    """Independent flood fill from the start through non-hole tiles."""
    n_rows, n_cols = lake.shape
    seen, stack = {lake.start}, [lake.start]
    while stack:
        row, col = stack.pop()
        for r, c in ((row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
            if 0 <= r < n_rows and 0 <= c < n_cols and (r, c) not in seen and lake.rows[r][c] != "H":
                seen.add((r, c))
                stack.append((r, c))
    return lake.goal in seen


def check_invariants(lake: LakeMap, shape: tuple[int, int], ratio: float) -> None:
    tiles = shape[0] * shape[1]
    assert lake.shape == shape and lake.start != lake.goal
    assert "".join(lake.rows).count("S") == 1 and "".join(lake.rows).count("G") == 1
    assert abs(lake.num_holes() / tiles - (1 - ratio)) <= 0.5 / tiles + 1e-12
    assert reachable(lake)


@pytest.mark.parametrize(("shape", "ratio"), CONFIGS)
def test_generated_maps_are_solvable_with_the_configured_holes(shape, ratio):
    holes = count_holes(shape, ratio)
    rng = np.random.default_rng(0)
    lakes = [generate_map(rng, shape, holes) for _ in range(100)]
    for lake in lakes:
        check_invariants(lake, shape, ratio)
    if shape[0] * shape[1] > 4:
        assert len({lake.rows for lake in lakes}) > 50


@pytest.mark.parametrize(("shape", "ratio"), CONFIGS)
def test_carved_fallback_keeps_the_invariants(shape, ratio):
    holes = count_holes(shape, ratio)
    rng = np.random.default_rng(1)
    for _ in range(100):
        lake = generate_map(rng, shape, holes, attempts=0)
        check_invariants(lake, shape, ratio)
        # The fallback carves a monotone path: the goal is exactly its Manhattan distance away.
        manhattan = abs(lake.start[0] - lake.goal[0]) + abs(lake.start[1] - lake.goal[1])
        assert distances_to_goal(lake)[lake.start] == manhattan


def test_generation_depends_on_the_generator_only():
    first = [generate_map(np.random.default_rng(7), (5, 5), 6) for _ in range(3)]
    assert first[0] == first[1] == first[2]


def test_configurations_without_room_for_start_and_goal_are_refused():
    assert len(CONFIGS) == len(SHAPES) * len(RATIOS) - 3  # 1x2 at 0.6 and 0.3, 2x2 at 0.3
    with pytest.raises(ValueError, match="do not fit"):
        generate_map(np.random.default_rng(0), (2, 2), 3)


def test_hole_count_rounds_to_the_nearest_tile():
    assert count_holes((4, 4), 0.8) == 3  # 3.2 holes
    assert count_holes((4, 4), 0.9) == 2  # 1.6 holes
    assert count_holes((4, 4), 1.0) == 0
    assert count_holes((2, 2), 0.5) == 2  # start and goal still fit
    with pytest.raises(ValueError, match="start and goal need 2"):
        count_holes((2, 2), 0.25)


def test_shortest_path_and_distances():
    lake = LakeMap.parse(["SFFF", "FHFH", "FFFH", "HFFG"])
    # Two shortest paths; at (2, 1) Down comes before Right in the fixed direction order.
    assert shortest_path(lake, lake.start) == ["Down", "Down", "Right", "Down", "Right", "Right"]
    assert distances_to_goal(lake).tolist() == [
        [6, 5, 4, 5],
        [5, -1, 3, -1],
        [4, 3, 2, -1],
        [-1, 2, 1, 0],
    ]
    assert shortest_path(LakeMap.parse(["SHG"]), (0, 0)) is None


def test_parse_accepts_both_alphabets():
    assert LakeMap.parse("P_O\n__G") == LakeMap.parse(["SFH", "FFG"]) == LakeMap(("SFH", "FFG"))
    assert LakeMap.parse(["SFH", "FFG"]).start == (0, 0) and LakeMap.parse(["SFH", "FFG"]).goal == (1, 2)
