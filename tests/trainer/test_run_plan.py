"""The run's plan (trainer/run_plan.py): config and machine in, specs out; no Ray, no model loaded."""

from __future__ import annotations

import json
import math

import pytest

from agents.models import tiny_model_path
from trainer.config import compose_train_config, to_train_config
from trainer.run_plan import (
    Hardware,
    engine_gpu_share,
    learner_spec,
    lora_bf16_caution,
    mixed_precision,
    plan_run,
    ray_resources,
    roles,
    shared_critic,
)

CPU = Hardware(cpu_count=2)
BF16_GPU = Hardware(cpu_count=16, cuda=True, bf16=True)
OLD_GPU = Hardware(cpu_count=16, cuda=True, bf16=False)


def config_of(*overrides: str, devices: int = 0, monkeypatch: pytest.MonkeyPatch | None = None):
    if monkeypatch is not None:  # the config check counts CUDA devices for trainer.n_gpus
        import trainer.config

        monkeypatch.setattr(trainer.config, "_cuda_devices", lambda: devices)
    return to_train_config(compose_train_config(["env=sokoban", "model=tiny", *overrides]))


def test_precision_auto_is_bf16_mixed_on_a_bf16_gpu_without_lora_and_float32_elsewhere(monkeypatch):
    assert not mixed_precision(config_of(), hardware=BF16_GPU)  # no trainer.n_gpus: the learner is on the CPU
    assert mixed_precision(config_of("trainer.precision=bf16-mixed"), hardware=CPU)  # asked for, also on CPU
    full = config_of("trainer.n_gpus=1", "model.lora_rank=0", devices=1, monkeypatch=monkeypatch)
    assert mixed_precision(full, hardware=BF16_GPU)
    assert not mixed_precision(full, hardware=OLD_GPU)  # a GPU without bf16
    float32 = config_of(
        "trainer.n_gpus=1", "model.lora_rank=0", "trainer.precision=float32", devices=1, monkeypatch=monkeypatch
    )
    assert not mixed_precision(float32, hardware=BF16_GPU)
    # LoRA adapters: a bf16 forward would hide part of their change; the warm-up (lora_rank 0) may use bf16
    lora = config_of("trainer.n_gpus=1", "model.lora_rank=8", devices=1, monkeypatch=monkeypatch)
    assert not mixed_precision(lora, hardware=BF16_GPU)
    assert mixed_precision(lora, lora_rank=0, hardware=BF16_GPU)


def test_bf16_with_lora_is_allowed_with_one_warning_line():
    assert lora_bf16_caution(config_of("model.lora_rank=8"), CPU) is None  # LoRA in float32
    assert lora_bf16_caution(config_of("trainer.precision=bf16-mixed", "model.lora_rank=0"), CPU) is None
    caution = lora_bf16_caution(config_of("trainer.precision=bf16-mixed", "model.lora_rank=8"), CPU)
    assert "\n" not in caution
    assert "trainer.precision=float32" in caution and "model.lora_rank=0" in caution


@pytest.mark.parametrize(
    ("overrides", "shared"),
    [
        ([], False),  # tiny trains every weight: auto keeps a critic model
        (["model.lora_rank=4"], True),  # with LoRA adapters auto puts the head on the actor
        (["model.lora_rank=4", "algo.critic_model=separate"], False),
        (["algo.critic_model=shared"], True),
        (["algo=grpo", "model.lora_rank=4"], False),  # no critic at all
    ],
)
def test_the_critic_model_decides_which_roles_start(overrides, shared):
    config = config_of(*overrides)
    assert shared_critic(config) == shared
    spec = learner_spec(config, str(tiny_model_path()), CPU)
    if shared:  # the head trains at the critic's learning rate, on the actor: no critic model
        assert spec.critic is None and spec.actor.value_head.lr == config.model.critic_lr
        assert roles(config).startswith("actor with the value head")
    else:
        assert spec.actor.value_head is None
        assert (spec.critic is not None) == config.algo.critic
        assert roles(config).startswith("actor, critic" if config.algo.critic else "actor, reference")
    # PPO's kl_coef is 0: no reference unless asked for (its KL metric); GRPO's KL term needs one
    assert ("reference" in roles(config)) == config.algo.reference == (config.algo.name == "grpo")


