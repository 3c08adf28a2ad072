"""Sandbox throughput: executions per second per backend, and Docker's warm pool against a container per run.

    python benchmarks/sandbox_throughput.py [--runs 40] [--backends docker bubblewrap process]

Two programs: a trivial one (``pass``) and a small test suite (a function and ten asserts on it, the
shape of an MBPP/HumanEval check). Runs go one after another (no concurrency), so the figures are
per-execution latency inverted. The last line compares the Docker pool with ``docker run`` of a fresh,
identically locked-down container per execution (the baseline the pool exists to beat).
"""

from __future__ import annotations

import argparse
import time

TRIVIAL = "pass"
SUITE = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n" + "\n".join(
    f"assert fib({n}) == {value}"
    for n, value in [(0, 0), (1, 1), (2, 1), (3, 2), (4, 3), (5, 5), (6, 8), (7, 13), (10, 55), (20, 6765)]
)


def executions_per_second(sandbox, program: str, runs: int) -> float:
    sandbox.run(program)  # warm-up (first container start, caches)
    start = time.perf_counter()
    for _ in range(runs):
        result = sandbox.run(program)
        assert result.ok, result
    return runs / (time.perf_counter() - start)


def container_per_run(sandbox, program: str, runs: int) -> float:
    """``docker run`` of a fresh container per execution, with the pool's flags and limits."""
    shape = sandbox.pool.shape(sandbox.default_limits)
    kwargs = shape.create_kwargs()
    start = time.perf_counter()
    for _ in range(runs):
        output = sandbox.client.containers.run(
            sandbox.image, command=["/usr/bin/python3", "-E", "-s", "-B", "-c", program], remove=True, **kwargs
        )
        assert output == b""
    return runs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--backends", nargs="+", default=["docker", "bubblewrap", "process"])
    args = parser.parse_args()

    from sandbox import make_sandbox

    for backend in args.backends:
        options = {"pool_size": 1} if backend == "docker" else {}
        with make_sandbox(backend, **options) as sandbox:
            trivial = executions_per_second(sandbox, TRIVIAL, args.runs)
            suite = executions_per_second(sandbox, SUITE, args.runs)
            print(f"{backend:>10}: {trivial:6.1f} exec/s trivial, {suite:6.1f} exec/s 10-assert suite")
            if backend == "docker":
                fresh = container_per_run(sandbox, SUITE, max(5, args.runs // 4))
                ratio = suite / fresh
                print(
                    f"{'docker':>10}: {fresh:6.1f} exec/s, a container per run; the warm pool is {ratio:.1f}x faster"
                )


if __name__ == "__main__":
    main()
