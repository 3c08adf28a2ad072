"""Agent functions: an existing agent program, run once per episode against an OpenAI-compatible endpoint.

An agent is an async function that receives an ``openai.AsyncOpenAI`` client and a task and returns
the episode's reward::

    async def agent(client: openai.AsyncOpenAI, task) -> float:
        reply = await client.chat.completions.create(model="any", messages=[...], tools=[...])
        ...
        return 1.0 if solved else 0.0

It may return a number, or a mapping ``{"reward": float, "turn_rewards": [one per request],
"success": bool}``. It is named ``module:function`` or ``path/to/file.py:function``
(:func:`load_callable`). An agent written as a program instead is run by :func:`command_agent`: the
command gets ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (its client's key) and ``TURNGYM_TASK`` (the task
as JSON) in its environment and prints its reward (a number or the mapping above, as JSON) as the last line of its
standard output.

Tasks come from ``tasks(seed) -> task`` (``module:function`` or ``file.py:function``), or from a
JSON Lines file (task ``seed % lines``), or are the seed itself when no source is given
(:func:`load_tasks`).

:func:`play_session` runs one episode through a :class:`~agents.gateway.service.Gateway`: it opens
a session, gives the agent a client whose base URL is that session's, and finishes the session with
the returned reward; the result is the session's trajectories. The agent raising, hanging past
``timeout_s`` or returning something that is not a reward ends the episode in ``error`` (one
trajectory, never trained on) and the session is discarded. The agent's client sends
``$TURNGYM_API_KEY`` where it is set (the key a gateway in this process then requires, see
:mod:`agents.gateway.auth`). :func:`evaluate_agent` runs an agent on tasks against any
OpenAI-compatible endpoint, without a gateway, for evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.gateway.auth import PLACEHOLDER_KEY, client_api_key
from agents.trajectory import Trajectory

__all__ = [
    "AgentFn",
    "AgentOutcome",
    "command_agent",
    "evaluate_agent",
    "load_agent",
    "load_callable",
    "load_tasks",
    "play_session",
    "read_outcome",
]

AgentFn = Callable[[Any, Any], Awaitable[Any]]
API_KEY = PLACEHOLDER_KEY  # for endpoints that check no key; OpenAI's SDKs insist on one


@dataclass(frozen=True)
class AgentOutcome:
    """What an agent returned: the final reward, optional per-request rewards, optional success."""

    reward: float
    turn_rewards: list[float] | None = None
    success: bool | None = None


def read_outcome(value: Any) -> AgentOutcome:
    """An agent's return value as an :class:`AgentOutcome`; ``TypeError`` naming what is wrong."""
    if isinstance(value, Mapping):
        unknown = set(value) - {"reward", "turn_rewards", "success"}
        if unknown:
            raise TypeError(f"the agent returned unknown keys {sorted(unknown)}; use reward, turn_rewards, success")
        turn_rewards = value.get("turn_rewards")
        if turn_rewards is not None:
            turn_rewards = [_finite(r, "turn_rewards entry") for r in turn_rewards]
        success = value.get("success")
        return AgentOutcome(
            _finite(value.get("reward"), "reward"), turn_rewards, None if success is None else bool(success)
        )
    return AgentOutcome(_finite(value, "reward"))


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"the agent's {what} must be a finite number, got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------------------------- loading
def load_callable(entry: str) -> Callable[..., Any]:
    """``module:function`` or ``path/to/file.py:function`` as the callable it names."""
    module_name, sep, attribute = entry.rpartition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{entry!r} must be module:function or path/to/file.py:function")
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{entry!r}: no file {path}")
        spec = importlib.util.spec_from_file_location(f"turngym_user_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # so that the function pickles and its dataclasses work
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    try:
        found = getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{entry!r}: {module_name} has no attribute {attribute!r}") from None
    if not callable(found):
        raise ValueError(f"{entry!r} is not callable")
    return found


def load_agent(entry: str | None = None, command: str | None = None) -> AgentFn:
    """The agent function ``entry`` names, or :func:`command_agent` of ``command`` (exactly one)."""
    if (entry is None) == (command is None):
        raise ValueError("give exactly one of an agent function (module:function) and an agent command")
    if command is not None:
        return command_agent(command)
    agent = load_callable(entry)  # type: ignore[arg-type]
    if not (inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(type(agent).__call__)):
        raise ValueError(f"{entry!r} must be an async function: async def agent(client, task) -> reward")
    parameters = inspect.signature(agent).parameters
    if len(parameters) < 2:
        raise ValueError(f"{entry!r} must take (client, task); it takes ({', '.join(parameters)})")
    return agent


def load_tasks(source: str | None) -> Callable[[int], Any]:
    """``seed -> task`` from a ``module:function``, a JSON Lines file, or the seed itself (``None``)."""
    if source is None or source == "":
        return lambda seed: seed
    if source.endswith(".jsonl") and ":" not in Path(source).name:
        lines = [json.loads(line) for line in Path(source).read_text(encoding="utf-8").splitlines() if line.strip()]
        if not lines:
            raise ValueError(f"{source} holds no tasks")
        return lambda seed: lines[seed % len(lines)]
    return load_callable(source)


def command_agent(command: str, *, kill_grace_s: float = 2.0) -> AgentFn:
    """An agent function that runs ``command`` in a shell (module docstring); its process group is killed
    when the episode is cancelled (a hung program does not outlive its deadline)."""

    async def agent(client: Any, task: Any) -> Any:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": str(client.base_url).rstrip("/"),
            "OPENAI_API_KEY": str(client.api_key),
            "TURNGYM_TASK": json.dumps(task),
        }
        process = await asyncio.create_subprocess_shell(
            command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True
        )
        try:
            stdout, stderr = await process.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), kill_grace_s)
            raise
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"the agent command exited with status {process.returncode}: {tail[0]}")
        lines = stdout.decode(errors="replace").strip().splitlines()
        if not lines:
            raise RuntimeError("the agent command printed no reward (its last output line must be the reward)")
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            raise RuntimeError(f"the agent command's last output line is not a reward: {lines[-1][:200]!r}") from None

    return agent


