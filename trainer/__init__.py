"""Training: rollout through Ray environment actors, RL algorithms as pure tensor functions, the FSDP2 learner.

Nothing in turngym imports this package; it imports agents and envs.
"""
