"""A run's plan, derived from its config alone: which models run, with how many ranks, on what share of which
device, in what precision, and what Ray must provide. Config in, specs out; nothing starts here.

The machine enters through :class:`Hardware` (CPU count, CUDA, bf16), read once by :meth:`Hardware.detect`
or given by a test, so every decision is a pure function of the config, the model directory's files and
that record:

- the learner's models (:func:`learner_spec`): the actor; a critic of its own unless the critic is a value
  head on the actor (:func:`shared_critic`); a reference of its own unless the actor trains LoRA adapters
  (then the reference is the actor with its adapters switched off);
- their precision (:func:`mixed_precision`) and GPU shares next to the engine (:func:`engine_gpu_share`);
- the engine's spec (:func:`engine_spec`);
- Ray's logical CPUs and object store (:func:`ray_resources`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agents.engines.registry import EngineSpec, engine_kind, local_device_and_dtype
from trainer.config import TrainConfig
from trainer.learner import LearnerSpec
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec

__all__ = [
    "Hardware",
    "RunPlan",
    "engine_gpu_share",
    "engine_spec",
    "learner_spec",
    "lora_bf16_caution",
    "mixed_precision",
    "plan_run",
    "ray_resources",
    "roles",
    "shared_critic",
]


@dataclass(frozen=True)
class Hardware:
    """What the plan needs to know about the machine the driver runs on."""

    cpu_count: int = 1
    cuda: bool = False
    bf16: bool = False  # CUDA devices that compute in bf16

    @classmethod
    def detect(cls) -> Hardware:
        import torch

        cuda = torch.cuda.is_available()
        return cls(cpu_count=os.cpu_count() or 1, cuda=cuda, bf16=cuda and torch.cuda.is_bf16_supported())


@dataclass(frozen=True)
class RunPlan:
    """What :func:`plan_run` decides: Ray's logical CPUs and object store, the engine, the learner, and two lines
    for the log (the learner's roles; a caution about the run's precision, or ``None``)."""

    ray_cpus: int
    object_store_bytes: int
    engine: EngineSpec
    engine_gpus: float
    learner: LearnerSpec
    roles: str
    caution: str | None


def plan_run(config: TrainConfig, model_path: str, hardware: Hardware | None = None) -> RunPlan:
    """The plan of ``config`` for the model in ``model_path`` on ``hardware`` (default: this machine's)."""
    hardware = Hardware.detect() if hardware is None else hardware
    ray_cpus, object_store = ray_resources(config, model_path, hardware)
    return RunPlan(
        ray_cpus=ray_cpus,
        object_store_bytes=object_store,
        engine=engine_spec(config, model_path),
        engine_gpus=engine_gpu_share(config, hardware),
        learner=learner_spec(config, model_path, hardware),
        roles=roles(config),
        caution=lora_bf16_caution(config, hardware),
    )


# ---------------------------------------------------------------------------------------------- the models
def shared_critic(config: TrainConfig) -> bool:
    """Whether the critic is a value head on the actor (``algo.critic_model``; ``auto``: when the actor trains LoRA
    adapters, whose separate critic would be frozen weights plus adapters too)."""
    if not config.algo.critic:
        return False
    if config.algo.critic_model == "auto":
        return config.model.lora_rank > 0
    return config.algo.critic_model == "shared"


def separate_critic(config: TrainConfig) -> bool:
    """A critic model of its own (not a value head on the actor)."""
    return config.algo.critic and not shared_critic(config)


def separate_reference(config: TrainConfig) -> bool:
    """A reference model of its own; with LoRA the reference is the actor with its adapters switched off."""
    return config.algo.reference and config.model.lora_rank == 0


def learner_models(config: TrainConfig) -> int:
    """The models the learner starts, each on every learner rank: the actor, and a critic and a reference
    of their own when the run has them."""
    return 1 + int(separate_critic(config)) + int(separate_reference(config))


def roles(config: TrainConfig) -> str:
    """The learner's roles as the start-up log names them."""
    reference = "reference" if separate_reference(config) else "reference = actor without its adapters"
    actor = "actor with the value head" if shared_critic(config) else "actor"
    critic = ["critic"] * separate_critic(config)
    return ", ".join([actor, *critic, *([reference] * config.algo.reference)])


def mixed_precision(config: TrainConfig, lora_rank: int | None = None, hardware: Hardware | None = None) -> bool:
    """Whether a learner model that trains LoRA adapters of ``lora_rank`` (default ``model.lora_rank``; 0: every
    weight) computes in bf16 (float32 master weights, gradients reduced in float32): ``trainer.precision``,
    where ``auto`` means on CUDA devices that support bf16, never on CPU, and not with LoRA adapters.

    A bf16 forward drops an adapter's contribution wherever it is under half a bf16 step of the base layer's
    output: that output is already on the bf16 grid, and their sum is rounded back to it. The learner then
    sees only part of its own policy change (:func:`lora_bf16_caution`)."""
    lora_rank = config.model.lora_rank if lora_rank is None else lora_rank
    if config.trainer.precision != "auto":
        return config.trainer.precision == "bf16-mixed"
    if config.trainer.n_gpus == 0 or lora_rank > 0:
        return False
    hardware = Hardware.detect() if hardware is None else hardware
    return hardware.bf16


def lora_bf16_caution(config: TrainConfig, hardware: Hardware | None = None) -> str | None:
    """A warning when the run was asked to train LoRA adapters with bf16 compute, else ``None``."""
    if config.model.lora_rank == 0 or not mixed_precision(config, hardware=hardware):
        return None
    return (
        "trainer.precision=bf16-mixed with LoRA adapters (model.lora_rank > 0): a bf16 forward rounds away each "
        "adapter's contribution where it is under half a bf16 step of the layer's output, so the learner sees only "
        "part of its own policy change (about half after one step of SmolLM2 at lr 1e-4); "
        "use trainer.precision=float32, or model.lora_rank=0"
    )


def learner_spec(config: TrainConfig, model_path: str, hardware: Hardware | None = None) -> LearnerSpec:
    """The learner's roles: each model's spec, the ranks, their CPUs and GPU share."""
    hardware = Hardware.detect() if hardware is None else hardware
    gpu = config.trainer.n_gpus > 0
    ranks = config.learner_ranks
    threads = config.trainer.threads or max(1, hardware.cpu_count // ranks)
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
        "mixed_precision": mixed_precision(config, hardware=hardware),
        "num_threads": threads,
        "mmap_threshold_mib": config.trainer.mmap_threshold_mib,
        "share_prefix": config.trainer.share_prefix,
        "logits_chunk_size": config.trainer.logits_chunk_size,
        "seed": config.trainer.seed,
    }
    lora = LoraSpec(rank=config.model.lora_rank, alpha=config.model.lora_alpha, layers=config.model.lora_layers)
    checkpointing = {
        "gradient_checkpointing": config.model.gradient_checkpointing,
        "checkpoint_layers": config.model.checkpoint_layers,
    }
    shared_head = optimizer(config.model.critic_lr) if shared_critic(config) else None
    actor = WorkerSpec(
        "actor",
        model_path,
        optimizer(config.model.lr),
        lora,
        **checkpointing,
        value_head=shared_head,
        **common,
    )
    critic = None
    if separate_critic(config):
        critic = WorkerSpec(
            "critic",
            model_path,
            optimizer(config.model.critic_lr),
            lora,
            **checkpointing,
            **common,
        )
    reference = WorkerSpec("reference", model_path, **common) if separate_reference(config) else None
    gpu_share = learner_gpu_share(config, learner_models(config), hardware)
    return LearnerSpec(actor, critic, reference, ranks, config.trainer.learner_cpus, gpu_share)


# ---------------------------------------------------------------------------------------------- the engine
def engine_spec(config: TrainConfig, model_path: str) -> EngineSpec:
    """The engine's spec: its kind, the model, device and dtype, batch size and servers."""
    engine = config.engine
    device, dtype = local_device_and_dtype(engine.device, engine.dtype)
    return EngineSpec(
        kind=engine.kind,
        model=model_path,
        device=device,
        dtype=dtype,
        max_batch_size=engine.max_batch_size,
        cuda_graphs=engine.cuda_graphs,
        seed=config.trainer.seed,
        urls=tuple(engine.urls),
        launch=engine.launch,
        num_servers=engine.num_servers,
        gpus_per_server=engine.gpus_per_server,
    )


def engine_gpu_share(config: TrainConfig, hardware: Hardware | None = None) -> float:
    """The engine actor's GPU share (``local`` engines): ``engine.num_gpus``, or 0.25 when it is 0 and the
    engine runs on CUDA (Ray hides the GPUs from an actor that reserves none)."""
    local = engine_kind(config.engine.kind).placement == "local"
    if not local or config.engine.device == "cpu":
        return 0.0
    hardware = Hardware.detect() if hardware is None else hardware
    if not hardware.cuda:
        return 0.0
    return config.engine.num_gpus or 0.25


def learner_gpu_share(config: TrainConfig, models: int, hardware: Hardware | None = None) -> float:
    """Each learner rank's GPU share: the models (actor, critic, reference) share each GPU, next to the engine."""
    if config.trainer.n_gpus == 0:
        return 0.0
    return (1.0 - engine_gpu_share(config, hardware)) / models


# ---------------------------------------------------------------------------------------------- Ray
def ray_resources(config: TrainConfig, model_path: str, hardware: Hardware | None = None) -> tuple[int, int]:
    """Ray's logical CPUs (enough for every actor of the run; they take turns on the real cores) and its object
    store's bytes (room for a few copies of the weights, which weight sync sends through it; at least 256 MiB)."""
    hardware = Hardware.detect() if hardware is None else hardware
    wanted = config.engine.num_cpus + learner_models(config) * config.learner_ranks * config.trainer.learner_cpus
    wanted += config.rollout.num_env_actors * 0.25 + 2
    cpus = max(hardware.cpu_count, int(wanted + 0.999))
    model = Path(model_path)
    weights = sum(p.stat().st_size for p in model.glob("*.safetensors")) if model.is_dir() else 0
    return cpus, max(256 * 1024**2, 3 * 4 * weights // max(1, _bytes_per_weight(model)))


def _bytes_per_weight(model: Path) -> int:
    config_file = model / "config.json"
    dtype = json.loads(config_file.read_text()).get("torch_dtype", "float32") if config_file.is_file() else "float32"
    return 2 if dtype in ("bfloat16", "float16") else 4
