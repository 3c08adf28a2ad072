"""A run's start-up: the components ``trainer.run``'s loop works with, started in order, and closed in reverse.

:func:`build_components` starts: the run directory (``config.yaml`` written, or the checkpoint to resume
found), the run's plan (:func:`trainer.run_plan.plan_run`), Ray, the warm-up when the run has one, the learner's
ranks, the engine, the environment actors (or the agent's gateway), then waits for the learner's models (its
ranks load them in their own processes while the engine and the environment actors start; a colocated engine is
built by the actor rank once it is set up), loads the checkpoint and syncs the engine to it when resuming, and
starts the metrics writer and the progress display.

:func:`restart_colocated` replaces a dead colocated actor (``engine.placement=colocated``: the learner's actor
rank that also runs the engine) while the run goes on: the learner, its engine and the environment actors are
started again and loaded as ``trainer.resume=true`` loads them, from the run's last checkpoint (or as they were
started, from the run's initial policy, when there is none yet); the metrics and checkpoints after that step are
dropped, as a resumed run drops them, and the loop plays those steps again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.command_config import turn_cap_note
from agents.engines.base import Engine
from agents.engines.registry import engine_kind
from agents.trajectory import Trajectory
from trainer.checkpoint import TrainerState, discard_checkpoints_after, latest_checkpoint
from trainer.colocated import ColocatedEngineClient, EngineOptions
from trainer.config import TrainConfig
from trainer.console import RUN_LOG, open_run_log
from trainer.curriculum import DifficultyCurriculum
from trainer.engine_actor import error_from_actor_of
from trainer.faults import FaultWatch
from trainer.learner import Learner
from trainer.ray_cluster import init_ray
from trainer.rollout import RolloutConfig, RolloutManager
from trainer.rollout_records import Rollout
from trainer.run_plan import Hardware, RunPlan, plan_run

if TYPE_CHECKING:
    from trainer.agent_rollout import AgentRollout
    from trainer.metrics import MetricsWriter
    from trainer.progress import ProgressDisplay

__all__ = ["Components", "Relaunch", "build_components", "colocated_actor_died", "restart_colocated"]

log = logging.getLogger("trainer.run")


@dataclass(frozen=True)
class Relaunch:
    """What starting the colocated actor again takes (:func:`restart_colocated`): the run's plan, the policy it
    started from (the warm-up's, if any) and the environment actors' ``setup``."""

    plan: RunPlan
    model_path: str
    setup: Callable[[], None] | None


@dataclass(kw_only=True)
class Components:
    """The started parts of a run; ``close`` stops them (the engine and every Ray actor).

    ``start_step`` and ``policy_version``: where the loop starts (0, or a resumed checkpoint's);
    ``samples_per_step``: the trajectories :meth:`write_samples` keeps (``trainer.samples_per_step``);
    ``relaunch``: with the colocated engine, what :func:`restart_colocated` needs (``None`` otherwise).
    """

    run_dir: Path
    engine: Engine
    rollout: Rollout
    learner: Learner
    writer: MetricsWriter
    progress: ProgressDisplay
    pad_id: int
    samples_per_step: int
    start_step: int = 0
    policy_version: int = 0
    closers: list[Callable[[], Any]] = field(default_factory=list)
    faults: FaultWatch = field(default_factory=FaultWatch)
    warmup_metrics: dict[str, float] = field(default_factory=dict)  # sft/* of the warm-up this process ran
    curriculum: DifficultyCurriculum | None = None  # curriculum=adaptive: the difficulty ceiling of the next steps
    relaunch: Relaunch | None = None

    def write_samples(self, step: int, trajectories: list[Trajectory]) -> None:
        from trainer.samples import write_samples

        write_samples(self.run_dir, step, trajectories, limit=self.samples_per_step)

    def write_evaluation(self, step: int, trajectories: list[Trajectory]) -> None:
        """The held-out episodes after ``step`` as ``evaluations/step_<step>.jsonl`` (paired comparisons, reading)."""
        from agents.trajectory import write_trajectories

        write_trajectories(self.run_dir / "evaluations" / f"step_{step:06d}.jsonl", trajectories, append=False)

    def write_report(self) -> None:
        """Rewrite ``report.html`` (agents.view's page of the run so far); a failure is a warning, never a stop."""
        from agents.report import write_report

        try:
            write_report(self.run_dir)
        except Exception as exc:  # the page is for reading the run: the run goes on without it
            log.warning("no report.html: %s", exc)

    def plot(self) -> None:
        from trainer.plot import plot_run

        try:
            plot_run(self.run_dir)
        except (ValueError, ImportError) as exc:  # no finished step yet, or matplotlib missing: say so, keep the run
            log.warning("no learning-curve plot: %s", exc)

    async def close(self) -> None:
        await _close_in_reverse(self.closers)


async def _close_in_reverse(closers: list[Callable[[], Any]]) -> None:
    """Call each closer, last started first, awaiting those that return a coroutine."""
    for close in reversed(closers):
        try:
            result = close()
            if asyncio.iscoroutine(result):
                await result
        except Exception as exc:  # closing the rest matters more than one failure here
            log.warning("while closing the run: %s", exc)


# ---------------------------------------------------------------------------------------------- start-up
async def build_components(config: TrainConfig, setup: Callable[[], None] | None = None) -> Components:
    """Start everything a run needs (see the module docstring).

    If a part fails to start, or SIGTERM or Ctrl-C stops the start-up, what was started is closed, last first,
    before the exception goes on.
    """
    closers: list[Callable[[], Any]] = []  # each part's closer, appended as it starts
    try:
        return await _start_components(config, setup, closers)
    except BaseException:
        await _close_in_reverse(closers)
        raise


async def _start_components(
    config: TrainConfig, setup: Callable[[], None] | None, closers: list[Callable[[], Any]]
) -> Components:
    from agents.cli import sigterm_reclaimed
    from agents.models import load_tokenizer, resolve_model
    from trainer.sft import sft_applies, warm_up

    started = time.perf_counter()
    run_dir, resume_from = _prepare_run_dir(config)
    closers.append(open_run_log(run_dir))
    log.info("run directory %s; preparing the model %s", run_dir, config.model.name)
    if note := turn_cap_note(config.env, config.rollout.max_turns, "rollout.max_turns"):
        log.info(note)
    model_path = resolve_model(config.model.name)
    hardware = Hardware.detect()  # once: both plans below are for this machine
    plan = plan_run(config, model_path, hardware)
    log.info("starting Ray (%s)", config.trainer.ray_address or f"local, {plan.ray_cpus} logical CPUs")
    with sigterm_reclaimed():  # Ray's start installs SIGTERM handlers that exit or abort
        init_ray(config.trainer.ray_address, num_cpus=plan.ray_cpus, object_store_memory=plan.object_store_bytes)
    warmup_metrics: dict[str, float] = {}
    if sft_applies(config):
        result = await warm_up(config, model_path, run_dir / "warmup", say=log.info)
        model_path, warmup_metrics = str(result.policy_dir), result.summary()
        plan = plan_run(config, model_path, hardware)  # the same plan, for the warm-up's policy
    # The learner's ranks load their models in their own processes while the engine and the environment
    # actors start; with the engine colocated, the actor rank builds it on its weights once set up.
    if config.engine_colocated:
        learner, colocated = _start_colocated(config, plan, wait=False)
        closers += [learner.close, colocated.close]
        engine, engine_factory = colocated, colocated.factory()
    else:
        learner = _start_learner(config, plan, wait=False)
        closers.append(learner.close)
        log.info("starting the engine (%s) and loading the model into it", config.engine.kind)
        engine, engine_factory = await _start_engine(config, plan)
        closers.append(engine.close)
    rollout = await _start_rollout(config, engine_factory, model_path, setup)
    closers.append(rollout.close)
    await learner.ready()
    state = TrainerState(step=0, policy_version=0)
    if resume_from is not None:
        state = await _resume(learner, engine, resume_from, run_dir)
    elif warmup_metrics and engine_kind(config.engine.kind).placement == "servers":  # they hold the model as it was
        await learner.sync_weights(engine, 0, export_dir=run_dir / "engine_weights")
    writer = _metrics_writer(config, run_dir, state.step if config.trainer.resume else None)
    closers.append(writer.close)
    progress = _progress(config, state.step)
    closers.append(progress.close)
    tokenizer = load_tokenizer(model_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    log.info(
        "started in %.1fs; step %d's rollout: %d group(s) of %d episode(s)",
        time.perf_counter() - started,
        state.step + 1,
        config.trainer.groups_per_step,
        config.algo.group_size,
    )
    faults = FaultWatch(
        config.trainer.max_failed_steps, run_dir / RUN_LOG, max_engine_restarts=config.engine.max_restarts
    )
    return Components(
        run_dir=run_dir,
        engine=engine,
        rollout=rollout,
        learner=learner,
        writer=writer,
        progress=progress,
        pad_id=int(pad_id),
        samples_per_step=config.trainer.samples_per_step,
        start_step=state.step,
        policy_version=state.policy_version,
        closers=closers,
        faults=faults,
        warmup_metrics=warmup_metrics,
        curriculum=_curriculum(config, state.curriculum_ceiling),
        relaunch=Relaunch(plan, model_path, setup) if config.engine_colocated else None,
    )


async def _start_rollout(
    config: TrainConfig, engine_factory: Callable[[], Engine], model_path: str, setup: Callable[[], None] | None
) -> Rollout:
    """The environment actors (``setup`` runs first in each), or with ``env=agent`` the agent's gateway."""
    from trainer.rollout_worker import ChatRendererFactory

    if config.agent_mode:
        return await _start_agent_rollout(config, engine_factory, model_path)
    log.info("starting %d environment actor(s)", config.rollout.num_env_actors)
    options = RolloutConfig(
        num_env_actors=config.rollout.num_env_actors,
        max_concurrent_episodes=config.rollout.max_concurrent_episodes,
        env_actor_resources=dict(config.rollout.env_actor_resources),
        collect_timeout_s=config.rollout.collect_timeout_s,
    )
    return RolloutManager(options, ChatRendererFactory(model_path), engine_factory, setup=setup)


def _metrics_writer(config: TrainConfig, run_dir: Path, resume_step: int | None) -> MetricsWriter:
    """``metrics.jsonl`` and the optional TensorBoard and W&B writers (continuing after ``resume_step`` if given)."""
    from trainer.metrics import MetricsWriter, WandbOptions

    wandb = None
    if config.logging.wandb:
        wandb = WandbOptions(project=config.logging.wandb_project, mode=config.logging.wandb_mode, name=run_dir.name)
    return MetricsWriter(run_dir, tensorboard=config.logging.tensorboard, wandb=wandb, resume_step=resume_step)


def _progress(config: TrainConfig, step: int) -> ProgressDisplay:
    from trainer.progress import ProgressDisplay

    return ProgressDisplay(config.trainer.total_steps, start_step=step, enabled=config.trainer.progress)


def _curriculum(config: TrainConfig, ceiling: int | None) -> DifficultyCurriculum | None:
    """``curriculum=adaptive``'s state over the env's ``difficulty_range`` (a resumed run's saved ``ceiling``)."""
    import envs
    from agents.config import env_options

    curriculum = config.curriculum
    if curriculum.mode == "none":
        return None
    env = envs.make(config.env["id"], **env_options(config))
    try:
        lowest, highest = env.difficulty_range
    finally:
        env.close()
    if curriculum.floor is not None:  # at most highest: the preflight checked it
        lowest = min(max(lowest, curriculum.floor), highest)
    start = ceiling if ceiling is not None else curriculum.start
    return DifficultyCurriculum(lowest, highest, tuple(curriculum.band), start)


async def _start_agent_rollout(
    config: TrainConfig, engine_factory: Callable[[], Engine], model_path: str
) -> AgentRollout:
    """``env=agent``: the gateway in this process, in front of the run's engine (:mod:`trainer.agent_rollout`)."""
    from agents.models import load_tokenizer
    from trainer.agent_rollout import AgentRollout, AgentRolloutConfig

    agent, rollout = config.agent, config.rollout
    options = AgentRolloutConfig(
        entry=agent.entry,
        command=agent.command,
        tasks=agent.tasks,
        max_concurrent_episodes=rollout.max_concurrent_episodes,
        episode_timeout_s=agent.episode_timeout_s,
        max_episode_retries=agent.max_episode_retries,
        collect_timeout_s=rollout.collect_timeout_s,
        max_total_tokens=rollout.max_total_tokens,
        model_name=config.model.name,
    )
    agent_rollout = AgentRollout(options, engine_factory(), load_tokenizer(model_path))
    url = await agent_rollout.start()
    log.info("the agent %s plays through the gateway at %s", agent.entry or agent.command, url)
    return agent_rollout


def _prepare_run_dir(config: TrainConfig) -> tuple[Path, Path | None]:
    from omegaconf import OmegaConf

    trainer = config.trainer
    if trainer.run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path("runs") / "train" / f"{config.env['id'].replace('/', '_')}-{config.algo.name}-{stamp}"
    else:
        run_dir = Path(trainer.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resume_from = latest_checkpoint(run_dir) if trainer.resume else None
    if not trainer.resume and (run_dir / "metrics.jsonl").exists():
        raise FileExistsError(
            f"{run_dir} already holds a run: continue it with trainer.resume=true, or choose another trainer.run_dir"
        )
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(config)))
    return run_dir, resume_from


def _start_learner(
    config: TrainConfig, plan: RunPlan, colocated: EngineOptions | None = None, *, wait: bool = True
) -> Learner:
    """The learner's groups; ``wait=False``: started, not yet set up (``await learner.ready()`` waits)."""
    log.info("starting the learner: %s (%d rank(s) each)", plan.roles, config.learner_ranks)
    if plan.caution is not None:
        log.warning(plan.caution)
    return Learner(plan.learner, colocated_engine=colocated, wait=wait)


def _start_colocated(
    config: TrainConfig, plan: RunPlan, *, wait: bool = True
) -> tuple[Learner, ColocatedEngineClient]:
    """The learner, whose actor rank then builds the engine on its own weights (:mod:`trainer.colocated`)."""
    options = EngineOptions(
        plan.engine.max_batch_size,
        plan.engine.max_context,
        plan.engine.seed,
        plan.engine.cuda_graphs,
        merge_adapters=config.engine.merge_adapters,
        share_frozen_layers=config.engine.share_frozen_layers,
    )
    learner = _start_learner(config, plan, options, wait=wait)
    log.info("the engine (%s) runs in the actor's process, on its weights", config.engine.kind)
    return learner, learner.engine()


async def _start_engine(config: TrainConfig, plan: RunPlan) -> tuple[Engine, Callable[[], Engine]]:
    """The engine the loop syncs weights to (``close`` stops it) and the factory env actors call.

    Placement comes from the engine table (:mod:`agents.engines.registry`): a ``local`` engine is built
    in one Ray engine actor and the actors get clients of it; a ``servers`` engine is started here
    (launching its servers when asked) and every actor connects to the same servers.
    """
    kind = engine_kind(config.engine.kind)
    spec = plan.engine
    if kind.placement == "local":
        from trainer.engine_actor import launch_engine_actor

        client = launch_engine_actor(
            spec,
            num_cpus=config.engine.num_cpus,
            num_gpus=plan.engine_gpus,
            max_restarts=config.engine.max_restarts,
        )
        return client, client.factory()
    engine = await kind.start_engine(spec)
    return engine, spec.connected_to(engine.urls)  # type: ignore[attr-defined]  # servers engines have urls


async def _resume(learner: Learner, engine: Engine, directory: Path, run_dir: Path) -> TrainerState:
    state = TrainerState.load(directory)
    await learner.actor.load_checkpoint(directory / "actor")
    if learner.critic is not None:
        await learner.critic.load_checkpoint(directory / "critic")
    await learner.sync_weights(engine, state.policy_version, export_dir=run_dir / "engine_weights")
    log.info("resumed from %s (step %d)", directory, state.step)
    return state


# ---------------------------------------------------------------------------------------------- restart
def colocated_actor_died(c: Components, error: BaseException) -> bool:
    """Whether ``error`` is Ray's word that the colocated actor (the learner's actor rank, running the engine) died."""
    from trainer.ray_cluster import import_ray

    if c.relaunch is None or not isinstance(c.engine, ColocatedEngineClient):
        return False
    if not isinstance(error, import_ray().exceptions.ActorDiedError):
        return False
    return error_from_actor_of(error, c.engine) is True  # an error naming no actor is not taken for its death


async def restart_colocated(config: TrainConfig, c: Components) -> None:
    """Replace the dead colocated actor in ``c`` and set ``c`` to go on from the run's last checkpoint.

    Counted and logged by :meth:`~trainer.faults.FaultWatch.colocated_died`, which raises
    :class:`~trainer.faults.RunFailedError` once ``engine.max_restarts`` restarts are used up. The learner's
    other roles and the environment actors (whose engine client reached the dead actor) are started again too:
    the critic's state after the checkpoint is as lost as the actor's. ``c.start_step`` and ``c.policy_version``
    become the checkpoint's; the metrics writer drops the steps after it (``trainer.resume``'s rule), so the
    loop writes them again; the held-out evaluation before step 1 is kept when its line is.
    """
    if c.relaunch is None:
        raise ValueError("restart_colocated needs the components of a run with engine.placement=colocated")
    directory = latest_checkpoint(c.run_dir)
    c.faults.colocated_died(None if directory is None else int(directory.name.split("_")[1]))
    for old in (c.rollout.close, c.learner.close, c.writer.close, c.progress.close):
        c.closers.remove(old)
    c.closers.remove(c.engine.close)  # the dead actor's engine: nothing left to close
    await _close_in_reverse([c.rollout.close, c.learner.close, c.writer.close, c.progress.close])
    learner, colocated = _start_colocated(config, c.relaunch.plan)
    c.learner, c.engine = learner, colocated
    c.closers += [learner.close, colocated.close]
    c.rollout = await _start_rollout(config, colocated.factory(), c.relaunch.model_path, c.relaunch.setup)
    c.closers.append(c.rollout.close)
    state = TrainerState(step=0, policy_version=0)
    if directory is not None:
        state = await _resume(learner, colocated, directory, c.run_dir)
    discard_checkpoints_after(c.run_dir, state.step)
    c.writer = _metrics_writer(config, c.run_dir, state.step)
    c.closers.append(c.writer.close)
    c.progress = _progress(config, state.step)
    c.closers.append(c.progress.close)
    c.start_step, c.policy_version = state.step, state.policy_version
    c.curriculum = _curriculum(config, state.curriculum_ceiling)
