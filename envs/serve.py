"""Serve a registered turngym environment over OpenEnv's protocol: ``python -m envs.serve <env id> [options]``.

    python -m envs.serve sokoban                         # http://127.0.0.1:8000, WebSocket sessions at /ws
    python -m envs.serve sokoban env.dim=8 env.num_boxes=2 port=8001
    python -m envs.serve webshop max_sessions=64

``env.<option>=<value>`` sets a constructor option of the environment (values read as YAML: ``8``,
``true``, ``[8, 10]``, ``{a: 1}``); ``host`` (127.0.0.1), ``port`` (8000) and ``max_sessions`` (256
concurrent WebSocket sessions, each with its own environment instance) configure the server. Any
OpenEnv client connects to it: ``GenericEnvClient(base_url="http://127.0.0.1:8000")``, TRL's and
SkyRL's OpenEnv integrations, or turngym's own ``envs.make("openenv", base_url=...)``.
The wire format is described in :mod:`envs.adapters.openenv_server`.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

SERVER_OPTIONS = {"host": "127.0.0.1", "port": 8000, "max_sessions": 256}


def parse_args(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(env id, env options, server options)`` from ``<env id> [env.<option>=<value>] [host|port|max_sessions=]``."""
    if not argv or "=" in argv[0] or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    env_id, env_options, server_options = argv[0], {}, dict(SERVER_OPTIONS)
    for arg in argv[1:]:
        key, eq, text = arg.partition("=")
        if not eq:
            raise SystemExit(f"cannot read {arg!r}: options look like env.<option>=<value> or port=8001")
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
    env_id, env_options, server_options = parse_args(sys.argv[1:] if argv is None else argv)
    import uvicorn

    import envs
    from envs.adapters.openenv_server import WS_MAX_SIZE_BYTES, build_app, quiet_disconnects

    try:
        app = build_app(envs.spec(env_id).id, env_options, max_sessions=int(server_options["max_sessions"]))
    except (envs.UnknownEnvironmentError, TypeError, ValueError, ImportError) as exc:
        raise SystemExit(f"envs.serve: {exc}") from exc
    host, port = str(server_options["host"]), int(server_options["port"])
    print(f"serving {env_id} over OpenEnv at http://{host}:{port} (WebSocket sessions at /ws)", flush=True)
    uvicorn.run(quiet_disconnects(app), host=host, port=port, ws_max_size=WS_MAX_SIZE_BYTES, log_level="warning")


if __name__ == "__main__":
    main()
