"""Sandbox throughput: executions per second per backend, and Docker's warm pool against a container per run.

    python benchmarks/sandbox_throughput.py [--runs 40] [--backends docker bubblewrap process] [--judge 48]

Two programs: a trivial one (``pass``) and a small test suite (a function and ten asserts on it, the
shape of an MBPP/HumanEval check). Runs go one after another (no concurrency), so the figures are
per-execution latency inverted. The last line compares the Docker pool with ``docker run`` of a fresh,
identically locked-down container per execution (the baseline the pool exists to beat).

With ``--judge N`` it also judges N bundled problems' reference solutions (a third of each kind:
stdio, call, assert; 9 cases each) with :func:`envs.code.runners.run_batch` in batches of 8, and
prints samples judged per second: the cost of the judge's whole protocol (one sandboxed run per
sample, the trusted test rounds of assert problems) on top of a bare execution.
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
    kwargs = {**shape.create_kwargs(), "user": "65534:65534"}
    start = time.perf_counter()
    for _ in range(runs):
        output = sandbox.client.containers.run(
            sandbox.image, command=["/usr/bin/python3", "-E", "-s", "-B", "-c", program], remove=True, **kwargs
        )
        assert output == b""
    return runs / (time.perf_counter() - start)


def samples_per_second(sandbox, count: int) -> float:
    from envs.code.loaders import load_dataset
    from envs.code.runners import run_batch

    problems = load_dataset("bundled")
    by_kind = [[p for p in problems if p.kind == kind] for kind in ("stdio", "call", "assert")]
    chosen = [by_kind[i % 3][i // 3] for i in range(count)]
    run_batch(sandbox, [(chosen[0], chosen[0].reference)])  # warm-up
    start = time.perf_counter()
    for i in range(0, count, 8):
        reports = run_batch(sandbox, [(p, p.reference) for p in chosen[i : i + 8]])
        assert all(report.all_passed for report in reports), reports
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--backends", nargs="+", default=["docker", "bubblewrap", "process"])
    parser.add_argument("--judge", type=int, default=0, help="also judge this many bundled reference solutions")
    args = parser.parse_args()

    from sandbox import make_sandbox

    for backend in args.backends:
        options = {"pool_size": 1} if backend == "docker" else {}
        with make_sandbox(backend, **options) as sandbox:
            trivial = executions_per_second(sandbox, TRIVIAL, args.runs)
            suite = executions_per_second(sandbox, SUITE, args.runs)
            print(f"{backend:>10}: {trivial:6.1f} exec/s trivial, {suite:6.1f} exec/s 10-assert suite")
            if args.judge:
                judged = samples_per_second(sandbox, args.judge)
                print(f"{backend:>10}: {judged:6.1f} samples/s judged (bundled references, 9 cases each)")
            if backend == "docker":
                fresh = container_per_run(sandbox, SUITE, max(5, args.runs // 4))
                ratio = suite / fresh
                print(
                    f"{'docker':>10}: {fresh:6.1f} exec/s, a container per run; the warm pool is {ratio:.1f}x faster"
                )


if __name__ == "__main__":
    main()
