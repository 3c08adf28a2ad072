"""Driving a verifiers v1 episode one model turn at a time, for :class:`envs.adapters.verifiers.VerifiersEnv`.

verifiers 0.4's ``verifiers.v1`` runs an episode as one coroutine, ``Env.run(task, agents)``: the env
is control flow over its agent seats, each played through ``agent.run(task)`` (one segment) or
``async with agent.interaction(task) as it: segment = await it.turn(message)`` (turn by turn), and a
task's ``@vf.stop`` hooks and ``@vf.reward`` / ``@vf.metric`` functions judge the seat's ``Trace``.
:class:`EpisodeDriver` runs ``Env.run`` on a private event loop with :class:`TurnSeats` as its
agents: every model turn becomes a request handed to the turngym agent, and the loop advances only
inside :meth:`EpisodeDriver.start` and :meth:`EpisodeDriver.respond`, so ``step`` stays synchronous.

The seat stands in for verifiers' harness, runtime and model together: it keeps a real v1 ``Trace``
(messages as ``MessageNode`` s), checks the task's trace-level ``@vf.stop`` hooks after each reply,
ends the exchange as verifiers does (``agent_completed`` after ``run``, ``user_closed`` when the
env leaves the interaction) and scores it with ``Task.score``. What it does not do: launch harness
programs or runtimes (sandboxes, containers), serve MCP toolsets, apply request/response
interceptors or stops, or play more than one seat.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

from envs.optional import import_pinned

__all__ = ["VERIFIERS_INSTALL", "VERIFIERS_VERSION", "EpisodeDriver", "Turn", "import_verifiers", "message_text"]

VERIFIERS_VERSION = "0.4.0"
VERIFIERS_INSTALL = f'pip install "turngym[verifiers]"  (verifiers=={VERIFIERS_VERSION})'


def import_verifiers() -> Any:
    """``verifiers.v1`` at the pinned version, or an :class:`ImportError` naming the install command."""
    import_pinned("verifiers", VERIFIERS_VERSION, VERIFIERS_INSTALL, user="the verifiers adapter")
    import verifiers.v1 as vf

    return vf


def message_text(message: Any) -> str:
    """The text of a v1 message (its str content, or its text parts joined)."""
    from verifiers.v1.types import content_text

    return content_text(getattr(message, "content", None)) or ""


@dataclass(frozen=True)
class Turn:
    """What the episode did after being advanced: it asks for a reply to ``new_messages``, or it ended."""

    new_messages: list[Any] = field(default_factory=list)
    finished: bool = False


class TurnSeat:
    """One agent seat of a v1 env, played by the turngym agent (the surface of ``vf.Agent`` that envs use)."""

    def __init__(self, driver: EpisodeDriver, name: str) -> None:
        self.driver, self.name = driver, name
        self.trainable = True

    async def run(self, task: Any, **kwargs: Any) -> Any:
        """One segment: the model answers the task's prompt once."""
        exchange = self.driver.open_exchange(task, self.name)
        segment = await exchange.turn()
        if not segment.terminated and exchange.trace.stop_condition is None:
            exchange.trace.stop("agent_completed")
        return await exchange.close()

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **kwargs: Any) -> AsyncIterator[Exchange]:
        exchange = self.driver.open_exchange(task, self.name)
        try:
            yield exchange
        finally:
            await exchange.close()


class Exchange:
    """A seat's conversation held open turn by turn (the surface of ``vf.Interaction``)."""

    def __init__(self, driver: EpisodeDriver, task: Any, seat: str) -> None:
        vf = import_verifiers()
        from verifiers.v1.trace import AgentInfo, TraceTask

        self.driver, self.task = driver, task
        self.trace = vf.Trace(
            task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            agent=AgentInfo(config=vf.AgentConfig(), name=seat),
        )
        self._stops = task.hooks("stop")
        self._started = self._closed = False
        system, prompt = task.data.system_prompt, task.data.prompt
        self._append([vf.SystemMessage(content=system)] if system else [], sampled=False)
        if prompt is not None:
            self._append([vf.UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt), sampled=False)

    async def turn(self, message: Any = None) -> Any:
        from verifiers.v1.agent import Segment
        from verifiers.v1.dialects import parse_message
        from verifiers.v1.types import AssistantMessage, UserMessage

        if self._closed or self.trace.stop_condition is not None:
            return Segment(messages=[], terminated=True)
        prompted = not self._started and self.task.data.prompt is not None
        if (message is None) != prompted:
            raise ValueError("a prompted task opens with a bare turn(); later turns need a message")
        if message is not None:
            messages = [UserMessage(content=message)] if isinstance(message, str) else message
            self._append([parse_message(m) if isinstance(m, dict) else m for m in messages], sampled=False)
        self._started = True
        unseen = [node.message for node in self.trace.nodes[self.driver.seen :]]
        text = await self.driver.ask(unseen)
        self.driver.seen = len(self.trace.nodes) + 1
        reply = AssistantMessage(content=text)
        self._append([reply], sampled=True)
        await self._check_stops()
        return Segment(messages=[reply])

    async def close(self) -> Any:
        """End the exchange (``user_closed`` unless something stopped it) and score it once."""
        if not self._closed:
            self._closed = True
            if self.trace.stop_condition is None:
                self.trace.stop("user_closed")
            self.trace.is_completed = self.trace.ok = True
            await self.task.score(self.trace)
            self.driver.traces.append(self.trace)
        return self.trace

    async def _check_stops(self) -> None:
        from verifiers.v1.session import call_hook

        for stop in self._stops:
            if await call_hook(stop, {"task": self.task, "trace": self.trace, type(self.trace): self.trace}):
                self.trace.stop(stop.__name__)
                return

    def _append(self, messages: list[Any], *, sampled: bool) -> None:
        from verifiers.v1.graph import MessageNode

        for message in messages:
            parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
            self.trace.nodes.append(MessageNode(parent=parent, message=message, sampled=sampled))


