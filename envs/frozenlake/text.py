"""What the FrozenLake agent reads: the instructions, the grid, and the report of each turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envs.actions import ParsedActions, WordActions, offset_words
from envs.frozenlake.maps import DIRECTIONS, LakeMap, Position

__all__ = ["Move", "describe_turn", "instructions", "relative_lines", "render_grid"]

# Board symbols (RAGEN's convention) and their ANSI colours for render().
_PLAYER, _FROZEN, _HOLE, _GOAL, _PLAYER_IN_HOLE, _PLAYER_ON_GOAL = "P", "_", "O", "G", "X", "√"
_COLORS = {
    _PLAYER: "\x1b[1;33m",
    _FROZEN: "\x1b[2m",
    _HOLE: "\x1b[34m",
    _GOAL: "\x1b[1;32m",
    _PLAYER_IN_HOLE: "\x1b[1;31m",
    _PLAYER_ON_GOAL: "\x1b[1;32m",
}
_RESET = "\x1b[0m"


@dataclass(frozen=True)
class Move:
    """One executed move: the direction asked for, the one taken (they differ after a slip), whether it moved, and
    the distance to the goal where it ended (``None`` in a hole)."""

    intended: str
    taken: str
    moved: bool
    distance: int | None = None


def render_grid(lake: LakeMap, position: Position, *, color: bool = False) -> str:
    """The map as rows of symbols, the player drawn at ``position``."""
    lines = []
    for r, row in enumerate(lake.rows):
        symbols = []
        for c, tile in enumerate(row):
            symbol = _tile_symbol(tile, (r, c) == position)
            symbols.append(f"{_COLORS[symbol]}{symbol}{_RESET}" if color else symbol)
        lines.append("".join(symbols))
    return "\n".join(lines)


def relative_lines(lake: LakeMap, position: Position, *, holes: bool = False, safe: bool = False) -> str:
    """The position in words, relative to the player: what lies one move away in each direction and where the
    goal is ("Next to you: Up edge, Down ice, Left hole, Right ice." and "The goal is 2 down and 1 right of
    you."); with ``holes``, a third line with where every hole is ("Holes: 1 up; 2 down and 1 left of you.",
    row by row from the top); with ``safe``, a last line naming the moves that land on ice or the goal ("Safe
    moves: Up, Right.", "Safe moves: none." when every neighbour is a hole or the edge); empty once the player is
    on the goal or in a hole.

    The grid asks a reader to find symbols by their column; these lines name the directions with the action
    words, which is what a small model can copy from. They say what a person sees on the map, never a path.
    """
    if lake.tile(position) in ("G", "H"):
        return ""
    around = ", ".join(f"{direction} {_neighbour_name(lake, position, direction)}" for direction in DIRECTIONS)
    lines = [f"Next to you: {around}.", f"The goal is {offset_words(position, lake.goal)} of you."]
    if holes:
        where = [offset_words(position, hole) for hole in _holes(lake)]
        lines.append(f"Holes: {'; '.join(where)} of you." if where else "No holes.")
    if safe:
        moves = [d for d in DIRECTIONS if _neighbour_name(lake, position, d) in ("ice", "goal")]
        lines.append(f"Safe moves: {', '.join(moves) if moves else 'none'}.")
    return "\n".join(lines)


def _holes(lake: LakeMap) -> list[Position]:
    rows, cols = lake.shape
    return [(r, c) for r in range(rows) for c in range(cols) if lake.is_hole((r, c))]


def _neighbour_name(lake: LakeMap, position: Position, direction: str) -> str:
    target = lake.move(position, direction)
    if target == position:
        return "edge"
    return {"H": "hole", "G": "goal"}.get(lake.tile(target), "ice")


def _tile_symbol(tile: str, has_player: bool) -> str:
    if tile == "H":
        return _PLAYER_IN_HOLE if has_player else _HOLE
    if tile == "G":
        return _PLAYER_ON_GOAL if has_player else _GOAL
    return _PLAYER if has_player else _FROZEN


def instructions(word_actions: WordActions, *, is_slippery: bool) -> str:
    """The system prompt: goal, legend, rules and the action format (constant for a configuration)."""
    lines = [
        "You are walking on a frozen lake. Reach the goal without falling into a hole.",
        "",
        "Map symbols:",
        f"{_PLAYER}: you",
        f"{_FROZEN}: frozen ice, safe to walk on",
        f"{_HOLE}: a hole",
        f"{_GOAL}: the goal",
        f"{_PLAYER_IN_HOLE}: you, fallen into a hole",
        f"{_PLAYER_ON_GOAL}: you, on the goal",
        "",
        "Rules:",
        "- Each move takes you one tile Up, Down, Left or Right (Up is towards the first row).",
        "- Moving into the edge of the lake leaves you where you are.",
        "- Reaching the goal gives a reward of 1 and ends the game; falling into a hole ends it with 0.",
    ]
    if is_slippery:
        lines.append(
            "- The ice is slippery: a move goes in the direction you chose with probability 1/3 and in "
            "each of the two perpendicular directions with probability 1/3."
        )
    lines += [*word_actions.rules(), "", word_actions.describe() + "."]
    return "\n".join(lines)


def describe_turn(moves: Sequence[Move], parsed: ParsedActions, word_actions: WordActions, *, outcome: str) -> str:
    """The report of one turn (without the grid). ``outcome``: "goal", "hole", "step_limit" or ""."""
    lines = []
    if moves:
        lines.append("You moved: " + ", ".join(_describe_move(m) for m in moves) + ".")
    lines += word_actions.feedback(parsed, executed=len(moves))
    lines.append(_OUTCOMES[outcome])
    return "\n".join(line for line in lines if line)


_OUTCOMES = {
    "goal": "You reached the goal!",
    "hole": "You fell into a hole. Game over.",
    "step_limit": "You ran out of moves. Game over.",
    "": "",
}


def _describe_move(move: Move) -> str:
    text = move.intended if move.taken == move.intended else f"{move.intended} (slipped {move.taken})"
    return text if move.moved else f"{text} (blocked by the edge)"
