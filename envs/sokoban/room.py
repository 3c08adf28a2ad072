"""Sokoban rooms and rules: the :class:`Level` record, level validation and the move rule of :class:`Board`.

Cells are flat indices ``row * cols + col`` into a ``rows x cols`` grid; row 0 is the top (``Up``
decreases the row). Every cell of a level is either a wall or floor; the floor is exactly the region
the player can walk to when boxes are ignored, and it never touches the edge of the grid (the room is
enclosed by walls, which also keeps neighbouring-cell arithmetic inside the grid).

Rules (gym-sokoban's): a move takes the player one cell Up, Down, Left or Right. Moving into a box pushes
it one cell further when that cell is floor without a box; there are no pulls. Moving into a wall, or
into a box that cannot move (a wall or another box behind it), leaves everything in place: the move
still happens and costs its step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ACTIONS",
    "BLOCKED",
    "DIRECTIONS",
    "PUSHED",
    "WALKED",
    "Board",
    "Level",
    "LevelError",
    "build_level",
    "render_level",
]

#: Action words and their (row, column) steps. The order is the solver's and oracle's order of moves.
DIRECTIONS: dict[str, tuple[int, int]] = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
ACTIONS: tuple[str, ...] = tuple(DIRECTIONS)

#: What one move did (returned by :meth:`Board.move`).
BLOCKED, WALKED, PUSHED = 0, 1, 2

# Board symbols (RAGEN's convention) and their ANSI colours.
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "√", "P", "S"
_COLORS = {
    WALL: "\x1b[90m",
    FLOOR: "\x1b[2m",
    TARGET: "\x1b[31m",
    BOX: "\x1b[1;33m",
    BOX_ON_TARGET: "\x1b[1;32m",
    PLAYER: "\x1b[1;36m",
    PLAYER_ON_TARGET: "\x1b[1;36m",
}
_RESET = "\x1b[0m"
# XSB's symbols for the empty room, used by state keys ("-" is XSB's other floor symbol: no spaces in a key)
_XSB_ROOM = {WALL: "#", FLOOR: "-", TARGET: "."}


class LevelError(ValueError):
    """A level that breaks the rules of a Sokoban position (the message says which and where)."""


@dataclass(frozen=True)
class Level:
    """One Sokoban position. Build it with :func:`build_level` (or :mod:`envs.sokoban.xsb`), which validates it.

    ``walls``: every cell that is not floor. ``targets`` and ``boxes``: equally many floor cells.
    ``player``: a floor cell without a box. ``name``: a label (the XSB comment before the level, say).
    """

    rows: int
    cols: int
    walls: frozenset[int]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int
    name: str = ""

    @property
    def num_boxes(self) -> int:
        return len(self.boxes)

    @property
    def solved(self) -> bool:
        return self.boxes == self.targets

    def offset(self, action: str) -> int:
        """The change of a cell index for one move in direction ``action``."""
        dr, dc = DIRECTIONS[action]
        return dr * self.cols + dc

    def position(self, cell: int) -> tuple[int, int]:
        """(row, column) of a cell index."""
        return divmod(cell, self.cols)

    def with_state(self, boxes: Iterable[int], player: int) -> Level:
        """The same room with other boxes and player (not re-validated: :class:`Board` keeps the invariants)."""
        return Level(self.rows, self.cols, self.walls, self.targets, frozenset(boxes), player, self.name)


def build_level(
    rows: int,
    cols: int,
    *,
    open_cells: Iterable[int],
    targets: Iterable[int],
    boxes: Iterable[int],
    player: int,
    name: str = "",
) -> Level:
    """Validate a position and return it as a :class:`Level`; raise :class:`LevelError` if it is malformed.

    ``open_cells``: every cell that is not a wall (targets, boxes and the player included). Open cells
    the player cannot reach, even with every box removed, become walls; a box or target among them is
    an error, and so is an open region that reaches the edge of the grid (the room must be enclosed).
    """
    if rows < 3 or cols < 3:
        raise LevelError(f"a level needs at least 3x3 cells, got {rows}x{cols}")
    cells = rows * cols
    open_set, target_set, box_set = frozenset(open_cells), frozenset(targets), frozenset(boxes)
    outside = [c for c in (*open_set, *target_set, *box_set, player) if not 0 <= c < cells]
    if outside:
        raise LevelError(f"cell {outside[0]} lies outside the {rows}x{cols} grid")
    if player in box_set:
        raise LevelError("the player stands on a box")
    if not target_set:
        raise LevelError("the level has no box and no target")
    if len(box_set) != len(target_set):
        raise LevelError(f"the level has {len(box_set)} boxes but {len(target_set)} targets; they must be equal")
    floor = _walkable_region(rows, cols, open_set | target_set | box_set | {player}, player)
    for kind, group in (("box", box_set), ("target", target_set)):
        stray = sorted(group - floor)
        if stray:
            r, c = divmod(stray[0], cols)
            raise LevelError(f"the {kind} at row {r}, column {c} cannot be reached by the player")
    if box_set == target_set:
        raise LevelError("every box is already on a target: the level is solved before it starts")
    walls = frozenset(range(cells)) - floor
    return Level(rows, cols, walls, target_set, box_set, player, name)


def _walkable_region(rows: int, cols: int, open_set: frozenset[int], start: int) -> frozenset[int]:
    """Open cells connected to ``start``; raises if the region touches the grid's edge."""
    seen, stack = {start}, [start]
    while stack:
        cell = stack.pop()
        r, c = divmod(cell, cols)
        if r in (0, rows - 1) or c in (0, cols - 1):
            raise LevelError(f"the room is not enclosed by walls: the player can walk to row {r}, column {c}")
        for nxt in (cell - cols, cell + cols, cell - 1, cell + 1):
            if nxt in open_set and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return frozenset(seen)


