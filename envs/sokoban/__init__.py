"""Sokoban: rules and rendering (:mod:`~envs.sokoban.room`), XSB level files (:mod:`~envs.sokoban.xsb`), an exact
move-optimal solver (:mod:`~envs.sokoban.solver`), a level generator (:mod:`~envs.sokoban.generator`) and the
text environment :class:`~envs.sokoban.env.SokobanEnv`."""

from envs.sokoban.env import SokobanEnv
from envs.sokoban.generator import GeneratedLevel, GenerationError, generate_level
from envs.sokoban.room import ACTIONS, Board, Level, LevelError, build_level
from envs.sokoban.solver import Solution, SolveResult, push_lower_bound, solve
from envs.sokoban.xsb import XSBError, level_to_xsb, load_xsb, parse_xsb

__all__ = [
    "ACTIONS",
    "Board",
    "GeneratedLevel",
    "GenerationError",
    "Level",
    "LevelError",
    "SokobanEnv",
    "Solution",
    "SolveResult",
    "XSBError",
    "build_level",
    "generate_level",
    "level_to_xsb",
    "load_xsb",
    "parse_xsb",
    "push_lower_bound",
    "solve",
]
