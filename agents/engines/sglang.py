"""The ``sglang`` engine: SGLang servers behind the :class:`~agents.engines.base.Engine` protocol.

Follows the native HTTP API of SGLang 0.5.23 (PyPI release; endpoints in
``sglang/srt/entrypoints/http_server.py``, request structs in ``sglang/srt/managers/io_struct.py``).
The request and response JSON is described in :mod:`agents.engines.sglang_protocol`, the weight-update
bodies in :mod:`agents.engines.sglang_weights`. SGLang needs CUDA: this module is exercised in tests
against ``tests/agents/engines/sglang_compat_server.py``, a stand-in that speaks the same JSON.

Use::

    engine = await SGLangEngine.create(SGLangConfig(model_path="Qwen/Qwen2.5-0.5B-Instruct", num_servers=2))
    generation = await engine.generate(prompt_ids, SamplingParams(max_new_tokens=64), affinity_key="traj-3")
    await engine.update_weights(model.state_dict(), policy_version=1)
    await engine.close()

What it does:

* Launches ``num_servers`` servers (:mod:`agents.engines.sglang_launch`: free ports, one log file per
  server, wait for ``/health``, stop on :meth:`SGLangEngine.close` and at interpreter exit), or
  connects to running ones (``urls``).
* Token in, token out: ``/generate`` with ``input_ids`` and ``return_logprob``; the sampled ids and
  their logprobs come back exactly as SGLang sampled them.
* Sticky routing (:mod:`agents.engines.sglang_router`): all turns of one ``affinity_key`` go to one
  server, so its radix cache serves the shared prefix; new keys go to the least-loaded server.
* Connection failures are retried with backoff (:mod:`agents.engines.sglang_client`); a server that
  stays unreachable (or whose process exited) is taken out of rotation and its requests move to the
  remaining servers (losing their cached prefixes). With no server left, ``generate`` raises
  :class:`SGLangUnreachableError` naming the servers and their logs; nothing waits forever
  (``request_timeout_s`` bounds a single request).
* Weights: :meth:`SGLangEngine.update_weights` (the protocol's call; a state dict through
  ``/update_weights_from_tensor``, same host only), :meth:`~SGLangEngine.update_weights_from_disk`
  (a checkpoint directory the servers can read), and :meth:`~SGLangEngine.init_weights_update_group`
  plus :meth:`~SGLangEngine.update_weights_from_distributed` (NCCL broadcast from the trainer; the
  HTTP calls are implemented, the broadcast is the caller's). Each is followed by ``/flush_cache``.
* :meth:`~SGLangEngine.release_memory_occupation` / :meth:`~SGLangEngine.resume_memory_occupation`
  (servers launched with ``--enable-memory-saver``) free GPU memory while the trainer runs.
* :meth:`SGLangEngine.stats`: prompt tokens and ``cached_tokens`` (as ``cached_prompt_tokens``) from
  each response's ``meta_info``, generated tokens, busy time, retries and failovers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.engines.base import EngineStats, Generation, SamplingParams, WeightSync
from agents.engines.sglang_client import (
    RetryPolicy,
    ServerClient,
    SGLangServerError,
    SGLangTimeoutError,
    SGLangUnreachableError,
)
from agents.engines.sglang_launch import (
    DEFAULT_LAUNCH_COMMAND,
    LaunchedServer,
    build_command,
    free_ports,
    launch_server,
    wait_healthy,
)
from agents.engines.sglang_protocol import build_generate_request, parse_generate_response
from agents.engines.sglang_router import StickyRouter
from agents.engines.sglang_weights import (
    DEFAULT_GROUP_NAME,
    disk_update_request,
    distributed_update_request,
    init_group_request,
    tensor_update_request,
)

if TYPE_CHECKING:
    from agents.engines.registry import EngineSpec

__all__ = [
    "SGLangConfig",
    "SGLangEngine",
    "SGLangServerError",
    "SGLangTimeoutError",
    "SGLangUnreachableError",
    "connect_sglang",
    "start_sglang",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SGLangConfig:
    """Where the servers are (``urls``) or how to launch them (``model_path`` and the rest).

    ``launch_command`` is a template (fields ``{python}``, ``{model_path}``, ``{host}``, ``{port}``)
    followed by ``server_args`` (e.g. ``("--mem-fraction-static", "0.7", "--enable-memory-saver")``).
    ``gpus_per_server > 0`` gives server ``i`` ``CUDA_VISIBLE_DEVICES`` ``i*g .. i*g+g-1``. ``tp_size``
    is each server's tensor-parallel size (one tensor payload per rank; ranks in the update group).
    """

    urls: tuple[str, ...] = ()
    model_path: str | None = None
    num_servers: int = 1
    host: str = "127.0.0.1"
    ports: tuple[int, ...] = ()  # empty: free ports picked by the OS
    server_args: tuple[str, ...] = ()
    launch_command: tuple[str, ...] = DEFAULT_LAUNCH_COMMAND
    gpus_per_server: int = 0
    log_dir: str | None = None  # None: a fresh temporary directory
    startup_timeout_s: float = 900.0
    request_timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    max_retries: int = 3
    retry_backoff_s: float = 0.5
    max_affinity_keys: int = 100_000
    tp_size: int = 1
    api_key: str | None = None
    flush_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if bool(self.urls) == (self.model_path is not None):
            raise ValueError("give either urls (running servers) or model_path (servers to launch), not both")
        if self.model_path is not None and self.num_servers < 1:
            raise ValueError(f"num_servers must be >= 1, got {self.num_servers}")
        if self.ports and len(self.ports) != self.num_servers:
            raise ValueError(f"{len(self.ports)} ports for {self.num_servers} servers")
        if self.tp_size < 1:
            raise ValueError(f"tp_size must be >= 1, got {self.tp_size}")


async def _launch_all(config: SGLangConfig) -> list[LaunchedServer]:
    if config.launch_command == DEFAULT_LAUNCH_COMMAND and importlib.util.find_spec("sglang") is None:
        raise ImportError("launching SGLang servers needs sglang on a CUDA machine: pip install sglang")
    ports = list(config.ports) or free_ports(config.host, config.num_servers)
    log_dir = Path(config.log_dir or tempfile.mkdtemp(prefix="turngym-sglang-"))
    servers = []
    for index, port in enumerate(ports):
        command = build_command(
            config.launch_command, model_path=config.model_path or "", host=config.host, port=port,
            extra_args=config.server_args,
        )  # fmt: skip
        gpus = range(index * config.gpus_per_server, (index + 1) * config.gpus_per_server)
        env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))} if config.gpus_per_server else None
        log_path = log_dir / f"server-{index}-port{port}.log"
        servers.append(launch_server(command, f"http://{config.host}:{port}", log_path, env))
    logger.info("launched %d SGLang servers, logs in %s", len(servers), log_dir)
    try:
        await asyncio.gather(*(wait_healthy(server, config.startup_timeout_s) for server in servers))
    except BaseException:
        await asyncio.gather(*(asyncio.to_thread(server.terminate) for server in servers))
        raise
    return servers


class SGLangEngine:
    """SGLang servers as one :class:`~agents.engines.base.Engine` (see the module docstring)."""

    name = "sglang"
    weight_sync: WeightSync = "disk"  # the trainer and the servers may not share a host

    def __init__(self, config: SGLangConfig, launched: Sequence[LaunchedServer] = ()) -> None:
        """Prefer :meth:`create`, which launches or checks the servers first."""
        self.config = config
        self._launched = list(launched)
        urls = [server.url for server in self._launched] or list(config.urls)
        exits = [server.exit_description for server in self._launched] or [None] * len(urls)
        retry = RetryPolicy(max_retries=config.max_retries, backoff_s=config.retry_backoff_s)
        self._clients = [
            ServerClient(
                url,
                request_timeout_s=config.request_timeout_s,
                connect_timeout_s=config.connect_timeout_s,
                retry=retry,
                api_key=config.api_key,
                describe_exit=describe_exit,
            )
            for url, describe_exit in zip(urls, exits, strict=True)
        ]
        self._router = StickyRouter(len(self._clients), config.max_affinity_keys)
        self._stats = EngineStats()
        self._failovers = 0
        self._in_flight = 0
        self._busy_since = 0.0
        self._closed = False

    @classmethod
    async def create(cls, config: SGLangConfig) -> SGLangEngine:
        """Launch the servers (``model_path``) and wait until healthy, or check that ``urls`` answer ``/health``."""
        launched = await _launch_all(config) if config.model_path is not None else []
        engine = cls(config, launched)
        if not launched:
            await asyncio.gather(*(client.request_ok("GET", "/health") for client in engine._clients))
        return engine

    async def __aenter__(self) -> SGLangEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def urls(self) -> list[str]:
        return [client.url for client in self._clients]

    @property
    def launched_servers(self) -> list[LaunchedServer]:
        """The server processes this engine started (empty when it connected to ``urls``)."""
        return list(self._launched)

    def server_of(self, affinity_key: str) -> int | None:
        """The index of the server ``affinity_key`` is pinned to, or ``None``."""
        return self._router.lookup(affinity_key)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this SGLangEngine is closed")

    # ----- generation -----

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        """Sample on the key's server; on an unreachable server, move to another one (module docstring)."""
        self._check_open()
        body = build_generate_request(input_ids, sampling)
        while True:
            server = self._router.route(affinity_key)
            try:
                generation = await self._generate_on(server, body)
            except SGLangUnreachableError as error:
                self._router.mark_unhealthy(server)
                self._failovers += 1
                if not any(self._router.healthy):
                    raise SGLangUnreachableError(f"every SGLang server is unreachable; last error: {error}") from error
                logger.warning("SGLang server %s taken out of rotation: %s", self._clients[server].url, error)
                continue
            self._count(generation)
            return generation

    async def _generate_on(self, server: int, body: Mapping[str, Any]) -> Generation:
        self._router.in_flight[server] += 1
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        try:
            status, payload = await self._clients[server].request("POST", "/generate", body)
        finally:
            self._router.in_flight[server] -= 1
            self._in_flight -= 1
            if self._in_flight == 0:
                self._stats.busy_seconds += time.perf_counter() - self._busy_since
        if status == 400:
            message = payload.get("error", payload) if isinstance(payload, dict) else payload
            if isinstance(message, dict):
                message = message.get("message", message)
            raise ValueError(f"SGLang rejected the request: {message}")
        if status != 200:
            url = self._clients[server].url
            raise SGLangServerError(f"{url}/generate answered HTTP {status}: {str(payload)[:500]}")
        return parse_generate_response(payload)

    def _count(self, generation: Generation) -> None:
        self._stats.requests += 1
        self._stats.prompt_tokens += generation.prompt_tokens
        self._stats.cached_prompt_tokens += generation.cached_tokens
        self._stats.generated_tokens += len(generation.output_ids)

    # ----- weights and cache -----

    async def _post_all(
        self, path: str, bodies: Sequence[Any], alongside: Callable[[], Awaitable[None]] | None = None
    ) -> list[Any]:
        """POST ``bodies[i]`` to server ``i`` concurrently (running ``alongside()`` meanwhile); all must succeed."""
        self._check_open()
        requests = [
            asyncio.ensure_future(client.request_ok("POST", path, body))
            for client, body in zip(self._clients, bodies, strict=True)
        ]
        if alongside is not None:
            try:
                await alongside()
            except BaseException:
                for request in requests:
                    request.cancel()
                raise
        return await asyncio.gather(*requests)

    async def flush_cache(self) -> None:
        """``/flush_cache`` on every server; SGLang refuses (400) while requests run: retry for ``flush_timeout_s``."""

        async def flush(client: ServerClient) -> None:
            deadline = time.monotonic() + self.config.flush_timeout_s
            while True:
                status, payload = await client.request("POST", "/flush_cache")
                if status == 200:
                    return
                if time.monotonic() >= deadline:
                    raise SGLangServerError(
                        f"{client.url}/flush_cache still refused after {self.config.flush_timeout_s} s "
                        f"(HTTP {status}: {str(payload)[:300]}); are requests still running?"
                    )
                await asyncio.sleep(0.1)

        self._check_open()
        await asyncio.gather(*(flush(client) for client in self._clients))

    async def _finish_update(self, policy_version: int) -> None:
        await self.flush_cache()
        self._stats.policy_version = policy_version

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        """The protocol's update: ``state_dict`` through ``/update_weights_from_tensor`` (same host only)."""
        await self.update_weights_from_tensor(state_dict.items(), policy_version)

    async def update_weights_from_tensor(self, named_tensors: Iterable[tuple[str, Any]], policy_version: int) -> None:
        """Send ``(name, tensor)`` pairs (all or some of the model's) to every server, then flush."""
        named = list(named_tensors)
        bodies = [tensor_update_request(named, self.config.tp_size, policy_version) for _ in self._clients]
        await self._post_all("/update_weights_from_tensor", bodies)
        await self._finish_update(policy_version)

    async def update_weights_from_disk(
        self, model_path: str | Path, policy_version: int, load_format: str | None = None
    ) -> None:
        """Make every server load the checkpoint at ``model_path`` (a path the servers can read), then flush."""
        body = disk_update_request(str(model_path), policy_version, load_format)
        await self._post_all("/update_weights_from_disk", [body] * len(self._clients))
        await self._finish_update(policy_version)

    async def init_weights_update_group(
        self,
        master_address: str,
        master_port: int,
        *,
        group_name: str = DEFAULT_GROUP_NAME,
        backend: str = "nccl",
        join: Callable[[], Awaitable[None]] | None = None,
    ) -> int:
        """Put every server's ranks into a process group with the trainer at rank 0; returns the world size.

        Server ``i`` takes ranks ``1 + i * tp_size`` onward. The servers block until the trainer joins,
        so pass ``join`` (the trainer's own process-group initialisation, as a coroutine function): it
        runs while the requests are pending.
        """
        tp_size = self.config.tp_size
        world_size = 1 + tp_size * len(self._clients)
        bodies = [
            init_group_request(master_address, master_port, 1 + i * tp_size, world_size, group_name, backend)
            for i in range(len(self._clients))
        ]
        await self._post_all("/init_weights_update_group", bodies, alongside=join)
        return world_size

    async def update_weights_from_distributed(
        self,
        names: Sequence[str],
        dtypes: Sequence[str],
        shapes: Sequence[Sequence[int]],
        policy_version: int,
        *,
        broadcast: Callable[[], Awaitable[None]] | None = None,
        group_name: str = DEFAULT_GROUP_NAME,
    ) -> None:
        """Announce the tensors to every server, run ``broadcast`` (the trainer broadcasts them from rank 0
        in the order of ``names``) while the servers receive, then flush."""
        body = distributed_update_request(names, dtypes, shapes, group_name, policy_version)
        await self._post_all("/update_weights_from_distributed", [body] * len(self._clients), alongside=broadcast)
        await self._finish_update(policy_version)

    async def release_memory_occupation(self, tags: Sequence[str] | None = None) -> None:
        """Free the servers' GPU memory (``tags``: ``"weights"``, ``"kv_cache"``; ``None`` = all)."""
        body = {"tags": list(tags) if tags else None}
        await self._post_all("/release_memory_occupation", [body] * len(self._clients))

    async def resume_memory_occupation(self, tags: Sequence[str] | None = None) -> None:
        body = {"tags": list(tags) if tags else None}
        await self._post_all("/resume_memory_occupation", [body] * len(self._clients))

    async def model_info(self) -> list[dict[str, Any]]:
        """Each server's ``/model_info`` (``/get_model_info`` on servers older than the rename)."""

        async def one(client: ServerClient) -> dict[str, Any]:
            status, payload = await client.request("GET", "/model_info")
            if status == 404:
                return await client.request_ok("GET", "/get_model_info")
            if status != 200:
                raise SGLangServerError(f"{client.url}/model_info answered HTTP {status}: {str(payload)[:300]}")
            return payload

        self._check_open()
        return list(await asyncio.gather(*(one(client) for client in self._clients)))

    # ----- bookkeeping -----

    def stats(self) -> EngineStats:
        snapshot = EngineStats(**{name: getattr(self._stats, name) for name in EngineStats.__dataclass_fields__})
        if self._in_flight:
            snapshot.busy_seconds += time.perf_counter() - self._busy_since
        snapshot.extra = {
            "retries": float(sum(client.retries for client in self._clients)),
            "failovers": float(self._failovers),
            "healthy_servers": float(sum(self._router.healthy)),
        }
        return snapshot

    async def stats_async(self) -> EngineStats:
        return self.stats()

    async def instance_async(self) -> str:
        # One id for the client: a server that restarts behind it is not detected here (the policy
        # version is the client's count, not the server's).
        return f"sglang-{id(self):x}"

    async def close(self) -> None:
        """Close the HTTP sessions and stop the servers this engine launched. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(client.close() for client in self._clients))
        await asyncio.gather(*(asyncio.to_thread(server.terminate) for server in self._launched))


def connect_sglang(spec: EngineSpec) -> SGLangEngine:
    """The ``sglang`` row of :mod:`agents.engines.registry`: a client of the running servers ``spec.urls``."""
    if spec.launch or not spec.urls:
        raise ValueError("an sglang client needs the urls of running servers (launching is start_sglang's)")
    return SGLangEngine(SGLangConfig(urls=tuple(spec.urls), api_key=spec.api_key))


async def start_sglang(spec: EngineSpec) -> SGLangEngine:
    """The driver's sglang engine: launch ``spec.num_servers`` servers of ``spec.model``, or check ``spec.urls``."""
    if spec.launch:
        config = SGLangConfig(
            model_path=spec.model, num_servers=spec.num_servers, gpus_per_server=spec.gpus_per_server
        )
    else:
        config = SGLangConfig(urls=tuple(spec.urls), api_key=spec.api_key)
    return await SGLangEngine.create(config)
