"""Generate the bundled problem set, deterministically: ``python -m envs.code.bundled.generate``.

Every family variant (:mod:`envs.code.bundled.families_text`, ``families_lists``, ``families_math``)
becomes one problem; its kind cycles through stdio, call and assert with the family's position and the
variant's index, so that every family appears in every kind. For each problem:

1. the test arguments are the family's edge cases and ``num_random`` draws from a
   :class:`random.Random` seeded with ``"<family>/<variant>"`` (duplicates dropped);
2. the expected values come from running the reference function here (it is our own code);
3. the mutant is the first single-point mutation of the function (:func:`envs.code.mutate.mutants`,
   in an order shuffled by the same seed) whose results differ from the reference on some case.

The output, ``envs/code/data/bundled.jsonl``, is byte-identical on every run with the same sources.
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import resource
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from string import Template
from typing import Any

from envs.code.bundled.families_lists import LIST_FAMILIES
from envs.code.bundled.families_math import MATH_FAMILIES
from envs.code.bundled.families_text import TEXT_FAMILIES
from envs.code.bundled.render import prompt_for, reference_program, substitute_args, tests_for
from envs.code.bundled.spec import Family
from envs.code.mutate import mutants
from envs.code.problems import KINDS, Problem, dump_jsonl

__all__ = ["BUNDLED_PATH", "FAMILIES", "build_problems", "main"]

FAMILIES: list[Family] = [*TEXT_FAMILIES, *LIST_FAMILIES, *MATH_FAMILIES]
BUNDLED_PATH = Path(__file__).resolve().parents[1] / "data" / "bundled.jsonl"
_MUTANT_CALL_TIMEOUT_S = 1.0
_ADDRESS_SPACE_BYTES = 4 << 30


def build_problems(families: list[Family] = FAMILIES) -> list[Problem]:
    """Every variant of every family as a :class:`Problem`, in a fixed order."""
    problems = []
    for family_index, family in enumerate(families):
        for variant_index, params in enumerate(family.variants):
            kind = KINDS[(family_index + variant_index) % len(KINDS)]
            problems.append(build_problem(family, variant_index, params, kind))
    return problems


def build_problem(family: Family, variant_index: int, params: dict[str, Any], kind: str) -> Problem:
    seed = f"{family.name}/{variant_index}"
    rng = random.Random(seed)
    source = Template(family.source).substitute(params).strip("\n") + "\n"
    function = _load_function(source, family.function)
    cases = []
    seen = set()
    for values in [*family.edge_cases(params), *(family.make_args(rng, params) for _ in range(family.num_random))]:
        values = substitute_args(tuple(values), family.args)
        if repr(values) in seen:
            continue
        seen.add(repr(values))
        cases.append((values, function(*copy.deepcopy(values))))
    tests = tests_for(kind, family.function, cases, family.args, family.result)
    mutant_source = _first_failing_mutant(source, family.function, cases, rng)
    doc = Template(family.doc).substitute(params)
    uses_float = family.result == "float"
    return Problem(
        id=f"bundled/{family.name}/{variant_index}",
        kind=kind,
        prompt=prompt_for(kind, family.function, family.args, family.result, doc, tests),
        tests=tests,
        reference=reference_program(kind, family.function, source, family.args, family.result),
        entry_point=family.function,
        setup="import math\n" if kind == "assert" and uses_float else "",
        float_tol=1e-6 if uses_float and kind != "assert" else None,
        mutant=reference_program(kind, family.function, mutant_source, family.args, family.result),
        source="bundled",
        tags=(family.topic, family.name),
    )


def _load_function(source: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _first_failing_mutant(source: str, name: str, cases: list[tuple[tuple, Any]], rng: random.Random) -> str:
    candidates = list(mutants(source, within=name))
    rng.shuffle(candidates)
    for candidate in candidates:
        if not _agrees(candidate, name, cases):
            return candidate
    raise RuntimeError(f"no mutant of {name} fails its tests; add test cases to the family")


def _agrees(candidate: str, name: str, cases: list[tuple[tuple, Any]]) -> bool:
    """Whether the candidate returns the expected value on every case (errors and time-outs disagree)."""
    try:
        function = _load_function(candidate, name)
        for values, expected in cases:
            with _time_limit(_MUTANT_CALL_TIMEOUT_S):
                got = function(*copy.deepcopy(values))
            if not _same(got, expected):
                return False
    except Exception:
        return False
    return True


def _same(got: Any, expected: Any) -> bool:
    if isinstance(expected, float):
        return isinstance(got, (int, float)) and math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6)
    return type(got) is type(expected) and got == expected


class _CallTimeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def interrupt(signum: int, frame: Any) -> None:
        raise _CallTimeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BUNDLED_PATH, help="where to write the JSONL file")
    args = parser.parse_args(argv)
    # Mutants run in this process: a runaway one must hit MemoryError here, not exhaust the machine.
    resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE_BYTES, resource.getrlimit(resource.RLIMIT_AS)[1]))
    problems = build_problems()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    dump_jsonl(problems, args.out)
    counts = {kind: sum(p.kind == kind for p in problems) for kind in KINDS}
    print(f"wrote {len(problems)} problems to {args.out} ({', '.join(f'{k}: {n}' for k, n in counts.items())})")


if __name__ == "__main__":
    main()
