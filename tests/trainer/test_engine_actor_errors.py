"""Which actor a Ray error comes from (:func:`trainer.engine_actor.error_from_actor_of`), on real actors.

The engine sync treats an unknown answer as the engine's death (it cannot tell), the colocated restart as no death
(it restarts only an actor it knows died): both read the same function.
"""

from __future__ import annotations

import collections
import time

import pytest
import ray

from trainer.engine_actor import EngineClient, error_from_actor_of
from trainer.ray_cluster import init_ray

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_session():
    init_ray(num_cpus=2, object_store_memory=100 * 1024**2)
    yield
    ray.shutdown()


def test_a_killed_actors_error_names_it_and_no_other(ray_session):
    actor = ray.remote(num_cpus=0)(collections.Counter)  # a class every worker can import
    dead, alive = actor.remote(a=1), actor.remote(b=2)
    assert ray.get([dead.total.remote(), alive.total.remote()]) == [1, 2]
    ray.kill(dead, no_restart=True)
    error = None
    deadline = time.monotonic() + 60
    while error is None:  # ray.kill returns at once: a call may still be served before the actor is gone
        try:
            ray.get(dead.total.remote(), timeout=60)
        except ray.exceptions.ActorDiedError as exc:
            error = exc
        assert time.monotonic() < deadline, "the killed actor still answered after 60 s"
        time.sleep(0.05)
    assert error_from_actor_of(error, EngineClient(dead)) is True
    assert error_from_actor_of(error, EngineClient(alive)) is False
    assert error_from_actor_of(error, object()) is None  # an in-process engine: no actor to compare
    error.actor_id = None  # an error that names no actor
    assert error_from_actor_of(error, EngineClient(dead)) is None