class TurnSeats:
    """The ``agents`` handed to ``Env.run``: its one seat, under whatever name the env gives it."""

    def __init__(self, driver: EpisodeDriver) -> None:
        self._driver = driver
        self._seat: TurnSeat | None = None

    def __getattr__(self, name: str) -> TurnSeat:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._seat is None:
            self._seat = TurnSeat(self._driver, name)
        elif self._seat.name != name:
            raise NotImplementedError(
                f"the env plays seats {self._seat.name!r} and {name!r}: turngym plays single-agent v1 envs only"
            )
        return self._seat


class EpisodeDriver:
    """One ``Env.run(task, agents)`` advanced turn by turn on a private event loop (module docstring)."""

    def __init__(self, vf_env: Any, task: Any) -> None:
        self.vf_env, self.task = vf_env, task
        self.traces: list[Any] = []
        self.seen = 0  # trace nodes already shown to the agent, its own replies included
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task | None = None
        self._asked: asyncio.Future | None = None
        self._answer: asyncio.Future | None = None

    def open_exchange(self, task: Any, seat: str) -> Exchange:
        if self.traces or self.seen:
            raise NotImplementedError("the env opened a second exchange: turngym plays one exchange per episode")
        return Exchange(self, task, seat)

    async def ask(self, messages: list[Any]) -> str:
        self._answer = self._loop.create_future()
        if self._asked is not None and not self._asked.done():
            self._asked.set_result(messages)
        return await self._answer

    def start(self) -> Turn:
        """Start the episode; return the first request for a reply (or its end, for an episode with no turn)."""
        self._task = self._loop.create_task(self.vf_env.run(self.task, TurnSeats(self)))
        return self._advance()

    def respond(self, text: str) -> Turn:
        if self._answer is None or self._answer.done():
            raise RuntimeError("the verifiers episode is not waiting for a reply")
        self._answer.set_result(text)
        return self._advance()

    def close(self) -> None:
        """Cancel an unfinished episode (its exchange still closes) and close the loop; closing twice is harmless."""
        if self._loop.is_closed():
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            _end_loop(self._loop, self._task)
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(_end_loop, self._loop, self._task).result()

    def close_when_dropped(self) -> None:
        """:meth:`close` for an episode nobody closed (its env's finalizer); the garbage collector may call it.

        Where another event loop runs in this thread (a server's, interrupted by the garbage collector), the
        episode unwinds in a thread of its own, not waited on: waiting could block that loop, or deadlock on
        a lock this thread holds.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.close()
            return
        threading.Thread(target=self.close, name="verifiers-episode-end", daemon=True).start()

    def _advance(self) -> Turn:
        assert self._task is not None
        self._asked = asked = self._loop.create_future()
        self._run(asyncio.wait([self._task, asked], return_when=asyncio.FIRST_COMPLETED))
        if asked.done():
            return Turn(new_messages=asked.result())
        self._task.result()  # re-raises what the env raised, if anything
        return Turn(finished=True)

    def _run(self, awaitable: Coroutine[Any, Any, Any]) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop.run_until_complete(awaitable)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(self._loop.run_until_complete, awaitable).result()


def _end_loop(loop: asyncio.AbstractEventLoop, task: asyncio.Task | None) -> None:
    """Cancel ``task`` and whatever else is pending on ``loop``, let them unwind, close ``loop``.

    No event loop may be running in the calling thread.
    """
    pending = {t for t in asyncio.all_tasks(loop) if not t.done()}
    if task is not None and not task.done():
        pending.add(task)
    for pending_task in pending:
        pending_task.cancel()

    async def unwind() -> None:
        if pending:
            await asyncio.wait(pending)
        await loop.shutdown_asyncgens()

    try:
        loop.run_until_complete(unwind())
    finally:
        loop.close()
