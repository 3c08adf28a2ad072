"""Starting Ray, or joining a cluster: the one place the trainer imports Ray from.

init_ray()                                   # a local Ray sized for this machine, dashboard off, lean
init_ray("ray://head:10001")                 # or join a running cluster (trainer.ray_address)
ray = import_ray()                           # Ray itself, or an ImportError naming the install
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["default_object_store_bytes", "import_ray", "init_ray"]

RAY_INSTALL_HINT = 'pip install "turngym[ray]"'
SMALL_MACHINE_BYTES = 64 * 1024**3
SMALL_MACHINE_OBJECT_STORE_BYTES = 256 * 1024**2
#: Ray's settings for a local cluster: no worker process started ahead of need (an idle one holds ~45 MiB).
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "enable_worker_prestart": False}


def import_ray() -> Any:
    """Import Ray, or raise an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"rollout runs environments in Ray actors; install Ray with: {RAY_INSTALL_HINT}") from exc
    return ray


def default_object_store_bytes() -> int | None:
    """256 MiB on machines with less than 64 GiB of memory, else ``None`` (Ray's own default, 30% of memory)."""
    import os

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return SMALL_MACHINE_OBJECT_STORE_BYTES if total < SMALL_MACHINE_BYTES else None


def init_ray(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    object_store_memory: int | str | None = "auto",
    log_to_driver: bool = True,
) -> None:
    """Start a local Ray (``address=None``) or join the cluster at ``address``; a no-op if Ray is running.

    Locally: the dashboard is off, Ray's own logging is limited to warnings, and the object store is
    capped (``"auto"``: :func:`default_object_store_bytes`; the trajectories of one collect take a
    few MB, weights sent through :class:`~trainer.engine_actor.EngineClient` take their full size).
    Ray's processes that a single local node does not use are not started (:func:`_local_head_trimmed`), nor
    a worker ahead of need (:data:`LOCAL_SYSTEM_CONFIG`): about 0.17 GiB less.
    When joining a cluster, ``num_cpus`` and ``object_store_memory`` belong to the cluster and are ignored.
    """
    ray = import_ray()
    if ray.is_initialized():
        return
    quiet = {"logging_level": logging.WARNING, "log_to_driver": log_to_driver}
    with _auth_notice_dropped():
        if address is not None:
            ray.init(address=address, **quiet)
            return
        if object_store_memory == "auto":
            object_store_memory = default_object_store_bytes()
        # Ray starts its workers at nice 15; here the workers (engine, learner, environments) are the whole job,
        # and at nice 15 any other process on a small machine starves them.
        os.environ.setdefault("RAY_worker_niceness", "0")
        with _local_head_trimmed():
            ray.init(
                num_cpus=num_cpus,
                object_store_memory=object_store_memory,
                include_dashboard=False,
                _system_config=LOCAL_SYSTEM_CONFIG,
                **quiet,
            )


@contextlib.contextmanager
def _local_head_trimmed() -> Iterator[bool]:
    """While ``ray.init`` starts a local head: without the autoscaler's monitor and the dashboard's API server.

    A local cluster has no autoscaler to drive, and with the dashboard off its API server loads only the usage
    statistics module: two Python processes of about 50 and 75 MiB that nothing of turngym reads. Ray offers no
    switch for either to ``ray.init`` (``ray start`` has ``--no-monitor``), so the head's parameters and node
    are swapped for subclasses while it starts: ``no_monitor`` set, the API server not started (Ray's
    documented state when it fails to start: no dashboard URL). The log monitor, which prints the workers'
    output in the driver's console, the raylet's agents and everything a worker uses are untouched.

    Yields whether the trim applies: ``False``, and Ray starts as it always does, when this Ray lacks either
    seam (a version that renamed them).
    """
    from ray._private import node as ray_node
    from ray._private import parameter as ray_parameter

    params, node = ray_parameter.RayParams, ray_node.Node
    if "no_monitor" not in inspect.signature(params.__init__).parameters or not hasattr(node, "start_api_server"):
        yield False
        return

    class LocalParams(params):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.no_monitor = True

    class LocalNode(node):  # type: ignore[misc, valid-type]
        def start_api_server(self, *args: Any, **kwargs: Any) -> None:
            self._webui_url = None

    ray_parameter.RayParams, ray_node.Node = LocalParams, LocalNode
    try:
        yield True
    finally:
        ray_parameter.RayParams, ray_node.Node = params, node


#: Ray's logger for its token-authentication set-up, and the start of the notice it logs as a warning when it
#: turns token authentication on for a new local cluster (Ray 2.5x).
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
RAY_AUTH_ENABLED_NOTICE = "Token authentication is enabled for this Ray cluster."


def _is_not_auth_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(RAY_AUTH_ENABLED_NOTICE)


@contextlib.contextmanager
def _auth_notice_dropped() -> Iterator[None]:
    """Drop Ray's notice that token authentication is on (the secure default, nothing to act on) while Ray starts.

    Authentication itself is left as Ray sets it. Only that notice goes: Ray's warning that a cluster runs
    *without* token authentication still shows. Workers inherit ``RAY_AUTH_MODE=token`` from the driver and
    log no notice of their own.
    """
    logger = logging.getLogger(RAY_AUTH_LOGGER)
    logger.addFilter(_is_not_auth_notice)
    try:
        yield
    finally:
        logger.removeFilter(_is_not_auth_notice)
