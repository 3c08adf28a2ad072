"""Sokoban level generation and step time: turngym against gym-sokoban, side by side in one run.

    python benchmarks/sokoban_generation.py                      # a few minutes
    python benchmarks/sokoban_generation.py --samples 500 --baseline-samples 200 --baseline-samples-large 20
    python benchmarks/sokoban_generation.py --no-baseline        # turngym only

turngym's levels are timed through ``SokobanEnv.reset(seed=...)`` (generation, exact solving and the
environment's own set-up) in two settings: with gym-sokoban's step limit (120 moves, no turn limit: the
optimal solution may take up to 120 moves) and with the environment's defaults (5 turns of 5 moves: up
to 25 moves). gym-sokoban's levels (``gym-sokoban==0.0.6``, ``gym==0.26.2``) are timed the way its
``SokobanEnv.reset`` generates them, one ``generate_room`` call per level, in its own virtual
environment (created in benchmarks/.venv-gym-sokoban on first use; it needs PyPI) through
benchmarks/gym_sokoban_worker.py. A call that raises is a failure (gym-sokoban's reset would retry it),
one longer than ``--timeout-s`` a timeout. gym-sokoban's levels are then solved by turngym's solver, so
that the table compares difficulty too (optimal moves and pushes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = HERE / "gym_sokoban_worker.py"
BASELINE_PACKAGES = ["gym-sokoban==0.0.6", "gym==0.26.2", "numpy==1.26.4"]  # gym 0.26 predates NumPy 2
ROOMS = [(6, 6, 1), (6, 6, 2), (8, 8, 2), (10, 10, 4)]
GYM_SOKOBAN_STEP_LIMIT = 120  # gym-sokoban's SokobanEnv(max_steps=120)
# turngym's two settings: gym-sokoban's step limit without a turn limit, and the environment's defaults
SETTINGS = ("<= 120 moves", "<= 25 moves, defaults")


@dataclass
class Result:
    """Timings and difficulty of one generator on one room size."""

    room: str
    generator: str
    seconds: list[float] = field(default_factory=list)
    failures: int = 0
    timeouts: int = 0
    moves: list[int] = field(default_factory=list)
    pushes: list[int] = field(default_factory=list)
    unsolved: int = 0  # levels the solver did not finish within its budget

    @property
    def mean_ms(self) -> float:
        return 1e3 * statistics.mean(self.seconds)

    @property
    def worst_ms(self) -> float:
        return 1e3 * max(self.seconds)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200, help="turngym levels per room size and setting")
    parser.add_argument("--baseline-samples", type=int, default=100, help="gym-sokoban levels per small room size")
    parser.add_argument("--baseline-samples-large", type=int, default=8, help="gym-sokoban levels of 10x10/4")
    parser.add_argument("--timeout-s", type=int, default=120, help="gym-sokoban: longer than this per level = timeout")
    parser.add_argument("--steps", type=int, default=20_000, help="steps timed per environment")
    parser.add_argument("--no-baseline", action="store_true", help="measure turngym only")
    parser.add_argument("--venv", type=Path, default=HERE / ".venv-gym-sokoban", help="gym-sokoban's environment")
    return parser.parse_args()


def room_name(rows: int, cols: int, boxes: int) -> str:
    return f"{rows}x{cols}/{boxes}"


# --------------------------------------------------------------------------------------------------
# turngym
# --------------------------------------------------------------------------------------------------
def measure_turngym(rows: int, cols: int, boxes: int, samples: int, setting: str) -> Result:
    from envs.sokoban import SokobanEnv

    limits = {"max_turns": None, "max_steps": GYM_SOKOBAN_STEP_LIMIT} if setting == SETTINGS[0] else {}
    env = SokobanEnv(dim=[rows, cols], num_boxes=boxes, **limits)
    result = Result(room_name(rows, cols, boxes), f"turngym ({setting})")
    for seed in range(samples):
        start = time.perf_counter()
        try:
            env.reset(seed=seed)
        except Exception as exc:  # a failure is a result to report, not a reason to stop measuring
            result.failures += 1
            print(f"  turngym {result.room} seed {seed} failed: {exc}", file=sys.stderr)
            continue
        result.seconds.append(time.perf_counter() - start)
        result.moves.append(env.optimal_solution.num_moves)
        result.pushes.append(env.optimal_solution.pushes)
    return result


def measure_turngym_steps(steps: int) -> dict[str, float]:
    from envs.sokoban import SokobanEnv

    env = SokobanEnv(max_turns=None, max_steps=10**9)
    env.reset(seed=0)
    timings = {}
    for label, action in (("1 action per turn", None), ("5 actions per turn", "Up || Down || Left || Right || Up")):
        start = time.perf_counter()
        for i in range(steps):
            env.step(action or ("Up", "Down", "Left", "Right")[i % 4])
        per_step = (time.perf_counter() - start) / steps * 1e6
        timings[f"turngym SokobanEnv.step, {label}"] = per_step
    board = env.board
    start = time.perf_counter()
    for i in range(steps):
        board.move(("Up", "Down", "Left", "Right")[i % 4])
    timings["turngym Board.move (the rule alone)"] = (time.perf_counter() - start) / steps * 1e6
    return timings


# --------------------------------------------------------------------------------------------------
# gym-sokoban, in its own virtual environment
# --------------------------------------------------------------------------------------------------
def baseline_python(venv: Path) -> Path:
    """The gym-sokoban environment's interpreter; creates the environment on first use."""
    python = venv / "bin" / "python"
    if python.exists() and _run([str(python), "-c", "import gym_sokoban"], check=False).returncode == 0:
        return python
    print(f"creating {venv} with {' '.join(BASELINE_PACKAGES)} (once)", file=sys.stderr)
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(python), "-m", "pip", "install", "--quiet", *BASELINE_PACKAGES])
    return python


