"""The contract's pure parts: status precedence, argument checks, backend choice."""

from __future__ import annotations

import signal

import pytest

import sandbox
from sandbox import Limits, SandboxError, Status
from sandbox.base import RawOutcome, check_files, classify

LIMITS = Limits(cpu_time_s=2.0)


def raw(**fields):
    base = {"returncode": 0, "term_signal": None, "stdout": b"", "stderr": b"", "wall_time_s": 0.1}
    return RawOutcome(**{**base, **fields})


MEMORY_TRACEBACK = b"Traceback (most recent call last):\n  ...\nMemoryError\n"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, Status.OK),
        ({"returncode": 2}, Status.RUNTIME_ERROR),
        ({"returncode": 1, "stderr": MEMORY_TRACEBACK}, Status.MEMORY),
        ({"returncode": None, "term_signal": signal.SIGSEGV}, Status.KILLED),
        ({"returncode": None, "term_signal": signal.SIGXCPU}, Status.TIMEOUT),
        # SIGKILL after 2.5 CPU seconds with a 2 s budget: the hard CPU rlimit's kill
        ({"returncode": None, "term_signal": signal.SIGKILL, "cpu_time_s": 2.5}, Status.TIMEOUT),
        ({"returncode": None, "term_signal": signal.SIGKILL, "cpu_time_s": 0.5}, Status.KILLED),
        ({"returncode": None, "term_signal": signal.SIGKILL, "oom_killed": True}, Status.MEMORY),
        # precedence: output limit > timeout > memory > killed > runtime error
        ({"output_limited": True, "timed_out": True, "returncode": None, "term_signal": 9}, Status.OUTPUT_LIMIT),
        ({"timed_out": True, "oom_killed": True, "returncode": None, "term_signal": 9}, Status.TIMEOUT),
        ({"oom_killed": True, "returncode": 1}, Status.MEMORY),
    ],
)
def test_status_precedence(fields, expected):
    assert classify(raw(**fields), LIMITS).status is expected


def test_classify_decodes_output_leniently():
    result = classify(raw(stdout=b"a\xffb", stderr="é".encode(), stdout_truncated=True), LIMITS)
    assert (result.stdout, result.stderr, result.stdout_truncated, result.exit_code) == ("a\ufffdb", "é", True, 0)
    assert result.ok


def test_memory_error_only_counts_as_the_last_line():
    # A program that prints "MemoryError" somewhere and then fails otherwise is a runtime error.
    stderr = b"MemoryError was expected\nTraceback:\nValueError: no\n"
    assert classify(raw(returncode=1, stderr=stderr), LIMITS).status is Status.RUNTIME_ERROR


@pytest.mark.parametrize("field", ["wall_time_s", "cpu_time_s", "memory_mb", "max_processes", "max_output_bytes"])
def test_limits_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: 0})


@pytest.mark.parametrize("path", ["", "/etc/passwd", "../up.py", "a/../../b", "a//b", "./x", "main.py", "n\x00ul"])
def test_bad_file_paths_are_refused(path):
    with pytest.raises(ValueError):
        check_files({path: "x"})


def test_files_are_encoded_as_utf8():
    assert check_files({"a/b.txt": "é", "c.bin": b"\x00"}) == {"a/b.txt": b"\xc3\xa9", "c.bin": b"\x00"}
    with pytest.raises(ValueError, match="str or bytes"):
        check_files({"x": 3})


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="docker, bubblewrap, process"):
        sandbox.make_sandbox("firejail")


def test_auto_never_picks_the_process_backend(monkeypatch):
    monkeypatch.setattr(sandbox, "available_backends", lambda: ["process"])
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap") as raised:
        sandbox.make_sandbox("auto")
    assert "\n" not in str(raised.value)


def test_auto_says_once_why_a_running_docker_daemon_is_not_used(monkeypatch, caplog):
    # The daemon answers on its socket (a real one here), but the SDK is "missing": auto falls back to
    # bubblewrap and says so, once, naming the package to install.
    import builtins

    import sandbox.docker_backend as docker_backend

    real_import = builtins.__import__

    def no_docker_package(name, *args, **kwargs):
        if name == "docker":
            raise ImportError("No module named 'docker'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(sandbox, "available_backends", lambda: ["bubblewrap", "process"])
    monkeypatch.setattr(docker_backend, "docker_daemon_answers", lambda: False)
    monkeypatch.setattr(docker_backend, "docker_socket_answers", lambda: True)
    monkeypatch.setattr(builtins, "__import__", no_docker_package)
    monkeypatch.setattr(sandbox, "_LOGGED", set())
    with caplog.at_level("INFO", logger="sandbox"):
        first, second = sandbox.make_sandbox("auto"), sandbox.make_sandbox("auto")
    assert first.name == second.name == "bubblewrap"
    messages = [record.getMessage() for record in caplog.records if record.name == "sandbox"]
    assert messages == [
        "sandbox=auto chose the bubblewrap backend: Docker is not usable (a Docker daemon is running but the "
        "`docker` Python package is missing: pip install 'docker>=7')"
    ]


def test_process_backend_is_always_available():
    assert sandbox.available_backends()[-1] == "process"
