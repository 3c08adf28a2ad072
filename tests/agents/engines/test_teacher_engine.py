"""TeacherEngine: an oracle's turns played through the episode loop are token-exact, masked and rewarded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from transformers import AutoTokenizer

import envs
from agents.base import OracleAgent
from agents.chat import ChatRenderer
from agents.engines.base import SamplingParams
from agents.engines.teacher import TeacherEngine
from agents.episode import EpisodeLimits, EpisodeSpec, run_episode

SMOLLM2 = Path(__file__).resolve().parents[2] / "fixtures" / "tokenizers" / "smollm2"


@pytest.fixture(scope="module")
def renderer():
    return ChatRenderer(AutoTokenizer.from_pretrained(SMOLLM2))


def oracle_episode(renderer, seed=0, limits=None, **env_options):
    env = envs.make("sokoban", **env_options)
    engine = TeacherEngine(env, renderer, lambda e: OracleAgent().act(e, ""))
    spec = EpisodeSpec("sokoban", seed, env_options=env_options)
    trajectory = asyncio.run(run_episode(env, engine, renderer, spec, limits=limits or EpisodeLimits()))
    return env, trajectory


def test_assistant_ids_are_the_content_then_the_end_of_turn_token(renderer):
    ids = renderer.assistant_ids("Up || Left")
    assert ids[-1] == renderer.stop_token_ids[0] == 2  # <|im_end|>
    assert renderer.tokenizer.decode(ids[:-1]) == "Up || Left"
    assert renderer.decode_action(ids) == "Up || Left"


def test_an_oracle_episode_is_the_templates_rendering_of_the_conversation(renderer):
    env, t = oracle_episode(renderer, seed=3, max_turns=3)
    t.validate()
    assert t.success and t.termination == "terminated" and t.error is None
    # The whole sequence decodes to the chat template's own text of the episode's messages: the oracle's
    # turns sit exactly where a model's sampled turns would, with the same glue and observations.
    # The episode ends on the oracle's last turn: the final observation is in the messages, not in the ids.
    last = max(i for i, m in enumerate(t.messages) if m["role"] == "assistant")
    text = renderer.tokenizer.decode(t.prompt_ids + t.response_ids)
    assert text == renderer.template_text(t.messages[: last + 1], add_generation_prompt=False).rstrip("\n")
    # The mask marks exactly the oracle's turns (content and <|im_end|>), logprob 0 (probability 1).
    turns = [m["content"] for m in t.messages if m["role"] == "assistant"]
    sampled = [i for i, m in zip(t.response_ids, t.response_mask, strict=True) if m]
    assert sampled == [i for turn in turns for i in renderer.assistant_ids(turn)]
    assert all(lp == 0.0 for lp in t.rollout_logprobs)
    assert len(t.turn_rewards) == t.num_turns == len(turns) and t.episode_return == pytest.approx(sum(t.turn_rewards))


def test_a_turn_longer_than_max_new_tokens_is_cut_like_a_models(renderer):
    env = envs.make("sokoban")
    env.reset(seed=0)
    engine = TeacherEngine(env, renderer, lambda e: "Up || Up || Up || Up || Up")
    generation = asyncio.run(engine.generate([1, 2, 3], SamplingParams(max_new_tokens=3)))
    assert generation.finish_reason == "length" and len(generation.output_ids) == 3
    assert engine.stats().prompt_tokens == 3 and engine.stats().generated_tokens == 3


def test_a_teacher_that_raises_ends_the_episode_in_error(renderer):
    env = envs.make("sokoban")

    def broken(_env):
        raise RuntimeError("no plan")

    spec = EpisodeSpec("sokoban", 0)
    t = asyncio.run(run_episode(env, TeacherEngine(env, renderer, broken), renderer, spec))
    assert t.termination == "error" and "no plan" in t.error and not t.trainable
