"""The running batch's layout in a rollout: this checkout's against another's, alternating, in one process.

    git show <commit>:agents/engines/hf_kv.py > /tmp/hf_kv_before.py
    python benchmarks/running_batch.py --baseline /tmp/hf_kv_before.py --rounds 4

Both play ``benchmarks/rollout.py``'s turngym loop (16 five-turn Sokoban episodes through the
``hf`` engine, replies of up to 32 tokens at temperature 1.0) with a sampling seed, so both generate the same
tokens (the script checks it) and differ only in the :class:`~agents.engines.hf_kv.RunningBatch` the engine
decodes with: the baseline module's class is swapped in for it. The order alternates round by round.

Reported per configuration and round: the rollout's wall time, the engine's decode and prefill seconds, the
running batch's reallocations (how many, and their seconds) and the key/value columns its decode steps read against
those holding a real token (the rest are holes of shorter rows, or columns no running row uses).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

from rollout import play_inprocess

from agents.chat import ChatRenderer
from agents.engines import hf, hf_kv
from agents.models import load_model, load_tokenizer


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location("running_batch_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Counted:
    """Wraps a RunningBatch class's reallocations and decode-step masks to count them."""

    def __init__(self, cls: type):
        self.cls = type(f"Counted{cls.__name__}", (cls,), {})
        self.reallocations, self.reallocation_s, self.read, self.real = 0, 0.0, 0, 0
        counter = self

        def _reallocate(batch, *args, **kwargs):
            started = time.perf_counter()
            cls._reallocate(batch, *args, **kwargs)
            counter.reallocations += 1
            counter.reallocation_s += time.perf_counter() - started

        def step_inputs(batch):
            cache, mask = cls.step_inputs(batch)
            counter.read += mask.numel()
            counter.real += int(mask.sum())
            return cache, mask

        self.cls._reallocate, self.cls.step_inputs = _reallocate, step_inputs

    def reset(self) -> None:
        self.reallocations, self.reallocation_s, self.read, self.real = 0, 0.0, 0, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="an hf_kv.py of another checkout")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    configurations = {
        "baseline": Counted(load_module(args.baseline).RunningBatch),
        "this": Counted(hf_kv.RunningBatch),
    }
    model, tokenizer = load_model(args.model), load_tokenizer(args.model)
    renderer = ChatRenderer(tokenizer)
    results, tokens = [], {}
    for round_ in range(args.rounds):
        names = ["baseline", "this"] if round_ % 2 == 0 else ["this", "baseline"]
        for name in names:
            counter = configurations[name]
            counter.reset()
            hf.RunningBatch = counter.cls
            seconds, stats, trajectories = asyncio.run(
                play_inprocess(model, renderer, list(range(args.episodes)), 32, 0)
            )
            extra = stats.extra
            responses = [t.response_ids for t in trajectories]
            tokens.setdefault("first", responses)
            if responses != tokens["first"]:
                raise SystemExit(f"round {round_}: {name} generated other tokens than the first rollout")
            result = {
                "configuration": name,
                "round": round_,
                "seconds": seconds,
                "decode_s": extra["decode_seconds"],
                "prefill_s": extra["prefill_seconds"],
                "generated_tokens": sum(t.num_sampled_tokens for t in trajectories),
                "reallocations": counter.reallocations,
                "reallocation_s": counter.reallocation_s,
                "columns_read": counter.read,
                "columns_real": counter.real,
            }
            results.append(result)
            print(json.dumps(result), flush=True)
    print("\nmean over rounds: wall / decode / prefill s, reallocations (s), share of read columns holding a token")
    for name in configurations:
        rows = [r for r in results if r["configuration"] == name]
        numbers = [key for key in rows[0] if key not in ("configuration", "round")]
        mean = {key: statistics.fmean(r[key] for r in rows) for key in numbers}
        print(
            f"{name:9s} {mean['seconds']:.1f} / {mean['decode_s']:.1f} / {mean['prefill_s']:.1f} s, "
            f"{mean['reallocations']:.0f} ({mean['reallocation_s']:.2f} s), "
            f"{mean['columns_real'] / mean['columns_read']:.1%} of {mean['columns_read']:,.0f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
