"""What the Sokoban agent reads: the instructions, the report of each turn and the status line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envs.actions import ParsedActions, WordActions, offset_words
from envs.sokoban.room import (
    ACTIONS,
    BLOCKED,
    BOX,
    BOX_ON_TARGET,
    FLOOR,
    PLAYER,
    PLAYER_ON_TARGET,
    PUSHED,
    TARGET,
    WALL,
    Board,
)

__all__ = ["MoveReport", "describe_turn", "instructions", "positions_line", "relative_lines", "status_line"]


#: What each board symbol is called, in the legend of the instructions and in the relative lines.
_NAMES = {
    WALL: "wall",
    FLOOR: "floor",
    TARGET: "target",
    BOX: "box",
    BOX_ON_TARGET: "box on a target",
    PLAYER: "you",
    PLAYER_ON_TARGET: "you on a target",
}


@dataclass(frozen=True)
class MoveReport:
    """One executed move: the action word, what it did (a :mod:`envs.sokoban.room` code) and the change in
    the number of boxes on targets (+1 a box landed on a target, -1 one left a target)."""

    action: str
    result: int
    on_target_change: int


def instructions(word_actions: WordActions, format_penalty: float, *, positions: bool = False) -> str:
    """The system prompt: goal, legend, rules, rewards and the action format (constant for a configuration).

    Compact on purpose: it opens every episode, so each token of it is paid for at every rollout,
    scoring pass and update (about 110 tokens with SmolLM2's tokenizer).
    """
    legend = ", ".join(f"{symbol} {name}" for symbol, name in _NAMES.items())
    lines = [
        "You are playing Sokoban: push every box onto a target.",
        f"Symbols: {legend}.",
        "Up is towards the top row. Walking into a box pushes it one cell if the cell behind it is free; "
        "boxes cannot be pulled, and a box in a corner is stuck for good.",
        *(["Positions are (row, column), counted from 0 at the top left."] if positions else []),
        f"Rewards: -0.1 per move, +1 per box pushed onto a target (-1 off), +10 when all are on targets; "
        f"an invalid answer costs {format_penalty:g}.",
    ]
    lines += [line.removeprefix("- ") for line in word_actions.rules()]
    lines.append(word_actions.describe() + ".")
    return "\n".join(lines)


def describe_turn(
    moves: Sequence[MoveReport],
    parsed: ParsedActions,
    word_actions: WordActions,
    *,
    outcome: str,
) -> str:
    """The report of one turn (without the board). ``outcome``: "solved", "step_limit" or ""."""
    lines = []
    if moves:
        lines.append("You moved: " + ", ".join(_describe_move(m) for m in moves) + ".")
    lines += word_actions.feedback(parsed, executed=len(moves))
    not_executed = len(parsed.actions) - len(moves)
    if not_executed:
        lines.append(f"The game ended before your last {not_executed} action(s).")
    lines.append(_OUTCOMES[outcome])
    return "\n".join(line for line in lines if line)


def positions_line(board: Board) -> str:
    """Where the player, the boxes and the targets are, as (row, column) from 0 at the top left."""
    level = board.level

    def cells(found: Iterable[int]) -> str:
        return ", ".join(str(level.position(cell)) for cell in sorted(found))

    return f"You: {level.position(board.player)}. Boxes: {cells(board.boxes)}. Targets: {cells(level.targets)}."


def relative_lines(board: Board, *, box_neighbours: bool = False) -> str:
    """The position in words, relative to the player: what is next to the player in each direction, where
    each box is from the player and where the nearest target is from that box (on a 6x6 board with one box:
    "Next to you: Up wall, Down floor, Left box, Right floor." and "The box is 1 down and 2 left of you;
    the target is 1 left of the box."). ``box_neighbours``: under each box's line, what is next to that box
    ("Next to the box: Up wall, Down you, Left floor, Right floor."), the cells a push needs free.

    With several boxes, each box names its nearest target that holds no box (ties: the one nearer the top
    left). The grid asks a reader to find symbols by their column; these lines name the directions with the
    action words, which is what a small model can copy from.
    """
    level = board.level
    here = level.position(board.player)
    around = ", ".join(f"{action} {_cell_name(board, board.player + level.offset(action))}" for action in ACTIONS)
    lines = [f"Next to you: {around}."]
    boxes = sorted(board.boxes)
    for number, box in enumerate(boxes, start=1):
        name = "The box" if len(boxes) == 1 else f"Box {number}"
        where = level.position(box)
        if box in level.targets:
            target = "it is on a target"
        else:
            free = [t for t in sorted(level.targets) if t not in board.boxes]  # never empty: this box is off one
            nearest = min(free, key=lambda t: _distance(level.position(t), where))
            words = f"{offset_words(where, level.position(nearest))} of"
            target = f"the target is {words} the box" if len(boxes) == 1 else f"its nearest free target is {words} it"
        lines.append(f"{name} is {offset_words(here, where)} of you; {target}.")
        if box_neighbours:
            cells = ((action, box + level.offset(action)) for action in ACTIONS)
            named = ", ".join(f"{a} {'you' if c == board.player else _cell_name(board, c)}" for a, c in cells)
            lines.append(f"Next to {'the box' if len(boxes) == 1 else f'box {number}'}: {named}.")
    return "\n".join(lines)


def _cell_name(board: Board, cell: int) -> str:
    """The legend's name of a cell other than the player's."""
    level = board.level
    if cell in board.boxes:
        return _NAMES[BOX_ON_TARGET if cell in level.targets else BOX]
    return _NAMES[WALL if cell in level.walls else TARGET if cell in level.targets else FLOOR]


def _distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def status_line(boxes_on_target: int, num_boxes: int, moves_left: int | None) -> str:
    """Progress shown under the board."""
    moves = "" if moves_left is None else f" Moves left: {moves_left}."
    return f"Boxes on targets: {boxes_on_target}/{num_boxes}.{moves}"


_OUTCOMES = {
    "solved": "Every box is on a target: you solved the puzzle!",
    "step_limit": "You have no moves left. Game over.",
    "": "",
}


def _describe_move(move: MoveReport) -> str:
    if move.result == BLOCKED:
        return f"{move.action} (blocked)"
    if move.result != PUSHED:
        return move.action
    where = {1: " onto a target", -1: " off a target"}.get(move.on_target_change, "")
    return f"{move.action} (pushed a box{where})"
