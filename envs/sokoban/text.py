"""What the Sokoban agent reads: the instructions, the report of each turn and the status line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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

__all__ = ["MoveReport", "answer_example", "describe_turn", "expected_format", "instructions", "status_line"]

_EXAMPLE = "Up || Left"


@dataclass(frozen=True)
class MoveReport:
    """One executed move: the action word, what it did (a :mod:`envs.sokoban.room` code) and the change in
    the number of boxes on targets (+1 a box landed on a target, -1 one left a target)."""

    action: str
    result: int
    on_target_change: int


def answer_example(require_answer_tag: bool) -> str:
    """An example of a well-formed turn."""
    return f"<answer>{_EXAMPLE}</answer>" if require_answer_tag else _EXAMPLE


def expected_format(max_actions_per_turn: int, require_answer_tag: bool) -> str:
    """One sentence on the action format, used in the instructions and after an invalid turn."""
    plural = "" if max_actions_per_turn == 1 else f" (up to {max_actions_per_turn}, separated by ||)"
    wrap = " inside <answer></answer>" if require_answer_tag else ""
    return f"Answer with Up, Down, Left or Right{plural}{wrap}, e.g. {answer_example(require_answer_tag)}"


def instructions(*, max_actions_per_turn: int, require_answer_tag: bool) -> str:
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
    if max_actions_per_turn > 1:
        lines.append(f"- You may send up to {max_actions_per_turn} moves per turn; they are made in order.")
    if require_answer_tag:
        lines.append("- You may think first inside <think></think>; only the <answer> block is read.")
    lines += ["", expected_format(max_actions_per_turn, require_answer_tag) + "."]
    return "\n".join(lines)


def describe_turn(
    moves: Sequence[MoveReport],
    *,
    outcome: str,
    error: str,
    over_cap: bool,
    not_executed: int,
    max_actions_per_turn: int,
    require_answer_tag: bool,
) -> str:
    """The report of one turn (without the board). ``outcome``: "solved", "step_limit" or ""."""
    lines = []
    if moves:
        lines.append("You moved: " + ", ".join(_describe_move(m) for m in moves) + ".")
    if error:
        rest = "The rest of your answer was ignored" if moves else "Nothing happened"
        lines.append(f"Invalid action: {error}. {rest}. {expected_format(max_actions_per_turn, require_answer_tag)}.")
    if over_cap:
        lines.append(f"Only the first {max_actions_per_turn} actions of a turn count; the others were ignored.")
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
