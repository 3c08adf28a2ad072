"""A learnable agent function for the gateway tests: two requests, reward = the share of digits written.

Written with the plain OpenAI SDK, as a user's agent would be; the tool schema makes every request go
through the gateway's tool path. A random tiny model writes about one digit in six characters.
"""

from __future__ import annotations

import asyncio

TOOLS = [{"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}]


def digit_share(text: str) -> float:
    characters = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in characters) / len(characters) if characters else 0.0


def task(seed: int) -> dict:
    return {"turns": 2, "seed": seed}


async def agent(client, task: dict) -> dict:
    messages = [{"role": "system", "content": "Write digits."}, {"role": "user", "content": "Digits please."}]
    rewards = []
    for _ in range(task["turns"]):
        reply = await client.chat.completions.create(model="any", messages=messages, tools=TOOLS, max_tokens=12)
        message = reply.choices[0].message
        rewards.append(digit_share(message.content or ""))
        messages += [message.model_dump(exclude_none=True), {"role": "user", "content": "More digits."}]
    return {"reward": 0.0, "turn_rewards": rewards}


async def crashing_agent(client, task: dict) -> float:
    await client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x"}], max_tokens=2)
    raise RuntimeError("the agent crashed")


async def hanging_agent(client, task: dict) -> float:
    await asyncio.sleep(3600)
    return 0.0


async def silent_agent(client, task: dict) -> float:
    return 1.0


async def compacting_agent(client, task: dict) -> float:
    """Drops its earlier replies from the history each turn: every request opens a segment."""
    messages = [{"role": "user", "content": "Digits please."}]
    for turn in range(3):
        reply = await client.chat.completions.create(model="any", messages=messages, max_tokens=4)
        messages = [{"role": "user", "content": f"Turn {turn}: {reply.choices[0].message.content[:3]!r} was said."}]
    return 1.0