def test_ppo_runs_the_reference_when_asked_for_its_kl_metric():
    config = config_of("model.lora_rank=4", "algo.reference=true")
    assert roles(config) == "actor with the value head, reference = actor without its adapters"
    assert learner_spec(config, str(tiny_model_path()), CPU).reference is None  # the actor with its adapters off
    assert learner_spec(config_of("algo.reference=true"), str(tiny_model_path()), CPU).reference is not None


def test_the_actor_and_a_separate_critic_carry_adapters_on_the_layers_asked_for():
    config = config_of("model.lora_rank=4", "model.lora_layers=1", "algo.critic_model=separate")
    spec = learner_spec(config, str(tiny_model_path()), CPU)
    assert spec.actor.lora.layers == spec.critic.lora.layers == 1
    assert learner_spec(config_of("model.lora_rank=4"), str(tiny_model_path()), CPU).actor.lora.layers is None


@pytest.mark.parametrize(
    ("overrides", "models"),
    [
        ([], 2),  # tiny trains every weight: actor and critic models (PPO runs no reference by default)
        (["algo.reference=true"], 3),  # and the reference, for PPO's KL metric
        (["model.lora_rank=4"], 1),  # the head and the reference (adapters off) live on the actor
        (["model.lora_rank=4", "algo.critic_model=separate"], 2),
        (["algo=grpo"], 2),  # actor and reference
        (["algo=grpo", "algo.reference=false", "algo.kl_coef=0"], 1),
    ],
)
def test_ray_gets_a_logical_cpu_per_learner_model(overrides, models):
    config = config_of(*overrides)
    # engine 1 + models x 1 rank x 1 CPU + 2 environment actors x 0.25 + 2 for the driver and Ray, rounded up
    cpus, _ = ray_resources(config, str(tiny_model_path()), Hardware(cpu_count=1))
    assert cpus == math.ceil(1 + models + 0.5 + 2)
    assert ray_resources(config, str(tiny_model_path()), Hardware(cpu_count=64))[0] == 64  # never under the cores


def test_the_object_store_holds_a_few_copies_of_the_float32_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * (200 * 1024**2))
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    # 200 MiB of bf16 weights: 100 M weights, 3 float32 copies = 1200 MiB
    assert ray_resources(config_of(), str(tmp_path), CPU)[1] == 1200 * 1024**2
    assert ray_resources(config_of(), str(tiny_model_path()), CPU)[1] == 256 * 1024**2  # the floor


def test_the_engine_reserves_a_gpu_share_only_on_cuda(monkeypatch):
    assert engine_gpu_share(config_of(), CPU) == 0.0
    assert engine_gpu_share(config_of(), BF16_GPU) == 0.25  # engine.device=auto on a CUDA machine
    assert engine_gpu_share(config_of("engine.device=cpu"), BF16_GPU) == 0.0
    shared = ("trainer.n_gpus=1", "model.lora_rank=8", "algo.critic_model=shared")
    gpu = config_of(*shared, devices=1, monkeypatch=monkeypatch)
    plan = plan_run(gpu, str(tiny_model_path()), BF16_GPU)
    # the actor alone on the learner (head and reference on it), next to the engine's quarter
    assert plan.engine_gpus == 0.25 and plan.learner.num_gpus == 0.75
    assert plan.learner.actor.device == "cuda" and plan.learner.actor.num_threads == 16
    assert plan.engine.model == str(tiny_model_path()) and plan.caution is None


def test_every_learner_rank_and_the_warm_up_get_the_mmap_threshold():
    from trainer.sft import _sft_worker_spec

    for overrides, threshold in (((), 4.0), (("trainer.mmap_threshold_mib=0",), 0.0)):
        config = config_of("algo.critic_model=separate", "algo.reference=true", *overrides)
        spec = learner_spec(config, str(tiny_model_path()), CPU)
        assert {role.mmap_threshold_mib for role in (spec.actor, spec.critic, spec.reference)} == {threshold}
        assert _sft_worker_spec(config, "m", 4).mmap_threshold_mib == threshold
