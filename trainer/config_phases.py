"""Configuration of the phases around the RL steps: the supervised warm-up (``sft``) and held-out evaluation
(``evaluation``). Both sections belong to :class:`trainer.config.TrainConfig`; ``python -m trainer.sft``
reads the same ``sft`` section.

Seeds. Training step ``k`` plays seeds ``trainer.seed + (k - 1) * trainer.groups_per_step + i``
(:mod:`trainer.seeds`); the warm-up's oracle plays ``sft.seed + i``; held-out evaluation plays
``evaluation.seed + i``. The three ranges must not overlap (checked at start-up), so the held-out success
rate is measured on episodes no phase trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EvaluationOptions", "SftOptions", "check_phases"]


@dataclass
class SftOptions:
    """Supervised fine-tuning on token-exact trajectories (:mod:`trainer.sft_data`).

    ``warmup`` (``trainer.run`` only): ``auto`` warms up when the environment has an oracle or
    ``files`` are given; ``true`` requires it; ``false`` starts RL from the model as it is.
    ``source``: ``oracle`` (the environment's oracle plays ``episodes`` seeds from ``seed``),
    ``files`` (JSONL trajectories, filtered: rejection-sampling fine-tuning), or ``mix`` (both).
    ``lora_rank`` 0 fine-tunes every weight; LoRA adapters are merged into the weights afterwards.
    ``oracle_noise``: the probability that an oracle turn is a random valid action instead, kept as context
    and not trained on, so the examples show the oracle recovering from positions off its path
    (:func:`trainer.sft_data.oracle_trajectories`); 0 plays the oracle alone.
    ``gradient_checkpointing``: the warm-up's activation checkpointing (``model.gradient_checkpointing`` is RL's). It
    recomputes the same arithmetic, so the weights come out the same; every weight trains here, so recomputing the
    forward costs a smaller share of a step than in RL's LoRA update.
    """

    warmup: str = "auto"  # auto | true | false
    source: str = "oracle"  # oracle | files | mix
    episodes: int = 256
    seed: int = 1_000_000
    oracle_noise: float = 0.0
    files: list[str] = field(default_factory=list)
    success_only: bool = True
    min_return: float | None = None
    epochs: int = 1
    batch_size: int = 8  # trajectories per optimizer step
    # rows per forward/backward; trainer.micro_batch_size is RL's. The rows' shared system prompt and instructions
    # run once per optimizer step whatever the size, and one row holds the fewest activations at once.
    micro_batch_size: int = 1
    gradient_checkpointing: bool = True
    lr: float = 5.0e-5
    lora_rank: int = 0
    warmup_steps: int = 2
    save_dataset: bool = True  # write the examples to <run_dir>/<phase>/data.jsonl


@dataclass
class EvaluationOptions:
    """Held-out evaluation: ``episodes`` seeds from ``seed``, before the first update and every ``every`` steps.

    ``temperature``: null plays at the rollout temperature (with per-turn seeds, so the same policy gives
    the same episodes); 0 plays greedily. ``every`` 0 evaluates only before the first update and after the last.
    ``max_concurrent_episodes``: held-out episodes in flight at once, across the environment actors (null: all of
    them, within ``rollout.max_concurrent_episodes`` per actor). Each holds its conversation's keys and values in
    the engine between turns, so more than the engine's rows cost memory and gain little.
    """

    enabled: bool = True
    episodes: int = 64
    seed: int = 10_000
    every: int = 5
    temperature: float | None = None
    max_concurrent_episodes: int | None = 16


def check_phases(config) -> None:
    """Checks of the ``sft`` and ``evaluation`` sections (ranges, choices, disjoint seeds); raises ``UsageError``."""
    from agents.config import UsageError, check_choice
    from trainer.seeds import training_seed_range

    sft, evaluation, trainer = config.sft, config.evaluation, config.trainer
    check_choice("sft.warmup", str(sft.warmup).lower(), ("auto", "true", "false"))
    check_choice("sft.source", sft.source, ("oracle", "files", "mix"))
    for name in ("episodes", "epochs", "batch_size", "micro_batch_size"):
        if getattr(sft, name) < 1:
            raise UsageError(f"sft.{name} must be >= 1, got {getattr(sft, name)}")
    if sft.lr <= 0 or sft.lora_rank < 0 or sft.warmup_steps < 0:
        raise UsageError("sft.lr must be > 0, sft.lora_rank and sft.warmup_steps >= 0")
    if not 0.0 <= sft.oracle_noise < 1.0:
        raise UsageError(f"sft.oracle_noise must be in [0, 1) (0: the oracle alone), got {sft.oracle_noise}")
    if sft.source in ("files", "mix") and not sft.files:
        raise UsageError(f"sft.source={sft.source} reads trajectories: give sft.files=[path.jsonl,...]")
    if evaluation.episodes < 1 or evaluation.every < 0:
        raise UsageError("evaluation.episodes must be >= 1 and evaluation.every >= 0")
    if evaluation.max_concurrent_episodes is not None and evaluation.max_concurrent_episodes < 1:
        raise UsageError(
            "evaluation.max_concurrent_episodes must be >= 1 (null: every held-out episode at once), "
            f"got {evaluation.max_concurrent_episodes}"
        )
    if evaluation.temperature is not None and evaluation.temperature < 0:
        raise UsageError(f"evaluation.temperature must be >= 0 (0: greedy) or null, got {evaluation.temperature}")
    trained = training_seed_range(trainer.seed, trainer.total_steps, trainer.groups_per_step)
    train = ("training", trained.start, trained.stop)
    ranges = [train, ("sft", sft.seed, sft.seed + sft.episodes)]
    if evaluation.enabled:
        ranges.append(("evaluation", evaluation.seed, evaluation.seed + evaluation.episodes))
    for i, (name_a, start_a, end_a) in enumerate(ranges):
        for name_b, start_b, end_b in ranges[i + 1 :]:
            if start_a < end_b and start_b < end_a:
                raise UsageError(
                    f"the {name_a} seeds [{start_a}, {end_a}) overlap the {name_b} seeds [{start_b}, {end_b}): "
                    "held-out episodes must not be trained on; move evaluation.seed or sft.seed"
                )
