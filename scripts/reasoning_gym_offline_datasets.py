"""Which reasoning-gym datasets run offline: try every one and write envs/adapters/data/reasoning_gym_offline.json.

    python scripts/reasoning_gym_offline_datasets.py [--seeds 2] [--timeout-s 120] [--out envs/adapters/data/...json]

For every dataset reasoning-gym registers, this builds :class:`envs.adapters.reasoning_gym.ReasoningGymEnv` (with
the configuration in ``CONFIGS`` where the dataset has no usable default) and, for each of ``--seeds``
seeds: resets it, checks that a second, fresh environment generates the same question from the same
seed, answers with the dataset's own answer (where it has one) expecting a score of 1, and answers
``<answer>turngym-wrong-answer</answer>`` expecting less. A dataset works offline when all of that
succeeds; otherwise its failure is recorded with a kind (``generation``, ``broken_verifier`` (refused by
the adapter, see ``BROKEN_VERIFIERS``), ``nondeterministic``, ``oracle``, ``wrong_answer``, ``timeout``,
``error``) and the reason. Run it with the network unavailable.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "envs" / "adapters" / "data" / "reasoning_gym_offline.json"
WRONG_ANSWER = "<answer>turngym-wrong-answer</answer>"
#: Datasets whose default configuration cannot generate: the configuration the survey uses instead.
CONFIGS: dict[str, dict[str, Any]] = {
    "composite": {"datasets": [{"name": "basic_arithmetic", "weight": 1.0, "config": {}}]},
}


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def try_dataset(name: str, seeds: int) -> dict[str, Any]:
    """``{"category", "oracle", "seconds"}`` for a dataset that works, else ``{"kind", "reason"}``."""
    from envs.adapters.reasoning_gym import ReasoningGymEnv, UnavailableDatasetError

    start = time.perf_counter()
    try:
        env = ReasoningGymEnv(dataset=name, config=CONFIGS.get(name))
    except UnavailableDatasetError as exc:
        return {"kind": exc.kind, "reason": str(exc)[:300]}
    has_oracle = True
    for seed in range(seeds):
        question, _ = env.reset(seed=seed)
        if ReasoningGymEnv(dataset=name, config=CONFIGS.get(name)).reset(seed=seed)[0] != question:
            return {"kind": "nondeterministic", "reason": f"seed {seed} gave two different questions"}
        plan = env.oracle()
        has_oracle = has_oracle and plan is not None
        if plan is not None:
            _, reward, _, _, info = env.step(plan[0])
            if reward != 1.0:
                return {"kind": "oracle", "reason": f"seed {seed}: the dataset's answer scored {info['score']}"}
            env.reset(seed=seed)
        _, _, _, _, info = env.step(WRONG_ANSWER)
        if info["score"] >= 1.0:
            return {"kind": "wrong_answer", "reason": f"seed {seed}: {WRONG_ANSWER} scored {info['score']}"}
    category = type(env._generator).__module__.split(".")[1]
    result = {"category": category, "oracle": has_oracle, "seconds": round(time.perf_counter() - start, 2)}
    if name in CONFIGS:
        result["config"] = CONFIGS[name]
    return result


def survey(seeds: int, timeout_s: int) -> dict[str, Any]:
    from envs.adapters.reasoning_gym import REASONING_GYM_VERSION, dataset_names

    signal.signal(signal.SIGALRM, _on_alarm)
    working: dict[str, Any] = {}
    unavailable: dict[str, Any] = {}
    for name in dataset_names():
        signal.alarm(timeout_s)
        try:
            result = try_dataset(name, seeds)
        except _Timeout:
            result = {"kind": "timeout", "reason": f"did not build and play {seeds} seeds within {timeout_s} s"}
        except Exception as exc:  # a dataset that crashes while playing: recorded, the survey goes on
            result = {"kind": "error", "reason": f"{type(exc).__name__} while playing: {str(exc)[:200]}"}
        finally:
            signal.alarm(0)
        (unavailable if "kind" in result else working)[name] = result
        print(f"{name}: {result.get('kind', 'ok')}", file=sys.stderr, flush=True)
    return {
        "reasoning_gym_version": REASONING_GYM_VERSION,
        "python": platform.python_version(),
        "generated_by": "scripts/reasoning_gym_offline_datasets.py",
        "counts": {
            "datasets": len(working) + len(unavailable),
            "working": len(working),
            "working_with_oracle": sum(1 for w in working.values() if w["oracle"]),
            "working_by_category": dict(sorted(Counter(w["category"] for w in working.values()).items())),
            "unavailable_by_kind": dict(sorted(Counter(u["kind"] for u in unavailable.values()).items())),
        },
        "working": working,
        "unavailable": unavailable,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds tried per dataset (default 2)")
    parser.add_argument("--timeout-s", type=int, default=120, help="seconds per dataset (default 120)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output JSON (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    report = survey(args.seeds, args.timeout_s)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    counts = report["counts"]
    print(
        f"{counts['working']} of {counts['datasets']} datasets work offline ({counts['working_with_oracle']} with "
        f"an answer for the oracle) in {time.perf_counter() - start:.0f} s; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
