"""XSB level files: symbols, separators, names, round trips, shipped levels and malformed input."""

from __future__ import annotations

import pytest

from envs.sokoban import XSBError, level_to_xsb, load_xsb, parse_xsb, solve
from envs.sokoban.env import LEVELS_DIR

COLLECTION = """\
; A small collection
; First
#####
#@$.#
#####

; Second
  ####
###  #
#+ * #
# $  #
######
; Third (after a comment line only)
-#####-
##@_$.#
-#####-
"""


def test_levels_names_and_symbols():
    first, second, third = parse_xsb(COLLECTION)
    assert [level.name for level in (first, second, third)] == ["First", "Second", "Third (after a comment line only)"]
    assert (first.rows, first.cols, first.player, first.boxes, first.targets) == (3, 5, 6, {7}, {8})
    # second: '+' is the player on a target, '*' a box on a target; ragged rows are padded
    cols = second.cols
    assert (second.rows, cols) == (5, 6)
    assert second.player == 2 * cols + 1 and second.player in second.targets
    assert second.boxes == {2 * cols + 3, 3 * cols + 2} and second.targets == {2 * cols + 1, 2 * cols + 3}
    # the spaces outside the room become walls
    assert 0 in second.walls and 1 in second.walls
    # third: '-' and '_' are floor
    assert (third.player, third.boxes, third.targets) == (9, {11}, {12})


def test_round_trip():
    for level in parse_xsb(COLLECTION):
        (again,) = parse_xsb(level_to_xsb(level))
        assert (again.rows, again.cols, again.walls, again.targets, again.boxes, again.player) == (
            level.rows,
            level.cols,
            level.walls,
            level.targets,
            level.boxes,
            level.player,
        )


def test_windows_line_endings():
    assert parse_xsb("#####\r\n#@$.#\r\n#####\r\n")[0].boxes == {7}


def test_shipped_levels_are_valid_and_solvable_within_the_default_budget():
    levels = load_xsb(LEVELS_DIR / "tutorial.xsb")
    assert len(levels) >= 5 and all(level.name for level in levels)
    for level in levels:
        solution = solve(level).solution
        assert solution is not None and solution.num_moves <= 25, level.name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#####\n# $.#\n#####", "exactly one player"),
        ("######\n#@$.@#\n######", "exactly one player"),
        ("######\n#@$$.#\n######", "2 boxes but 1 targets"),
        ("#####\n#@ .#\n#####", "0 boxes but 1 targets"),
        ("#####\n#@  #\n#####", "no box and no target"),
        ("#######\n#@$.#$#\n#####.#\n#######", "cannot be reached"),
        ("#####\n#@$. \n#####", "not enclosed"),
        ("#####\n#@*##\n#####", "solved before it starts"),
        ("#####\n#@$x#\n#####", "line 2: unexpected character 'x'"),
        ("; only a comment\n\n", "no level found"),
    ],
)
def test_malformed_levels(text, message):
    with pytest.raises(XSBError, match=message):
        parse_xsb(text)


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "broken.xsb"
    path.write_text("; fine\n#####\n#@$.#\n#####\n\n#####\n# $.#\n#####\n", encoding="utf-8")
    with pytest.raises(XSBError, match=r"broken\.xsb, level starting at line 6"):
        load_xsb(path)
