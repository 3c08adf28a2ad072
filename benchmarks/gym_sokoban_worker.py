"""Runs inside the gym-sokoban virtual environment (see sokoban_generation.py); imports nothing of turngym.

    python gym_sokoban_worker.py generate ROWS COLS BOXES SAMPLES TIMEOUT_S
        one JSON line per level: {"seed", "seconds", "status": ok|failed|timeout, "error", "xsb"}
    python gym_sokoban_worker.py step STEPS
        one JSON line: microseconds per env.step for each observation mode

Levels are generated the way gym-sokoban's own SokobanEnv.reset does (``generate_room`` with
``num_steps = int(1.7 * (rows + cols))``), one call per level, seeded through Python's and NumPy's
global generators (which is how gym-sokoban draws its randomness). A call that raises is a failure
(gym-sokoban's reset would print it and retry); a call longer than TIMEOUT_S is a timeout.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
import warnings

warnings.filterwarnings("ignore")  # gym 0.26 warns about its own age on import

import numpy as np  # noqa: E402
from gym_sokoban.envs.room_utils import generate_room  # noqa: E402
from gym_sokoban.envs.sokoban_env import SokobanEnv  # noqa: E402

# room_state codes: 0 wall, 1 floor, 2 target, 3 box on target, 4 box, 5 player
_XSB = {3: "*", 4: "$"}


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def to_xsb(structure, state) -> str:
    rows = []
    for i in range(state.shape[0]):
        row = ""
        for j in range(state.shape[1]):
            target = structure[i, j] == 2
            code = int(state[i, j])
            if structure[i, j] == 0:
                row += "#"
            elif code == 5:
                row += "+" if target else "@"
            else:
                row += _XSB.get(code, "." if target else " ")
        rows.append(row)
    return "\n".join(rows)


def generate(rows: int, cols: int, boxes: int, samples: int, timeout_s: int) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    for seed in range(samples):
        random.seed(seed)
        np.random.seed(seed)
        record = {"seed": seed, "status": "ok", "error": "", "xsb": ""}
        start = time.perf_counter()
        signal.alarm(timeout_s)
        try:
            structure, state, _ = generate_room(dim=(rows, cols), num_steps=int(1.7 * (rows + cols)), num_boxes=boxes)
            record["xsb"] = to_xsb(structure, state)
        except _Timeout:
            record.update(status="timeout", error=f"longer than {timeout_s} s")
        except (RuntimeError, RuntimeWarning) as exc:  # what gym-sokoban's reset catches and retries on
            record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            signal.alarm(0)
        record["seconds"] = time.perf_counter() - start
        print(json.dumps(record), flush=True)


def step(steps: int) -> None:
    random.seed(0)
    np.random.seed(0)
    env = SokobanEnv(dim_room=(6, 6), num_boxes=1, max_steps=10**9)
    result = {}
    for mode in ("rgb_array", "tiny_rgb_array"):
        start = time.perf_counter()
        for i in range(steps):
            env.step(1 + i % 4, observation_mode=mode)  # push up/down/left/right in turn
        result[mode] = (time.perf_counter() - start) / steps * 1e6
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(*(int(a) for a in sys.argv[2:7]))
    elif sys.argv[1] == "step":
        step(int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}; use generate or step")
