"""Python execution through :mod:`sandbox`: each call runs the code as a fresh program under hard limits.

Nothing persists between calls (variables, files): the model prints what it needs. The result is
the program's stdout (and, when it fails, the tail of stderr and the status: ``timeout``,
``memory``, ``output_limit``, ...), cut to ``max_output_chars``. A failing program is an
``ok=False`` result, never an exception; a broken sandbox (no Docker daemon, no bubblewrap) raises
:class:`sandbox.SandboxError` from the call, as infrastructure failures should.

The sandbox is created on the first call (``make_sandbox(backend)``) and shared by every
trajectory, since each run already gets a fresh work directory; :meth:`PythonTool.close` releases
it. ``backend="auto"`` picks an isolating backend (Docker or bubblewrap), never a plain process.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tools.base import Stateless, ToolResult

__all__ = ["PythonTool"]


class PythonTool(Stateless):
    """Runs Python 3 code in a sandbox and returns what it printed.

    Args:
        backend: a :func:`sandbox.make_sandbox` backend name (``"auto"``: Docker or bubblewrap).
        limits: a :class:`sandbox.Limits` for each run (default: 5 s wall time, 256 MB).
        max_output_chars: stdout/stderr kept in the result.
        sandbox: an already built sandbox to use instead (the tool does not close it).
        sandbox_options: keyword arguments for ``make_sandbox``.
    """

    name = "python"
    description = (
        "Run a Python 3 program and get what it prints (stdout). Each call is a fresh program: nothing is kept "
        "between calls, there is no network, and time and memory are limited. Use print() to see results."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1, "description": "The Python 3 program"}},
        "required": ["code"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        backend: str = "auto",
        *,
        limits: Any = None,
        max_output_chars: int = 4000,
        sandbox: Any = None,
        sandbox_options: Mapping[str, Any] | None = None,
    ) -> None:
        sandbox_module = _import_sandbox()
        self.backend = backend
        self.limits = limits if limits is not None else sandbox_module.Limits(wall_time_s=5.0, memory_mb=256)
        self.max_output_chars = int(max_output_chars)
        self._sandbox = sandbox
        self._owns_sandbox = sandbox is None
        self._sandbox_options = dict(sandbox_options or {})
        self._lock = threading.Lock()

    def _get_sandbox(self) -> Any:
        with self._lock:
            if self._sandbox is None:
                self._sandbox = _import_sandbox().make_sandbox(self.backend, **self._sandbox_options)
            return self._sandbox

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        sandbox = self._get_sandbox()
        result = await sandbox.arun(arguments["code"], limits=self.limits)
        stdout = _tail(result.stdout, self.max_output_chars)
        metrics = {"wall_time_s": float(result.wall_time_s)}
        if result.ok:
            return ToolResult(stdout if stdout.strip() else "(the program printed nothing)", metrics=metrics)
        status = getattr(result.status, "value", str(result.status))
        stderr = _tail(result.stderr, self.max_output_chars // 2)
        parts = [f"Error: the program ended with status {status} (exit code {result.exit_code})."]
        if stdout.strip():
            parts.append(f"stdout:\n{stdout}")
        if stderr.strip():
            parts.append(f"stderr:\n{stderr}")
        return ToolResult("\n".join(parts), ok=False, metrics=metrics)

    def close(self) -> None:
        """Close the sandbox if this tool created it (idempotent)."""
        with self._lock:
            if self._sandbox is not None and self._owns_sandbox:
                self._sandbox.close()
                self._sandbox = None


def _tail(text: str, limit: int) -> str:
    """The last ``limit`` characters (a traceback's end is the informative part)."""
    return text if len(text) <= limit else "[...]" + text[-limit:]


def _import_sandbox() -> Any:
    try:
        import sandbox
    except ImportError as exc:  # pragma: no cover - sandbox ships with turngym
        raise ImportError(f"the python tool needs turngym's sandbox package: {exc}") from exc
    return sandbox
