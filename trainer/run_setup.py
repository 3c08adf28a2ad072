"""What ``trainer.run``'s loop works with: the started components, and the small pieces of each step.

:func:`build_components` starts, in order: the run directory (``config.yaml`` written, or the
checkpoint to resume found), Ray, the engine, the environment actors, the learner groups (loading
the checkpoint and syncing the engine to it when resuming), the metrics writer and the progress display.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.engines.base import Engine
from agents.engines.registry import EngineSpec, engine_kind, local_device_and_dtype
from agents.policy import sampling_and_limits
from agents.trajectory import Trajectory
from trainer.checkpoint import TrainerState, checkpoint_dir, latest_checkpoint, mark_complete, prune_checkpoints
from trainer.config import TrainConfig, lora_bf16_caution, mixed_precision, shared_critic
from trainer.console import RUN_LOG, open_run_log
from trainer.curriculum import DifficultyCurriculum, difficulty_mix
from trainer.faults import FaultWatch
from trainer.learner import Learner, LearnerSpec
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.rollout import RolloutConfig, RolloutManager, RolloutResult, group_requests
from trainer.seeds import curriculum_draw_seed, rollout_sampling_seed, training_level_seeds

if TYPE_CHECKING:
    from trainer.agent_rollout import AgentRollout

__all__ = ["Components", "build_components", "episode_metrics", "rollout_task", "save_checkpoint", "trainable"]

log = logging.getLogger("trainer.run")


@dataclass
class Components:
    """The started parts of a run; ``close`` stops them (the engine and every Ray actor)."""

    run_dir: Path
    engine: Engine
    rollout: RolloutManager | AgentRollout
    learner: Learner
    writer: Any
    progress: Any
    pad_id: int
    start_step: int = 0
    policy_version: int = 0
    config: TrainConfig | None = None
    closers: list[Callable[[], Any]] = field(default_factory=list)
    faults: FaultWatch = field(default_factory=FaultWatch)
    warmup_metrics: dict[str, float] = field(default_factory=dict)  # sft/* of the warm-up this process ran
    curriculum: DifficultyCurriculum | None = None  # curriculum=adaptive: the difficulty ceiling of the next steps

    def write_samples(self, step: int, trajectories: list[Trajectory]) -> None:
        from trainer.samples import write_samples

        write_samples(self.run_dir, step, trajectories, limit=self.config.trainer.samples_per_step)

    def write_evaluation(self, step: int, trajectories: list[Trajectory]) -> None:
        """The held-out episodes after ``step`` as ``evaluations/step_<step>.jsonl`` (paired comparisons, reading)."""
        from agents.trajectory import write_trajectories

        write_trajectories(self.run_dir / "evaluations" / f"step_{step:06d}.jsonl", trajectories, append=False)

    def plot(self) -> None:
        from trainer.plot import plot_run

        try:
            plot_run(self.run_dir)
        except (ValueError, ImportError) as exc:  # no finished step yet, or matplotlib missing: say so, keep the run
            log.warning("no learning-curve plot: %s", exc)

    async def close(self) -> None:
        for close in reversed(self.closers):
            try:
                result = close()
                if asyncio.iscoroutine(result):
                    await result
            except Exception as exc:  # closing the rest matters more than one failure here
                log.warning("while closing the run: %s", exc)


# ---------------------------------------------------------------------------------------------- start-up
async def build_components(config: TrainConfig, setup: Callable[[], None] | None = None) -> Components:
    """Start everything a run needs (see the module docstring)."""
    from agents.models import load_tokenizer, resolve_model
    from trainer.metrics import MetricsWriter, WandbOptions
    from trainer.progress import ProgressDisplay
    from trainer.rollout import init_ray
    from trainer.rollout_worker import ChatRendererFactory
    from trainer.sft import sft_applies, warm_up

    started = time.perf_counter()
    run_dir, resume_from = _prepare_run_dir(config)
    closers: list[Callable[[], Any]] = [open_run_log(run_dir)]
    log.info("run directory %s; preparing the model %s", run_dir, config.model.name)
    model_path = resolve_model(config.model.name)
    log.info("starting Ray (%s)", config.trainer.ray_address or f"local, {_logical_cpus(config)} logical CPUs")
    init_ray(
        config.trainer.ray_address, num_cpus=_logical_cpus(config), object_store_memory=_object_store_bytes(model_path)
    )
    warmup_metrics: dict[str, float] = {}
    if sft_applies(config):
        result = await warm_up(config, model_path, run_dir / "warmup", say=log.info)
        model_path, warmup_metrics = str(result.policy_dir), result.summary()
    log.info("starting the engine (%s) and loading the model into it", config.engine.kind)
    engine, engine_factory = await _start_engine(config, model_path)
    closers.append(engine.close)
    if config.agent_mode:
        rollout: Any = await _start_agent_rollout(config, engine_factory, model_path)
    else:
        log.info("starting %d environment actor(s)", config.rollout.num_env_actors)
        rollout = RolloutManager(
            RolloutConfig(
                num_env_actors=config.rollout.num_env_actors,
                max_concurrent_episodes=config.rollout.max_concurrent_episodes,
                collect_timeout_s=config.rollout.collect_timeout_s,
            ),
            ChatRendererFactory(model_path),
            engine_factory,
            setup=setup,
        )
    closers.append(rollout.close)
    log.info("starting the learner: %s (%d rank(s) each)", _roles(config), config.learner_ranks)
    if (caution := lora_bf16_caution(config)) is not None:
        log.warning(caution)
    learner = Learner(_learner_spec(config, model_path))
    closers.append(learner.close)
    state = TrainerState(step=0, policy_version=0)
    if resume_from is not None:
        state = await _resume(learner, engine, resume_from, run_dir)
    elif warmup_metrics and engine_kind(config.engine.kind).placement == "servers":  # they hold the model as it was
        await learner.sync_weights(engine, 0, export_dir=run_dir / "engine_weights")
    wandb = None
    if config.logging.wandb:
        wandb = WandbOptions(project=config.logging.wandb_project, mode=config.logging.wandb_mode, name=run_dir.name)
    writer = MetricsWriter(
        run_dir,
        tensorboard=config.logging.tensorboard,
        wandb=wandb,
        resume_step=state.step if config.trainer.resume else None,
    )
    closers.append(writer.close)
    progress = ProgressDisplay(config.trainer.total_steps, start_step=state.step, enabled=config.trainer.progress)
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
        run_dir,
        engine,
        rollout,
        learner,
        writer,
        progress,
        int(pad_id),
        state.step,
        state.policy_version,
        config,
        closers,
        faults,
        warmup_metrics,
        _curriculum(config, state.curriculum_ceiling),
    )


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
    start = ceiling if ceiling is not None else curriculum.start
    return DifficultyCurriculum(lowest, highest, tuple(curriculum.band), start)


async def _start_agent_rollout(config: TrainConfig, engine_factory: Callable[[], Any], model_path: str) -> Any:
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


def _logical_cpus(config: TrainConfig) -> int:
    """Ray's CPU count: enough logical CPUs for every actor of the run (they take turns on the real cores)."""
    wanted = config.engine.num_cpus + _learner_models(config) * config.learner_ranks * config.trainer.learner_cpus
    wanted += config.rollout.num_env_actors * 0.25 + 2
    return max(os.cpu_count() or 1, int(wanted + 0.999))


