"""What ``trainer.run`` checks after the config and before anything heavy (Ray, the model, any actor).

:func:`preflight` checks the model name (:func:`agents.preflight.check_model`), that the run
directory does not already hold a run (unless resuming), and builds one environment of the
requested configuration in this process and resets it once (:func:`agents.preflight.make_checked_env`,
the same check ``agents.eval`` and ``agents.play`` make); with ``env=agent`` it loads the agent and
makes its first task instead. So a typo'd option (``env.dimm=8``), an
impossible room (``env.dim=3``), an environment whose sandbox cannot start, or credit that needs the
environment's exact state (``algo.shaping``, ``algo.step_groups``) from one that does not report it fails
in about a second, as a :class:`~agents.config.UsageError` whose one line names the fix, instead of a run that
trains nothing. So does a first prompt (that level's system message and first observation, rendered as the
rollout renders it, with the model's tokenizer) that leaves less than one turn's ``rollout.max_new_tokens`` of
``rollout.max_total_tokens``: every episode would end before or inside its first answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.config import UsageError, env_options
from agents.preflight import check_model, make_checked_env
from trainer.config import TrainConfig
from trainer.metrics import METRICS_FILE

__all__ = ["preflight"]

log = logging.getLogger("trainer.run")


def preflight(config: TrainConfig, setup: Callable[[], None] | None = None) -> None:
    """Raise :class:`UsageError` if the run cannot work (see the module docstring).

    ``setup`` (the one every environment actor runs first, e.g. to register an environment) runs here
    first, so the environment check sees what the actors will see.
    """
    if setup is not None:
        setup()
    check_model(config.model.name)
    trainer = config.trainer
    if trainer.run_dir is not None and not trainer.resume and (Path(trainer.run_dir) / METRICS_FILE).exists():
        raise UsageError(
            f"{trainer.run_dir} already holds a run: continue it with trainer.resume=true, "
            "or choose another trainer.run_dir"
        )
    if config.agent_mode:
        _check_agent(config)
        return
    env = make_checked_env(config.env["id"], env_options(config), seed=trainer.seed)
    try:
        if config.algo.uses_state:
            _check_state_info(config, env.reset(seed=trainer.seed)[1])
        if config.algo.move_credit.weight != 0:
            _check_move_info(config, env)
        if config.curriculum.mode != "none":
            _check_difficulty(config, env)
        env.reset(seed=trainer.seed)  # the first level again (the difficulty check resets to another)
        _check_prompt_fits(config, env)
    finally:
        env.close()


def _check_prompt_fits(config: TrainConfig, env: Any) -> None:
    """The reset level's first prompt plus one turn's new tokens must fit the episode's token budget."""
    from agents.episode import renderer_for
    from trainer.rollout_worker import ChatRendererFactory

    rollout = config.rollout
    prompt = len(renderer_for(ChatRendererFactory(config.model.name)(), env).prompt_ids(env.messages()))
    if prompt + rollout.max_new_tokens > rollout.max_total_tokens:
        raise UsageError(
            f"env={config.env['id']}'s first prompt is {prompt} tokens (seed {config.trainer.seed}), so "
            f"rollout.max_total_tokens={rollout.max_total_tokens} leaves less than one turn of "
            f"rollout.max_new_tokens={rollout.max_new_tokens}: set rollout.max_total_tokens to at least "
            f"{prompt + rollout.max_new_tokens} (more for later turns), or shorten the prompt"
        )


