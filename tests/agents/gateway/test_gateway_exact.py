"""The gateway records exactly what the engine saw and sampled: random conversations on the tiny model.

For random conversations (append-only, with tool turns, with edited histories and second
conversations in one session), every recorded turn must equal the engine's sampled ids and logprobs
exactly, be preceded in its segment by exactly the ids the engine was given, carry mask 1 on
exactly the sampled tokens, and score the same logprobs when the model is run over the recorded
sequence, teacher-forced, in float32 (the learner's computation, :func:`trainer.algos.losses.token_logprobs`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.engines.base import Generation, SamplingParams
from agents.engines.hf import HfEngine
from agents.gateway import Gateway, GatewayLimits, parse_request
from agents.models import load_model, load_tokenizer
from trainer.algos.losses import token_logprobs

TOOLS = [
    {
        "type": "function",
        "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
]


class RecordingEngine:
    """The real engine, remembering each request's input ids and generation."""

    name = "recording"

    def __init__(self, engine: HfEngine) -> None:
        self.engine = engine
        self.calls: list[tuple[list[int], Generation, SamplingParams]] = []

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None):
        generation = await self.engine.generate(input_ids, sampling, affinity_key)
        self.calls.append((list(input_ids), generation, sampling))
        return generation


@functools.cache
def _model():
    return load_model("tiny")


def _gateway(**limits) -> tuple[Gateway, RecordingEngine]:
    engine = RecordingEngine(HfEngine(_model(), device="cpu", seed=0))
    return Gateway(engine, load_tokenizer("tiny"), limits=GatewayLimits(**limits)), engine


def _request(messages, *, tools=False, max_tokens=6, temperature=1.0):
    body = {"model": "any", "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    if tools:
        body["tools"] = TOOLS
    return parse_request(body)


def _assistant(completion) -> dict:
    message = {"role": "assistant", "content": completion.message["content"]}
    if completion.tool_calls:
        message["tool_calls"] = completion.tool_calls
    return message


# One step of a conversation script: what the agent does before its next request.
STEPS = st.sampled_from(["user", "user", "tool", "edit", "drop_reply", "restart"])


async def _play(steps: list[str], texts: list[str], tools: bool) -> tuple[Gateway, RecordingEngine, list[str]]:
    gateway, engine = _gateway()
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": texts[0]}]
    kinds = []
    completion = await gateway.complete("s", _request(messages, tools=tools))
    for step, text in zip(steps, texts[1:], strict=False):
        reply = _assistant(completion)
        if step == "user":
            messages = [*messages, reply, {"role": "user", "content": text}]
        elif step == "tool":
            messages = [*messages, reply, {"role": "tool", "tool_call_id": "call_0", "content": text}]
        elif step == "edit":  # the agent rewrites its first user message (history is not append-only)
            messages = [messages[0], {"role": "user", "content": text + "!"}, *messages[2:], reply]
            messages.append({"role": "user", "content": "go on"})
        elif step == "drop_reply":  # compaction: the reply is replaced by a summary the agent wrote
            messages = [*messages, {"role": "assistant", "content": "(summary)"}, {"role": "user", "content": text}]
        else:  # a second conversation in the same session (a sub-agent)
            messages = [{"role": "system", "content": "Sub-task."}, {"role": "user", "content": text}]
        kinds.append(step)
        completion = await gateway.complete("s", _request(messages, tools=tools))
    return gateway, engine, kinds


def _check_exact(gateway: Gateway, engine: RecordingEngine) -> None:
    session = gateway.sessions["s"]
    turns = [turn for segment in session.segments for turn in segment.turns]
    assert sorted(turn.request for turn in turns) == list(range(len(engine.calls)))
    for turn in turns:
        segment = session.segments[turn.segment]
        input_ids, generation, _ = engine.calls[turn.request]
        assert segment.token_ids[: len(segment.prompt_ids) + turn.start] == input_ids  # what the engine saw
        assert segment.response_ids[turn.start : turn.end] == list(generation.output_ids)  # what it sampled
        assert segment.logprobs[turn.start : turn.end] == list(generation.logprobs)
    for segment in session.segments:
        sampled = {i for turn in segment.turns for i in range(turn.start, turn.end)}
        assert [i for i, m in enumerate(segment.response_mask) if m == 1] == sorted(sampled)
        assert all(lp == 0.0 for lp, m in zip(segment.logprobs, segment.response_mask, strict=True) if m == 0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(STEPS, min_size=1, max_size=5),
    texts=st.lists(st.text(alphabet="abc xyz<>|_12\n", min_size=1, max_size=12), min_size=6, max_size=6),
    tools=st.booleans(),
)
def test_recorded_ids_are_the_engines_sampled_ids_for_random_conversations(steps, texts, tools) -> None:
    gateway, engine, kinds = asyncio.run(_play(steps, texts, tools))
    _check_exact(gateway, engine)
    session = gateway.sessions["s"]
    if all(kind in ("user", "tool") for kind in kinds):  # append-only: one segment, every turn extends it
        assert len(session.segments) == 1
        assert gateway.stats.message_extensions == len(kinds)
    trajectories = gateway.finish("s", reward=1.0)
    assert len(trajectories) == len(session.segments)
    for trajectory in trajectories:
        trajectory.validate()
        assert trajectory.turn_rewards[-1] == 1.0


def test_learner_logprobs_over_the_recorded_segments_agree_with_the_recorded_logprobs() -> None:
    async def play():
        gateway, engine = _gateway()
        messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "hello"}]
        for text in ["one", "two <tool_call>", "three"]:
            completion = await gateway.complete("s", _request(messages, max_tokens=10, temperature=0.7))
            messages = [*messages, _assistant(completion), {"role": "user", "content": text}]
        edited = [messages[0], {"role": "user", "content": "a fresh start"}]
        await gateway.complete("s", _request(edited, max_tokens=10, temperature=0.7))
        return gateway

    gateway = asyncio.run(play())
    trajectories = gateway.finish("s", reward=0.5)
    assert len(trajectories) == 2  # the edited history opened a second segment
    model = _model()
    worst = 0.0
    for trajectory in trajectories:
        ids = torch.tensor([trajectory.prompt_ids + trajectory.response_ids])
        with torch.no_grad():
            logits = model(ids).logits.float()[:, :-1] / 0.7
        learner = token_logprobs(logits, ids[:, 1:])[0, len(trajectory.prompt_ids) - 1 :]
        mask = torch.tensor(trajectory.response_mask, dtype=torch.bool)
        recorded = torch.tensor(trajectory.rollout_logprobs)
        worst = max(worst, float((learner[mask] - recorded[mask]).abs().max()))
    assert worst < 1e-4