class Board:
    """The mutable state of a game: a level's fixed room with the current player and boxes.

    :meth:`move` applies the rules in a few dictionary and set operations (it is the inner loop of
    ``SokobanEnv.step``). ``boxes_on_target`` is kept up to date.
    """

    __slots__ = (
        "_background",
        "_key_background",
        "_offsets",
        "_targets",
        "_walls",
        "boxes",
        "boxes_on_target",
        "level",
        "player",
    )

    def __init__(self, level: Level) -> None:
        self.level = level
        self.player = level.player
        self.boxes = set(level.boxes)
        self.boxes_on_target = len(level.boxes & level.targets)
        self._walls = level.walls
        self._targets = level.targets
        self._offsets = {action: level.offset(action) for action in ACTIONS}
        self._background = _background(level)
        self._key_background = [_XSB_ROOM[symbol] for symbol in self._background]

    @property
    def solved(self) -> bool:
        return self.boxes_on_target == len(self.boxes)

    def move(self, action: str) -> int:
        """Apply one move (a word of :data:`ACTIONS`); return :data:`BLOCKED`, :data:`WALKED` or :data:`PUSHED`."""
        step = self._offsets[action]
        nxt = self.player + step
        if nxt in self._walls:
            return BLOCKED
        if nxt not in self.boxes:
            self.player = nxt
            return WALKED
        beyond = nxt + step
        if beyond in self._walls or beyond in self.boxes:
            return BLOCKED
        self.boxes.remove(nxt)
        self.boxes.add(beyond)
        self.boxes_on_target += (beyond in self._targets) - (nxt in self._targets)
        self.player = nxt
        return PUSHED

    def snapshot(self) -> Level:
        """The current position as an immutable :class:`Level`."""
        return self.level.with_state(self.boxes, self.player)

    def state_key(self) -> str:
        """The whole position as one string: XSB rows (``-`` for floor) joined by ``/``, e.g. ``"#####/#@$.#/#####"``.

        Walls, targets, boxes and the player, every cell of the grid: equal keys exactly when the positions are
        equal, levels of other rooms included; ``key.replace("/", "\\n")`` is the position in XSB. Nothing else
        (no move counter, no level name): it keys the board position.
        """
        symbols = list(self._key_background)
        targets = self._targets
        for box in self.boxes:
            symbols[box] = "*" if box in targets else "$"
        symbols[self.player] = "+" if self.player in targets else "@"
        cols = self.level.cols
        return "/".join("".join(symbols[r * cols : (r + 1) * cols]) for r in range(self.level.rows))

    def render(self, *, color: bool = False, separator: str = "") -> str:
        """The board in RAGEN's symbols, one text line per row with ``separator`` between cells; ``color``
        adds ANSI colours."""
        return _draw(self.level, self._background, self.boxes, self.player, color, separator)


def render_level(level: Level, *, color: bool = False, separator: str = "") -> str:
    """``level`` (its boxes and player) in RAGEN's symbols, one text line per row."""
    return _draw(level, _background(level), level.boxes, level.player, color, separator)


def _background(level: Level) -> list[str]:
    """The symbol of every cell of the empty room: wall, target or floor."""
    return [
        WALL if cell in level.walls else TARGET if cell in level.targets else FLOOR
        for cell in range(level.rows * level.cols)
    ]


def _draw(level: Level, background: list[str], boxes: Iterable[int], player: int, color: bool, separator: str) -> str:
    symbols = list(background)
    for box in boxes:
        symbols[box] = BOX_ON_TARGET if box in level.targets else BOX
    symbols[player] = PLAYER_ON_TARGET if player in level.targets else PLAYER
    if color:
        symbols = [f"{_COLORS[s]}{s}{_RESET}" for s in symbols]
    cols = level.cols
    return "\n".join(separator.join(symbols[r * cols : (r + 1) * cols]) for r in range(level.rows))
