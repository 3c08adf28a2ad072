"""FrozenLake: walk over frozen ice to the goal without falling into a hole (see :mod:`envs.frozenlake.env`)."""

from envs.frozenlake.env import FrozenLakeEnv
from envs.frozenlake.maps import LakeMap, generate_map

__all__ = ["FrozenLakeEnv", "LakeMap", "generate_map"]
