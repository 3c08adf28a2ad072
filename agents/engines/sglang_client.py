"""An HTTP client for one SGLang server, with retries on connection failures (aiohttp).

Retried, with exponential backoff (``backoff_s * 2**attempt``, at most ``max_backoff_s``), up to
``max_retries`` times: connection errors (refused, reset, server gone mid-request) and the transient
statuses 502, 503 and 504 (SGLang answers 503 while it starts or shuts down). Not retried: a request
that ran past ``request_timeout_s`` (raises :class:`SGLangTimeoutError`), and every other status, which
is returned to the caller with the decoded body. When the server is a process this engine launched and
that process has exited, the failure is reported at once, with the tail of its log, instead of being
retried.

``aiohttp`` is imported when the first client is built; without it an ImportError says
``pip install aiohttp``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RetryPolicy",
    "SGLangServerError",
    "SGLangTimeoutError",
    "SGLangUnreachableError",
    "ServerClient",
    "import_aiohttp",
]

_TRANSIENT_STATUSES = (502, 503, 504)


def import_aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError as error:
        raise ImportError("the sglang engine needs aiohttp: pip install aiohttp") from error
    return aiohttp


class SGLangServerError(RuntimeError):
    """A server answered with an error status to a request that must succeed."""


class SGLangUnreachableError(SGLangServerError):
    """A server could not be reached (after the retries), or its process has exited."""


class SGLangTimeoutError(SGLangServerError):
    """A request ran longer than ``request_timeout_s``."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay_s(self, attempt: int) -> float:
        return min(self.backoff_s * 2**attempt, self.max_backoff_s)


class ServerClient:
    """JSON requests to one server at ``url`` (``http://host:port``).

    ``describe_exit`` (set for launched servers) returns ``None`` while the server process runs and a
    description of its exit (code and log tail) once it has exited.
    """

    def __init__(
        self,
        url: str,
        *,
        request_timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        api_key: str | None = None,
        max_connections: int = 256,
        describe_exit: Callable[[], str | None] | None = None,
    ) -> None:
        self._aiohttp = import_aiohttp()
        self.url = url.rstrip("/")
        self.retry = retry
        self.describe_exit = describe_exit
        self._timeout = self._aiohttp.ClientTimeout(total=request_timeout_s, connect=connect_timeout_s)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._max_connections = max_connections
        self._session: Any = None
        self.retries = 0  # requests re-sent after a connection failure or a transient status

    def _get_session(self) -> Any:
        if self._session is None or self._session.closed:
            connector = self._aiohttp.TCPConnector(limit=self._max_connections)
            self._session = self._aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, headers=self._headers
            )
        return self._session

    async def _send_once(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        async with self._get_session().request(method, self.url + path, json=body) as response:
            text = await response.text()
        try:
            payload = json.loads(text) if text else None
        except json.JSONDecodeError:
            payload = text
        return response.status, payload

    def _exit_error(self, path: str) -> SGLangUnreachableError | None:
        exit_description = self.describe_exit() if self.describe_exit else None
        if exit_description is None:
            return None
        return SGLangUnreachableError(f"{self.url}{path}: the server process has exited ({exit_description})")

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send ``body`` as JSON; return ``(status, decoded body)`` after the retry policy (module docstring)."""
        last_failure = ""
        for attempt in range(self.retry.max_retries + 1):
            if attempt:
                self.retries += 1
                await asyncio.sleep(self.retry.delay_s(attempt - 1))
            if (exited := self._exit_error(path)) is not None:
                raise exited
            try:
                status, payload = await self._send_once(method, path, body)
            except asyncio.TimeoutError as error:
                raise SGLangTimeoutError(
                    f"{method} {self.url}{path} took longer than {self._timeout.total} s (request_timeout_s); "
                    "raise it for long generations, or check that the server is not stuck"
                ) from error
            except self._aiohttp.ClientConnectionError as error:
                last_failure = f"{type(error).__name__}: {error}"
                continue
            if status not in _TRANSIENT_STATUSES:
                return status, payload
            last_failure = f"HTTP {status}: {str(payload)[:300]}"
        if (exited := self._exit_error(path)) is not None:
            raise exited
        raise SGLangUnreachableError(
            f"{method} {self.url}{path} failed {self.retry.max_retries + 1} times, last with {last_failure}; "
            "is the server running and reachable?"
        )

    async def request_ok(self, method: str, path: str, body: Any = None) -> Any:
        """Like :meth:`request`, but a status other than 200 raises :class:`SGLangServerError`.

        SGLang's weight endpoints answer ``{"success": false, "message": ...}`` (with status 400) on
        failure; that message is in the error.
        """
        status, payload = await self.request(method, path, body)
        if status != 200 or (isinstance(payload, dict) and payload.get("success") is False):
            raise SGLangServerError(f"{method} {self.url}{path} answered HTTP {status}: {str(payload)[:500]}")
        return payload

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
