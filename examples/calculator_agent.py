"""An agent written with the plain OpenAI SDK and one tool, trainable unchanged through turngym's gateway.

    python -m trainer.run env=agent agent.entry=examples/calculator_agent.py:agent \
        agent.tasks=examples/calculator_agent.py:task algo=grpo model=smollm2

The agent asks the model for the sum of two numbers and offers an ``add`` tool; it runs the calls the
model makes, sends the results back, and pays 1.0 when the final answer holds the right sum. Nothing
here knows about turngym: the same function runs against any OpenAI-compatible endpoint
(``python -m agents.eval env=agent agent_entry=examples/calculator_agent.py:agent
agent_tasks=examples/calculator_agent.py:task agent=openai base_url=...``).
"""

from __future__ import annotations

import json
import random

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def task(seed: int) -> dict:
    rng = random.Random(seed)
    return {"a": rng.randint(10, 99), "b": rng.randint(10, 99)}


def _run(arguments: str) -> str:
    try:
        values = json.loads(arguments)
        return str(int(values["a"]) + int(values["b"]))
    except (ValueError, KeyError, TypeError) as exc:
        return f"error: {exc}"


async def agent(client, task: dict) -> float:
    messages = [
        {"role": "system", "content": "You are a calculator. Call the add tool, then answer with the number only."},
        {"role": "user", "content": f"What is {task['a']} + {task['b']}?"},
    ]
    for _ in range(3):
        reply = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, max_tokens=48)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return 1.0 if str(task["a"] + task["b"]) in (message.content or "") else 0.0
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _run(call.function.arguments)})
    return 0.0