def test_a_history_rewriting_template_gives_exact_segments() -> None:
    """A Qwen3-style template that drops the content of assistant turns before the last user message:
    the renderer accepts it (``append_only`` false), every request after a reply opens a segment, and
    each segment is exact."""
    tokenizer = load_tokenizer("tiny")
    tokenizer = type(tokenizer).from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = (
        "{% set ns = namespace(last_user=0) %}{% for m in messages %}{% if m.role == 'user' %}"
        "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role != 'assistant' or loop.index0 > ns.last_user %}"
        "{{ m.content }}{% else %}(earlier reply){% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    engine = RecordingEngine(HfEngine(_model(), device="cpu", seed=1))
    gateway = Gateway(engine, tokenizer)

    async def play():
        messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "q1"}]
        for text in ["q2", "q3", "q4"]:
            completion = await gateway.complete("s", _request(messages))
            messages = [*messages, _assistant(completion), {"role": "user", "content": text}]
        await gateway.complete("s", _request(messages))

    asyncio.run(play())
    renderer, _ = gateway._renderers[next(iter(gateway._renderers))]
    assert renderer.append_only is False
    session = gateway.sessions["s"]
    assert len(session.segments) == 4 and gateway.stats.segments_opened == 4
    _check_exact(gateway, engine)
    # Each later segment's prompt holds the earlier replies as the template rewrote them.
    later = tokenizer.decode(session.segments[3].prompt_ids)
    assert later.count("(earlier reply)") == 3


def test_interleaved_sub_conversations_each_extend_their_own_segment() -> None:
    async def play():
        gateway, engine = _gateway()
        main = [{"role": "system", "content": "Main."}, {"role": "user", "content": "task"}]
        sub = [{"role": "system", "content": "Sub."}, {"role": "user", "content": "part"}]
        for _ in range(3):
            reply = await gateway.complete("s", _request(main))
            main = [*main, _assistant(reply), {"role": "user", "content": "more"}]
            reply = await gateway.complete("s", _request(sub))
            sub = [*sub, _assistant(reply), {"role": "user", "content": "more"}]
        return gateway, engine

    gateway, engine = asyncio.run(play())
    session = gateway.sessions["s"]
    assert len(session.segments) == 2
    assert [len(segment.turns) for segment in session.segments] == [3, 3]
    _check_exact(gateway, engine)


@pytest.mark.parametrize("rewards", [None, [0.1, -0.2, 0.3]])
def test_rewards_land_on_each_turn_and_the_outcome_on_every_segment(rewards) -> None:
    async def play():
        gateway, _ = _gateway()
        messages = [{"role": "system", "content": "A."}, {"role": "user", "content": "1"}]
        reply = await gateway.complete("s", _request(messages))
        messages = [*messages, _assistant(reply), {"role": "user", "content": "2"}]
        await gateway.complete("s", _request(messages))
        await gateway.complete("s", _request([{"role": "user", "content": "other"}]))
        return gateway

    gateway = asyncio.run(play())
    first, second = gateway.finish("s", reward=2.0, turn_rewards=rewards)
    per_turn = rewards or [0.0, 0.0, 0.0]
    assert first.turn_rewards == [per_turn[0], per_turn[1] + 2.0]
    assert second.turn_rewards == [per_turn[2] + 2.0]
    assert first.episode_return == second.episode_return == pytest.approx(sum(per_turn) + 2.0)
    assert first.metrics["gateway/segments"] == 2.0 and first.success and second.success
