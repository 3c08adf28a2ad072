"""Sticky routing: every turn of a trajectory goes to the server that holds its prefix in cache.

A multi-turn episode sends a prompt that extends the previous turn's prompt and response; only the
server that served the previous turn has that prefix in its radix cache. :class:`StickyRouter` maps
each ``affinity_key`` to one server for as long as the key is remembered:

* a new key goes to the healthy server with the fewest requests in flight, ties broken by the fewest
  keys assigned, then by the lowest index (so keys spread evenly even when requests are sequential);
* keys are remembered in a bounded LRU (``max_keys``); a forgotten key is assigned afresh;
* :meth:`mark_unhealthy` takes a server out of rotation; keys pinned to it move on their next request
  (their prefix cache is lost, the run goes on). ``None`` as a key is never remembered.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["StickyRouter"]


class StickyRouter:
    """Maps affinity keys to server indices ``0 .. num_servers - 1`` (see the module docstring)."""

    def __init__(self, num_servers: int, max_keys: int = 100_000) -> None:
        if num_servers < 1:
            raise ValueError(f"num_servers must be >= 1, got {num_servers}")
        if max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {max_keys}")
        self.num_servers = num_servers
        self.max_keys = max_keys
        self.in_flight = [0] * num_servers
        self.keys_assigned = [0] * num_servers
        self.healthy = [True] * num_servers
        self._keys: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def lookup(self, key: str) -> int | None:
        """The server ``key`` is pinned to, or ``None``; does not change the LRU order."""
        return self._keys.get(key)

    def _least_loaded(self) -> int:
        candidates = [i for i in range(self.num_servers) if self.healthy[i]]
        if not candidates:
            raise RuntimeError("no healthy SGLang server left: every server failed; see their logs")
        return min(candidates, key=lambda i: (self.in_flight[i], self.keys_assigned[i], i))

    def _forget(self, key: str) -> None:
        server = self._keys.pop(key)
        self.keys_assigned[server] -= 1

    def route(self, key: str | None) -> int:
        """The server for the next request of ``key`` (pinning a new key, refreshing a known one)."""
        if key is None:
            return self._least_loaded()
        server = self._keys.get(key)
        if server is not None and self.healthy[server]:
            self._keys.move_to_end(key)
            return server
        if server is not None:
            self._forget(key)
        server = self._least_loaded()
        self._keys[key] = server
        self.keys_assigned[server] += 1
        while len(self._keys) > self.max_keys:
            self._forget(next(iter(self._keys)))
        return server

    def mark_unhealthy(self, server: int) -> None:
        """Take ``server`` out of rotation (its keys move to other servers on their next request)."""
        self.healthy[server] = False

    def mark_healthy(self, server: int) -> None:
        self.healthy[server] = True
