"""The episode loop with the real pieces: ChatRenderer on the tiny model's tokenizer and the hf engine.

A random tiny model plays Sokoban; whatever it writes is a (mostly invalid) action. What must hold
regardless: the trajectory is well-formed, its tokens render the conversation the environment saw,
the mask marks exactly what the engine sampled, the rollout logprobs agree with a fresh forward pass
of the same model over the whole sequence, and later turns are served from the prefix cache.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

import envs
from agents.chat import ChatRenderer
from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode
from agents.models import load_model, load_tokenizer


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny"), load_tokenizer("tiny")


def play_episodes(model, tokenizer, temperature: float, n: int = 2):
    async def main():
        engine = HfEngine(model, max_batch_size=n, seed=0)
        renderer = ChatRenderer(tokenizer)
        sampling = SamplingParams(temperature=temperature)
        limits = EpisodeLimits(max_new_tokens=8, max_total_tokens=4096)
        runs = [
            run_episode(
                envs.make("sokoban"),
                engine,
                renderer,
                EpisodeSpec("sokoban", s, f"g{s}"),
                sampling=sampling,
                limits=limits,
            )
            for s in range(n)
        ]
        trajectories = await asyncio.gather(*runs)
        stats = engine.stats()
        await engine.close()
        return trajectories, stats, renderer

    return asyncio.run(main())


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tiny_model_trajectories_are_token_exact(tiny, temperature):
    model, tokenizer = tiny
    trajectories, stats, renderer = play_episodes(model, tokenizer, temperature)
    for t in trajectories:
        t.validate()
        assert t.termination == "truncated" and t.num_turns == 5  # sokoban's default max_turns
        assert t.num_sampled_tokens == sum(1 for m in t.response_mask if m)
        # every turn's sampled ids, read back out of the trajectory, decode to the action the env saw
        turns, start = [], 0
        for end in t.turn_end_indices:
            first = max(i for i in range(start, end + 1) if i == start or t.response_mask[i - 1] == 0)
            turns.append(t.response_ids[first : end + 1])
            start = end + 1
        actions = [m["content"] for m in t.messages if m["role"] == "assistant"]
        assert [renderer.decode_action(ids) for ids in turns] == actions

        # rollout logprobs == log_softmax(logits / T) of a fresh forward pass at the sampled positions
        ids = torch.tensor([t.prompt_ids + t.response_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, :-1].float() / temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        mask = torch.tensor(t.response_mask, dtype=torch.bool)
        recomputed = logprobs[len(t.prompt_ids) - 1 :][mask]
        rollout = torch.tensor(t.rollout_logprobs)[mask]
        assert torch.allclose(rollout, recomputed, atol=1e-4), (rollout - recomputed).abs().max()

    # turns 2-5 of each episode reuse their prefix: well over half of all prompt tokens come from cache
    assert stats.prefix_hit_rate > 0.6
    # and once an episode ends its keys and values go (an LRU bound alone would keep them: the cache holds 32k
    # tokens): nothing is left of the two finished episodes
    assert stats.extra["prefix_cache_tokens"] == 0


def test_prompt_ids_are_the_chat_template_of_the_first_messages(tiny):
    _, tokenizer = tiny
    renderer = ChatRenderer(tokenizer)
    env = envs.make("sokoban")
    env.reset(seed=3)
    expected = tokenizer.apply_chat_template(env.messages(), add_generation_prompt=True, tokenize=True)
    expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
    assert renderer.prompt_ids(env.messages()) == list(expected)