def measure_gym_sokoban(python: Path, rows: int, cols: int, boxes: int, samples: int, timeout_s: int) -> Result:
    from envs.sokoban import parse_xsb, solve

    command = [str(python), str(WORKER), "generate", *map(str, (rows, cols, boxes, samples, timeout_s))]
    output = _run(command, timeout=samples * (timeout_s + 5) + 60).stdout
    result = Result(room_name(rows, cols, boxes), "gym-sokoban 0.0.6")
    for line in output.splitlines():
        record = json.loads(line)
        result.seconds.append(record["seconds"])  # failed and timed-out calls cost their time too
        result.failures += record["status"] == "failed"
        result.timeouts += record["status"] == "timeout"
        if record["status"] == "ok":
            solution = solve(parse_xsb(record["xsb"])[0], max_expansions=300_000).solution
            if solution is None:
                result.unsolved += 1
            else:
                result.moves.append(solution.num_moves)
                result.pushes.append(solution.pushes)
    return result


def measure_gym_sokoban_steps(python: Path, steps: int) -> dict[str, float]:
    output = _run([str(python), str(WORKER), "step", str(steps)]).stdout
    timings = json.loads(output.strip().splitlines()[-1])
    return {f"gym-sokoban SokobanEnv.step, observation {mode}": us for mode, us in timings.items()}


def _run(command: list[str], *, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------
def print_generation_table(results: list[Result]) -> None:
    header = (
        f"{'room':<8} {'generator':<31} {'levels':>6} {'failed':>6} {'timeout':>7} {'mean ms':>9} {'median ms':>9} "
        f"{'worst ms':>9} {'opt. moves':>10} {'opt. pushes':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        moves = f"{statistics.mean(r.moves):.1f}" if r.moves else "-"
        pushes = f"{statistics.mean(r.pushes):.1f}" if r.pushes else "-"
        if r.unsolved:
            moves += f" ({r.unsolved} unsolved)"
        median = 1e3 * statistics.median(r.seconds)
        print(
            f"{r.room:<8} {r.generator:<31} {len(r.seconds):>6} {r.failures:>6} {r.timeouts:>7} {r.mean_ms:>9.2f} "
            f"{median:>9.2f} {r.worst_ms:>9.2f} {moves:>10} {pushes:>11}"
        )


def print_ratios(results: list[Result]) -> None:
    print("\ngym-sokoban time / turngym time (higher is better for turngym)")
    by_key = {(r.room, r.generator): r for r in results}
    for room in dict.fromkeys(r.room for r in results):
        baseline = by_key.get((room, "gym-sokoban 0.0.6"))
        if baseline is None:
            continue
        for r in results:
            if r.room == room and r is not baseline:
                print(
                    f"{room:<8} vs {r.generator:<31} mean {baseline.mean_ms / r.mean_ms:>8.1f}x   "
                    f"worst {baseline.worst_ms / r.worst_ms:>8.1f}x"
                )


def main() -> int:
    args = parse_args()
    sys.path.insert(0, str(REPO))
    results: list[Result] = []
    python = None
    if not args.no_baseline:
        python = baseline_python(args.venv)
    for rows, cols, boxes in ROOMS:
        for setting in SETTINGS:
            results.append(measure_turngym(rows, cols, boxes, args.samples, setting))
        if python is not None:
            large = (rows, cols, boxes) == (10, 10, 4)
            samples = args.baseline_samples_large if large else args.baseline_samples
            print(f"gym-sokoban {room_name(rows, cols, boxes)}: {samples} levels ...", file=sys.stderr, flush=True)
            results.append(measure_gym_sokoban(python, rows, cols, boxes, samples, args.timeout_s))
    print_generation_table(results)
    print_ratios(results)
    steps = measure_turngym_steps(args.steps)
    if python is not None:
        steps.update(measure_gym_sokoban_steps(python, min(args.steps, 2_000)))
    print("\nstep time (one move per step unless stated)")
    for label, us in steps.items():
        print(f"{label:<60} {us:>9.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
