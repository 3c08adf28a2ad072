"""RL over several draws of training levels from one shared warm-up, each judged on the same held-out seeds.

    python benchmarks/learning_draws.py --draws 4                          # the README's main command, 4 draws
    python benchmarks/learning_draws.py --draws 2 --algo gigpo -- algo.group_size=4 algo.shaping.coef=0.5
    python benchmarks/learning_draws.py --draws 4 --warmup runs/w/policy  # reuse a warm-up policy
    python benchmarks/learning_draws.py --seeds 0 6000 --warmup runs/w/policy --out runs/d  # these draws, into runs/d
    python benchmarks/learning_draws.py --seeds 0 6000 --warmup runs/w/policy --out runs/e --against runs/d -- ...
    python benchmarks/learning_draws.py --seeds 0 1000 --jobs 2 --warmup runs/w/policy   # two draws at once

What one run of the main command cannot say: how much of RL's gain is the draw of training levels. So:

1. one warm-up (``python -m trainer.sft``, the same oracle episodes and steps as ``trainer.run``'s) unless
   ``--warmup`` names a policy directory already made that way;
2. the warm-up policy evaluated once on ``--eval-episodes`` held-out seeds (``python -m agents.eval``, seeds
   from ``evaluation.seed``, the run's temperature and limits);
3. for each draw ``k`` (training seed ``--first-seed + k * --seed-stride``): the RL phase from the warm-up policy
   (``python -m trainer.run ... model=<warm-up> sft.warmup=false trainer.seed=<seed>``, the embedded model's
   LoRA settings, no in-run evaluation), its process tree's memory sampled every second, then its final
   policy evaluated on the same held-out seeds with the same sampling seed;
4. per draw: held-out success with a 95% interval, and RL over the warm-up paired per seed with a 95% interval;
   over the draws: the mean gain with a 95% t-interval (the draws' spread), the worst draw, wall time and
   peak memory. JSON on stdout and in ``<out>/learning_draws.json``.

Resuming: with ``--out`` naming a folder of an earlier run with the same settings (the same warm-up policy,
evaluation, algorithm and overrides, recorded in ``<out>/settings.json``), the warm-up's evaluation and every
finished draw (``<out>/draw_<seed>/draw.json``) are read back instead of run again, so a table can be
assembled from several sessions; other settings in that folder are an error, not a silent mix. A draw whose RL
phase ran to its end but whose evaluations were stopped is not trained again: the evaluations it finished (every
episode written) are read back, the others run again, and its wall time and memory are recorded as unknown.

Draws at once: ``--jobs 2`` runs two draws side by side, each its own ``trainer.run`` (and Ray cluster) and its
own evaluation. A run on this 2-core CPU leaves a core idle much of the time (the engine waits on environments,
the driver on the engine), so two at a time finish sooner than one after the other, but each draw's
``rl_wall_s`` then counts the time it shared the machine: compare wall times only between runs of the same
``jobs`` (recorded in the JSON). The draws' results do not depend on it: their seeds fix what each plays. Their
evaluations get the cores shared out (``OMP_NUM_THREADS``, ``eval_threads`` in the JSON): on two cores, two
evaluations of 256 episodes at once took 22 minutes with torch's default two threads each and 3.8 with one (one
alone, two threads: 2.3 minutes).

Comparing two methods: ``--against <folder>`` pairs each draw with the draw of the same training seed in another
folder made from the same warm-up policy and evaluation (``against`` in the JSON): per held-out seed, success here
minus there, so the draw's luck cancels out of the difference.

Along the way: ``--checkpoints`` also evaluates every checkpoint a draw kept (``trainer.checkpoint_every`` and
``trainer.keep_checkpoints`` in the overrides say which) on the same held-out seeds, so each draw gets a held-out
curve (``by_step`` in its JSON, and over the draws the mean gain at each step they share). A draw read back
without one gets it from its kept checkpoints.

Intervals: a draw's are normal intervals on 256 (or ``--eval-episodes``) per-seed values; the overall one
is Student's t on the draws' gains (it counts the training draw as the unit, which is what varies most).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from learning_run import TreeMemory
from omegaconf import OmegaConf

from agents.eval import summarize
from agents.trajectory import read_trajectories
from trainer.checkpoint import COMPLETE, checkpoint_dir

DEFAULT_MAX_TURNS, DEFAULT_MAX_TOTAL_TOKENS = 3, 1024  # the main command's episodes
# Student's t quantile for a two-sided 95% interval, by degrees of freedom (draws - 1).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def smollm2_rl() -> list[str]:
    """The embedded model's RL settings (``configs/training/model/smollm2.yaml``) as overrides: a policy directory
    loads as ``model=hf``, whose own settings are those of full fine-tuning."""
    from trainer.config import compose_train_config

    model = compose_train_config(["env=sokoban", "model=smollm2"]).model  # the env changes no model setting
    keys = ("lr", "critic_lr", "lora_rank", "lora_alpha", "lora_layers")
    return [f"model.{key}={'null' if model[key] is None else model[key]}" for key in keys]


def interval(values: list[float], *, t: bool = False) -> dict[str, float]:
    """Mean and a 95% interval half-width: normal (1.96 s.e.) or Student's t over ``len(values) - 1`` degrees."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "ci95": math.nan, "n": len(values)}
    se = statistics.stdev(values) / math.sqrt(len(values))
    quantile = _T95.get(len(values) - 1, 1.96) if t else 1.96
    return {"mean": mean, "ci95": quantile * se, "n": len(values)}


