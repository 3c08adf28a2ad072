"""Supervised fine-tuning: token-exact oracle data, file filters, and a tiny model learning a task it could not do."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import learnable_env
import pytest
import ray
from transformers import AutoTokenizer

import envs
from agents.chat import ChatRenderer
from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode
from agents.models import load_tokenizer, tiny_model_path
from agents.trajectory import Trajectory, write_trajectories
from trainer.config import compose_train_config, to_train_config
from trainer.ray_cluster import init_ray
from trainer.sft import USAGE, main, warm_up
from trainer.sft_data import TrajectoryFilter, file_trajectories, oracle_trajectories

SMOLLM2 = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizers" / "smollm2"


@pytest.fixture(scope="module")
def renderer():
    return ChatRenderer(AutoTokenizer.from_pretrained(SMOLLM2))


def test_oracle_data_is_deterministic_and_keeps_only_finished_episodes(renderer):
    limits = EpisodeLimits(max_turns=3, max_new_tokens=32, max_total_tokens=1024)
    first, dropped = asyncio.run(oracle_trajectories("sokoban", {"max_turns": 3}, range(8), renderer, limits))
    again, _ = asyncio.run(oracle_trajectories("sokoban", {"max_turns": 3}, range(8), renderer, limits))
    assert dropped == 0 and len(first) == 8
    assert [_untimed(t) for t in first] == [_untimed(t) for t in again]
    assert [t.seed for t in first] == list(range(8)) and all(t.success for t in first)
    # One turn of five moves solves only the levels whose optimum is at most 5 moves: the others are dropped.
    short = EpisodeLimits(max_turns=1, max_new_tokens=32, max_total_tokens=1024)
    kept, dropped = asyncio.run(oracle_trajectories("sokoban", {"max_turns": 3}, range(8), renderer, short))
    optimal = []
    for seed in range(8):
        env = envs.make("sokoban", max_turns=3)
        _, info = env.reset(seed=seed)
        optimal.append(info["optimal_moves"])
    assert [t.seed for t in kept] == [s for s, moves in zip(range(8), optimal, strict=True) if moves <= 5]
    assert dropped == sum(moves > 5 for moves in optimal) > 0


def test_oracle_noise_turns_are_context_and_the_oracle_recovers_from_them(renderer):
    """With ``noise``, every trained turn is the oracle's move from the position it was played in, every masked
    turn a random move that differs from it; the examples are seeded, and noise 0 is the oracle alone."""
    options = {"max_turns": 12, "max_actions_per_turn": 1, "safe_line": True}
    limits = EpisodeLimits(max_turns=12, max_new_tokens=16, max_total_tokens=4096)
    seeds = range(24)
    noisy, _ = asyncio.run(oracle_trajectories("frozenlake", options, seeds, renderer, limits, noise=0.4))
    again, _ = asyncio.run(oracle_trajectories("frozenlake", options, seeds, renderer, limits, noise=0.4))
    assert [_untimed(t) for t in noisy] == [_untimed(t) for t in again]
    plain, _ = asyncio.run(oracle_trajectories("frozenlake", options, seeds, renderer, limits))
    clean, _ = asyncio.run(oracle_trajectories("frozenlake", options, seeds, renderer, limits, noise=0.0))
    assert [_untimed(t) for t in plain] == [_untimed(t) for t in clean]
    random_turns = trained_turns = 0
    for trajectory in noisy:
        assert trajectory.success
        trajectory.validate()
        env = envs.make("frozenlake", **options)
        env.reset(seed=trajectory.seed)
        actions = [m["content"] for m in trajectory.messages if m["role"] == "assistant"]
        start = 0
        for k, (action, end) in enumerate(zip(actions, trajectory.turn_end_indices, strict=True)):
            assert trajectory.response_mask[end] == 1  # every turn ends on a sampled token, the end of turn
            trained = any(trajectory.response_mask[start:end])
            assert (action == env.oracle()[0]) == trained, (trajectory.seed, action)
            # a context turn's move is no longer on sampled tokens: its per-move record goes with its mask
            assert len(trajectory.turn_move_end_indices[k]) == len(trajectory.turn_move_distances[k]) == trained
            random_turns += not trained
            trained_turns += trained
            env.step(action)
            start = end + 1
    assert random_turns >= 5 and trained_turns > random_turns
    shortest = {t.seed: t.num_turns for t in plain}  # a detour only lengthens an episode
    assert all(t.num_turns >= shortest[t.seed] for t in noisy)
    assert sum(t.num_turns > shortest[t.seed] for t in noisy) >= 3
    with pytest.raises(ValueError, match="noise"):
        asyncio.run(oracle_trajectories("frozenlake", options, seeds, renderer, limits, noise=1.0))


def _untimed(trajectory: Trajectory) -> dict:
    return {k: v for k, v in trajectory.to_dict().items() if k != "timings"}


def _recorded(seed: int, success: bool, episode_return: float, ids: list[int]) -> Trajectory:
    return Trajectory(
        env_id="x",
        seed=seed,
        group_id=str(seed),
        prompt_ids=[1, 2],
        response_ids=ids,
        response_mask=[1] * len(ids),
        rollout_logprobs=[-0.5] * len(ids),
        turn_rewards=[episode_return],
        turn_end_indices=[len(ids) - 1],
        episode_return=episode_return,
        success=success,
    )


def test_file_data_keeps_what_the_filter_accepts(tmp_path):
    path = tmp_path / "episodes.jsonl"
    records = [_recorded(0, True, 1.0, [5]), _recorded(1, False, 0.9, [6]), _recorded(2, True, 0.2, [7])]
    no_ids = Trajectory(env_id="x", seed=3, group_id="3", success=True, episode_return=1.0)  # text-level record
    write_trajectories(path, [*records, no_ids])
    kept, rejected = file_trajectories([path], TrajectoryFilter())
    assert [t.seed for t in kept] == [0, 2] and rejected == 2
    kept, rejected = file_trajectories([path], TrajectoryFilter(success_only=False, min_return=0.5))
    assert [t.seed for t in kept] == [0, 1] and rejected == 2
    with pytest.raises(ValueError, match="beyond this model's vocabulary"):
        file_trajectories([path], TrajectoryFilter(), vocab_size=6)


def _greedy_success(model_dir: str, seeds: range) -> float:
    """The share of CueEnv episodes a model wins, greedily, through the episode loop."""
    engine = HfEngine(model_dir, seed=0)
    renderer = ChatRenderer(load_tokenizer(model_dir))

    async def play() -> list[Trajectory]:
        return await asyncio.gather(
            *(
                run_episode(
                    envs.make(learnable_env.CUE_ID),
                    engine,
                    renderer,
                    EpisodeSpec(learnable_env.CUE_ID, seed),
                    sampling=SamplingParams(max_new_tokens=6, temperature=0.0),
                )
                for seed in seeds
            )
        )

    try:
        return sum(t.success for t in asyncio.run(play())) / len(seeds)
    finally:
        asyncio.run(engine.close())


def test_a_bad_option_is_one_turngym_error_line_before_anything_starts(capsys):
    assert main(["env=sokoban", "sft.epochs=0"]) == 2
    assert capsys.readouterr() == ("", "turngym: error: sft.epochs must be >= 1, got 0\n")


def test_help_and_cfg(capsys):
    assert main(["-h"]) == 0
    assert capsys.readouterr().out == USAGE
    assert main(["--cfg", "env=sokoban", "sft.epochs=3"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "epochs: 3" in out and "id: sokoban" in out


@pytest.mark.ray
def test_warm_up_teaches_the_tiny_model_a_task_it_could_not_do(tmp_path):
    learnable_env.register_cue()
    init_ray(num_cpus=4, object_store_memory=300 * 1024**2)
    try:
        config = to_train_config(
            compose_train_config(
                [
                    f"env={learnable_env.CUE_ID}",
                    "model=tiny",
                    "sft.episodes=32",
                    "sft.epochs=12",
                    "sft.batch_size=8",
                    "sft.lr=3e-3",
                    "rollout.max_turns=1",
                    "rollout.max_new_tokens=6",
                    "trainer.micro_batch_size=8",
                ]
            )
        )
        result = asyncio.run(warm_up(config, str(tiny_model_path()), tmp_path / "warmup", say=lambda _: None))
    finally:
        ray.shutdown()
    lines = [json.loads(line) for line in (tmp_path / "warmup" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == len(result.steps) == 12 * 4  # 32 examples in batches of 8, 12 epochs
    assert result.examples == 32 and (tmp_path / "warmup" / "data.jsonl").is_file()
    # The loss falls: measured 7.2 -> below 0.5 (the tiny model's vocabulary has ~7.2 nats of uniform entropy).
    assert lines[-1]["nll"] < 0.25 * lines[0]["nll"]
    held_out = range(10_000, 10_032)
    before = _greedy_success(str(tiny_model_path()), held_out)
    after = _greedy_success(str(result.policy_dir), held_out)
    assert before == 0.0 and after >= 0.9, (before, after)
    assert (result.policy_dir / "COMPLETE").is_file()
    # A second warm-up with the same directory reuses the finished checkpoint.
    again = asyncio.run(warm_up(config, str(tiny_model_path()), tmp_path / "warmup", say=lambda _: None))
    assert again.policy_dir == result.policy_dir and again.steps == []
