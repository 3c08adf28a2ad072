"""End-to-end training runs on CPU with the tiny model: real Ray, real FSDP2 (gloo), the real hf engine.

* A three-step PPO run on a multi-turn environment writes everything a run promises (metrics with
  every documented key, TensorBoard events, samples, a Hugging Face checkpoint that ``from_pretrained``
  loads, the learning-curve PNG), bumps the policy version each step, and keeps the engine in sync
  with the learner: the logprob mismatch stays at float noise although the weights move each step.
* The reward of a trivially learnable environment rises under GRPO.
* One-step off-policy mode runs, and trains on trajectories one version old.
* With LoRA the engine runs in the actor's process on its weights (``engine.placement=auto``): the run is the
  run with a separate engine actor, step by step.
* Faults: a run whose groups all fail logs each dropped group's error, trains nothing and stops after
  ``trainer.max_failed_steps`` such steps; an engine actor killed with SIGKILL is restarted by Ray, counted
  (``engine/restarts``) and given the learner's weights again before it samples; a colocated actor killed with
  SIGKILL in any phase of a step is started again from the last checkpoint (``learner/restarts``) and the run
  ends as an uninterrupted one does (with no restart allowed: ``test_train_signals.py``).
* A bad configuration fails before any work; a short CUDA run (marker ``gpu``) where CUDA exists.
"""

from __future__ import annotations

import json
import math
import os
import signal

import learnable_env
import pytest
import ray
import torch
from test_train_resume import without_wall_time

from agents.config import UsageError
from agents.models import tiny_model_path
from trainer import engine_sync, train_step
from trainer.config import compose_train_config, to_train_config
from trainer.faults import RunFailedError
from trainer.metrics import read_metrics
from trainer.ray_cluster import init_ray
from trainer.rollout import RolloutManager
from trainer.run import train

pytestmark = pytest.mark.ray

REQUIRED_METRICS = (
    "reward/mean",
    "reward/std",
    "reward/success_rate",
    "episode/turns",
    "episode/invalid_action_rate",
    "actor/policy_loss",
    "critic/value_loss",
    "actor/entropy",
    "actor/clipfrac",
    "actor/kl_ref",
    "actor/grad_norm",
    "actor/lr",
    "rollout/logprob_mismatch",
    "rollout/prefix_hit_rate",
    "time/rollout_s",
    "time/train_s",
    "throughput/tokens_per_s",
    "policy_version",
)


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    init_ray(num_cpus=8, object_store_memory=300 * 1024**2)
    ray.cloudpickle.register_pickle_by_value(learnable_env)  # Ray workers cannot import tests/trainer
    learnable_env.register()
    learnable_env.register_cue()
    yield
    ray.shutdown()


def config_for(tmp_path, *overrides: str):
    base = [
        f"env={learnable_env.ENV_ID}",
        "model=tiny",
        "rollout.max_new_tokens=8",
        "rollout.max_total_tokens=256",
        "rollout.max_turns=null",
        "rollout.num_env_actors=1",
        "engine.num_cpus=1",
        "trainer.progress=false",
        "trainer.micro_batch_size=8",
        f"trainer.run_dir={tmp_path / 'run'}",
        "evaluation.enabled=false",  # the held-out evaluation has its own test
    ]
    return to_train_config(compose_train_config([*base, *overrides]))


