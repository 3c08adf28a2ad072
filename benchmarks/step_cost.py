"""The cost of a default RL step against the previous default configuration, in one run of this script.

    python benchmarks/step_cost.py                 # 3 steps each, PPO on Sokoban, SmolLM2, no warm-up
    python benchmarks/step_cost.py --steps 4 -- rollout.max_new_tokens=24
    python benchmarks/step_cost.py --candidate bf16="trainer.precision=bf16-mixed engine.dtype=bfloat16"
    python benchmarks/step_cost.py --only default --steps 2      # one configuration: no ratios

Both configurations start from the same weights (no warm-up, no evaluation) and play the same seeds with
the same sampling seeds, so their first 8 episodes are the same tokens (the default plays 16 a step):

* ``previous``: every weight trained (``model.lora_rank=0``, lr 1e-6 / 1e-5), a separate critic model
  and a separate reference model, old logprobs recomputed by the actor
  (``algo.reuse_rollout_logprobs=false``), every row's prompt computed in full
  (``trainer.share_prefix=false``), 8 episodes a step in one optimizer step, token-mean;
* ``default``: the current defaults (LoRA rank 32, the reference as the actor with its adapters off,
  the critic as a value head on the actor, applied by the colocated engine as it samples, so the old logprobs
  and the values come from the rollout after a check of two rows and no scoring forward runs, LoRA
  checkpoints, the rows of a micro-batch packed behind their common system prompt and instructions,
  16 episodes a step in 4 optimizer steps).

``--candidate NAME="overrides"`` (repeatable) adds a configuration: the defaults plus those overrides.

Figures per configuration: mean seconds per step (and its rollout / scoring / training parts, the
first step left out when there are more), seconds per 1,000 trained tokens (every token of the
batch, prompt included) and per 1,000 sampled tokens, peak PSS of the process tree, and the size of one
checkpoint; then the ratios previous / default. The run directories (checkpoints: several GB) are removed at the
end; ``--keep`` keeps them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from learning_run import TreeMemory

from trainer.metrics import read_metrics

CONFIGURATIONS = {
    "previous": [
        "model.lora_rank=0",
        "model.lr=1e-6",
        "model.critic_lr=1e-5",
        "algo.critic_model=separate",
        "algo.reuse_rollout_logprobs=false",
        "algo.mini_batches=1",
        "algo.loss_agg_mode=token-mean",
        "trainer.groups_per_step=8",
        "trainer.share_prefix=false",
    ],
    "default": [],
}


def measure(name: str, extra: list[str], steps: int, root: Path) -> dict[str, float]:
    run_dir = root / name
    command = [sys.executable, "-m", "trainer.run", "env=sokoban", "algo=ppo", "sft.warmup=false"]
    command += ["evaluation.enabled=false", f"trainer.total_steps={steps}", f"trainer.checkpoint_every={steps}"]
    command += [f"trainer.run_dir={run_dir}", "trainer.progress=false", "logging.plot=false", *extra]
    started = time.perf_counter()
    process = subprocess.Popen(command)
    memory = TreeMemory(process.pid)
    if process.wait() != 0:
        raise SystemExit(f"{name}: trainer.run failed with exit code {process.returncode}")
    memory.stop()
    records = read_metrics(run_dir)
    later = records[1:] if len(records) > 1 else records
    step_s = statistics.fmean(r["time/step_s"] for r in later)
    trained = statistics.fmean(r.get("train/tokens", 0.0) for r in later)
    sampled = statistics.fmean(r["episode/response_tokens"] * r["episode/count"] for r in later)
    checkpoint = next((run_dir / "checkpoints").glob("step_*"))
    return {
        "wall_s": time.perf_counter() - started,
        "step_s": step_s,
        "rollout_s": statistics.fmean(r["time/rollout_s"] for r in later),
        "score_s": statistics.fmean(r.get("time/score_s", 0.0) for r in later),
        "train_s": statistics.fmean(r["time/train_s"] for r in later),
        "update_s": statistics.fmean(r.get("time/update_s", 0.0) for r in later),
        "sync_s": statistics.fmean(r.get("time/sync_s", 0.0) for r in later),
        "s_per_1k_trained_tokens": 1000 * step_s / trained if trained else float("nan"),
        "s_per_1k_sampled_tokens": 1000 * step_s / sampled if sampled else float("nan"),
        "peak_pss_gib": memory.peak_pss / 2**30,
        "peak_pss_gib_by_process": memory.peak_gib_by_process(),
        "checkpoint_gib": sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file()) / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        metavar='NAME="OVERRIDES"',
        help="another configuration: the defaults plus these space-separated overrides (repeatable)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help="measure only these configurations (e.g. --only default: its memory without the heavy previous one)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the run directories (checkpoints, several GB each) instead of removing them at the end",
    )
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides for every configuration (after --)")
    args = parser.parse_args()
    configurations = dict(CONFIGURATIONS)
    for candidate in args.candidate:
        name, _, overrides = candidate.partition("=")
        if not name or name in configurations or not overrides.strip():
            parser.error(f'--candidate {candidate!r}: give a new NAME="key=value ..."')
        configurations[name] = overrides.split()
    if args.only is not None:
        unknown = sorted(set(args.only) - configurations.keys())
        if unknown:
            parser.error(f"--only {' '.join(unknown)}: not a configuration (known: {', '.join(configurations)})")
        configurations = {name: configurations[name] for name in args.only}
    root = Path(tempfile.mkdtemp(prefix="turngym-step-cost-"))
    results = {}
    try:
        for name, extra in configurations.items():
            results[name] = measure(name, [*args.overrides, *extra], args.steps, root)
    finally:
        if args.keep:
            print(f"run directories kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    previous = results.get("previous")
    for name in configurations:
        if previous is not None and name != "previous":
            ratios = {
                key: previous[key] / value
                for key, value in results[name].items()
                if isinstance(value, float) and value
            }
            results[f"previous_over_{name}"] = ratios
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
