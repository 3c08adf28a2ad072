"""The default training run, measured: seconds per step, and the policy before and after N steps.

    python benchmarks/train_run.py                                  # env=sokoban algo=ppo, 4 steps, 16 eval episodes
    python benchmarks/train_run.py --steps 10 --eval-episodes 32 -- algo=grpo algo.group_size=4

Runs ``python -m trainer.run env=sokoban algo=ppo trainer.total_steps=<steps>`` (plus any overrides after
``--``) into a fresh run directory, then evaluates the initial model and the trained policy (the last
checkpoint's ``policy/``, a Hugging Face directory) with ``python -m agents.eval`` on the same held-out
seeds (10,000 and up, never seen in training) and the run's sampling settings.

Figures: seconds per step (first step, and the mean of the others), the time split (rollout, scoring,
update), learner tokens/s, prefix-cache hit rate, and reward / success rate / invalid-action rate of the
first and last training steps and of the two evaluations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from trainer.metrics import read_metrics


def evaluate(model: str, episodes: int, config: dict) -> dict:
    out = Path(tempfile.mkdtemp(prefix="turngym-eval-")) / "eval.jsonl"
    rollout = config["rollout"]
    command = [
        sys.executable, "-m", "agents.eval", f"env={config['env']['id']}", "agent=hf", f"model={model}",
        f"episodes={episodes}", "seed=10000", f"temperature={rollout['temperature']}",
        f"max_new_tokens={rollout['max_new_tokens']}", f"max_total_tokens={rollout['max_total_tokens']}",
        f"max_turns={'null' if rollout['max_turns'] is None else rollout['max_turns']}",
        f"out={out}", "progress=false",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    episodes_read = [json.loads(line) for line in out.read_text().splitlines()]
    turns = sum(e["num_turns"] for e in episodes_read)
    return {
        "reward": statistics.fmean(e["episode_return"] for e in episodes_read),
        "success": statistics.fmean(float(e["success"]) for e in episodes_read),
        "invalid": sum(e["num_invalid_actions"] for e in episodes_read) / max(1, turns),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("overrides", nargs="*", help="trainer.run overrides (after --)")
    args = parser.parse_args()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="turngym-train-")) / "run"
    overrides = ["env=sokoban", "algo=ppo", *args.overrides, f"trainer.total_steps={args.steps}"]
    overrides += [f"trainer.run_dir={run_dir}", "trainer.progress=false", f"trainer.checkpoint_every={args.steps}"]
    subprocess.run([sys.executable, "-m", "trainer.run", *overrides], check=True)
    records = read_metrics(run_dir)
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"))
    step_times = [r["time/step_s"] for r in records]
    print(f"\n{' '.join(overrides)}")
    print(f"first step {step_times[0]:.0f} s; later steps {statistics.fmean(step_times[1:] or step_times):.0f} s mean")
    for key in ("time/rollout_s", "time/score_s", "time/train_s", "throughput/learner_tokens_per_s"):
        print(f"  {key}: {statistics.fmean(r[key] for r in records):.1f} mean")
    print(f"  rollout/prefix_hit_rate: {statistics.fmean(r['rollout/prefix_hit_rate'] for r in records):.3f} mean")
    print(f"  rollout/logprob_mismatch: {max(r['rollout/logprob_mismatch'] for r in records):.2e} max")
    print("\n| when | reward | success | invalid actions |\n|---|---|---|---|")
    for label, r in (("training step 1", records[0]), (f"training step {len(records)}", records[-1])):
        row = (r["reward/mean"], r["reward/success_rate"], r["episode/invalid_action_rate"])
        print(f"| {label} | {row[0]:.3f} | {row[1]:.1%} | {row[2]:.1%} |")
    final = run_dir / "checkpoints" / f"step_{len(records):06d}" / "policy"
    for label, model in (("eval before", config["model"]["name"]), ("eval after", str(final))):
        e = evaluate(model, args.eval_episodes, config)
        label = f"{label} ({args.eval_episodes} held-out episodes)"
        print(f"| {label} | {e['reward']:.3f} | {e['success']:.1%} | {e['invalid']:.1%} |")


if __name__ == "__main__":
    main()