def test_ppo_run_writes_everything_and_keeps_the_engine_in_sync(tmp_path):
    config = config_for(
        tmp_path,
        "algo=ppo",
        "algo.mini_batches=1",  # one optimizer step a step: the first epoch's ratio is exactly 1
        "algo.reference=true",  # off by default (kl_coef 0); on, it logs actor/kl_ref
        "trainer.total_steps=3",
        "trainer.groups_per_step=4",
        "trainer.sample_every=2",
    )
    run_dir = train(config, setup=learnable_env.register)
    records = read_metrics(run_dir)
    assert [r["step"] for r in records] == [1, 2, 3]
    for record in records:
        missing = [key for key in REQUIRED_METRICS if key not in record]
        assert not missing, missing
        assert all(not isinstance(v, float) or math.isfinite(v) for v in record.values() if v is not None)
    assert [r["policy_version"] for r in records] == [1, 2, 3]
    # Two turns per episode: the environment's limit, so every episode is complete and trainable.
    assert all(r["episode/turns"] == 2 and r["episode/count"] == 4 for r in records)
    # After every sync the engine samples from the learner's weights: engine and learner logprobs agree
    # (a stale engine would differ by the update, which moves the weights by ~lr per step).
    assert all(r["rollout/logprob_mismatch"] < 1e-4 for r in records)
    assert records[0]["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # first epoch: ratio 1
    assert records[1]["rollout/prefix_hit_rate"] > 0.0
    # Outputs.
    assert (run_dir / "config.yaml").is_file() and any((run_dir / "tensorboard").iterdir())
    assert (run_dir / "learning_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (run_dir / "report.html").read_text()  # agents.view's page, written at the end of the run
    assert report.lstrip().lower().startswith("<!doctype html") and "step_000002" in report
    samples = [json.loads(line) for line in (run_dir / "samples" / "step_000002.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and samples[0]["messages"][0]["role"] == "system"
    checkpoint = run_dir / "checkpoints" / "step_000003"
    assert (checkpoint / "COMPLETE").is_file()
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state == {"step": 3, "policy_version": 3, "curriculum_ceiling": None}
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(checkpoint / "policy")
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    moved = max((a - b).abs().max().item() for a, b in zip(trained.parameters(), initial.parameters(), strict=True))
    assert moved > 1e-3  # three AdamW steps at lr 1e-3


def test_ppo_with_the_value_head_on_the_actor_starts_no_critic_model(tmp_path):
    config = config_for(
        tmp_path, "algo=ppo", "algo.critic_model=shared", "trainer.total_steps=2", "trainer.groups_per_step=4"
    )
    run_dir = train(config, setup=learnable_env.register)
    records = read_metrics(run_dir)
    assert [r["policy_version"] for r in records] == [1, 2]
    for record in records:
        assert record["critic/value_loss"] > 0 and record["critic/grad_norm"] > 0 and "critic/vf_clipfrac" in record
    # One actor forward scored values and old logprobs: nothing reused, and the learner agrees with the engine.
    assert all(r["rollout/old_logprobs_reused"] == 0.0 and r["rollout/logprob_mismatch"] < 1e-4 for r in records)
    assert "starting the learner: actor with the value head" in (run_dir / "train.log").read_text()
    assert not any("actor/kl_ref" in r or "rollout/kl_ref" in r for r in records)  # PPO's default: no reference
    checkpoint = run_dir / "checkpoints" / "step_000002"
    assert (checkpoint / "actor").is_dir() and not (checkpoint / "critic").exists()


def test_warm_up_then_rl_with_held_out_evaluation(tmp_path):
    config = config_for(
        tmp_path,
        f"env={learnable_env.CUE_ID}",
        "algo=grpo",
        "algo.group_size=4",
        "sft.episodes=32",
        "sft.epochs=12",
        "sft.lr=3e-3",
        "evaluation.enabled=true",
        "evaluation.episodes=16",
        "evaluation.every=1",
        "evaluation.temperature=0",
        "trainer.total_steps=2",
        "trainer.groups_per_step=2",
        "trainer.checkpoint_every=0",
    )
    run_dir = train(config, setup=learnable_env.register_all)
    records = read_metrics(run_dir)
    assert [r["step"] for r in records] == [0, 1, 2]
    start = records[0]  # after the warm-up, before the first update
    assert start["sft/examples"] == 32 and start["sft/nll_last"] < 0.25 * start["sft/nll_first"]
    assert start["eval/episodes"] == 16 and start["eval/success_rate"] >= 0.9  # RL starts from the warmed-up policy
    assert all("eval/success_rate" in r and "eval/success_stderr" in r for r in records)
    assert (run_dir / "warmup" / "policy" / "COMPLETE").is_file()
    assert (run_dir / "samples" / "step_000001.jsonl").is_file()
    assert (run_dir / "learning_curves.png").is_file()


def learnable_run(tmp_path, algo: str) -> tuple[list[dict], float, float]:
    """Ten steps of ``algo`` on the learnable environment at a high learning rate: the records, and the mean reward
    of the first two and of the last two steps."""
    config = config_for(
        tmp_path,
        f"algo={algo}",
        "algo.group_size=8",
        "algo.kl_coef=0",
        "model.lr=3e-2",
        "trainer.total_steps=10",
        "trainer.groups_per_step=4",
        "trainer.checkpoint_every=0",
        "trainer.sample_every=0",
        "logging.plot=false",
    )
    records = read_metrics(train(config, setup=learnable_env.register))
    first = sum(r["reward/mean"] for r in records[:2]) / 2
    last = sum(r["reward/mean"] for r in records[-2:]) / 2
    return records, first, last


def test_grpo_reward_rises_on_a_learnable_environment(tmp_path):
    records, first, last = learnable_run(tmp_path, "grpo")
    # A random tiny model writes ~14% digits (0.14 per turn, 2 turns). Measured at temperature 0.7 (the default):
    # 0.136 0.158 0.183 0.231 0.255 0.316 0.512 0.764 1.102 1.727 (of 2.0): first two 0.15, last two 1.41.
    assert last > first + 0.8, [round(r["reward/mean"], 3) for r in records]
    assert records[-1]["actor/entropy"] < records[0]["actor/entropy"]
    for record in records:  # where the signal came from: success, or the shaping rewards alone
        assert 0 <= record["groups/mixed_success_group_fraction"] <= 1
        assert 0 <= record["advantage/share_without_success"] <= 1


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["gspo", "cispo"])
def test_the_other_policy_losses_raise_the_reward_too(tmp_path, algo):
    """The same run as GRPO's above through the policy-loss table's other rows: GSPO's sequence ratio (the paper's
    clip range, 3e-4/4e-4, seq-mean-token-mean) and CISPO's clipped, detached weight."""
    records, first, last = learnable_run(tmp_path, algo)
    assert last > first + 0.8, [round(r["reward/mean"], 3) for r in records]
    assert all(math.isfinite(r["actor/policy_loss"]) and 0 <= r["actor/clipfrac"] <= 1 for r in records)


def test_off_policy_mode_trains_on_one_step_old_rollouts(tmp_path):
    config = config_for(
        tmp_path,
        "algo=rloo",
        "algo.off_policy=true",
        "algo.tis.level=token",
        "trainer.total_steps=3",
        "trainer.groups_per_step=2",
        "trainer.sample_every=1",
        "logging.plot=false",
    )
    run_dir = train(config, setup=learnable_env.register)
    records = read_metrics(run_dir)
    assert [r["policy_version"] for r in records] == [1, 2, 3]
    # Step 1 plays with version 0; step 2's rollout overlapped step 1's training, so it is version 0 too.
    versions = [
        {json.loads(line)["policy_version"] for line in (run_dir / "samples" / f"step_{s:06d}.jsonl").open()}
        for s in (1, 2, 3)
    ]
    assert versions == [{0}, {0}, {1}]
    # Its data is one update old: the learner's logprobs now differ from the engine's, and the IS weights correct.
    assert records[1]["rollout/logprob_mismatch"] > 1e-4
    assert "rollout/is_weight_mean" in records[1]
    assert not [k for k in records[1] if k.startswith("memory/actor_")]  # no phases apart: rollouts overlap updates


def test_bad_config_fails_before_any_work(tmp_path):
    with pytest.raises(UsageError, match=r"algo\.group_size"):
        config_for(tmp_path, "algo=grpo", "algo.group_size=1")
    assert not (tmp_path / "run").exists()  # the check came before the run directory or any actor


@pytest.mark.gpu
def test_short_cuda_run_with_nccl_and_bf16(tmp_path):
    """On a CUDA machine: learner ranks on the GPU (NCCL, bf16 compute) next to the hf engine."""
    if not torch.cuda.is_available():
        pytest.fail("the gpu marker runs only where CUDA is available")
    config = config_for(tmp_path, "algo=ppo", "trainer.n_gpus=1", "trainer.total_steps=2", "trainer.groups_per_step=4")
    records = read_metrics(train(config, setup=learnable_env.register))
    assert [r["policy_version"] for r in records] == [1, 2]
    # bf16 engine against bf16-compute learner: agreement to bf16 precision, not float noise.
    assert all(r["rollout/logprob_mismatch"] < 0.1 for r in records)


def test_a_run_whose_groups_all_fail_stops_with_the_first_error(tmp_path, capfd):
    """Fault injection: the environment raises on every step. Each step's dropped groups and their error reach
    the console and train.log; nothing is trained; after trainer.max_failed_steps=2 such steps the run stops."""
    learnable_env.register_crashing()
    config = config_for(
        tmp_path,
        "algo=ppo",
        "algo.mini_batches=1",
        "trainer.total_steps=5",
        "trainer.groups_per_step=2",
        "logging.plot=false",
    )
    config.env["id"] = learnable_env.CRASHING_ID
    with pytest.raises(RunFailedError) as caught:
        train(config, setup=learnable_env.register_crashing)
    run_dir = tmp_path / "run"
    assert str(caught.value) == (
        "every group failed in 2 steps in a row (trainer.max_failed_steps=2), so the run stopped; first error: "
        f"RuntimeError: this environment always crashes; the run's log: {run_dir / 'train.log'}"
    )
    records = read_metrics(run_dir)
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["rollout/groups_dropped"] == 2 and r["rollout/env_errors"] >= 2 for r in records)
    assert all(r["policy_version"] == 0 and "actor/policy_loss" not in r for r in records)
    assert not (run_dir / "checkpoints").exists()  # no checkpoint of a model that never trained
    dropped = "2 of 2 groups dropped: RuntimeError: this environment always crashes (groups crashing-test/"
    err = capfd.readouterr().err
    assert f"turngym: warning: step 1: {dropped}" in err and f"turngym: warning: step 2: {dropped}" in err
    log = (run_dir / "train.log").read_text()
    assert f"step 2: {dropped}" in log
    assert "step 1: group crashing-test/1/1 dropped: RuntimeError: this environment always crashes" in log


def engine_actors() -> list[dict]:
    """This Ray cluster's engine actors, as Ray's actor table records them (pid, state, restarts)."""
    return [a for a in ray._private.state.actors().values() if a["ActorClassName"] == "EngineHost"]


def test_a_killed_engine_actor_is_restarted_and_synced_again(tmp_path, capfd):
    """Fault injection: SIGKILL the engine actor's process after step 1. Ray restarts it with the initial
    weights; the loop notices (policy version 0 again), syncs the learner's weights and plays the step."""
    import os
    import signal
    import threading
    import time

    config = config_for(
        tmp_path, "algo=ppo", "trainer.total_steps=3", "trainer.groups_per_step=4", "logging.plot=false"
    )
    done: dict[str, object] = {}
    earlier = {a["ActorID"] for a in engine_actors()}  # the engines of earlier tests in this cluster
    thread = threading.Thread(target=lambda: done.setdefault("run_dir", train(config, setup=learnable_env.register)))
    thread.start()
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 300  # start-up on a loaded 2-core machine takes minutes
    while not (metrics.exists() and metrics.read_text().count("\n") >= 1):
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    # This run's engine actor (other Ray clusters on the machine may run one too).
    [engine] = [a for a in engine_actors() if a["ActorID"] not in earlier]
    os.kill(int(engine["Pid"]), signal.SIGKILL)
    thread.join(timeout=300)
    assert "run_dir" in done, "the run did not finish"
    records = read_metrics(done["run_dir"])
    assert [r["policy_version"] for r in records] == [1, 2, 3]
    # Steps 2 and 3 sampled from the learner's weights, not from the restarted engine's initial ones.
    assert all(r["rollout/logprob_mismatch"] < 1e-4 for r in records)
    assert all(r["episode/count"] == 4 for r in records)
    # The restart is counted (cumulatively, from the step that noticed it), as Ray counted it, and said on the console.
    assert records[0]["engine/restarts"] == 0 and records[-1]["engine/restarts"] == 1
    assert ray._private.state.actors(engine["ActorID"])["NumRestarts"] == 1
    assert (
        "turngym: warning: the engine actor died and Ray restarted it (restart 1 of at most engine.max_restarts=3"
        in (capfd.readouterr().err)
    )


def test_gigpo_with_shaping_and_a_curriculum_learns_and_moves_the_difficulty(tmp_path):
    config = config_for(
        tmp_path,
        f"env={learnable_env.STATEFUL_ID}",
        "algo=gigpo",
        "algo.group_size=8",
        "algo.kl_coef=0",
        "algo.shaping.coef=0.1",
        "curriculum=adaptive",
        "model.lr=3e-2",
        "trainer.total_steps=10",
        "trainer.groups_per_step=4",
        "trainer.checkpoint_every=0",
        "trainer.sample_every=5",
        "logging.plot=false",
    )
    run_dir = train(config, setup=learnable_env.register)
    records = read_metrics(run_dir)
    per_turn = [r["reward/mean"] / r["episode/turns"] for r in records]
    # the share of digits per turn, whatever the episode's length (the curriculum changes it)
    assert sum(per_turn[-2:]) / 2 > sum(per_turn[:2]) / 2 + 0.3, [round(x, 3) for x in per_turn]
    ceilings = [r["curriculum/ceiling"] for r in records]
    assert ceilings[0] == 1 and max(ceilings) > 1, ceilings  # starts with 1-turn episodes, moves up as they succeed
    for record in records:
        assert record["curriculum/difficulty_max"] <= record["curriculum/ceiling"]
        assert record["shaping/return_mean"] > 0  # every turn takes one turn off the distance: +0.1 each
        assert record["credit/progress_turn_fraction"] == 1.0
        assert record["credit/step_grouped_turn_fraction"] == 1.0  # turn k of every episode shares "turn<k>"
        assert record["advantage/step_abs_mean"] >= 0 and record["advantage/episode_abs_mean"] >= 0
    samples = [json.loads(line) for line in (run_dir / "samples" / "step_000005.jsonl").read_text().splitlines()]
    assert all(1 <= s["reset_options"]["difficulty"] <= 3 for s in samples)
    assert all(s["initial_distance"] == s["num_turns"] == s["reset_options"]["difficulty"] for s in samples)
    assert all(s["turn_distances_after"][-1] == 0 for s in samples)
    state = json.loads((run_dir / "checkpoints" / "step_000010" / "trainer_state.json").read_text())
    # the ceiling after step 10's update: step 10's, moved by its success
    assert abs(state["curriculum_ceiling"] - records[-1]["curriculum/ceiling"]) <= 1


def test_a_colocated_lora_run_plays_the_separate_engines_episodes_with_no_engine_actor(tmp_path):
    """``engine.placement=auto`` with LoRA on one rank: the engine runs in the actor's process on its weights
    (trainer/colocated.py), unmerged adapters and no state dict sent. Rollouts and updates alternate without
    deadlock, and the run is the run with a separate engine actor given the merged weights each step: the same
    rewards step by step (the same sampled tokens), and the same engine-learner agreement."""

    def run(placement: str) -> list[dict]:
        config = config_for(
            tmp_path / placement,
            "algo=grpo",
            "algo.group_size=4",
            "model.lora_rank=8",
            "model.lr=1e-1",
            f"engine.placement={placement}",
            "trainer.total_steps=3",
            "trainer.groups_per_step=2",
            "trainer.checkpoint_every=0",
            "trainer.sample_every=0",
            "logging.plot=false",
        )
        assert config.engine_colocated == (placement == "auto")
        return read_metrics(train(config, setup=learnable_env.register))

    earlier = {a["ActorID"] for a in engine_actors()}
    colocated = run("auto")
    assert not [a for a in engine_actors() if a["ActorID"] not in earlier]  # no engine actor was started
    separate = run("separate")
    assert [r["policy_version"] for r in colocated] == [1, 2, 3]
    # every finished episode's keys/values are forgotten as it ends (and the colocated engine drops the rest before
    # the learner trains): neither engine holds any while the learner trains
    assert [r["engine/prefix_cache_tokens_held"] for r in colocated] == [0.0, 0.0, 0.0]
    assert [r["engine/prefix_cache_tokens_held"] for r in separate] == [0.0, 0.0, 0.0]
    assert all(r["rollout/logprob_mismatch"] < 1e-4 for r in colocated)  # sampled from the actor's current weights
    for records in (colocated, separate):  # the actor's peak resident memory in each phase of every step
        for phase in ("rollout", "score", "update"):
            assert all(0.1 < r[f"memory/actor_{phase}_peak_gib"] < 16 for r in records)
    assert [r["reward/mean"] for r in colocated] == pytest.approx([r["reward/mean"] for r in separate], abs=1e-9)
    assert [r["actor/policy_loss"] for r in colocated] == pytest.approx(
        [r["actor/policy_loss"] for r in separate], abs=1e-4
    )


def test_colocated_ppo_takes_the_old_logprobs_and_values_from_the_rollout(tmp_path):
    """PPO with the value head on a LoRA actor and the engine in its process: the engine applies the head as it
    samples, so each step checks two rows and skips the scoring forward, and the run is the run that scores every
    row (``algo.reuse_rollout_logprobs=false``), step by step."""

    def run(reuse: str) -> list[dict]:
        config = config_for(
            tmp_path / reuse,
            "algo=ppo",
            "model.lora_rank=8",
            "algo.mini_batches=2",
            f"algo.reuse_rollout_logprobs={reuse}",
            "trainer.total_steps=3",
            "trainer.groups_per_step=4",
            "trainer.checkpoint_every=0",
            "trainer.sample_every=0",
            "logging.plot=false",
        )
        assert config.engine_colocated and config.algo.critic_model == "auto"
        return read_metrics(train(config, setup=learnable_env.register))

    reused, scored = run("true"), run("false")
    assert [r["rollout/values_reused"] for r in reused] == [1.0, 1.0, 1.0]
    assert [r["rollout/old_logprobs_reused"] for r in reused] == [1.0, 1.0, 1.0]
    assert all(r["rollout/value_mismatch_max"] < 1e-4 and r["rollout/logprob_mismatch_max"] < 1e-4 for r in reused)
    assert [r["rollout/values_reused"] for r in scored] == [0.0, 0.0, 0.0]
    assert all(r["rollout/value_mismatch_max"] < 1e-4 for r in scored)  # every row: the engine's values are right
    assert any(abs(r["advantage/value_mean"]) > 1e-3 for r in reused[1:])  # the head has trained: values not all 0
    for key in ("reward/mean", "advantage/value_mean", "critic/value_loss", "actor/policy_loss"):
        assert [r[key] for r in reused] == pytest.approx([r[key] for r in scored], abs=1e-4), key


COLOCATED = (
    "algo=grpo",
    "algo.group_size=4",
    "model.lora_rank=8",  # at tiny's lr 1e-3: at lr 1e-1 AdamW magnifies the float noise between two runs
    "engine.placement=colocated",
    "trainer.total_steps=3",
    "trainer.groups_per_step=2",
    "trainer.checkpoint_every=1",
    "trainer.keep_checkpoints=4",
    "trainer.sample_every=0",
    "evaluation.enabled=true",  # before step 1 and after step 3
    "evaluation.episodes=2",
    "logging.plot=false",
    "logging.tensorboard=false",
)
FINAL_POLICY = "checkpoints/step_000003/policy/model.safetensors"


@pytest.fixture(scope="module")
def uninterrupted_colocated(tmp_path_factory):
    """The run directory of a colocated run that nothing interrupts: what a restarted run must end as."""
    return train(config_for(tmp_path_factory.mktemp("uninterrupted"), *COLOCATED), setup=learnable_env.register)


def kill_colocated_actor_on(monkeypatch, owner: object, name: str, call: int) -> None:
    """SIGKILL the colocated actor's process (as the out-of-memory killer would) when the loop calls ``owner.name``
    for the ``call``-th time, once; the call then goes on and meets the dead actor."""
    original, calls = getattr(owner, name), []

    def hooked(*args, **kwargs):
        calls.append(name)
        if len(calls) == call:
            [actor] = [
                a
                for a in ray._private.state.actors().values()
                if a["ActorClassName"] == "ColocatedWorker" and a["State"] == "ALIVE"
            ]
            os.kill(int(actor["Pid"]), signal.SIGKILL)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, hooked)


PHASES = {  # the function the loop calls in a phase, which of its calls is hit, and the step it belongs to
    "evaluation": (RolloutManager, "collect", 1, 0),  # the held-out evaluation before step 1: no checkpoint yet
    "rollout": (RolloutManager, "collect", 2, 1),  # step 1's: no checkpoint yet, the evaluation's line is kept
    "scoring": (train_step, "score_batch", 2, 2),
    "update": (train_step, "update", 2, 2),
    "sync": (engine_sync, "sync_engine", 2, 2),
    "checkpoint": (train_step, "save_checkpoint", 2, 2),  # step 2's checkpoint is cut short
}


@pytest.mark.slow  # about 100 s each on a loaded 2-core machine (two start-ups), and 100 s for the uninterrupted run
@pytest.mark.parametrize("phase", list(PHASES))
def test_a_killed_colocated_actor_restarts_from_the_last_checkpoint(
    tmp_path, monkeypatch, capfd, phase, uninterrupted_colocated
):
    """The colocated actor (learner and engine in one process) SIGKILLed as it enters ``phase``: a new one starts
    from the last checkpoint (step 1's, or the initial policy before it), the steps after it are played again,
    and the run ends with the uninterrupted run's metrics, evaluations and final weights.

    Not bit for bit: two uninterrupted colocated runs differ by float noise (about 1e-6 in the weights after one
    step at lr 1e-1, which AdamW grows to 6e-5 by step 3), as the engine batches the episodes' requests as they
    come; at lr 1e-3 the noise stays far below the tolerance and the steps' moves far above it.
    """
    from safetensors.torch import load_file

    owner, name, call, step = PHASES[phase]
    kill_colocated_actor_on(monkeypatch, owner, name, call)
    run_dir = train(config_for(tmp_path, *COLOCATED), setup=learnable_env.register)
    records, straight = read_metrics(run_dir), read_metrics(uninterrupted_colocated)
    assert [r["step"] for r in records] == [0, 1, 2, 3]  # 0: the held-out evaluation before the first update
    assert [r["learner/restarts"] for r in records[1:]] == [0 if step == 2 else 1, 1, 1]
    assert all(r["engine/restarts"] == 0 for r in records[1:])  # the new actor's engine is not an engine restart
    back_to = (
        "the checkpoint of step 1 and playing step 2" if step == 2 else "the run's initial policy and playing step 1"
    )
    assert (
        "turngym: warning: the actor's process, which also ran the engine (engine.placement=colocated), died: "
        f"restarting it from {back_to} on again (restart 1 of at most engine.max_restarts=3;"
    ) in capfd.readouterr().err
    rows = [{k: v for k, v in r.items() if k != "learner/restarts"} for r in without_wall_time(records)]
    for a, b in zip(without_wall_time(straight), rows, strict=True):
        assert a.keys() - {"learner/restarts"} == b.keys()
        for key in b:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (a["step"], key)
    assert sorted(p.name for p in (run_dir / "evaluations").iterdir()) == ["step_000000.jsonl", "step_000003.jsonl"]
    assert all((run_dir / "checkpoints" / f"step_00000{s}" / "COMPLETE").is_file() for s in (1, 2, 3))
    weights, expected = load_file(run_dir / FINAL_POLICY), load_file(uninterrupted_colocated / FINAL_POLICY)
    for key, tensor in expected.items():
        torch.testing.assert_close(weights[key], tensor, atol=1e-5, rtol=0, msg=key)
    after_step_1 = load_file(run_dir / "checkpoints" / "step_000001" / "policy" / "model.safetensors")
    assert max((weights[k] - after_step_1[k]).abs().max().item() for k in weights) > 1e-4  # steps 2-3 moved it