# ---------------------------------------------------------------------------------------------- running
async def play_session(
    gateway: Any,
    base_url_for: Callable[[str], str],
    agent: AgentFn,
    task: Any,
    *,
    session_id: str,
    group_id: str = "",
    seed: int = 0,
    task_name: str = "agent",
    timeout_s: float | None = 300.0,
    sampling: Any = None,
    policy_version: int | None = None,
) -> list[Trajectory]:
    """One episode of ``agent`` on ``task`` through ``gateway`` (module docstring); never raises for the
    agent's failures (they become one ``error`` trajectory). ``sampling`` and ``policy_version``
    override the gateway's for this session (training: the rollout's temperature and weights)."""
    import openai

    started = time.perf_counter()
    gateway.open_session(
        session_id, group_id=group_id, seed=seed, task=task_name, sampling=sampling, policy_version=policy_version
    )
    client = openai.AsyncOpenAI(
        base_url=base_url_for(session_id), api_key=client_api_key(), max_retries=0, timeout=timeout_s
    )
    try:
        outcome = read_outcome(await asyncio.wait_for(agent(client, task), timeout_s))
        trajectories = gateway.finish(session_id, outcome.reward, outcome.turn_rewards, outcome.success)
        if not trajectories:
            raise RuntimeError("the agent made no request through its client")
    except Exception as exc:  # the agent's failure is the episode's, not the caller's
        gateway.discard(session_id)
        message = f"the agent timed out after {timeout_s} s" if isinstance(exc, TimeoutError) else _one_line(exc)
        return [Trajectory(task_name, seed, group_id, termination="error", error=message)]
    except BaseException:  # cancelled (its group was dropped, the deadline passed): leave no session behind
        gateway.discard(session_id)
        raise
    finally:
        with contextlib.suppress(Exception):
            await client.close()
    for trajectory in trajectories:
        trajectory.timings["total_s"] = time.perf_counter() - started
    return trajectories


async def evaluate_agent(
    agent: AgentFn,
    tasks: Callable[[int], Any],
    seeds: list[int],
    *,
    base_url: str,
    api_key: str = API_KEY,
    concurrency: int = 8,
    timeout_s: float | None = 300.0,
) -> list[tuple[int, AgentOutcome | None, str | None]]:
    """Run ``agent`` once per seed against any OpenAI-compatible ``base_url``: ``(seed, outcome, error)``."""
    import openai

    limit = asyncio.Semaphore(concurrency)

    async def one(seed: int) -> tuple[int, AgentOutcome | None, str | None]:
        async with limit:
            client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)
            try:
                return seed, read_outcome(await asyncio.wait_for(agent(client, tasks(seed)), timeout_s)), None
            except Exception as exc:
                return seed, None, _one_line(exc)
            finally:
                with contextlib.suppress(Exception):
                    await client.close()

    return list(await asyncio.gather(*(one(seed) for seed in seeds)))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
