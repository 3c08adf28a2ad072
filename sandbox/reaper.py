"""Remove a sandbox pool's containers once its owner process is gone.

``python -m sandbox.reaper OWNER`` blocks reading stdin, a pipe whose other end only the owner holds.
End of file means the owner closed the pool or died (SIGKILL included); the reaper then removes every
container labelled ``turngym.sandbox.owner=OWNER`` and exits.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    owner = (argv or sys.argv[1:])[0]
    sys.stdin.buffer.read()  # returns at end of file: the owner is gone
    import docker

    from sandbox.docker_pool import OWNER_LABEL

    client = docker.from_env()
    for container in client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"}):
        try:
            container.remove(force=True)
        except docker.errors.APIError as error:
            print(f"sandbox reaper: could not remove {container.short_id}: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
