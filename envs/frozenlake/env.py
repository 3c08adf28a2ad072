"""FrozenLake as a multi-turn text environment (RAGEN's convention).

Walk from the start to the goal over frozen ice without falling into a hole. Each turn the agent sends
up to ``max_actions_per_turn`` of the words Up, Down, Left, Right separated by ``||`` (optionally, or
with ``require_answer_tag`` necessarily, inside ``<answer>...</answer>``); they are executed in order.

Rewards and episode end:

* reaching the goal: reward 1, ``terminated``, ``success``;
* falling into a hole: reward 0, ``terminated``, no success;
* ``max_steps`` moves made: ``truncated``; ``max_turns`` turns taken: ``truncated`` (the base class);
* a turn with any invalid token, or no action at all, is invalid: ``format_penalty`` is subtracted.

Turns that are only partly valid: the actions before the first invalid token are executed, then the
turn counts as invalid. Actions beyond the cap are ignored (``info["actions_over_cap"]``), which does not
make the turn invalid. Execution stops as soon as the episode ends mid-turn. Moving into the border is
a move that leaves the player in place (it counts towards ``max_steps``).

On slippery ice every move goes in the intended direction or in one of the two perpendicular
directions, each with probability 1/3, drawn from ``self.np_random``.

The state information of the contract (:mod:`envs.core`), in every info, never shown to the model:
``state_key`` is the map and the player, ``"SFFF/FHFH/FFFH/HFFG@1,2"`` (the rows joined by ``/``, then
``@row,column``; no counters); ``distance_to_goal`` is the length of a shortest hole-free path from the
player to the goal (0 on the goal, ``None`` in a hole or where no path exists). On slippery ice it is the
same number: the fewest moves left if no move slips, a lower bound on the moves any policy needs (a slip
is still a move to a neighbouring tile, so no move lowers it by more than one). ``reset(options=
{"difficulty": d})`` draws a map whose shortest path from start to goal takes exactly ``d`` moves
(:func:`~envs.frozenlake.maps.generate_map_at_distance`; ``d`` within :attr:`FrozenLakeEnv.difficulty_range`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from envs.actions import ParsedActions, WordActions
from envs.core import StepOutcome, TextEnv
from envs.frozenlake.maps import (
    DIRECTIONS,
    SLIP_OUTCOMES,
    LakeMap,
    Position,
    count_holes,
    distance_range,
    distances_to_goal,
    generate_map,
    generate_map_at_distance,
    normalize_size,
    shortest_path,
)
from envs.frozenlake.planning import SlipperyPlanner
from envs.frozenlake.text import Move, describe_turn, instructions, relative_lines, render_grid

__all__ = ["VOCABULARY", "FrozenLakeEnv"]

VOCABULARY = tuple(DIRECTIONS)


class FrozenLakeEnv(TextEnv):
    """FrozenLake for LLM agents: random solvable maps, optional slippery ice, several moves per turn.

    Args:
        size: map size, an int for a square or ``[rows, columns]``. Ignored when ``desc`` is given.
        frozen_ratio: fraction of tiles that are not holes, start and goal included; the map has
            ``round((1 - frozen_ratio) * rows * columns)`` holes. Ignored when ``desc`` is given.
        is_slippery: each move goes as intended or perpendicular, each with probability 1/3.
        max_turns: turn limit (``None``: none), handled by :class:`~envs.core.TextEnv`.
        max_steps: move limit per episode; reaching it truncates. The default, 100, is Gymnasium's
            limit for its 4x4 map; with the default turn limit (5 turns of 5 moves) it never binds.
        max_actions_per_turn: moves read per turn; the rest is ignored.
        require_answer_tag: only text inside ``<answer>...</answer>`` counts.
        format_penalty: subtracted from the reward of an invalid turn.
        render_mode: ``"ansi"`` or ``None``.
        relative: add two lines in words under the map (:func:`~envs.frozenlake.text.relative_lines`): what lies
            one move away in each direction and where the goal is from the player. ``False``: the grid alone
            (RAGEN's observation).
        hole_line: with ``relative`` (refused without it), a third line: where every hole is from the player,
            in move words.
        safe_line: with ``relative`` (refused without it), a last line naming the moves that land on ice or the
            goal, not in a hole or against the edge ("Safe moves: Up, Right."): the "Next to you" line regrouped,
            nothing a person does not see on the map.
        desc: a fixed map instead of random ones: rows of ``S`` start, ``F`` frozen, ``H`` hole, ``G`` goal
            (Gymnasium's letters; turngym's ``P``, ``_``, ``O`` are accepted too), or one string of such
            lines. It need not be solvable. ``reset(options={"desc": ...})`` sets the map of one episode.

    Info keys besides the standard ones: ``position`` and ``goal`` (row, column), ``steps`` (moves so
    far), ``state_key`` and ``distance_to_goal`` (module docstring); at reset ``map`` (the rows, usable
    as ``desc``); after a step ``actions_executed`` (the moves asked for and made), ``directions_taken``
    (where they went), ``slips``, ``actions_not_executed`` (valid actions skipped because the episode
    ended), ``actions_over_cap``, ``invalid_reason``, ``move_distances`` and ``move_spans`` (per move made: the
    distance to the goal where it ended, and where the action text wrote it).
    Metrics: ``moves``, ``slips`` and ``fell_in_hole`` for the episode so far.
    """

    def __init__(
        self,
        *,
        size: int | tuple[int, int] | list[int] = 4,
        frozen_ratio: float = 0.8,
        is_slippery: bool = False,
        max_turns: int | None = 5,
        max_steps: int = 100,
        max_actions_per_turn: int = 5,
        require_answer_tag: bool = False,
        format_penalty: float = 0.1,
        render_mode: str | None = "ansi",
        desc: str | Sequence[str] | None = None,
        relative: bool = True,
        hole_line: bool = False,
        safe_line: bool = False,
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        if max_actions_per_turn < 1:
            raise ValueError(f"max_actions_per_turn must be a positive integer, got {max_actions_per_turn!r}")
        self.shape = normalize_size(size)
        self.frozen_ratio = float(frozen_ratio)
        self.num_holes = count_holes(self.shape, self.frozen_ratio)
        self.fixed_map = None if desc is None else LakeMap.parse(desc)
        self.is_slippery = bool(is_slippery)
        self.stochastic_dynamics = self.is_slippery
        self.max_steps = int(max_steps)
        self.max_actions_per_turn = int(max_actions_per_turn)
        self.require_answer_tag = bool(require_answer_tag)
        self.show_relative = bool(relative)
        self.hole_line = bool(hole_line)
        self.safe_line = bool(safe_line)
        for name, asked in (("hole_line", self.hole_line), ("safe_line", self.safe_line)):
            if asked and not self.show_relative:
                raise ValueError(f"{name}=True adds a line to the relative lines: set relative=True as well")
        self.word_actions = WordActions(
            VOCABULARY, self.max_actions_per_turn, self.require_answer_tag, example=("Right", "Down")
        )
        self.instructions = instructions(self.word_actions, is_slippery=self.is_slippery)
        self.action_format = self.word_actions.example_turn()
        self._lake: LakeMap | None = None
        self._position: Position = (0, 0)
        self._steps = 0
        self._slips = 0
        self._planner: SlipperyPlanner | None = None
        self._distances: np.ndarray | None = None  # shortest path lengths to the goal, -1: none (distances_to_goal)

    @property
    def lake(self) -> LakeMap | None:
        """The current episode's map (``None`` before the first reset)."""
        return self._lake

    @property
    def position(self) -> Position:
        """The player's (row, column)."""
        return self._position

    @property
    def difficulty_range(self) -> tuple[int, int]:
        """The difficulties ``reset(options={"difficulty": d})`` takes: shortest path lengths, ``(lowest, highest)``.

        From 1 to the longest path without detours the map holds (:func:`~envs.frozenlake.maps.distance_range`).
        An environment with a fixed map (``desc``) draws no maps: it has no difficulty range (``AttributeError``,
        so that ``hasattr`` says so).
        """
        if self.fixed_map is not None:
            raise AttributeError("FrozenLakeEnv with a fixed map (desc) draws no maps, so it has no difficulty_range")
        return distance_range(self.shape, self.num_holes)

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        difficulty = options.get("difficulty")
        if difficulty is not None:
            if options.get("desc") is not None or self.fixed_map is not None:
                raise ValueError("the option 'difficulty' draws a map: it cannot be combined with a map given by desc")
            self._lake = generate_map_at_distance(
                self.np_random, self.shape, self.num_holes, self._check_difficulty(difficulty)
            )
        elif options.get("desc") is not None:
            self._lake = LakeMap.parse(options["desc"])
        elif self.fixed_map is not None:
            self._lake = self.fixed_map
        else:
            self._lake = generate_map(self.np_random, self.shape, self.num_holes)
        self._position = self._lake.start
        self._steps = 0
        self._slips = 0
        self._planner = None
        self._distances = distances_to_goal(self._lake)
        observation = f"{self.render_text()}\nYour move."
        return observation, {**self._state_info(), "map": list(self._lake.rows)}

    def _step(self, action: str) -> StepOutcome:
        lake = self._require_lake()
        parsed = self.word_actions.parse(action)
        moves = self._execute(lake, parsed.actions)
        tile = lake.tile(self._position)
        outcome = {"H": "hole", "G": "goal"}.get(tile, "step_limit" if self._steps >= self.max_steps else "")
        report = describe_turn(moves, parsed, self.word_actions, outcome=outcome)
        return StepOutcome(
            observation=f"{report}\n{self.render_text()}",
            reward=1.0 if outcome == "goal" else 0.0,
            terminated=outcome in ("goal", "hole"),
            truncated=outcome == "step_limit",
            success=outcome == "goal",
            action_is_valid=parsed.is_valid,
            metrics={"moves": self._steps, "slips": self._slips, "fell_in_hole": float(outcome == "hole")},
            extra_info=self._step_info(parsed, moves),
        )

    def render_text(self, color: bool = False) -> str:
        """The map as the observation shows it, with the relative lines when asked for."""
        lake = self._require_lake()
        grid = render_grid(lake, self._position, color=color)
        lines = (
            relative_lines(lake, self._position, holes=self.hole_line, safe=self.safe_line)
            if self.show_relative
            else ""
        )
        return f"{grid}\n{lines}" if lines else grid

    def oracle(self) -> list[str] | None:
        """The reference action texts from the current state, one per turn.

        Deterministic ice: a shortest path, ``max_actions_per_turn`` moves per turn. Slippery ice: one
        turn of up to ``max_actions_per_turn`` moves, the one most likely to reach the goal within the turns
        left when every later turn is chosen the same way after seeing where this one ended (ask again each
        turn; see :mod:`envs.frozenlake.planning`).
        ``None`` before reset or when no path to the goal exists; ``[]`` once the episode is over.
        """
        if self._lake is None:
            return None
        if self.episode_over:
            return []
        path = shortest_path(self._lake, self._position)
        if path is None:
            return None
        if self.is_slippery:
            if self._planner is None:
                self._planner = SlipperyPlanner(self._lake, moves_per_turn=self.max_actions_per_turn)
            moves = self._planner.best_turn(self._position, self._turns_left())
            return [self.word_actions.turn(moves[: self.max_steps - self._steps])]
        return self.word_actions.turns(path)

    def valid_actions(self) -> list[str]:
        return [self.word_actions.turn([word]) for word in VOCABULARY]

    # ----------------------------------------------------------------------------------------------
    # Dynamics
    # ----------------------------------------------------------------------------------------------
    def _execute(self, lake: LakeMap, actions: Sequence[str]) -> list[Move]:
        """Make the moves in order until the goal, a hole or the step limit."""
        moves = []
        for intended in actions:
            if self._steps >= self.max_steps or lake.tile(self._position) in "HG":
                break
            taken = intended
            if self.is_slippery:
                taken = SLIP_OUTCOMES[intended][int(self.np_random.integers(3))]
                self._slips += taken != intended
            target = lake.move(self._position, taken)
            moves.append(Move(intended, taken, moved=target != self._position, distance=self._distance_at(target)))
            self._position = target
            self._steps += 1
        return moves

    def _turns_left(self) -> int:
        """Turns the agent can still play: the turn limit's, and no more than the move limit leaves at
        ``max_actions_per_turn`` moves a turn (the slippery oracle's horizon; it plans the last of them as a full
        turn even when the move limit will cut it short)."""
        by_moves = -(-(self.max_steps - self._steps) // self.max_actions_per_turn)
        return by_moves if self.max_turns is None else min(by_moves, self.max_turns - self.turn)

    def _check_difficulty(self, difficulty: Any) -> int:
        low, high = self.difficulty_range
        if isinstance(difficulty, bool) or not isinstance(difficulty, Integral) or not low <= difficulty <= high:
            raise ValueError(
                f"difficulty must be an int in [{low}, {high}] (shortest path moves; difficulty_range of a "
                f"{self.shape[0]}x{self.shape[1]} map with {self.num_holes} holes), got {difficulty!r}"
            )
        return int(difficulty)

    def _state_info(self) -> dict[str, Any]:
        lake = self._require_lake()
        return {
            "position": self._position,
            "goal": lake.goal,
            "steps": self._steps,
            "state_key": f"{'/'.join(lake.rows)}@{self._position[0]},{self._position[1]}",
            "distance_to_goal": self._distance_at(self._position),
        }

    def _distance_at(self, position: Position) -> int | None:
        """The shortest hole-free path from ``position`` to the goal; ``None`` where none exists (a hole)."""
        assert self._distances is not None
        distance = int(self._distances[position])
        return distance if distance >= 0 else None

    def _step_info(self, parsed: ParsedActions, moves: Sequence[Move]) -> dict[str, Any]:
        return {
            **self._state_info(),
            "move_distances": [m.distance for m in moves],
            "move_spans": [list(span) for span in parsed.spans[: len(moves)]],
            "actions_executed": [m.intended for m in moves],
            "directions_taken": [m.taken for m in moves],
            "slips": sum(m.taken != m.intended for m in moves),
            "actions_not_executed": len(parsed.actions) - len(moves),
            "actions_over_cap": parsed.over_cap,
            "invalid_reason": parsed.error,
        }

    def _require_lake(self) -> LakeMap:
        if self._lake is None:
            raise RuntimeError("FrozenLakeEnv has no map before reset(); call reset() first")
        return self._lake
