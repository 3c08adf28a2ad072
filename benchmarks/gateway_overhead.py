"""What the gateway adds: requests/s and latency through it versus calling the engine directly.

    python benchmarks/gateway_overhead.py --model tiny --model smollm2

For each model, the same ``--requests`` chat requests (two-turn conversations: the second turn sends
the first reply back, as an agent does) are answered twice by one ``hf`` engine, greedily and with the
same ``--max-tokens``, so both paths sample identical tokens:

* *direct*: the prompt rendered with ``ChatRenderer`` and ``engine.generate`` awaited in-process
  (the episode loop's path);
* *core*: :meth:`Gateway.complete <agents.gateway.service.Gateway.complete>` in-process (one session
  per conversation): the gateway's own work (validation, rendering, placing, recording) without HTTP;
* *http*: the OpenAI SDK over HTTP to a :class:`~agents.gateway.server.GatewayServer` on 127.0.0.1,
  client and server in one process (as in ``trainer.run env=agent``).

Each path runs ``--concurrency`` conversations at a time, twice, interleaved, on conversations no run
has seen (cold prefix cache for every path). Reported: requests/s of each path (best of two), the
ratios to direct, mean latency per request and the latency each path adds. A first round checks that
the three paths sample identical tokens (``identical_tokens``). JSON on standard output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time


def conversation(i: int) -> list[dict]:  # i: a distinct conversation per run and index
    return [
        {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
        {"role": "user", "content": f"Question {i}: name a colour and a number between {i} and {i + 10}."},
    ]


async def direct(engine, renderer, n: int, concurrency: int, max_tokens: int, offset: int = 0):
    from agents.engines.base import SamplingParams

    sampling = SamplingParams(max_new_tokens=max_tokens, temperature=0.0, stop_token_ids=renderer.stop_token_ids)
    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    outputs: dict[int, list] = {}

    async def one(i: int) -> None:
        async with limit:
            messages = conversation(offset + i)
            ids = renderer.prompt_ids(messages)
            started = time.perf_counter()
            first = await engine.generate(ids, sampling, affinity_key=str(i))
            latencies.append(time.perf_counter() - started)
            text = renderer.decode_action(first.output_ids)
            history = [*messages, {"role": "assistant", "content": text}]
            more = renderer.continuation_ids(
                history, [{"role": "user", "content": "And another?"}], first.output_ids, first.finish_reason
            )
            started = time.perf_counter()
            second = await engine.generate(ids + list(first.output_ids) + more, sampling, affinity_key=str(i))
            latencies.append(time.perf_counter() - started)
            outputs[i] = [list(first.output_ids), list(second.output_ids)]

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, latencies, outputs


async def in_process(gateway, n: int, concurrency: int, max_tokens: int, offset: int = 0):
    from agents.gateway import parse_request

    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    outputs: dict[int, list] = {}

    async def one(i: int) -> None:
        async with limit:
            messages = conversation(offset + i)
            ids = []
            for follow_up in ("And another?", None):
                body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
                started = time.perf_counter()
                completion = await gateway.complete(f"p{offset + i}", parse_request(body))
                latencies.append(time.perf_counter() - started)
                ids.append(list(completion.generation.output_ids))
                if follow_up:
                    messages = [*messages, {"role": "assistant", "content": completion.message["content"]}]
                    messages.append({"role": "user", "content": follow_up})
            gateway.finish(f"p{offset + i}", 0.0)
            outputs[i] = ids

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, latencies, outputs


async def through_gateway(server, n: int, concurrency: int, max_tokens: int, offset: int = 0):
    import openai

    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    outputs: dict[int, list] = {}

    async def one(i: int) -> None:
        async with limit:
            client = openai.AsyncOpenAI(base_url=server.session_url(f"b{offset + i}"), api_key="x", max_retries=0)
            messages = conversation(offset + i)
            ids = []
            for follow_up in ("And another?", None):
                started = time.perf_counter()
                reply = await client.chat.completions.create(
                    model="m", messages=messages, max_tokens=max_tokens, temperature=0.0
                )
                latencies.append(time.perf_counter() - started)
                ids.append(reply.model_extra["turngym"]["completion_token_ids"])
                if follow_up:
                    messages = [*messages, reply.choices[0].message.model_dump(exclude_none=True)]
                    messages.append({"role": "user", "content": follow_up})
            await client.close()
            server.gateway.finish(f"b{offset + i}", 0.0)
            outputs[i] = ids

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, latencies, outputs


async def measure(model: str, n: int, concurrency: int, max_tokens: int) -> dict:
    from agents.chat import ChatRenderer
    from agents.engines.hf import HfEngine
    from agents.gateway import Gateway
    from agents.gateway.server import GatewayServer
    from agents.models import load_model, load_tokenizer

    tokenizer = load_tokenizer(model)
    engine = HfEngine(load_model(model), device="cpu", max_batch_size=concurrency, seed=0)
    renderer = ChatRenderer(tokenizer)
    gateway = Gateway(engine, tokenizer, model_name=model)
    async with GatewayServer(gateway) as server:
        check = [await direct(engine, renderer, 4, 4, max_tokens), await through_gateway(server, 4, 4, max_tokens)]
        check.append(await in_process(gateway, 4, 4, max_tokens))
        same = check[0][2] == check[1][2] == check[2][2]  # greedy: the three paths sample the same tokens
        paths = {
            "direct": (direct, engine, renderer),
            "http": (through_gateway, server),
            "core": (in_process, gateway),
        }
        runs: dict[str, list] = {name: [] for name in paths}
        for repeat in range(2):
            for k, (name, (run, *target)) in enumerate(paths.items()):
                offset = 1000 * (1 + repeat * len(paths) + k)
                runs[name].append(await run(*target, n, concurrency, max_tokens, offset=offset))
    requests = 2 * n
    wall = {name: min(r[0] for r in found) for name, found in runs.items()}
    latency = {name: statistics.mean([x for r in found for x in r[1]]) for name, found in runs.items()}
    return {
        "model": model,
        "requests": requests,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "identical_tokens": same,
        **{f"{name}_requests_per_s": requests / wall[name] for name in wall},
        **{f"{name}_latency_ms": 1000 * latency[name] for name in latency},
        "http_throughput_ratio": wall["direct"] / wall["http"],
        "core_throughput_ratio": wall["direct"] / wall["core"],
        "http_added_latency_ms": 1000 * (latency["http"] - latency["direct"]),
        "core_added_latency_ms": 1000 * (latency["core"] - latency["direct"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="tiny, smollm2 or a directory (repeatable)")
    parser.add_argument("--requests", type=int, default=32, help="conversations per path (two requests each)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    for model in args.model or ["tiny"]:
        print(json.dumps(asyncio.run(measure(model, args.requests, args.concurrency, args.max_tokens))), flush=True)


if __name__ == "__main__":
    main()
