"""WebShop's set-up and per-turn costs: catalogue build, goals, BM25 index, search latency, env steps.

    python benchmarks/webshop_search.py                # about half a minute
    python benchmarks/webshop_search.py --repeats 3 --queries 1000 --episodes 200

Catalogue, goals and index are built ``--repeats`` times (best and mean reported). Search latency is timed
per query over the instruction texts of the first ``--queries`` goals (what a rule-based agent would type)
and, separately, over product titles (what the oracle types). Step time is the mean ``env.step`` of
oracle episodes on the test goals (search, open, options, buy), with the oracle's own planning excluded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _best_and_mean(seconds: list[float]) -> str:
    return f"best {1e3 * min(seconds):8.1f} ms   mean {1e3 * statistics.mean(seconds):8.1f} ms"


def _latency(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"mean {1e3 * statistics.mean(seconds):6.2f} ms   p95 {1e3 * p95:6.2f} ms   (n={len(seconds)})"


def time_build(repeats: int) -> None:
    from envs.webshop.generate import generate_products
    from envs.webshop.goals import shuffle_goals, synthetic_goals
    from envs.webshop.search import SearchEngine

    build, goals, index = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        products = generate_products()
        build.append(time.perf_counter() - start)
        start = time.perf_counter()
        all_goals = shuffle_goals(synthetic_goals(products))
        goals.append(time.perf_counter() - start)
        start = time.perf_counter()
        SearchEngine(products)
        index.append(time.perf_counter() - start)
    print(f"catalogue: {len(products)} products, {len(all_goals)} goals")
    print(f"  catalogue build   {_best_and_mean(build)}")
    print(f"  goals + shuffle   {_best_and_mean(goals)}")
    print(f"  BM25 index build  {_best_and_mean(index)}")


def time_search(num_queries: int) -> None:
    from envs.webshop.catalogue import load_shop

    shop = load_shop()
    for label, queries in [
        ("instructions", [g.instruction_text for g in shop.catalogue.goals[:num_queries]]),
        ("titles", [p.title.lower() for p in shop.catalogue.products[:num_queries]]),
    ]:
        seconds = []
        for query in queries:
            start = time.perf_counter()
            shop.search(query)
            seconds.append(time.perf_counter() - start)
        print(f"  search ({label:12s}) {_latency(seconds)}")


def time_steps(episodes: int) -> None:
    import envs

    env = envs.make("webshop", split="test", max_turns=None)
    seconds, rewards = [], []
    for index in range(episodes):
        env.reset(options={"goal_index": index % len(env.goals)})
        reward = 0.0
        while not env.episode_over:
            action = env.oracle()[0]
            start = time.perf_counter()
            _, reward, _, _, _ = env.step(action)
            seconds.append(time.perf_counter() - start)
        rewards.append(reward)
    print(f"  env.step (oracle) {_latency(seconds)}   oracle mean reward {statistics.mean(rewards):.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args(argv)
    time_build(args.repeats)
    time_search(args.queries)
    time_steps(args.episodes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
