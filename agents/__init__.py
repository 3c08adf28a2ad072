"""Agents and the loops that let them act in environments: play (interactive), and later evaluation and rollout."""
