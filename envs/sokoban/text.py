"""What the Sokoban agent reads: the instructions, the report of each turn and the status line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envs.actions import ParsedActions, WordActions
from envs.sokoban.room import (
    BLOCKED,
    BOX,
    BOX_ON_TARGET,
    FLOOR,
    PLAYER,
    PLAYER_ON_TARGET,
    PUSHED,
    TARGET,
    WALL,
)

__all__ = ["MoveReport", "describe_turn", "instructions", "status_line"]


@dataclass(frozen=True)
class MoveReport:
    """One executed move: the action word, what it did (a :mod:`envs.sokoban.room` code) and the change in
    the number of boxes on targets (+1 a box landed on a target, -1 one left a target)."""

    action: str
    result: int
    on_target_change: int


def instructions(word_actions: WordActions) -> str:
    """The system prompt: goal, legend, rules and the action format (constant for a configuration)."""
    lines = [
        "You are playing Sokoban. You are in a room with boxes and targets: push every box onto a target.",
        "",
        "Board symbols:",
        f"{WALL}: wall",
        f"{FLOOR}: floor",
        f"{TARGET}: target",
        f"{BOX}: box",
        f"{BOX_ON_TARGET}: box on a target",
        f"{PLAYER}: you",
        f"{PLAYER_ON_TARGET}: you, standing on a target",
        "",
        "Rules:",
        "- Each move takes you one cell Up, Down, Left or Right (Up is towards the first row).",
        "- Walking into a box pushes it one cell further if that cell is floor or an empty target. You cannot pull "
        "a box, and a box cannot be pushed into a wall or another box: such a move leaves everything in place.",
        "- A box pushed into a corner can never be moved again, so plan before you push.",
        "- Every move costs 0.1 points; pushing a box onto a target gives 1 point and pushing one off a target "
        "costs 1; when every box is on a target you get 10 points and the game ends.",
    ]
    lines += [*word_actions.rules(), "", word_actions.describe() + "."]
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
