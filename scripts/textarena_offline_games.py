"""Which TextArena games play offline: try every registered game and write envs/adapters/data/textarena_offline.json.

    python scripts/textarena_offline_games.py [--steps 5] [--timeout-s 30] [--out envs/adapters/data/...json]

For every TextArena game configuration (``textarena.envs.registration.ENV_REGISTRY`` without the
``-raw``/``-train`` wrapper variants) this builds :class:`envs.adapters.textarena.TextArenaEnv`, resets it with
seed 0 and plays up to ``--steps`` moves (a move the game accepts where one is found, else ``[0]``).
A game works offline when all of that succeeds; otherwise its failure is recorded with a kind
(``nltk_data``, ``api_key``, ``internet``, ``players``, ``python_version``, ``broken_release``,
``timeout``, ``error``) and the reason. Run it with the network unavailable to get the offline list.
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
DEFAULT_OUT = ROOT / "envs" / "adapters" / "data" / "textarena_offline.json"


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def try_game(game_id: str, steps: int) -> dict[str, Any]:
    """``{"players": n, "moves": k, "ended": bool}`` for a game that works, else ``{"kind", "reason"}``."""
    from envs.adapters.textarena import TextArenaEnv, UnavailableGameError

    try:
        env = TextArenaEnv(game=game_id)
    except UnavailableGameError as exc:
        return {"kind": exc.kind, "reason": exc.reason}
    env.reset(seed=0)
    moves = 0
    while not env.episode_over and moves < steps:
        actions = env.valid_actions()
        env.step(actions[int(env.np_random.integers(len(actions)))] if actions else "[0]")
        moves += 1
    return {"players": env.num_players, "moves": moves, "ended": env.episode_over}


def survey(steps: int, timeout_s: int) -> dict[str, Any]:
    import textarena

    from envs.adapters.textarena_games import game_ids

    signal.signal(signal.SIGALRM, _on_alarm)
    working: dict[str, Any] = {}
    unavailable: dict[str, Any] = {}
    for game_id in game_ids():
        signal.alarm(timeout_s)
        try:
            result = try_game(game_id, steps)
        except _Timeout:
            result = {"kind": "timeout", "reason": f"did not build, reset and play {steps} moves within {timeout_s} s"}
        except Exception as exc:  # a game that crashes while playing: recorded, the survey goes on
            result = {"kind": "error", "reason": f"{type(exc).__name__} while playing: {str(exc)[:200]}"}
        finally:
            signal.alarm(0)
        (unavailable if "kind" in result else working)[game_id] = result
        print(f"{game_id}: {result.get('kind', 'ok')}", file=sys.stderr, flush=True)
    return {
        "textarena_version": textarena.__version__,
        "python": platform.python_version(),
        "generated_by": "scripts/textarena_offline_games.py",
        "counts": _counts(working, unavailable),
        "working": working,
        "unavailable": unavailable,
    }


def _counts(working: dict[str, Any], unavailable: dict[str, Any]) -> dict[str, Any]:
    def base(ids: Any) -> list[str]:
        return [i for i in ids if i.endswith("-v0")]

    return {
        "configurations": len(working) + len(unavailable),
        "working": len(working),
        "base_games": len(base(working)) + len(base(unavailable)),
        "base_games_working": len(base(working)),
        "working_by_players": dict(sorted(Counter(str(w["players"]) for w in working.values()).items())),
        "unavailable_by_kind": dict(sorted(Counter(u["kind"] for u in unavailable.values()).items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="moves played per game (default 5)")
    parser.add_argument("--timeout-s", type=int, default=30, help="seconds per game (default 30)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output JSON (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    report = survey(args.steps, args.timeout_s)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    counts = report["counts"]
    print(
        f"{counts['working']} of {counts['configurations']} configurations work offline "
        f"({counts['base_games_working']} of {counts['base_games']} base -v0 games) in "
        f"{time.perf_counter() - start:.0f} s; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