def _check_difficulty(config: TrainConfig, env: Any) -> None:
    """A curriculum needs ``difficulty_range`` and the ``difficulty`` reset option (:mod:`trainer.curriculum`)."""
    env_id = config.env["id"]
    if not hasattr(env, "difficulty_range"):
        raise UsageError(
            f"env={env_id} has no difficulty_range, which curriculum={config.curriculum.mode} draws levels from: "
            "remove curriculum (or use sokoban, frozenlake)"
        )
    lowest, highest = env.difficulty_range
    floor = config.curriculum.floor
    if floor is not None and floor > highest:
        raise UsageError(
            f"curriculum.floor={floor} is above the hardest level env={env_id} generates (difficulty_range "
            f"[{lowest}, {highest}]): set curriculum.floor to at most {highest}"
        )
    try:
        env.reset(seed=config.trainer.seed, options={"difficulty": highest})
    except Exception as exc:
        raise UsageError(f"env={env_id} cannot generate a level of difficulty {highest}: {exc}") from exc


def _check_state_info(config: TrainConfig, info: dict) -> None:
    """Shaping needs ``info["distance_to_goal"]`` (unless ``algo.shaping.required=false``: then it is off, said
    once) and step groups ``info["state_key"]`` (``info["distance_to_goal"]`` with ``algo.step_groups.key=distance``;
    see envs.core)."""
    algo, env_id = config.algo, config.env["id"]
    needs = []
    if algo.shaping.coef != 0 and "distance_to_goal" not in info:
        if algo.shaping.required:
            needs.append(("distance_to_goal", "algo.shaping.coef=0"))
        else:
            log.info('env=%s reports no info["distance_to_goal"]: progress shaping is off for this run', env_id)
    step_info = "distance_to_goal" if algo.step_groups.key == "distance" else "state_key"
    if algo.step_groups.weight != 0 and step_info not in info and all(key != step_info for key, _ in needs):
        needs.append((step_info, "algo.step_groups.weight=0" if algo.advantage != "gigpo" else "algo=grpo"))
    if needs:
        keys = " and ".join(f'info["{key}"]' for key, _ in needs)
        fixes = " and ".join(fix for _, fix in needs)
        raise UsageError(
            f"env={env_id} reports no {keys}, which {algo.name}'s state-based credit needs: set {fixes}, or use an "
            "env with an exact solver (sokoban, frozenlake)"
        )


def _check_move_info(config: TrainConfig, env: Any) -> None:
    """Move credit needs ``info["move_distances"]`` and ``info["move_spans"]`` after a step (see envs.core): one
    step of the oracle's first turn (or of the first valid action) shows whether the env gives them."""
    env_id = config.env["id"]
    if env.stochastic_dynamics:
        raise UsageError(
            f"env={env_id} has random move outcomes here (stochastic_dynamics), and algo.move_credit would charge a "
            "move for where chance took it: set algo.move_credit.weight=0 (algo.shaping and algo.step_groups judge "
            "turns instead), or make the dynamics deterministic (env.is_slippery=false)"
        )
    env.reset(seed=config.trainer.seed)
    plan = env.oracle() or env.valid_actions()
    info = env.step(plan[0])[4] if plan else {}
    if "move_distances" not in info or "move_spans" not in info:
        raise UsageError(
            f'env={env_id} reports no info["move_distances"] and info["move_spans"] after a step, which '
            "algo.move_credit needs: set algo.move_credit.weight=0, or use an env that reports each move "
            "(sokoban, frozenlake)"
        )
    if config.algo.move_credit.stop and not isinstance(config.env.get("max_actions_per_turn"), int):
        raise UsageError(
            f"env={env_id} has no integer env.max_actions_per_turn, the move limit a turn that algo.move_credit.stop "
            "charges the unmade moves against: set env.max_actions_per_turn, or algo.move_credit.stop=false"
        )


def _check_agent(config: TrainConfig) -> None:
    """Load the agent and its task source, and make the first task: a typo fails here, not in a rollout."""
    from agents.gateway.agent import load_agent, load_tasks

    agent = config.agent
    try:
        load_agent(agent.entry, agent.command)
        load_tasks(agent.tasks)(config.trainer.seed)
    except Exception as exc:
        raise UsageError(f"env=agent: {type(exc).__name__}: {exc}") from exc
