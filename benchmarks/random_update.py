"""A control for an RL phase's update: the same change, pointed in a random direction.

An RL phase that loses held-out points may have learnt something wrong, or its steps may be mostly the noise of a few
episodes, a walk away from the policy it started from that costs what any walk of that size would. To tell the two
apart, this writes a policy whose change from ``--base`` is the trained change (``--trained`` minus ``--base``) of
every weight matrix with its rows and columns shuffled (:func:`shuffled_change`): each matrix's change keeps its
singular values, so its size and rank, but points nowhere the training chose. Evaluate it like any policy::

    python benchmarks/random_update.py --base <warm-up>/policy --trained <draw>/checkpoints/step_000016/policy \\
        --out <folder> --seed 0
    python -m agents.eval env=sokoban env.max_moves=null agent=hf model=<folder> episodes=256 seed=10000 \\
        sampling_seed=0 temperature=0.7 max_new_tokens=32 max_turns=3 out=<folder>/held_out.jsonl

A shuffled change that loses as much as the trained one says the trained direction was as good as a random one.
Only matrices are shuffled (a vector's change, a norm's, is kept as trained; LoRA changes none). The base's other
files (tokenizer, config) are copied beside the new weights.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from update_geometry import WEIGHTS, require_policy_folders  # a sibling script: benchmarks/ is on sys.path


def shuffled_change(change, generator):
    """``change`` ``[out, in]`` with its rows and its columns each in a random order (``generator``'s): the same
    singular values, other singular vectors. Not a matrix (fewer than 2 dimensions): returned as it is."""
    import torch

    if change.dim() < 2:
        return change
    rows = torch.randperm(change.shape[0], generator=generator)
    columns = torch.randperm(change.shape[1], generator=generator)
    return change[rows][:, columns]


def shuffled_policy(base: dict, trained: dict, seed: int) -> tuple[dict, dict]:
    """``base`` plus every tensor's trained change shuffled (:func:`shuffled_change`); returns the weights and, per
    changed tensor, the Frobenius norm of its change (equal before and after the shuffle)."""
    import torch

    if base.keys() != trained.keys():
        missing = sorted(base.keys() ^ trained.keys())[:5]
        raise ValueError(f"--base and --trained hold different tensors (first: {missing}): not one model's weights")
    generator = torch.Generator().manual_seed(seed)
    weights, norms = {}, {}
    for name in sorted(base):  # a fixed order: the same seed gives the same permutations
        change = trained[name].float() - base[name].float()
        if torch.count_nonzero(change) == 0:
            weights[name] = base[name]
            continue
        norms[name] = float(change.norm())
        moved = base[name].float() + shuffled_change(change, generator)
        weights[name] = moved.to(base[name].dtype).contiguous()
    return weights, norms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the policy the RL phase started from (a model folder)")
    parser.add_argument("--trained", required=True, help="the RL phase's policy (a model folder of the same model)")
    parser.add_argument("--out", required=True, help="a new folder for the shuffled policy")
    parser.add_argument("--seed", type=int, default=0, help="the permutations' seed")
    args = parser.parse_args()
    base_dir, trained_dir, out = Path(args.base), Path(args.trained), Path(args.out)
    require_policy_folders(parser, [base_dir, trained_dir])
    if out.exists():
        parser.error(f"{out} exists: pass a new folder")

    from safetensors.torch import load_file, save_file

    weights, norms = shuffled_policy(load_file(base_dir / WEIGHTS), load_file(trained_dir / WEIGHTS), args.seed)
    shutil.copytree(base_dir, out, ignore=shutil.ignore_patterns(WEIGHTS, "COMPLETE"))
    save_file(weights, out / WEIGHTS, metadata={"format": "pt"})
    summary = {"base": str(base_dir), "trained": str(trained_dir), "seed": args.seed, "changed_tensors": len(norms),
               "change_norm": sum(n * n for n in norms.values()) ** 0.5}  # fmt: skip
    (out / "random_update.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
