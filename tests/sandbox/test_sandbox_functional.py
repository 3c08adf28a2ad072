"""Behaviour every backend shares: stdin, files, exit codes, Unicode, statuses, concurrency."""

from __future__ import annotations

import asyncio

import pytest

from sandbox import ExecResult, Limits, Status

BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bubblewrap", id="bubblewrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
pytestmark = pytest.mark.parametrize("sandbox", BACKENDS, indirect=True)
QUICK = Limits(wall_time_s=5.0, cpu_time_s=5.0)


def test_stdin_reaches_the_program_and_stdout_comes_back(sandbox):
    program = "import sys\nnumbers = [int(x) for x in sys.stdin.read().split()]\nprint(sum(numbers), max(numbers))"
    result = sandbox.run(program, stdin="3 14 15\n92 6\n", limits=QUICK)
    # 3 + 14 + 15 + 92 + 6 = 130, the largest is 92
    assert result == ExecResult(Status.OK, 0, "130 92\n", "", result.wall_time_s)
    assert result.ok and 0 < result.wall_time_s < 5


def test_files_are_in_the_work_dir_and_importable(sandbox):
    files = {
        "helper.py": "def double(x):\n    return 2 * x\n",
        "data/blob.bin": bytes([0, 255, 7]),
        "note.txt": "héllo",
    }
    program = (
        "import helper, os\n"
        "print(helper.double(21))\n"
        "print(list(open('data/blob.bin', 'rb').read()))\n"
        "print(open('note.txt', encoding='utf-8').read())\n"
        "print(sorted(os.listdir('.')))\n"
    )
    result = sandbox.run(program, files=files, limits=QUICK)
    assert result.status is Status.OK, result.stderr
    assert result.stdout == "42\n[0, 255, 7]\nhéllo\n['data', 'helper.py', 'main.py', 'note.txt']\n"


def test_work_dir_is_fresh_for_every_run(sandbox):
    first = sandbox.run("open('left.txt', 'w').write('x'); import os; print(sorted(os.listdir('.')))", limits=QUICK)
    second = sandbox.run("import os; print(sorted(os.listdir('.')))", limits=QUICK)
    assert first.stdout == "['left.txt', 'main.py']\n"
    assert second.stdout == "['main.py']\n"


@pytest.mark.parametrize("code", [0, 1, 3, 42])
def test_exit_codes(sandbox, code):
    result = sandbox.run(f"import sys; sys.exit({code})", limits=QUICK)
    assert result.exit_code == code
    assert result.status is (Status.OK if code == 0 else Status.RUNTIME_ERROR)


def test_uncaught_exception_is_a_runtime_error_with_its_traceback(sandbox):
    result = sandbox.run("print('before')\nraise ValueError('bad input 7')", limits=QUICK)
    assert (result.status, result.exit_code, result.stdout) == (Status.RUNTIME_ERROR, 1, "before\n")
    assert result.stderr.rstrip().endswith("ValueError: bad input 7")
    assert 'main.py", line 2' in result.stderr


def test_unicode_round_trips_through_stdin_stdout_and_stderr(sandbox):
    text = "Zoë 中文 مرحبا 😀 \u200d"
    program = "import sys\ns = sys.stdin.read()\nprint(s[::-1])\nprint(len(s), file=sys.stderr)"
    result = sandbox.run(program, stdin=text, limits=QUICK)
    assert result.stdout == text[::-1] + "\n"
    assert result.stderr == f"{len(text)}\n"  # 16 code points


def test_invalid_utf8_output_is_replaced_not_fatal(sandbox):
    result = sandbox.run("import sys; sys.stdout.buffer.write(b'ok\\xff\\xfe!')", limits=QUICK)
    assert result.ok and result.stdout == "ok\ufffd\ufffd!"


def test_large_stdin_is_delivered_completely(sandbox):
    payload = "x" * 3_000_000 + "\n"  # far beyond a pipe buffer (64 KiB)
    result = sandbox.run("import sys; print(len(sys.stdin.read()))", stdin=payload, limits=QUICK)
    assert result.stdout == "3000001\n"


def test_program_ignoring_stdin_is_fine(sandbox):
    result = sandbox.run("print('no read')", stdin="y" * 1_000_000, limits=QUICK)
    assert result.ok and result.stdout == "no read\n"


def test_wall_time_limit(sandbox):
    result = sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(30)", limits=Limits(wall_time_s=3.0))
    assert (result.status, result.exit_code, result.stdout) == (Status.TIMEOUT, None, "started\n")
    assert 3.0 <= result.wall_time_s < 8.0


def test_cpu_time_limit(sandbox):
    result = sandbox.run("while True:\n    pass", limits=Limits(wall_time_s=20.0, cpu_time_s=1.0))
    assert result.status is Status.TIMEOUT
    assert result.wall_time_s < 10.0  # SIGXCPU at 1 s of CPU, well before the wall limit


def test_memory_error_is_status_memory(sandbox):
    result = sandbox.run("block = bytearray(2 * 1024**3)", limits=Limits(memory_mb=256))
    assert result.status is Status.MEMORY and result.exit_code == 1


def test_output_flood_is_capped(sandbox):
    limits = Limits(wall_time_s=10.0, max_output_bytes=10_000)
    result = sandbox.run("while True:\n    print('y' * 99)", limits=limits)
    assert (result.status, result.stdout_truncated, result.stderr_truncated) == (Status.OUTPUT_LIMIT, True, False)
    assert len(result.stdout.encode()) == 10_000 and result.stdout.startswith("y" * 99 + "\n")
    assert result.wall_time_s < 5.0  # killed at the cap, not at the wall limit


def test_stderr_flood_is_capped_too(sandbox):
    result = sandbox.run(
        "import sys\nwhile True:\n    sys.stderr.write('e' * 1000)", limits=Limits(max_output_bytes=5000)
    )
    assert (result.status, result.stderr_truncated, len(result.stderr)) == (Status.OUTPUT_LIMIT, True, 5000)


def test_killed_by_a_signal(sandbox):
    result = sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", limits=QUICK)
    assert (result.status, result.exit_code) == (Status.KILLED, None)


def test_file_size_limit(sandbox):
    program = "try:\n    open('big', 'wb').write(b'0' * 3 * 2**20)\nexcept OSError as e:\n    print(e.errno)"
    result = sandbox.run(program, limits=Limits(max_file_mb=1))
    assert result.stdout == "27\n"  # EFBIG: Python ignores SIGXFSZ, so the write fails instead


def test_arun_runs_concurrently_and_keeps_results_apart(sandbox):
    async def many():
        return await asyncio.gather(*(sandbox.arun(f"print({i} * {i})", limits=QUICK) for i in range(6)))

    results = asyncio.run(many())
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(6)]
