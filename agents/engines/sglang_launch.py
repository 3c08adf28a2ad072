"""Launching SGLang server processes, waiting until they answer ``/health``, and stopping them.

A server is started as ``python -m sglang.launch_server --model-path M --host H --port P [args...]``
(SGLang 0.5.23's entry point and flag names) in its own session (process group), with stdout and
stderr in a log file. The command is a template whose ``{python}``, ``{model_path}``, ``{host}`` and
``{port}`` fields are filled per server, so a test can point it at a stand-in that speaks the same
HTTP API. Stopping sends SIGTERM to the whole process group (SGLang runs its scheduler and detokenizer
as child processes), then SIGKILL after ``grace_s``. Every launched server is also stopped when the
Python process exits normally (``atexit``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agents.engines.sglang_client import import_aiohttp

__all__ = ["DEFAULT_LAUNCH_COMMAND", "LaunchedServer", "build_command", "free_ports", "launch_server", "wait_healthy"]

DEFAULT_LAUNCH_COMMAND: tuple[str, ...] = (
    "{python}", "-m", "sglang.launch_server", "--model-path", "{model_path}", "--host", "{host}", "--port", "{port}",
)  # fmt: skip

_LAUNCHED: weakref.WeakSet[LaunchedServer] = weakref.WeakSet()


@dataclass(eq=False)
class LaunchedServer:
    """One server process: its URL, the command that started it and its log file."""

    url: str
    command: list[str]
    log_path: Path
    process: subprocess.Popen = field(repr=False)

    def log_tail(self, max_lines: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as error:
            return f"(log {self.log_path} unreadable: {error})"
        return "\n".join(lines[-max_lines:])

    def exit_description(self) -> str | None:
        """``None`` while the process runs; its exit code and log tail once it has exited."""
        code = self.process.poll()
        if code is None:
            return None
        return f"exit code {code}; last lines of {self.log_path}:\n{self.log_tail()}"

    def terminate(self, grace_s: float = 10.0) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after ``grace_s``. Idempotent."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(timeout=grace_s)
        else:
            _signal_group(self.process, signal.SIGKILL)  # children the exited leader may have left behind
        _LAUNCHED.discard(self)


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(process.pid, sig)


@atexit.register
def _terminate_all() -> None:
    for server in list(_LAUNCHED):
        server.terminate(grace_s=5.0)


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (the OS picks them)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def build_command(
    template: Sequence[str], *, model_path: str, host: str, port: int, extra_args: Sequence[str] = ()
) -> list[str]:
    """Fill the template's ``{python}``, ``{model_path}``, ``{host}``, ``{port}`` fields and append ``extra_args``."""
    values = {"python": sys.executable, "model_path": str(model_path), "host": host, "port": str(port)}
    try:
        return [part.format(**values) for part in template] + list(extra_args)
    except (KeyError, IndexError) as error:
        raise ValueError(f"launch command {list(template)}: unknown field {error}; use {sorted(values)}") from error


def launch_server(
    command: Sequence[str], url: str, log_path: Path, env: Mapping[str, str] | None = None
) -> LaunchedServer:
    """Start ``command`` in a new process group with its output in ``log_path``; does not wait."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    server = LaunchedServer(url=url, command=list(command), log_path=log_path, process=process)
    _LAUNCHED.add(server)
    return server


async def wait_healthy(server: LaunchedServer, timeout_s: float, poll_s: float = 0.5) -> None:
    """Return once ``GET /health`` answers 200; raise with the log tail if the process exits or time runs out."""
    aiohttp = import_aiohttp()
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=max(poll_s * 4, 2.0))) as session:
        while True:
            if (exit_description := server.exit_description()) is not None:
                raise RuntimeError(f"SGLang server {server.url} exited during start-up: {exit_description}")
            try:
                async with session.get(server.url + "/health") as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                last = f"{type(error).__name__}"
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"SGLang server {server.url} not healthy after {timeout_s} s (last: {last}; raise "
                    f"startup_timeout_s for big models); last lines of {server.log_path}:\n{server.log_tail()}"
                )
            await asyncio.sleep(poll_s)
