"""Reading and writing levels in XSB, the plain-text format Sokoban collections are distributed in.

Symbols: ``#`` wall, space floor (``-`` and ``_`` are accepted as floor too), ``.`` target, ``$`` box,
``*`` box on a target, ``@`` player, ``+`` player on a target. A file holds one or more levels
separated by blank lines or comment lines (lines starting with ``;``); the last comment line before a
level is its name. Rows may have different lengths (short rows are padded with floor) and the
surroundings of the room are usually spaces: every open cell the player cannot reach becomes a wall.
Any other character, and any level that breaks the rules (no player, boxes and targets in different
numbers, a box or target the player cannot reach, a room open to the edge) raises :class:`XSBError`
with the file and line.
"""

from __future__ import annotations

from pathlib import Path

from envs.sokoban.room import Level, LevelError, build_level

__all__ = ["XSBError", "level_to_xsb", "load_xsb", "parse_xsb"]

_FLOOR_CHARS = " -_"
_BOARD_CHARS = "#.$*@+" + _FLOOR_CHARS


class XSBError(ValueError):
    """Malformed XSB text; the message names the source, the line and the problem."""


def load_xsb(path: str | Path) -> list[Level]:
    """Every level of an XSB file, in file order."""
    path = Path(path)
    return parse_xsb(path.read_text(encoding="utf-8"), source=str(path))


def parse_xsb(text: str, *, source: str = "<string>") -> list[Level]:
    """Every level in XSB ``text`` (``source`` names the text in error messages); at least one is required."""
    levels: list[Level] = []
    block: list[tuple[int, str]] = []
    name = ""
    for number, raw in enumerate([*text.splitlines(), ""], start=1):
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        if stripped and not stripped.startswith(";"):
            bad = next((ch for ch in line if ch not in _BOARD_CHARS), None)
            if bad is not None:
                raise XSBError(
                    f"{source}, line {number}: unexpected character {bad!r}; a level row may only contain "
                    f"{_BOARD_CHARS!r} (comments start with ';')"
                )
            block.append((number, line))
            continue
        if block:
            levels.append(_parse_level(block, name, source))
            block, name = [], ""
        if stripped.startswith(";"):
            name = stripped.lstrip(";").strip()
    if not levels:
        raise XSBError(f"{source}: no level found (a level is a block of rows of {_BOARD_CHARS!r})")
    return levels


def _parse_level(block: list[tuple[int, str]], name: str, source: str) -> Level:
    first_line = block[0][0]
    rows, cols = len(block), max(len(line) for _, line in block)
    open_cells, targets, boxes, players = [], [], [], []
    for r, (_, line) in enumerate(block):
        for c, ch in enumerate(line.ljust(cols)):
            cell = r * cols + c
            if ch != "#":
                open_cells.append(cell)
            if ch in ".*+":
                targets.append(cell)
            if ch in "$*":
                boxes.append(cell)
            if ch in "@+":
                players.append(cell)
    where = f"{source}, level starting at line {first_line}"
    if len(players) != 1:
        raise XSBError(f"{where}: a level needs exactly one player ('@' or '+'), found {len(players)}")
    try:
        return build_level(
            rows, cols, open_cells=open_cells, targets=targets, boxes=boxes, player=players[0], name=name
        )
    except LevelError as exc:
        raise XSBError(f"{where}: {exc}") from None


def level_to_xsb(level: Level) -> str:
    """``level`` as XSB rows (walls outside the room are kept, so the text round-trips exactly)."""
    lines = []
    for r in range(level.rows):
        row = []
        for c in range(level.cols):
            cell = r * level.cols + c
            target = cell in level.targets
            if cell in level.walls:
                row.append("#")
            elif cell == level.player:
                row.append("+" if target else "@")
            elif cell in level.boxes:
                row.append("*" if target else "$")
            else:
                row.append("." if target else " ")
        lines.append("".join(row).rstrip())
    return "\n".join(lines)
