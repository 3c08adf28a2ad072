"""Serve a registered turngym environment over OpenEnv's protocol: ``python -m envs.serve <env id> [options]``.

    python -m envs.serve sokoban                         # http://127.0.0.1:8000, WebSocket sessions at /ws
    python -m envs.serve sokoban env.dim=8 env.num_boxes=2 port=8001
    python -m envs.serve webshop max_sessions=64

``env.<option>=<value>`` sets a constructor option of the environment (values read as YAML: ``8``,
``true``, ``[8, 10]``, ``{a: 1}``); ``host`` (127.0.0.1), ``port`` (8000) and ``max_sessions`` (256
concurrent WebSocket sessions, each with its own environment instance) configure the server.

An API key (``$TURNGYM_API_KEY``, or ``api_key=<key>``, read as text; the environment variable keeps
it out of the process list) makes every request but ``GET /health`` carry ``Authorization: Bearer
<key>``. A ``host`` other than loopback (127.0.0.0/8, ::1, localhost) needs one: without it the
server refuses to start. Any
OpenEnv client connects to it: ``GenericEnvClient(base_url="http://127.0.0.1:8000")``, TRL's and
SkyRL's OpenEnv integrations, or turngym's own ``envs.make("openenv", base_url=...)``.
The wire format is described in :mod:`envs.adapters.openenv_server`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import yaml

SERVER_OPTIONS = {"host": "127.0.0.1", "port": 8000, "max_sessions": 256, "api_key": None}


def parse_args(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(env id, env options, server options)`` from ``<env id> [env.<option>=<value>] [<server option>=]``."""
    if not argv or "=" in argv[0] or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    env_id, env_options, server_options = argv[0], {}, dict(SERVER_OPTIONS)
    for arg in argv[1:]:
        key, eq, text = arg.partition("=")
        if not eq:
            raise SystemExit(f"cannot read {arg!r}: options look like env.<option>=<value> or port=8001")
        if key == "api_key":  # text as given: YAML would read 0x1F as 31
            server_options[key] = text or None
            continue
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError as exc:
            raise SystemExit(f"cannot read the value of {arg!r}: {exc}") from exc
        if key.startswith("env.") and len(key) > 4:
            env_options[key[4:]] = value
        elif key in SERVER_OPTIONS:
            server_options[key] = value
        else:
            raise SystemExit(f"unknown option {key!r}; options: env.<option>, {', '.join(SERVER_OPTIONS)}")
    return env_id, env_options, server_options


def main(argv: list[str] | None = None) -> None:
    """Serve the environment named in ``argv`` until interrupted; a bad option or binding exits with one line."""
    env_id, env_options, server_options = parse_args(sys.argv[1:] if argv is None else argv)
    import uvicorn

    import envs
    from envs.adapters.openenv_server import (
        API_KEY_ENV,
        WS_MAX_SIZE_BYTES,
        build_app,
        check_binding,
        quiet_disconnects,
    )

    host, port = str(server_options["host"]), int(server_options["port"])
    api_key = server_options["api_key"] or os.environ.get(API_KEY_ENV) or None
    try:
        check_binding(host, api_key)
        spec_id, max_sessions = envs.spec(env_id).id, int(server_options["max_sessions"])
        app = build_app(spec_id, env_options, max_sessions=max_sessions, api_key=api_key)
    except (envs.UnknownEnvironmentError, TypeError, ValueError, ImportError) as exc:
        raise SystemExit(f"envs.serve: {exc}") from exc
    keyed = "; requests need the API key" if api_key else ""
    print(f"serving {env_id} over OpenEnv at http://{host}:{port} (WebSocket sessions at /ws{keyed})", flush=True)
    uvicorn.run(quiet_disconnects(app), host=host, port=port, ws_max_size=WS_MAX_SIZE_BYTES, log_level="warning")


if __name__ == "__main__":
    main()
