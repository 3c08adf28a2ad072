"""The vocabulary head's forward and backward with a frozen head: gradients made in the forward against logits
made again in the backward.

    python benchmarks/head_gradients.py                      # SmolLM2's head shape, 2 threads, 5 rounds
    python benchmarks/head_gradients.py --positions 96 1536 --entropy-grad

:func:`trainer.algos.chunked_token_logprobs` on SmolLM2-135M-Instruct's head shape (576 hidden, 49,152 tokens;
random float32 weights: the time depends on the shapes only) with the head frozen, as under LoRA, for each
``--positions`` count (96: one default reply's row of a micro-batch; 1,536: a step's 16 episodes x 3 turns x 32
tokens). Two ways, alternating in rounds after one warm-up round: ``early`` (the default: the forward makes each
position's gradient vectors, the backward makes no logits) and ``recomputed`` (the backward makes each chunk's
logits again, the only way before; forced here). Both must give the same gradient (checked). ``--entropy-grad``
differentiates the entropy too (an entropy bonus), where ``early`` makes a third product in the forward.

Figures: mean seconds of a forward and backward for each, ``recomputed`` over ``early``. JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from unittest import mock

import torch

import trainer.algos.chunked_logits as chunked

HIDDEN, VOCAB = 576, 49_152


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, nargs="+", default=[96, 384, 1536])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--entropy-grad", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(VOCAB, HIDDEN, generator=generator) * 0.05

    def run(hidden: torch.Tensor, targets: torch.Tensor, coef: torch.Tensor, early: bool) -> torch.Tensor:
        hidden = hidden.clone().requires_grad_()
        with mock.patch.object(chunked, "_gradients_in_forward", lambda *a: early and torch.is_grad_enabled()):
            logprobs, entropy = chunked.chunked_token_logprobs(
                hidden,
                weight,
                None,
                targets,
                temperature=0.7,
                chunk_size=args.chunk_size,
                entropy=True,
                entropy_grad=args.entropy_grad,
            )
            loss = (logprobs * coef).sum() + (0.01 * entropy.sum() if args.entropy_grad else 0.0)
            loss.backward()
        return hidden.grad

    results = []
    for n in args.positions:
        hidden = torch.randn(n, HIDDEN, generator=generator)
        targets = torch.randint(0, VOCAB, (n,), generator=generator)
        coef = torch.randn(n, generator=generator)
        times: dict[str, list[float]] = {"early": [], "recomputed": []}
        grads: dict[str, torch.Tensor] = {}
        for repeat in range(args.rounds + 1):  # the first round warms up
            for name in times:
                started = time.perf_counter()
                grads[name] = run(hidden, targets, coef, name == "early")
                if repeat:
                    times[name].append(time.perf_counter() - started)
        difference = float((grads["early"] - grads["recomputed"]).abs().max())
        scale = float(grads["recomputed"].abs().max())
        if difference > 1e-4 * scale:
            raise SystemExit(f"{n} positions: the two gradients differ by {difference:.3g} (largest {scale:.3g})")
        early, recomputed = statistics.fmean(times["early"]), statistics.fmean(times["recomputed"])
        results.append(
            {
                "positions": n,
                "early_s": early,
                "recomputed_s": recomputed,
                "recomputed_over_early": recomputed / early,
                "rounds_s": times,
                "max_gradient_difference": difference,
            }
        )
    print(json.dumps({"threads": args.threads, "entropy_grad": args.entropy_grad, "results": results}, indent=1))


if __name__ == "__main__":
    main()