def _learner_models(config: TrainConfig) -> int:
    """The models the learner starts, each on every learner rank: the actor, and a critic and a reference
    of their own when the run has them."""
    return 1 + int(_separate_critic(config)) + int(_separate_reference(config))


def _separate_critic(config: TrainConfig) -> bool:
    return config.algo.critic and not shared_critic(config)


def _separate_reference(config: TrainConfig) -> bool:
    """A reference model of its own; with LoRA the reference is the actor with its adapters switched off."""
    return config.algo.reference and config.model.lora_rank == 0


def _roles(config: TrainConfig) -> str:
    reference = "reference" if _separate_reference(config) else "reference = actor without its adapters"
    actor = "actor with the value head" if shared_critic(config) else "actor"
    critic = ["critic"] * _separate_critic(config)
    return ", ".join([actor, *critic, *([reference] * config.algo.reference)])


def _object_store_bytes(model_path: str) -> int:
    """Room for a few copies of the weights (weight sync goes through the object store), at least 256 MiB."""
    weights = sum(p.stat().st_size for p in Path(model_path).glob("*.safetensors")) if Path(model_path).is_dir() else 0
    return max(256 * 1024**2, 3 * 4 * weights // max(1, _bytes_per_weight(model_path)))


def _bytes_per_weight(model_path: str) -> int:
    import json

    config_file = Path(model_path) / "config.json"
    dtype = json.loads(config_file.read_text()).get("torch_dtype", "float32") if config_file.is_file() else "float32"
    return 2 if dtype in ("bfloat16", "float16") else 4


async def _start_engine(config: TrainConfig, model_path: str) -> tuple[Engine, Callable[[], Engine]]:
    """The engine the loop syncs weights to (``close`` stops it) and the factory env actors call.

    Placement comes from the engine table (:mod:`agents.engines.registry`): a ``local`` engine is built
    in one Ray engine actor and the actors get clients of it; a ``servers`` engine is started here
    (launching its servers when asked) and every actor connects to the same servers.
    """
    kind = engine_kind(config.engine.kind)
    spec = _engine_spec(config, model_path)
    if kind.placement == "local":
        from trainer.engine_actor import launch_engine_actor

        client = launch_engine_actor(
            spec,
            num_cpus=config.engine.num_cpus,
            num_gpus=_engine_gpu_share(config),
            max_restarts=config.engine.max_restarts,
        )
        return client, client.factory()
    engine = await kind.start_engine(spec)
    return engine, spec.connected_to(engine.urls)  # type: ignore[attr-defined]  # servers engines have urls


def _engine_spec(config: TrainConfig, model_path: str) -> EngineSpec:
    engine = config.engine
    device, dtype = local_device_and_dtype(engine.device, engine.dtype)
    return EngineSpec(
        kind=engine.kind,
        model=model_path,
        device=device,
        dtype=dtype,
        max_batch_size=engine.max_batch_size,
        seed=config.trainer.seed,
        urls=tuple(engine.urls),
        launch=engine.launch,
        num_servers=engine.num_servers,
        gpus_per_server=engine.gpus_per_server,
    )


def _engine_gpu_share(config: TrainConfig) -> float:
    """The engine actor's GPU share (``local`` engines): ``engine.num_gpus``, or 0.25 when it is 0 and the
    engine runs on CUDA (Ray hides the GPUs from an actor that reserves none)."""
    import torch

    local = engine_kind(config.engine.kind).placement == "local"
    if not local or config.engine.device == "cpu" or not torch.cuda.is_available():
        return 0.0
    return config.engine.num_gpus or 0.25


def _learner_gpu_share(config: TrainConfig, roles: int) -> float:
    """Each learner rank's GPU share: the roles (actor, critic, reference) share each GPU, next to the engine."""
    if config.trainer.n_gpus == 0:
        return 0.0
    return (1.0 - _engine_gpu_share(config)) / roles


def _learner_spec(config: TrainConfig, model_path: str) -> LearnerSpec:
    gpu = config.trainer.n_gpus > 0
    ranks = config.learner_ranks
    threads = config.trainer.threads or max(1, (os.cpu_count() or 1) // ranks)
    optim = config.optim

    def optimizer(lr: float) -> OptimizerSpec:
        return OptimizerSpec(
            lr=lr,
            betas=(optim.betas[0], optim.betas[1]),
            weight_decay=optim.weight_decay,
            grad_clip=optim.grad_clip,
            warmup_steps=optim.warmup_steps,
            total_steps=config.trainer.total_steps * config.algo.ppo_epochs * config.algo.mini_batches,
            schedule=optim.schedule,
            min_lr_ratio=optim.min_lr_ratio,
        )

    common = {
        "device": "cuda" if gpu else "cpu",
        "mixed_precision": mixed_precision(config),
        "num_threads": threads,
        "share_prefix": config.trainer.share_prefix,
        "seed": config.trainer.seed,
    }
    lora = LoraSpec(rank=config.model.lora_rank, alpha=config.model.lora_alpha)
    checkpointing = config.model.gradient_checkpointing
    shared_head = optimizer(config.model.critic_lr) if shared_critic(config) else None
    actor = WorkerSpec(
        "actor",
        model_path,
        optimizer(config.model.lr),
        lora,
        gradient_checkpointing=checkpointing,
        value_head=shared_head,
        **common,
    )
    critic = None
    if _separate_critic(config):
        critic = WorkerSpec(
            "critic",
            model_path,
            optimizer(config.model.critic_lr),
            lora,
            gradient_checkpointing=checkpointing,
            **common,
        )
    reference = WorkerSpec("reference", model_path, **common) if _separate_reference(config) else None
    gpu_share = _learner_gpu_share(config, _learner_models(config))
    return LearnerSpec(actor, critic, reference, ranks, config.trainer.learner_cpus, gpu_share)


async def _resume(learner: Learner, engine: Any, directory: Path, run_dir: Path) -> TrainerState:
    state = TrainerState.load(directory)
    await learner.actor.load_checkpoint(directory / "actor")
    if learner.critic is not None:
        await learner.critic.load_checkpoint(directory / "critic")
    await learner.sync_weights(engine, state.policy_version, export_dir=run_dir / "engine_weights")
    log.info("resumed from %s (step %d)", directory, state.step)
    return state


# ---------------------------------------------------------------------------------------------- each step
def rollout_task(config: TrainConfig, c: Components, step: int, policy_version: int) -> asyncio.Task:
    """Start step ``step``'s rollout: groups of seeds ``seed + (step - 1) * groups_per_step + i``."""
    groups, base = config.trainer.groups_per_step, config.trainer.seed
    env_options = {k: v for k, v in config.env.items() if k != "id"}
    seeds = training_level_seeds(base, step, groups)
    requests = group_requests(config.env["id"], seeds, config.algo.group_size, env_options)
    curriculum_metrics: dict[str, float] = {}
    if c.curriculum is not None:  # every group plays a level of the difficulty drawn for it
        difficulties = c.curriculum.draw(groups, seed=curriculum_draw_seed(base, step))
        requests = [replace(r, reset_options={"difficulty": d}) for r, d in zip(requests, difficulties, strict=True)]
        curriculum_metrics = {**difficulty_mix(difficulties), "curriculum/ceiling": float(c.curriculum.ceiling)}
    rollout = config.rollout
    sampling, limits = sampling_and_limits(
        rollout, seed=rollout_sampling_seed(base, step), step_timeout_s=rollout.step_timeout_s
    )

    async def collect() -> tuple[RolloutResult, dict[str, float]]:
        started = time.perf_counter()
        for attempt in range(2):
            before = await engine_in_sync(c, policy_version)
            result = await c.rollout.collect(requests, sampling=sampling, limits=limits, policy_version=policy_version)
            after = await engine_stats(c.engine)
            await watch_engine(c)
            if after.policy_version == policy_version or attempt == 1:
                break
            # The engine restarted during the rollout: part of it came from the wrong weights. Play it again.
            log.warning("the engine restarted during step %d's rollout; playing the step again", step)
        prompt = after.prompt_tokens - before.prompt_tokens
        cached = after.cached_prompt_tokens - before.cached_prompt_tokens
        metrics = {
            "time/rollout_s": time.perf_counter() - started,
            "rollout/prefix_hit_rate": cached / prompt if prompt else 0.0,
            "rollout/prompt_tokens": float(prompt),
            "rollout/generated_tokens": float(after.generated_tokens - before.generated_tokens),
            "engine/restarts": float(c.faults.engine_restarts),
            **curriculum_metrics,
        }
        return result, metrics

    return asyncio.ensure_future(collect())


def trainable(result: RolloutResult, keep_fraction: float = 1.0) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories to train on: every member of the complete groups (failed attempts are not in groups),
    or with ``keep_fraction`` < 1 of the groups whose returns vary most (``algo.filter_groups``,
    :func:`trainer.algos.select_groups_by_std`); returns them and ``filter/*`` metrics."""
    from trainer.algos import select_groups_by_std

    groups = [[t for t in group if t.trainable] for group in result.groups]
    groups = [group for group in groups if group]
    if keep_fraction >= 1.0 or not groups:
        return [t for group in groups for t in group], {}
    kept = select_groups_by_std([[t.episode_return for t in group] for group in groups], keep_fraction)
    return [t for i in kept for t in groups[i]], {
        "filter/kept_groups": float(len(kept)),
        "filter/groups": float(len(groups)),
    }


def episode_metrics(result: RolloutResult) -> dict[str, float]:
    """reward/*, episode/* over the step's complete episodes (empty when every group was dropped).

    The same definitions as ``python -m agents.eval``'s table (:func:`agents.eval.summarize`), plus
    ``env/<name>``: the mean of every numeric metric the episodes' ``Trajectory.metrics`` hold (their
    env's last ``info["metrics"]``), over the episodes that report it.
    """
    import statistics

    from agents.eval import summarize

    episodes = result.trajectories
    if not episodes:
        return {}
    returns = [t.episode_return for t in episodes]
    summary = summarize(episodes)
    n = summary.episodes
    ended = {"truncated": summary.truncated, "max_tokens": summary.max_tokens}
    ended["terminated"] = n - summary.truncated - summary.max_tokens - summary.errors
    return {
        "reward/mean": summary.mean_return,
        "reward/std": statistics.pstdev(returns),
        "reward/max": max(returns),
        "reward/min": min(returns),
        "reward/success_rate": summary.success_rate,
        "episode/turns": summary.mean_turns,
        "episode/response_tokens": summary.mean_sampled_tokens,
        "episode/total_tokens": summary.mean_total_tokens,
        "episode/invalid_action_rate": summary.invalid_action_rate,
        "episode/count": float(n),
        **{f"episode/{kind}_fraction": ended[kind] / n for kind in ("terminated", "truncated", "max_tokens")},
        **_env_metric_means(episodes),
    }


def _env_metric_means(episodes: list[Any]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for episode in episodes:
        for name, value in episode.metrics.items():
            if isinstance(value, (int, float)):
                values.setdefault(name, []).append(float(value))
    return {f"env/{name}": sum(found) / len(found) for name, found in sorted(values.items())}


def timing_metrics(metrics: dict[str, Any], started: float, train_started: float) -> dict[str, float]:
    step_s = time.perf_counter() - started
    train_s = time.perf_counter() - train_started
    sampled = metrics.get("episode/response_tokens", 0.0) * metrics.get("episode/count", 0.0)
    out = {
        "time/step_s": step_s,
        "time/train_s": train_s,
        "throughput/tokens_per_s": sampled / metrics["time/rollout_s"] if metrics.get("time/rollout_s") else 0.0,
        "throughput/learner_tokens_per_s": metrics.get("train/tokens", 0.0) / train_s if train_s > 0 else 0.0,
    }
    return out


async def engine_in_sync(c: Components, policy_version: int) -> Any:
    """The engine's counters, after giving it the learner's weights again if it lost them (version 0 again).

    Ray restarts a dead ``hf`` engine actor (``engine.max_restarts``) with the weights it was built
    with; the rollout must not sample from them under a later version's name.
    """
    stats = await engine_stats(c.engine)
    await watch_engine(c)
    if stats.policy_version != policy_version:
        log.warning(
            "the engine is at policy version %d, not %d (restarted?): syncing it", stats.policy_version, policy_version
        )
        await sync_engine(c, policy_version)
        stats = await engine_stats(c.engine)
    return stats


async def watch_engine(c: Components) -> None:
    """Count a restart of the engine since the last look (:meth:`trainer.faults.FaultWatch.engine_instance`)."""
    c.faults.engine_instance(await _while_restarting(c.engine.instance_async))


async def sync_engine(c: Components, policy_version: int) -> None:
    """Give the engine the actor's weights as ``policy_version`` (waiting out an engine actor's restart)."""
    await _while_restarting(lambda: c.learner.sync_weights(c.engine, policy_version, c.run_dir / "engine_weights"))


async def engine_stats(engine: Engine) -> Any:
    """The engine's counters (a restarting engine actor is waited for)."""
    return await _while_restarting(engine.stats_async)


async def _while_restarting(call: Callable[[], Any], timeout_s: float = 300.0) -> Any:
    """``await call()``, again every half second while the actor it reaches is being restarted by Ray."""
    from trainer.rollout import import_ray

    unavailable = import_ray().exceptions.ActorUnavailableError
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def save_checkpoint(config: TrainConfig, c: Components, step: int, policy_version: int) -> Path:
    """Write step ``step``'s checkpoint (layout: ``trainer.checkpoint``), then prune old ones."""
    directory = checkpoint_dir(c.run_dir, step)
    directory.mkdir(parents=True, exist_ok=True)
    await c.learner.actor.save_checkpoint(directory / "actor")
    if c.learner.critic is not None:
        await c.learner.critic.save_checkpoint(directory / "critic")
    await c.learner.actor.save_pretrained(directory / "policy", c.learner.spec.actor.model)
    ceiling = None if c.curriculum is None else c.curriculum.ceiling
    TrainerState(step=step, policy_version=policy_version, curriculum_ceiling=ceiling).save(directory)
    mark_complete(directory)
    prune_checkpoints(c.run_dir, config.trainer.keep_checkpoints)
    return directory
