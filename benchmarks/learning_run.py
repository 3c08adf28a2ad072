"""The README's main command, measured as a new user runs it: does held-out success rise, how long, how much memory.

    python benchmarks/learning_run.py                       # python -m trainer.run env=sokoban algo=ppo, timed
    python benchmarks/learning_run.py --fresh-cache         # also convert the embedded model first (empty cache)
    python benchmarks/learning_run.py -- trainer.total_steps=4 evaluation.episodes=32   # any overrides
    python benchmarks/learning_run.py --algo grpo -- algo.group_size=4 env.max_moves=3   # another algorithm
    python benchmarks/learning_run.py --env frozenlake                                  # another environment

It runs ``python -m trainer.run env=sokoban algo=ppo`` (plus the overrides) to its end while sampling the
memory of the whole process tree (driver, Ray, engine, learner, environment actors) every second, then
evaluates the model *before* the warm-up with ``python -m agents.eval`` on the run's own held-out seeds
and sampling settings. Figures, as JSON on stdout and in ``<run>/learning_run.json``:

* held-out success rate and invalid-action rate (with standard errors) before the warm-up, after it
  (the run's step-0 evaluation), and after the RL steps (its last evaluation); the paired difference of
  the last two on the same seeds, with its standard error;
* wall time of the whole command, of the warm-up, of each evaluation and of the RL steps (rollout,
  scoring, update);
* peak memory: the largest sum of PSS (proportional set size: shared pages split between the processes
  that share them, so libraries are not counted once per process) over the process tree, and the same
  sum of RSS; the largest sum of PSS after the warm-up (the RL steps and evaluations), by process;
* the size of one checkpoint.
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
import threading
import time
from pathlib import Path

import psutil

from agents.trajectory import read_trajectories
from trainer.metrics import read_metrics


class TreeMemory:
    """Samples the summed PSS and RSS of a process and all its descendants once a second; keeps the peaks.

    ``peak_by_process`` is the PSS of each kind of process (its name without a Ray task's method:
    ``ray::ModelWorker``, ``ray::EngineHost``, ``raylet``, ``python`` for the driver and Ray's Python services)
    at the sample with the highest summed PSS, summed over processes of the same name. ``samples`` keeps every
    sample (wall-clock time, summed PSS, PSS by process) for the peak of a phase (:meth:`peak_after`).
    """

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak_pss = self.peak_rss = 0
        self.peak_by_process: dict[str, int] = {}
        self.samples: list[tuple[float, int, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            pss = rss = 0
            by_process: dict[str, int] = {}
            for process in processes:
                try:
                    info, name = process.memory_full_info(), process.name()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if name.startswith("ray::"):
                    name = name.split(".")[0]  # ray::Actor.method: the actor's kind
                own = getattr(info, "pss", info.rss)
                pss, rss = pss + own, rss + info.rss
                by_process[name] = by_process.get(name, 0) + own
            self.samples.append((time.time(), pss, by_process))
            if pss > self.peak_pss:
                self.peak_by_process = dict(sorted(by_process.items(), key=lambda item: -item[1]))
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_after(self, since: float) -> tuple[float, dict[str, float]]:
        """The highest summed PSS sampled from wall-clock time ``since`` on, in GiB, and its PSS by process
        (``0.0, {}`` when no sample came after it)."""
        later = [(pss, by_process) for t, pss, by_process in self.samples if t >= since]
        if not later:
            return 0.0, {}
        pss, by_process = max(later, key=lambda sample: sample[0])
        return pss / 2**30, {name: round(v / 2**30, 3) for name, v in sorted(by_process.items(), key=lambda i: -i[1])}

    def peak_gib_by_process(self) -> dict[str, float]:
        """``peak_by_process`` in GiB, rounded to the MiB."""
        return {name: round(pss / 2**30, 3) for name, pss in self.peak_by_process.items()}


def _after_warmup_peak(memory: TreeMemory, run_dir: Path) -> dict[str, object]:
    """The peak of the run after its warm-up (the RL steps and evaluations): from the moment the warm-up's policy
    was complete (its ``COMPLETE`` marker's modification time); nothing for a run without a warm-up of its own."""
    marker = run_dir / "warmup" / "policy" / "COMPLETE"
    if not marker.is_file():
        return {}
    pss, by_process = memory.peak_after(marker.stat().st_mtime)
    return {"peak_pss_gib_after_warmup": pss, "peak_pss_gib_after_warmup_by_process": by_process}


def _rate(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)


def summarize_episodes(path: Path) -> dict[str, float]:
    episodes = list(read_trajectories(path))
    success, success_se = _rate([float(t.success) for t in episodes])
    turns = sum(t.num_turns for t in episodes)
    invalid = sum(t.num_invalid_actions for t in episodes) / max(turns, 1)
    return {"episodes": len(episodes), "success": success, "success_se": success_se, "invalid_action_rate": invalid}


def paired_difference(before: Path, after: Path) -> dict[str, float]:
    """Success after minus before on the same seeds: mean and standard error of the per-seed differences."""
    first = {t.seed: float(t.success) for t in read_trajectories(before)}
    second = {t.seed: float(t.success) for t in read_trajectories(after)}
    seeds = sorted(first.keys() & second.keys())
    mean, se = _rate([second[s] - first[s] for s in seeds])
    return {"seeds": len(seeds), "difference": mean, "difference_se": se}


def evaluate_base_model(config: dict, out: Path) -> None:
    rollout, evaluation = config["rollout"], config["evaluation"]
    temperature = rollout["temperature"] if evaluation["temperature"] is None else evaluation["temperature"]
    env_overrides = [f"env.{k}={json.dumps(v)}" for k, v in config["env"].items() if k != "id" and v is not None]
    command = [
        sys.executable, "-m", "agents.eval", f"env={config['env']['id']}", *env_overrides, "agent=hf",
        f"model={config['model']['name']}", f"episodes={evaluation['episodes']}", f"seed={evaluation['seed']}",
        f"temperature={temperature}", f"max_new_tokens={rollout['max_new_tokens']}",
        f"max_total_tokens={rollout['max_total_tokens']}", f"max_turns={rollout['max_turns']}", f"out={out}",
        "progress=false",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", default=None, help="where the run goes (default: a new temporary folder)")
    parser.add_argument("--env", default="sokoban", help="the run's environment (the README's main command: sokoban)")
    parser.add_argument("--algo", default="ppo", help="the run's algorithm (the README's main command: ppo)")
    parser.add_argument("--fresh-cache", action="store_true", help="start from an empty model cache")
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides (after --)")
    args = parser.parse_args()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="turngym-learning-")) / "run"
    environment = dict(os.environ)
    if args.fresh_cache:
        environment["TURNGYM_CACHE"] = tempfile.mkdtemp(prefix="turngym-cache-")
    command = [sys.executable, "-m", "trainer.run", f"env={args.env}", f"algo={args.algo}", *args.overrides]
    command += [f"trainer.run_dir={run_dir}", "trainer.progress=true"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=environment)
    memory = TreeMemory(process.pid)
    if process.wait() != 0:
        raise SystemExit(f"trainer.run failed with exit code {process.returncode}")
    memory.stop()
    wall_s = time.perf_counter() - started
    records = read_metrics(run_dir)
    import yaml

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    evaluations = sorted((run_dir / "evaluations").glob("step_*.jsonl"))
    base = run_dir / "evaluations" / "base_model.jsonl"
    evaluate_base_model(config, base)
    steps = [r for r in records if r["step"] > 0]
    checkpoints = sorted((run_dir / "checkpoints").glob("step_*"))
    report = {
        "command": " ".join(command[1:]),
        "wall_s": wall_s,
        "warmup_s": records[0].get("time/sft_s", 0.0),
        "eval_s": [r["time/eval_s"] for r in records if "time/eval_s" in r],
        "steps": len(steps),
        "step_s_mean": statistics.fmean(r["time/step_s"] for r in steps),
        "rollout_s_mean": statistics.fmean(r["time/rollout_s"] for r in steps),
        "score_s_mean": statistics.fmean(r.get("time/score_s", 0.0) for r in steps),
        "train_s_mean": statistics.fmean(r["time/train_s"] for r in steps),
        "update_s_mean": statistics.fmean(r.get("time/update_s", 0.0) for r in steps),
        "train_tokens_mean": statistics.fmean(r.get("train/tokens", 0.0) for r in steps),
        "peak_pss_gib": memory.peak_pss / 2**30,
        "peak_rss_gib": memory.peak_rss / 2**30,
        "peak_pss_gib_by_process": memory.peak_gib_by_process(),
        **_after_warmup_peak(memory, run_dir),
        "checkpoint_gib": sum(f.stat().st_size for f in checkpoints[-1].rglob("*") if f.is_file()) / 2**30
        if checkpoints
        else 0.0,
        "before_warmup": summarize_episodes(base),
        "after_warmup": summarize_episodes(evaluations[0]),
        "after_rl": summarize_episodes(evaluations[-1]),
        "rl_minus_warmup": paired_difference(evaluations[0], evaluations[-1]),
        "held_out_curve": [(r["step"], r["eval/success_rate"]) for r in records if "eval/success_rate" in r],
    }
    (run_dir / "learning_run.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