def per_seed_success(path: Path) -> dict[int, float]:
    return {t.seed: float(t.success) for t in read_trajectories(path)}


def outcomes(path: Path) -> dict:
    """How the held-out episodes in ``path`` ended, where the env reports the solver's distance: success per
    difficulty bucket (``[bucket, rate, episodes]``) and the failures left with no solution or still solvable; where
    it reports each move, the moves a turn made (over the turns of those episodes)."""
    trajectories = list(read_trajectories(path))
    summary = summarize(trajectories)
    turns = [turn for t in trajectories for turn in t.turn_move_distances]
    return {
        "by_difficulty": [list(bucket) for bucket in summary.by_difficulty],
        "failed_lost": summary.failed_lost,
        "failed_solvable": summary.failed_solvable,
        "moves_per_turn": sum(map(len, turns)) / len(turns) if turns else None,
    }


def eval_threads(args: argparse.Namespace) -> int | None:
    """Torch threads for an evaluation beside other draws: the cores shared out between the ``--jobs``, so that the
    processes' threads do not outnumber the cores (oversubscribed, each waits on threads that are not running);
    ``None`` alone: torch's own default."""
    return None if args.jobs == 1 else max(1, (os.cpu_count() or 1) // args.jobs)


def evaluate(policy: Path, args: argparse.Namespace, out: Path, *, threads: int | None = None) -> dict[int, float]:
    """``agents.eval`` of ``policy`` on the held-out seeds, with ``threads`` torch threads (``None``: torch's
    default); per-seed success."""
    command = [
        sys.executable, "-m", "agents.eval", f"env={args.env_id}", *args.env, "agent=hf", f"model={policy}",
        f"episodes={args.eval_episodes}", f"seed={args.eval_seed}", f"temperature={args.temperature}",
        "max_new_tokens=32", f"max_total_tokens={args.max_total_tokens}", f"max_turns={args.max_turns}",
        f"out={out}", "progress=false",
    ]  # fmt: skip
    if args.sampling_seed is not None:  # the same random numbers for every policy (closer pairs; see agents.eval)
        command.append(f"sampling_seed={args.sampling_seed}")
    environment = None if threads is None else {**os.environ, "OMP_NUM_THREADS": str(threads)}
    subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
    return per_seed_success(out)


def evaluated(policy: Path, args: argparse.Namespace, out: Path, *, threads: int | None = None) -> dict[int, float]:
    """The per-seed success in ``out`` when it holds every one of the ``--eval-episodes`` episodes; otherwise (no
    file, or an evaluation stopped part-way: fewer episodes, or a line cut short) ``policy`` evaluated into it."""
    if out.exists():
        try:
            found = per_seed_success(out)
        except ValueError:  # a line cut short
            found = {}
        if len(found) == args.eval_episodes:
            return found
    return evaluate(policy, args, out, threads=threads)


def trained(run_dir: Path) -> bool:
    """Whether the RL phase in ``run_dir`` ran to its end: the checkpoint of its last step is complete."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        return False
    return (checkpoint_dir(run_dir, OmegaConf.load(config).trainer.total_steps) / COMPLETE).is_file()


def run_timed(command: list[str]) -> tuple[float, TreeMemory]:
    started = time.perf_counter()
    process = subprocess.Popen(command)
    memory = TreeMemory(process.pid)
    code = process.wait()
    memory.stop()
    if code != 0:
        raise SystemExit(f"{' '.join(command[1:4])} ... failed with exit code {code}")
    return time.perf_counter() - started, memory


def episode_limits(args: argparse.Namespace) -> list[str]:
    """The training overrides for ``--max-turns`` and ``--max-total-tokens``; none at their defaults, which are the
    main command's own limits (and ``evaluate``'s)."""
    if (args.max_turns, args.max_total_tokens) == (DEFAULT_MAX_TURNS, DEFAULT_MAX_TOTAL_TOKENS):
        return []
    return [f"rollout.max_turns={args.max_turns}", f"rollout.max_total_tokens={args.max_total_tokens}"]


def same_settings(out: Path, args: argparse.Namespace, policy: Path) -> bool:
    """Whether ``out`` may be resumed: it holds nothing yet, or an earlier run's with these exact settings.

    Records the settings in ``<out>/settings.json`` on first use; a folder made with other settings is an
    error, so draws of different configurations never land in one table.
    """
    settings = {
        "warmup_policy": str(policy.resolve()), "algo": args.algo, "overrides": args.overrides,
        "env_id": args.env_id, "env": args.env, "eval_episodes": args.eval_episodes, "eval_seed": args.eval_seed,
        "temperature": args.temperature, "sampling_seed": args.sampling_seed,
    }  # fmt: skip
    if episode_limits(args):  # only when not the defaults: older folders resume
        settings["limits"] = {"max_turns": args.max_turns, "max_total_tokens": args.max_total_tokens}
    path = out / "settings.json"
    if path.exists():
        recorded = json.loads(path.read_text())
        if recorded != settings:
            changed = sorted(k for k in settings.keys() | recorded.keys() if recorded.get(k) != settings.get(k))
            raise SystemExit(f"{out} holds draws made with other settings ({', '.join(changed)}): pick another --out")
        return True
    path.write_text(json.dumps(settings, indent=2))
    return not any(out.glob("draw_*"))


# What two folders must share for their draws to be paired: the start, the held-out seeds and the random numbers.
_PAIRED_SETTINGS = (
    "warmup_policy", "env_id", "env", "eval_episodes", "eval_seed", "temperature", "sampling_seed", "limits",
)  # fmt: skip


def against(out: Path, other: Path) -> dict:
    """Each draw of ``out`` paired per held-out seed with the draw of the same training seed in ``other``, a folder
    of the same warm-up and evaluation made with another algorithm or overrides: success here minus there, with a
    95% interval, the levels gained and lost; over the draws in both, the mean difference with a t-interval.

    Pairing two methods on the same training levels and held-out seeds removes both draws' luck from their
    difference, which two unpaired tables of ``rl_minus_warmup`` keep.
    """
    ours, theirs = (json.loads((folder / "settings.json").read_text()) for folder in (out, other))
    changed = [key for key in _PAIRED_SETTINGS if ours.get(key) != theirs.get(key)]
    if changed:
        raise SystemExit(f"{other} differs from {out} in {', '.join(changed)}: its draws cannot be paired with these")
    draws = []
    for run_dir in sorted(out.glob("draw_*"), key=lambda d: int(d.name.removeprefix("draw_"))):
        here, there = run_dir / "held_out.jsonl", other / run_dir.name / "held_out.jsonl"
        if not (here.exists() and there.exists()):
            continue
        a, b = per_seed_success(here), per_seed_success(there)
        differences = [a[s] - b[s] for s in sorted(a.keys() & b.keys())]
        draws.append({
            "seed": int(run_dir.name.removeprefix("draw_")), "difference": interval(differences),
            "gained": sum(d > 0 for d in differences), "lost": sum(d < 0 for d in differences),
        })  # fmt: skip
    means = [d["difference"]["mean"] for d in draws]
    return {"folder": str(other), "draws": draws, "overall": interval(means, t=True) if means else None}


def run_draw(
    seed: int, policy: Path, model: list[str], warm: dict[int, float], args: argparse.Namespace, out: Path
) -> dict:
    """One draw: the RL phase from ``policy`` (with ``model``'s settings, :func:`smollm2_rl`) and training seed
    ``seed``, its final policy evaluated on the held-out seeds and paired per seed with the warm-up's ``warm``;
    written to ``<out>/draw_<seed>/draw.json``."""
    run_dir = out / f"draw_{seed}"
    command = [
        sys.executable, "-m", "trainer.run", f"env={args.env_id}", *args.env, f"algo={args.algo}",
        f"model={policy}", *model, "sft.warmup=false", "evaluation.enabled=false", f"trainer.seed={seed}",
        f"trainer.run_dir={run_dir}", "trainer.progress=false", *episode_limits(args), *args.overrides,
    ]  # fmt: skip
    if trained(run_dir):  # an earlier run trained this draw and was stopped before its evaluations were all done
        print(f"draw {seed}: trained before, judged now (its wall time and memory were not recorded)", flush=True)
        wall_s, peak_pss_gib = None, None
    else:
        wall_s, memory = run_timed(command)
        peak_pss_gib = memory.peak_pss / 2**30
    final = sorted((run_dir / "checkpoints").glob("step_*"))[-1] / "policy"
    after = evaluated(final, args, run_dir / "held_out.jsonl", threads=eval_threads(args))
    draw = {"seed": seed, "rl_wall_s": wall_s, "peak_pss_gib": peak_pss_gib, **judged(after, warm)}
    draw["outcomes"] = outcomes(run_dir / "held_out.jsonl")
    if args.checkpoints:
        draw["by_step"] = checkpoint_curve(run_dir, warm, args)
    (run_dir / "draw.json").write_text(json.dumps(draw, indent=2))
    print(json.dumps(draw), flush=True)
    return draw


def judged(after: dict[int, float], warm: dict[int, float]) -> dict:
    """Held-out success of a policy and its gain over the warm-up, paired per seed, each with a 95% interval."""
    paired = sorted(warm.keys() & after.keys())
    return {
        "success": interval([after[s] for s in paired]),
        "rl_minus_warmup": interval([after[s] - warm[s] for s in paired]),
    }


def checkpoint_curve(run_dir: Path, warm: dict[int, float], args: argparse.Namespace) -> list[dict]:
    """Every checkpoint ``run_dir`` kept, judged on the held-out seeds as the final policy is: ``step``, success
    and gain over the warm-up; the last checkpoint's episodes are ``held_out.jsonl``, the others'
    ``held_out_step_<n>.jsonl`` (read back when complete)."""
    checkpoints = sorted((run_dir / "checkpoints").glob("step_*"))
    curve = []
    for checkpoint in checkpoints:
        step = int(checkpoint.name.removeprefix("step_"))
        path = run_dir / ("held_out.jsonl" if checkpoint == checkpoints[-1] else f"held_out_step_{step}.jsonl")
        after = evaluated(checkpoint / "policy", args, path, threads=eval_threads(args))
        curve.append({"step": step, **judged(after, warm), "outcomes": outcomes(path)})
    return curve


def curve_over_draws(draws: list[dict]) -> list[dict]:
    """The mean gain over the warm-up (t-interval over the draws) at each step every draw has a checkpoint of."""
    curves = [{point["step"]: point for point in draw.get("by_step", [])} for draw in draws]
    shared = sorted(set.intersection(*(set(curve) for curve in curves))) if curves else []
    return [
        {
            "step": step,
            "rl_minus_warmup": interval([curve[step]["rl_minus_warmup"]["mean"] for curve in curves], t=True),
            "success": interval([curve[step]["success"]["mean"] for curve in curves], t=True),
        }
        for step in shared
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--out", default=None, help="a folder for everything (default: a new temporary one)")
    parser.add_argument("--warmup", default=None, help="a warm-up policy directory to start every draw from")
    parser.add_argument("--first-seed", type=int, default=0, help="training seed of the first draw")
    parser.add_argument("--seed-stride", type=int, default=1000, help="training seeds of later draws step by this")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="these training seeds (not --draws)")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--eval-seed", type=int, default=10_000)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--sampling-seed", type=int, default=None, help="agents.eval's sampling_seed (default: none)")
    parser.add_argument("--env-id", default="sokoban", help="the environment (default: sokoban, the main command's)")
    parser.add_argument("--env", nargs="*", default=[], help="env.<key>=<value> overrides for training and evaluation")
    parser.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="an episode's turns (training, eval)")
    parser.add_argument("--max-total-tokens", type=int, default=DEFAULT_MAX_TOTAL_TOKENS, help="its token budget")
    parser.add_argument(
        "--against", default=None, help="a folder of draws from the same warm-up and evaluation: pair with its draws"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="draws run at once (each its own Ray cluster; their wall times overlap)"
    )
    parser.add_argument(
        "--checkpoints", action="store_true", help="also evaluate every checkpoint a draw kept: a held-out curve"
    )
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides of the RL phase (after --)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    out = Path(args.out or tempfile.mkdtemp(prefix="turngym-draws-"))
    out.mkdir(parents=True, exist_ok=True)
    limits = episode_limits(args)
    report: dict = {"algo": args.algo, "overrides": args.overrides, "env": args.env, "draws": []}
    started = time.perf_counter()
    if args.warmup is None:
        warmup_dir = out / "warmup"
        command = [sys.executable, "-m", "trainer.sft", f"env={args.env_id}", *args.env, *limits]
        command.append(f"trainer.run_dir={warmup_dir}")
        report["warmup_s"], _ = run_timed(command)
        policy = warmup_dir / "policy"
    else:
        policy = Path(args.warmup)
    report["warmup_policy"] = str(policy)
    resumable = args.warmup is not None and same_settings(out, args, policy)
    warm_path = out / "warmup_eval.jsonl"
    warm = evaluated(policy, args, warm_path) if resumable else evaluate(policy, args, warm_path)
    report["warmup_success"] = interval(list(warm.values()))
    report["warmup_outcomes"] = outcomes(warm_path)
    seeds = args.seeds or [args.first_seed + k * args.seed_stride for k in range(args.draws)]
    draws: dict[int, dict] = {}
    for seed in seeds:
        done = out / f"draw_{seed}" / "draw.json"
        if resumable and done.exists():
            draws[seed] = json.loads(done.read_text())
            print(f"draw {seed}: read back from {done}", flush=True)
            if "outcomes" not in draws[seed]:  # a draw.json from before outcomes were recorded
                draws[seed]["outcomes"] = outcomes(done.parent / "held_out.jsonl")
            if args.checkpoints and "by_step" not in draws[seed]:
                draws[seed]["by_step"] = checkpoint_curve(done.parent, warm, args)
            done.write_text(json.dumps(draws[seed], indent=2))
    pending = [seed for seed in seeds if seed not in draws]
    # A draw that fails raises here once the others running beside it have finished and written their draw.json.
    model = smollm2_rl()  # composed once, here: Hydra's global state is not for threads
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        finished = pool.map(lambda seed: run_draw(seed, policy, model, warm, args, out), pending)
        draws.update(zip(pending, finished, strict=True))
    report["draws"] = [draws[seed] for seed in seeds]
    report["jobs"], report["eval_threads"] = args.jobs, eval_threads(args)
    gains = [d["rl_minus_warmup"]["mean"] for d in report["draws"]]
    walls = [d["rl_wall_s"] for d in report["draws"] if d["rl_wall_s"] is not None]
    peaks = [d["peak_pss_gib"] for d in report["draws"] if d["peak_pss_gib"] is not None]
    report["overall"] = {
        "rl_minus_warmup": interval(gains, t=True),
        "success": interval([d["success"]["mean"] for d in report["draws"]], t=True),
        "worst_draw_gain": min(gains),
        "draws_with_gain_of_10_points": sum(g >= 0.10 for g in gains),
        "rl_wall_s_mean": statistics.fmean(walls) if walls else None,  # over the draws trained in one run
        "peak_pss_gib_max": max(peaks, default=None),
    }
    if args.checkpoints:
        report["overall"]["by_step"] = curve_over_draws(report["draws"])
    if args.against is not None:
        report["against"] = against(out, Path(args.against))
    report["wall_s"] = time.perf_counter() - started
    (out / "learning_draws.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
