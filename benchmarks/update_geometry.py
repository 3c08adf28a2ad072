"""How RL phases moved the weights: the size of each policy's change from a base, and the cosine between changes.

Every policy is a saved model folder (``<run>/checkpoints/step_*/policy``) of the same model as ``--base``; its
change is the difference of all its weights from the base's, as one vector. Printed (and written to ``--out`` as
JSON): each change's norm, and the cosine of every pair of changes, and of every pair of *increments* between
consecutive policies of one run when their folders are passed in order with ``--run``::

    python benchmarks/update_geometry.py --base <warm-up>/policy \\
        --run <draw>/checkpoints/step_000016/policy <draw>/checkpoints/step_000032/policy \\
              <draw>/checkpoints/step_000048/policy

What the numbers say: steps that keep pushing one way give increments with a positive cosine, and a change that
grows in proportion to the steps; steps that are mostly noise give increments near orthogonal (in tens of millions
of dimensions two random directions have a cosine near 0) and a change that grows like the square root of the
steps. Changes of runs with other seeds start from other random adapters, so their cosine says little.
"""

from __future__ import annotations

import argparse
import json
from itertools import combinations, pairwise
from pathlib import Path

WEIGHTS = "model.safetensors"


def require_policy_folders(parser: argparse.ArgumentParser, folders: list) -> None:
    """Stop with a usage error naming the first of ``folders`` that holds no saved weights."""
    for folder in folders:
        if not (Path(folder) / WEIGHTS).is_file():
            parser.error(f"{folder} has no {WEIGHTS}: pass a saved policy folder (<run>/checkpoints/step_*/policy)")


def change(base: dict, policy: dict):
    """``policy``'s weights minus ``base``'s, every tensor flattened in name order, as one float32 vector."""
    import torch

    if base.keys() != policy.keys():
        raise ValueError("a policy holds other tensors than --base: not the same model")
    return torch.cat([(policy[name].float() - base[name].float()).flatten() for name in sorted(base)])


def cosine(a, b) -> float:
    """The cosine of two vectors (0 when either is 0), summed in float64: over a hundred million float32 terms the
    rounding would show (two equal changes read as a cosine of 1.009)."""
    a, b = a.double(), b.double()
    denominator = float(a.norm() * b.norm())
    return float(a @ b) / denominator if denominator > 0 else 0.0


def geometry(changes: dict, runs: list[list[str]]) -> dict:
    """Norms of ``changes`` (name -> vector), cosines of every pair, and for each run (names in step order) the
    norms and pairwise cosines of its increments (the first from the base)."""
    report: dict = {
        "norm": {name: float(vector.norm()) for name, vector in changes.items()},
        "cosine": {f"{a} | {b}": cosine(changes[a], changes[b]) for a, b in combinations(changes, 2)},
        "runs": [],
    }
    for names in runs:
        increments = [changes[names[0]]] + [changes[b] - changes[a] for a, b in pairwise(names)]
        report["runs"].append({
            "policies": names,
            "increment_norm": [float(i.norm()) for i in increments],
            "increment_cosine": {f"{i} | {j}": cosine(increments[i], increments[j])
                                 for i, j in combinations(range(len(increments)), 2)},
        })  # fmt: skip
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the policy the runs started from (a model folder)")
    parser.add_argument("--policy", nargs="*", default=[], help="policies to compare (model folders)")
    parser.add_argument(
        "--run", nargs="+", action="append", default=[], help="one run's policies in step order (repeatable)"
    )
    parser.add_argument("--out", default=None, help="also write the report here (JSON)")
    args = parser.parse_args()
    folders = list(dict.fromkeys([*args.policy, *(p for run in args.run for p in run)]))
    if not folders:
        parser.error("pass policies to compare: --policy <folder> ... or --run <folder> <folder> ...")
    require_policy_folders(parser, [args.base, *folders])

    from safetensors.torch import load_file

    base = load_file(Path(args.base) / WEIGHTS)
    changes = {folder: change(base, load_file(Path(folder) / WEIGHTS)) for folder in folders}
    report = geometry(changes, args.run)
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
