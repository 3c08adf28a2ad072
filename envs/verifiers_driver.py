"""Driving a verifiers rollout one model turn at a time, for :class:`envs.verifiers.VerifiersEnv`.

verifiers runs an episode as one coroutine, ``Environment.rollout(input, client, model, ...)``, that
asks its ``client`` for every model response. :class:`TurnClient` is a client whose "model" is the
turngym agent: it hands each prompt out and waits for the action text. :class:`RolloutDriver` runs
the rollout and then the rubric on a private event loop, advancing it only inside :meth:`start` and
:meth:`respond`, so that the verifiers code (stop conditions, ``env_response``, cleanup handlers,
async reward functions) runs exactly as it would against a real model, and the environment's
``step`` stays synchronous. When the calling thread already runs an event loop, the private loop is
advanced in a helper thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from envs.optional import import_pinned

__all__ = ["VERIFIERS_INSTALL", "VERIFIERS_VERSION", "RolloutDriver", "Turn", "import_verifiers", "message_text"]

VERIFIERS_VERSION = "0.3.1"
# --no-deps: verifiers' dependency openai-agents ships a top-level ``agents`` package that shadows
# turngym's; the extra installs its other dependencies.
VERIFIERS_INSTALL = f'pip install --no-deps verifiers=={VERIFIERS_VERSION} && pip install "turngym[verifiers]"'


def import_verifiers() -> Any:
    """The ``verifiers`` module (classic MultiTurnEnv API), or an :class:`ImportError` naming the pinned install."""
    return import_pinned("verifiers", VERIFIERS_VERSION, VERIFIERS_INSTALL, user="the verifiers adapter")


def message_text(message: Any) -> str:
    """The text of a verifiers message (a pydantic model or a dict): its str content, or its text parts joined."""
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


def message_role(message: Any) -> str:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    return str(role or "user")


@dataclass(frozen=True)
class Turn:
    """What the rollout did after being advanced: it asks for a response (``prompt``) or it ended (``state``)."""

    prompt: list[Any] | None = None
    state: Any = None

    @property
    def finished(self) -> bool:
        return self.state is not None


def _client_class() -> type:
    vf = import_verifiers()
    from verifiers.clients import Client
    from verifiers.types import Response, ResponseMessage

    class TurnClient(Client):
        """A verifiers client whose responses are the turngym agent's actions (module docstring)."""

        def __init__(self) -> None:
            super().__init__(None)
            self.asked: asyncio.Future | None = None  # resolved with the prompt when a response is needed
            self._answer: asyncio.Future | None = None

        def setup_client(self, config: Any) -> None:
            return None

        async def to_native_tool(self, tool: Any) -> Any:
            return tool

        async def to_native_prompt(self, messages: Any) -> tuple[Any, dict]:
            return messages, {}

        async def get_native_response(self, prompt: Any, model: str, sampling_args: Any, tools: Any = None, **kw: Any):
            self._answer = asyncio.get_running_loop().create_future()
            if self.asked is not None and not self.asked.done():
                self.asked.set_result(list(prompt))
            return await self._answer

        def answer(self, text: str) -> None:
            if self._answer is None or self._answer.done():
                raise RuntimeError("the verifiers rollout is not waiting for a response")
            self._answer.set_result(text)

        async def raise_from_native_response(self, response: Any) -> None:
            return None

        async def from_native_response(self, response: str) -> Any:
            message = ResponseMessage(content=response, finish_reason="stop", is_truncated=False)
            return Response(id="turngym", created=0, model="turngym-agent", message=message)

        async def close(self) -> None:
            return None

    del vf
    return TurnClient


class RolloutDriver:
    """One verifiers rollout, advanced turn by turn on a private event loop (module docstring)."""

    def __init__(self, vf_env: Any, row: dict[str, Any]) -> None:
        self.vf_env = vf_env
        self.row = row
        self.client = _client_class()()
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task | None = None

    def start(self) -> Turn:
        """Start the rollout; return the first request for a model response (or the end, for a 0-turn rollout)."""
        self._task = self._loop.create_task(self._rollout_and_score())
        return self._advance()

    def respond(self, text: str) -> Turn:
        """Give the model response ``text``; return the next request or the scored end state."""
        self.client.answer(text)
        return self._advance()

    def close(self) -> None:
        """Cancel an unfinished rollout (its cleanup handlers run) and close the loop."""
        if self._loop.is_closed():
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
            self._run(asyncio.wait([self._task]))
        self._loop.close()

    def __del__(self) -> None:
        # An environment dropped mid-episode: cancel its rollout so that verifiers' cleanup handlers run.
        if not sys.is_finalizing():
            with contextlib.suppress(Exception):
                self.close()

    async def _rollout_and_score(self) -> Any:
        env, rubric = self.vf_env, self.vf_env.rubric
        state = await env.rollout(self.row, self.client, "turngym-agent", {})
        if not env.score_rollouts:
            await rubric.dummy_score_rollout(state)
        elif rubric.has_group_rewards:
            await rubric.score_group([state])  # a group of one, as verifiers scores group rubrics
        else:
            await rubric.score_rollout(state)
        await rubric.cleanup(state)
        return state

    def _advance(self) -> Turn:
        assert self._task is not None
        self.client.asked = self._loop.create_future()
        asked = self.client.asked
        self._run(asyncio.wait([self._task, asked], return_when=asyncio.FIRST_COMPLETED))
        if asked.done():
            return Turn(prompt=asked.result())
        return Turn(state=self._task.result())  # re-raises what the rollout raised, if anything

    def _run(self, awaitable: Coroutine[Any, Any, Any]) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop.run_until_complete(awaitable)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(self._loop.run_until_complete, awaitable).result()
