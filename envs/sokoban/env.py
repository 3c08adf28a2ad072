"""Sokoban as a multi-turn text environment: gym-sokoban's rules and rewards, RAGEN's text convention.

Each turn the agent sends up to ``max_actions_per_turn`` of the words Up, Down, Left, Right separated
by ``||`` (optionally, or with ``require_answer_tag`` necessarily, inside ``<answer>...</answer>``);
they are executed in order.

Rewards (gym-sokoban's), summed over the moves of a turn: -0.1 per move, blocked moves included; +1
when a box lands on a target, -1 when one leaves a target; +10 when every box is on a target. The base
class rounds each turn's reward to 10 decimals, so that, say, three moves give exactly -0.3.

Episode end: every box on a target: ``terminated`` and ``success``. ``max_steps`` moves made:
``truncated``; ``max_turns`` turns taken: ``truncated`` (the base class). A turn with any invalid token,
or no action at all, is invalid and ``format_penalty`` is subtracted; the actions before the first
invalid token are still executed. Actions beyond the cap are ignored (``info["actions_over_cap"]``),
which does not make the turn invalid. Execution stops as soon as the episode ends mid-turn.

Levels come from :func:`envs.sokoban.generator.generate_level` (seeded by ``self.np_random``), from an
XSB file (``level_file``; the seed picks a level) or from ``reset(options=...)``: ``{"level": xsb_text}``
plays that level, ``{"level_index": i}`` the i-th level of ``level_file``, ``{"difficulty": d}`` a generated
level whose optimal solution takes exactly ``d`` moves (``d`` within :attr:`SokobanEnv.difficulty_range`;
the seed and ``d`` fix the level).

The state information of the contract (:mod:`envs.core`), in every info: ``state_key`` is the board
position (:meth:`~envs.sokoban.room.Board.state_key`: XSB rows joined by ``/``, room included, counters
excluded) and ``distance_to_goal`` the optimal number of moves left (:mod:`envs.sokoban.plans`: the
exact solver, cached along optimal solutions; ``None`` once the position is unsolvable, a box stuck in a
corner say, or beyond the solver's budget). Neither is ever shown to the model. After a step, the
contract's per-move keys too: ``move_distances`` (the distance after each move the turn made) and
``move_spans`` (where in the action text each of those moves was written).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from envs.actions import ParsedActions, WordActions
from envs.core import StepOutcome, TextEnv
from envs.sokoban.generator import GeneratedLevel, difficulty_range, generate_level, min_floor_cells
from envs.sokoban.plans import PlanCache, phase_turns
from envs.sokoban.room import ACTIONS, PUSHED, Board, Level
from envs.sokoban.solver import Solution, solve
from envs.sokoban.text import MoveReport, describe_turn, instructions, positions_line, relative_lines, status_line
from envs.sokoban.xsb import load_xsb, parse_xsb

__all__ = ["BOARD_SEPARATORS", "LEVELS_DIR", "ORACLE_TURNS", "STEP_REWARD", "SokobanEnv"]

#: ``oracle_turns`` option: how the oracle's solution is cut into turns (:meth:`SokobanEnv.oracle`).
ORACLE_TURNS = ("packed", "phases")
#: ``board`` option: what stands between two cells of a row.
BOARD_SEPARATORS = {"cells": " ", "grid": ""}
STEP_REWARD = -0.1  # every move, blocked or not
BOX_ON_TARGET_REWARD = 1.0  # per box that lands on a target (the same amount is lost when one leaves)
SOLVED_REWARD = 10.0
LEVELS_DIR = Path(__file__).parent / "levels"
_SOLVER_EXPANSIONS = 200_000  # for levels from files, the oracle and distance_to_goal; generated levels come solved
# The difficulty option's attempt budget, in units of max_attempts: exact move counts are rarer than bounds.
_DIFFICULTY_ATTEMPTS_FACTOR = 10


class SokobanEnv(TextEnv):
    """Sokoban for LLM agents: generated levels with a known optimal solution, several moves per turn.

    Args:
        dim: room size including the outer walls (gym-sokoban's convention): an int for a square room
            or ``[rows, columns]``. ``6`` is RAGEN's "simple" 6x6 room. Ignored with ``level_file``.
        num_boxes: boxes (and targets) per generated level. Ignored with ``level_file``.
        max_turns: turn limit (``None``: none), handled by :class:`~envs.core.TextEnv`.
        max_steps: move limit per episode; reaching it truncates. The default, 100, never binds with
            the default turn limit (5 turns of 5 moves), as in FrozenLake.
        max_actions_per_turn: moves read per turn (RAGEN uses 5); the rest is ignored.
        require_answer_tag: only text inside ``<answer>...</answer>`` counts.
        format_penalty: subtracted from the reward of an invalid turn. The default, 1.0, makes an unreadable
            turn cost more than any valid turn's moves (at most ``max_actions_per_turn`` x 0.1), so the
            format carries a learning signal; RAGEN's 0.1 costs no more than one move (a warning says so).
        min_pushes: generated levels need at least this many pushes (every box also starts off its
            target, so at least ``num_boxes``).
        max_moves: generated levels are solvable in at most this many moves. ``None``: the episode's
            move budget, ``min(max_steps, max_turns * max_actions_per_turn)``; a larger value is
            lowered to that budget, so that every generated level can be solved within the limits.
        level_file: an XSB file (a path, or a file name in ``envs/sokoban/levels/``) to draw levels
            from instead of generating them; the seed picks the level.
        max_attempts: rooms the generator may try per level before it raises
            :class:`~envs.sokoban.generator.GenerationError` (seeded, so no wall-clock limit).
        render_mode: ``"ansi"`` or ``None``.
        board: how the board is written: ``"grid"`` (the default, RAGEN's) writes rows of adjacent
            symbols, which BPE tokenizers merge into runs of varying length (SmolLM2 reads ``####`` as one
            token and ``#`` as another), so a symbol's column is not visible in the tokens; ``"cells"`` puts
            a space between cells, so that every cell is one token and rows line up (about 19 more tokens
            per 6x6 board).
        positions: add a line with the (row, column) of the player, the boxes and the targets, counted
            from 0 at the top left, under the board.
        relative: add lines in words under the board (:func:`~envs.sokoban.text.relative_lines`): what is
            next to the player in each direction, and where each box is from the player and its target
            from the box ("The box is 1 down and 2 left of you; the target is 1 left of the box.").
        box_line: with ``relative``, a line under each box's: what is next to the box in each direction
            ("Next to the box: Up wall, Down you, Left floor, Right floor."), as the board shows it.
        oracle_turns: how :meth:`oracle` cuts its solution into turns: ``"packed"``, ``max_actions_per_turn``
            moves a turn; ``"phases"``, a turn ends where the solution turns from walking to pushing or back
            (:func:`~envs.sokoban.plans.phase_turns`, within the turns left), so that each turn of a warm-up
            on the oracle's episodes is one step read off the board. The moves are the same optimal ones.

    Info keys besides the standard ones: ``boxes_on_target``, ``num_boxes``, ``steps`` (moves so far),
    ``pushes``, ``optimal_moves`` (of the start position; ``None`` if unsolvable or unknown),
    ``level_name``, ``state_key`` and ``distance_to_goal`` (module docstring); after a step also
    ``actions_executed``, ``actions_not_executed`` (valid actions skipped because the episode ended),
    ``actions_over_cap``, ``invalid_reason``, ``move_distances`` and ``move_spans`` (one per executed action: the
    distance to the goal after it, and its ``[start, end)`` characters in the action text). Metrics:
    ``boxes_on_target_fraction``, ``moves`` and ``pushes`` for the episode so far.
    """

    def __init__(
        self,
        *,
        dim: int | tuple[int, int] | list[int] = 6,
        num_boxes: int = 1,
        max_turns: int | None = 5,
        max_steps: int = 100,
        max_actions_per_turn: int = 5,
        require_answer_tag: bool = False,
        format_penalty: float = 1.0,
        min_pushes: int = 1,
        max_moves: int | None = None,
        level_file: str | None = None,
        max_attempts: int = 200,
        render_mode: str | None = "ansi",
        board: str = "grid",
        positions: bool = False,
        relative: bool = True,
        oracle_turns: str = "packed",
        box_line: bool = False,
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        _check_positive(
            max_steps=max_steps,
            max_actions_per_turn=max_actions_per_turn,
            max_attempts=max_attempts,
            num_boxes=num_boxes,
            min_pushes=min_pushes,
        )
        self.max_steps = int(max_steps)
        self.max_actions_per_turn = int(max_actions_per_turn)
        self.require_answer_tag = bool(require_answer_tag)
        self.max_attempts = int(max_attempts)
        if board not in BOARD_SEPARATORS:
            raise ValueError(f"board must be one of {sorted(BOARD_SEPARATORS)}, got {board!r}")
        self.board_format = board
        self.show_positions = bool(positions)
        self.show_relative = bool(relative)
        self.box_line = bool(box_line)
        if self.box_line and not self.show_relative:
            raise ValueError("box_line=True adds a line to the relative lines: set relative=True as well")
        if oracle_turns not in ORACLE_TURNS:
            raise ValueError(f"oracle_turns must be one of {list(ORACLE_TURNS)}, got {oracle_turns!r}")
        self.oracle_turns = oracle_turns
        self.levels = _load_level_file(level_file) if level_file is not None else None
        self.shape = _normalize_dim(dim)
        self.num_boxes = int(num_boxes)
        self.min_pushes = int(min_pushes)
        self.max_moves = self._move_bound(max_moves)
        if self.levels is None:
            self._check_generator_options()
        self.word_actions = WordActions(
            ACTIONS, self.max_actions_per_turn, self.require_answer_tag, example=("Up", "Left")
        )
        if self.format_penalty < self.max_actions_per_turn * -STEP_REWARD:
            warnings.warn(
                f"format_penalty={self.format_penalty:g} makes an invalid turn cheaper than a valid turn of "
                f"{self.max_actions_per_turn} moves ({self.max_actions_per_turn * STEP_REWARD:g}): the format then "
                f"carries no learning signal; use format_penalty >= {self.max_actions_per_turn * -STEP_REWARD:g}",
                UserWarning,
                stacklevel=2,
            )
        self.instructions = instructions(self.word_actions, self.format_penalty, positions=self.show_positions)
        self.action_format = self.word_actions.example_turn()
        self._level: Level | None = None
        self._board: Board | None = None
        self._optimal: Solution | None = None
        self._steps = 0
        self._pushes = 0
        self._plans = PlanCache(_SOLVER_EXPANSIONS)
        self._file_solutions: dict[int, Solution | None] = {}

    @property
    def level(self) -> Level | None:
        """The current episode's start position (``None`` before the first reset)."""
        return self._level

    @property
    def optimal_solution(self) -> Solution | None:
        """An optimal solution of the start position (``None``: unsolvable, or beyond the solver's budget)."""
        return self._optimal

    @property
    def board(self) -> Board:
        """The current position (read it, do not move it: use :meth:`step`)."""
        return self._require_board()

    @property
    def difficulty_range(self) -> tuple[int, int]:
        """The difficulties ``reset(options={"difficulty": d})`` takes: optimal moves, ``(lowest, highest)`` inclusive.

        Within the bounds of the configuration (``max(min_pushes, num_boxes) + 1`` moves: the player never
        starts next to a box; ``max_moves``), narrowed to the move counts the generator reaches readily in
        this room (:func:`~envs.sokoban.generator.difficulty_range`, computed once per configuration: a 6x6
        room with one box rarely has an optimal solution of 20 moves or more). An environment playing a
        ``level_file`` generates no levels: it has no difficulty range (``AttributeError``, so that
        ``hasattr`` says so).
        """
        if self.levels is not None:
            raise AttributeError("SokobanEnv with a level_file generates no levels, so it has no difficulty_range")
        rows, cols = self.shape
        return difficulty_range(rows, cols, self.num_boxes, min_pushes=self.min_pushes, max_moves=self.max_moves)

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        self._level, self._optimal = self._choose_level(options)
        self._board = Board(self._level)
        self._steps = 0
        self._pushes = 0
        self._plans.clear()
        self._plans.remember(self._level, None if self._optimal is None else self._optimal.moves)
        observation = f"{self._board_text()}\n{self._status(0)} Your move."
        return observation, self._state_info()

    def _step(self, action: str) -> StepOutcome:
        board = self._require_board()
        parsed = self.word_actions.parse(action)
        on_target_before = board.boxes_on_target
        moves, distances = self._execute(board, parsed.actions)
        solved = board.solved
        out_of_steps = not solved and self._steps >= self.max_steps
        reward = (
            len(moves) * STEP_REWARD
            + (board.boxes_on_target - on_target_before) * BOX_ON_TARGET_REWARD
            + (SOLVED_REWARD if solved else 0.0)
        )
        outcome = "solved" if solved else "step_limit" if out_of_steps else ""
        report = describe_turn(moves, parsed, self.word_actions, outcome=outcome)
        return StepOutcome(
            observation=f"{report}\n{self._board_text()}\n{self._status(self.turn + 1)}",
            reward=reward,
            terminated=solved,
            truncated=out_of_steps,
            success=solved,
            action_is_valid=parsed.is_valid,
            metrics={
                "boxes_on_target_fraction": board.boxes_on_target / len(board.boxes),
                "moves": self._steps,
                "pushes": self._pushes,
            },
            extra_info=self._step_info(parsed, moves, distances),
        )

    def render_text(self, color: bool = False) -> str:
        return self._require_board().render(color=color, separator=BOARD_SEPARATORS[self.board_format])

    def _board_text(self) -> str:
        """The board as the observation shows it, with the positions and relative lines when asked for."""
        board = self._require_board()
        lines = [self.render_text()]
        if self.show_positions:
            lines.append(positions_line(board))
        if self.show_relative:
            lines.append(relative_lines(board, box_neighbours=self.box_line))
        return "\n".join(lines)

    def oracle(self) -> list[str] | None:
        """An optimal solution (fewest moves, then fewest pushes) from the current position, cut into turns
        as ``oracle_turns`` says. ``[]`` once the episode is over; ``None`` before reset, when the position is
        unsolvable (a box stuck in a corner, say) or when the solver's budget runs out.
        """
        if self._board is None:
            return None
        if self.episode_over:
            return []
        moves = self._plans.plan(self._board)
        if moves is None:
            return None
        if self.oracle_turns == "phases":
            turns_left = None if self.max_turns is None else self.max_turns - self.turn
            cuts = phase_turns(self._board, moves, self.max_actions_per_turn, turns_left)
            if cuts is not None:
                return [self.word_actions.turn(words) for words in cuts]
        return self.word_actions.turns(moves)

    def valid_actions(self) -> list[str]:
        return [self.word_actions.turn([word]) for word in ACTIONS]

    # ----------------------------------------------------------------------------------------------
    # Levels and dynamics
    # ----------------------------------------------------------------------------------------------
    def _choose_level(self, options: Mapping[str, Any]) -> tuple[Level, Solution | None]:
        """The start position for an episode and its optimal solution (``None``: unsolvable or unknown)."""
        unknown = sorted(set(options) - {"level", "level_index", "difficulty"})
        if unknown:
            raise ValueError(
                f"unknown reset options {unknown}; SokobanEnv accepts 'level', 'level_index' and 'difficulty'"
            )
        difficulty = options.get("difficulty")
        if difficulty is not None:
            if options.get("level") is not None or options.get("level_index") is not None:
                raise ValueError("the option 'difficulty' generates a level: it cannot be combined with a given level")
            if self.levels is not None:
                raise ValueError("the option 'difficulty' needs generated levels: leave out level_file")
            generated = self._generate(self._check_difficulty(difficulty))
            return generated.level, generated.solution
        if options.get("level") is not None:
            levels = parse_xsb(str(options["level"]), source="options['level']")
            if len(levels) != 1:
                raise ValueError(f"options['level'] must hold one level in XSB text, found {len(levels)}")
            return levels[0], _solve_start(levels[0])
        if self.levels is not None:
            index = options.get("level_index")
            if index is None:
                index = int(self.np_random.integers(len(self.levels)))
            if not 0 <= index < len(self.levels):
                raise ValueError(f"level_index must lie in [0, {len(self.levels)}), got {index!r}")
            if index not in self._file_solutions:
                self._file_solutions[index] = _solve_start(self.levels[index])
            return self.levels[index], self._file_solutions[index]
        if options.get("level_index") is not None:
            raise ValueError("the option 'level_index' needs a level_file")
        generated = self._generate(None)
        return generated.level, generated.solution

    def _generate(self, difficulty: int | None) -> GeneratedLevel:
        """A level from the seeded generator: within the move bound, or of exactly ``difficulty`` optimal moves."""
        rows, cols = self.shape
        if difficulty is None:
            bounds = {"max_moves": self.max_moves, "max_attempts": self.max_attempts}
        else:
            attempts = _DIFFICULTY_ATTEMPTS_FACTOR * self.max_attempts
            bounds = {"min_moves": difficulty, "max_moves": difficulty, "max_attempts": attempts}
        return generate_level(rows, cols, self.num_boxes, self.np_random, min_pushes=self.min_pushes, **bounds)

    def _check_difficulty(self, difficulty: Any) -> int:
        low, high = self.difficulty_range
        if isinstance(difficulty, bool) or not isinstance(difficulty, Integral) or not low <= difficulty <= high:
            raise ValueError(
                f"difficulty must be an int in [{low}, {high}] (optimal moves; difficulty_range of this "
                f"{self.shape[0]}x{self.shape[1]} room with {self.num_boxes} box(es)), got {difficulty!r}"
            )
        return int(difficulty)

    def _execute(self, board: Board, actions: tuple[str, ...]) -> tuple[list[MoveReport], list[int | None]]:
        """Make the moves in order until the puzzle is solved or the step limit is reached; the moves made and
        the distance to the goal after each (the solver's plans are cached, so an optimal move costs no search)."""
        moves: list[MoveReport] = []
        distances: list[int | None] = []
        for action in actions:
            if board.solved or self._steps >= self.max_steps:
                break
            before = board.boxes_on_target
            result = board.move(action)
            self._steps += 1
            self._pushes += result == PUSHED
            moves.append(MoveReport(action, result, board.boxes_on_target - before))
            distances.append(self._distance(board))
        return moves, distances

    def _distance(self, board: Board) -> int | None:
        """The optimal moves left from ``board``'s position; ``None`` when unsolvable or unknown."""
        plan = self._plans.plan(board)
        return None if plan is None else len(plan)

    def _move_bound(self, max_moves: int | None) -> int:
        """The generator's bound on optimal moves: ``max_moves`` within the episode's move budget."""
        budget = self.max_steps
        if self.max_turns is not None:
            budget = min(budget, self.max_turns * self.max_actions_per_turn)
        if max_moves is None:
            return budget
        _check_positive(max_moves=max_moves)
        return min(int(max_moves), budget)

    def _check_generator_options(self) -> None:
        rows, cols = self.shape
        interior = max(rows - 2, 0) * max(cols - 2, 0)
        if interior < min_floor_cells(self.num_boxes):
            raise ValueError(
                f"a {rows}x{cols} room (outer walls included) has {interior} inner cells, too few for "
                f"{self.num_boxes} box(es): they need at least {min_floor_cells(self.num_boxes)}; "
                "use a larger dim or fewer boxes"
            )
        if max(self.min_pushes, self.num_boxes) > self.max_moves:
            raise ValueError(
                f"levels need at least {max(self.min_pushes, self.num_boxes)} pushes (min_pushes, num_boxes) but "
                f"may take at most {self.max_moves} moves (max_moves, max_steps, max_turns * max_actions_per_turn)"
            )

    # ----------------------------------------------------------------------------------------------
    # Text and info
    # ----------------------------------------------------------------------------------------------
    def _status(self, turns_taken: int) -> str:
        board = self._require_board()
        return status_line(board.boxes_on_target, len(board.boxes), self._moves_left(turns_taken))

    def _moves_left(self, turns_taken: int) -> int:
        """Moves the agent can still make after ``turns_taken`` turns: the step limit or what the turns left
        allow, whichever is less (what the status line says, so the board never promises moves the limits deny)."""
        left = self.max_steps - self._steps
        if self.max_turns is not None:
            left = min(left, (self.max_turns - turns_taken) * self.max_actions_per_turn)
        return max(left, 0)

    def _state_info(self) -> dict[str, Any]:
        board = self._require_board()
        level = self._level
        assert level is not None
        return {
            "boxes_on_target": board.boxes_on_target,
            "num_boxes": len(board.boxes),
            "steps": self._steps,
            "pushes": self._pushes,
            "optimal_moves": None if self._optimal is None else self._optimal.num_moves,
            "level_name": level.name,
            "state_key": board.state_key(),
            "distance_to_goal": self._distance(board),
        }

    def _step_info(
        self, parsed: ParsedActions, moves: list[MoveReport], distances: list[int | None]
    ) -> dict[str, Any]:
        return {
            **self._state_info(),
            "move_distances": distances,
            "move_spans": [list(span) for span in parsed.spans[: len(moves)]],
            "actions_executed": [m.action for m in moves],
            "actions_not_executed": len(parsed.actions) - len(moves),
            "actions_over_cap": parsed.over_cap,
            "invalid_reason": parsed.error,
        }

    def _require_board(self) -> Board:
        if self._board is None:
            raise RuntimeError("SokobanEnv has no level before reset(); call reset() first")
        return self._board


def _normalize_dim(dim: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """(rows, columns) from an int or a pair (any sequence, e.g. an OmegaConf ListConfig)."""
    if isinstance(dim, Integral) and not isinstance(dim, bool):
        shape = (int(dim), int(dim))
    elif (
        isinstance(dim, Sequence)
        and not isinstance(dim, str)
        and len(dim) == 2
        and all(isinstance(d, Integral) and not isinstance(d, bool) for d in dim)
    ):
        shape = (int(dim[0]), int(dim[1]))
    else:
        raise TypeError(f"dim must be an int or a pair [rows, columns] of ints, got {dim!r}")
    if min(shape) < 3:
        raise ValueError(f"dim counts the outer walls and must be at least 3 in each direction, got {dim!r}")
    return shape


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _load_level_file(level_file: str) -> list[Level]:
    """Levels of an XSB file given as a path or as a file name in :data:`LEVELS_DIR`."""
    path = Path(level_file)
    if not path.is_file() and (LEVELS_DIR / level_file).is_file():
        path = LEVELS_DIR / level_file
    if not path.is_file():
        shipped = ", ".join(sorted(p.name for p in LEVELS_DIR.glob("*.xsb")))
        raise FileNotFoundError(f"level_file {level_file!r} is neither a file nor one of the shipped files: {shipped}")
    return load_xsb(path)


def _solve_start(level: Level) -> Solution | None:
    return solve(level, max_expansions=_SOLVER_EXPANSIONS).solution
