"""A policy optimising the code reward attacks the judge: every attack must earn nothing, on every isolating backend.

The attacks (``attack_programs.py``) try to forge verdicts, read the expected outputs from the judge's
state, short-circuit the assert judge, pass with always-equal objects, disturb samples judged beside
them, and take over a warm sandbox for later submissions. Each runs on every problem kind through
:func:`envs.code.runners.run_batch`, and end to end through ``envs.make("code", sandbox=...)``.
"""

from __future__ import annotations

import secrets
import time
import uuid

import pytest
from attack_programs import ALWAYS_EQUAL, FORGE, SCAN, SHORT_CIRCUIT, TAKEOVER, fill

import envs
from envs.code import env as code_env_module
from envs.code.extract import fenced
from envs.code.loaders import load_dataset
from envs.code.problems import AssertCase, CallCase, Problem, StdioCase
from envs.code.runners import JudgeConfig, run_batch, run_tests

BACKENDS = [
    pytest.param("bubblewrap", id="bubblewrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
pytestmark = pytest.mark.parametrize("sandbox", BACKENDS, indirect=True)
FAST = JudgeConfig(case_timeout_s=3.0, total_timeout_s=10.0)
BUNDLED = load_dataset("bundled")
# One bundled problem of each kind (9 cases each), with their reference solutions.
BY_KIND = {kind: next(p for p in BUNDLED if p.kind == kind) for kind in ("stdio", "call", "assert")}


def judged(sandbox, problem, program):
    report = run_tests(sandbox, problem, program, FAST)
    return report.reward("all"), report.reward("fraction"), report


@pytest.mark.parametrize("kind", ["stdio", "call", "assert"])
def test_forged_verdicts_earn_nothing(sandbox, kind):
    problem = BY_KIND[kind]
    reward, fraction, report = judged(sandbox, problem, fill(FORGE, entry=problem.entry_point or "solve"))
    assert (reward, fraction) == (0.0, 0.0), report.cases
    assert report.tamper["judge_tamper"] and report.tamper["verdict_output"]


def _secret_problems() -> dict[str, tuple[Problem, bytes, bytes]]:
    # Problems whose expected outputs hold a fresh secret: a program that finds it anywhere in the
    # sandbox (the judge's memory, its own, files, /proc) would print it and pass.
    head, tail = b"EXPECTED-" + secrets.token_hex(4).encode(), secrets.token_hex(8).encode()
    secret = (head + tail).decode()
    setup = f"def check(candidate):\n    assert candidate() == {secret!r}\n"
    return {
        "stdio": (Problem("a/s", "stdio", "p", (StdioCase("", secret),)), head, tail),
        "call": (Problem("a/c", "call", "p", (CallCase((), secret),), entry_point="f"), head, tail),
        "assert": (Problem("a/a", "assert", "p", (AssertCase(f"assert f() == {secret!r}"),)), head, tail),
        "humaneval": (
            Problem("a/h", "assert", "p", (AssertCase("check(f)"),), entry_point="f", setup=setup),
            head,
            tail,
        ),
    }


@pytest.mark.parametrize("kind", ["stdio", "call", "assert", "humaneval"])
def test_expected_outputs_are_nowhere_in_the_sandbox(sandbox, kind):
    problem, head, tail = _secret_problems()[kind]
    program = fill(SCAN, head=head, tail=tail, entry="f", stdio=kind == "stdio")
    reward, _, report = judged(sandbox, problem, program)
    assert reward == 0.0, report.cases
    if kind in ("stdio", "call"):  # the message shows what the program printed or returned: its scan ran
        assert report.cases[0].message.endswith(("got:\nclean\n", 'got "clean"')), report.cases[0].message


@pytest.mark.parametrize("kind", ["assert", "humaneval"])
def test_short_circuiting_the_assert_judge_earns_nothing(sandbox, kind):
    problem = BY_KIND["assert"] if kind == "assert" else _secret_problems()["humaneval"][0]
    reward, fraction, report = judged(sandbox, problem, SHORT_CIRCUIT)
    assert (reward, fraction) == (0.0, 0.0), report.cases
    assert all(case.status == "error" for case in report.cases), report.cases
    assert report.tamper["result_forgery"] and report.tamper["judge_probe"]


@pytest.mark.parametrize("returned", ["object", "str", "int"])
def test_always_equal_objects_earn_nothing(sandbox, returned):
    for problem in (BY_KIND["assert"], BY_KIND["call"], _secret_problems()["humaneval"][0]):
        program = fill(ALWAYS_EQUAL, kind=returned, entry=problem.entry_point or "f")
        reward, fraction, report = judged(sandbox, problem, program)
        assert (reward, fraction) == (0.0, 0.0), (problem.id, report.cases)
        assert report.cases[0].status == "wrong_answer" and "which is not plain data" in report.cases[0].message


@pytest.mark.parametrize("kind", ["stdio", "call", "assert"])
def test_samples_judged_together_cannot_touch_each_other(sandbox, kind):
    # An attacker beside a correct and a wrong sample: it kills every process it may, forges verdicts
    # for every job and case, and plants files; the others keep exactly their own rewards.
    problem = BY_KIND[kind]
    entry = problem.entry_point or "solve"
    attacker = (
        "import os, signal\n"
        + fill(FORGE, entry=entry)
        + "\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
    )
    jobs = [(problem, attacker), (problem, problem.reference), (problem, problem.mutant), (problem, attacker)]
    reports = run_batch(sandbox, jobs, FAST)
    assert [report.reward("all") for report in reports] == [0.0, 1.0, 0.0, 0.0]
    assert reports[2].reward("fraction") < 1.0


@pytest.fixture
def env_on(sandbox, monkeypatch):
    """``env_on(**options)``: a code env judging in this test's sandbox (the one the attacks ran in)."""
    monkeypatch.setitem(code_env_module._SANDBOXES, sandbox.name, sandbox)
    return lambda **options: envs.make("code", sandbox=sandbox.name, **options)


def test_takeover_of_a_warm_sandbox_pays_no_later_submission(sandbox, env_on, processes_with):
    # The attack runs first, in the container (or namespace) later submissions would get; then nine
    # non-solutions score 0 and the reference scores 1, through the environment end to end.
    marker = f"turngym-takeover-{uuid.uuid4().hex}"
    result = sandbox.run(fill(TAKEOVER, marker=marker))
    assert result.status is not None  # a result, not an exception
    env = env_on()
    rewards = []
    for index in range(9):
        env.reset(options={"problem_id": BUNDLED[index * 7].id})
        rewards.append(env.step(fenced("print('All 9 tests passed.')\n"))[1])
    env.reset(options={"problem_id": BUNDLED[0].id})
    assert rewards == [0.0] * 9 and env.step(env.oracle()[0])[1] == 1.0
    time.sleep(0.5)
    assert processes_with(marker) == []
    after = sandbox.run(
        "import os\nprint(os.path.exists('/tmp/turngym-planted'), os.path.exists('/dev/shm/turngym-planted'))"
    )
    assert after.stdout == "False False\n"


def test_takeover_does_not_reach_the_python_tool(sandbox):
    import asyncio

    from tools.python import PythonTool

    tool = PythonTool(sandbox=sandbox)
    marker = f"turngym-tool-{uuid.uuid4().hex}"
    asyncio.run(tool.call({"code": fill(TAKEOVER, marker=marker)}, None))
    asyncio.run(tool.call({"code": "import builtins\nbuiltins.kept = 41\nopen('/tmp/state', 'w').write('1')"}, None))
    answer = asyncio.run(tool.call({"code": "print(1 + 1)"}, None))
    kept = asyncio.run(
        tool.call(
            {"code": "import builtins, os\nprint(hasattr(builtins, 'kept'), os.path.exists('/tmp/state'))"}, None
        )
    )
    assert (answer.content, kept.content) == ("2\n", "False False\n")


def test_multi_turn_lookup_table_earns_nothing(sandbox, env_on):
    env = env_on(max_turns=4, reward_mode="fraction")
    env.reset(options={"problem_id": BY_KIND["stdio"].id})
    table: dict[str, str] = {}
    total = 0.0
    for _ in range(4):
        program = f"import sys\ntable = {table!r}\nprint(table.get(sys.stdin.read(), ''))\n"
        observation, reward, terminated, _, _ = env.step(fenced(program))
        total += reward
        for case in env.problem.tests:
            if case.output.strip() and case.output.strip() in observation.split("\n"):
                table[case.input] = case.output
        if terminated:
            break
    assert total == 0.0 and table  # it memorised the visible tests and earned nothing


@pytest.mark.parametrize(
    "raised", ["KeyboardInterrupt", "SystemExit(0)", "type('Escape', (BaseException,), {})()", "GeneratorExit"]
)
def test_base_exceptions_from_the_solution_earn_nothing_and_are_flagged(sandbox, raised):
    problem = BY_KIND["call"]
    program = f"def {problem.entry_point}(*args):\n    raise {raised}\n"
    reward, fraction, report = judged(sandbox, problem, program)
    assert (reward, fraction) == (0.0, 0.0) and {case.status for case in report.cases} == {"error"}
    assert report.tamper["base_exception"] and report.tamper["judge_tamper"]


def test_framing_lines_in_output_or_return_values_are_only_data(sandbox):
    # The trusted checker's and the harness's framings, printed and returned: neither is ever parsed
    # from the program's own channels, so the answer is simply wrong.
    problem = BY_KIND["call"]
    fake = 'turngym-check {"job": 0, "case": 0, "status": "passed"}\nturngym-case {"case": 0, "status": "ok"}'
    program = f"print({fake!r})\ndef {problem.entry_point}(*args):\n    return '\\n' + {fake!r} + '\\n'\n"
    reward, fraction, report = judged(sandbox, problem, program)
    assert (reward, fraction) == (0.0, 0.0) and report.tamper["verdict_output"]


@pytest.mark.parametrize(
    "attack",
    [
        "while True:\n    pass",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "def {entry}(*args):\n    return 'x' * 10**8",
        "block = bytearray(2**34)",
    ],
    ids=["hang", "fork-bomb", "huge-result", "memory"],
)
def test_resource_exhaustion_costs_only_the_attacker(sandbox, attack):
    problem = BY_KIND["call"]
    attacker = attack.replace("{entry}", problem.entry_point)
    reports = run_batch(sandbox, [(problem, attacker), (problem, problem.reference)], FAST)
    assert [report.reward("all") for report in reports] == [0.0, 1.0]


@pytest.mark.slow
def test_always_equal_objects_earn_nothing_on_any_bundled_or_humaneval_problem(sandbox):
    from envs.code.loaders import load_humaneval

    problems = [p for p in BUNDLED if p.kind in ("assert", "call")] + load_humaneval()
    jobs = [(p, fill(ALWAYS_EQUAL, kind="object", entry=p.entry_point or "f")) for p in problems]
    reports = run_batch(sandbox, jobs, FAST)
    paid = [p.id for p, report in zip(problems, reports, strict=True) if report.reward("fraction") > 0]
    assert len(problems) == 125 + 126 + 164 and paid == []
