"""An OpenEnv environment server as a turngym environment: ``envs.make("openenv", base_url=...)``.

OpenEnv servers speak one protocol: a WebSocket session at ``/ws`` with ``reset`` / ``step`` /
``state`` messages, typed actions and observations whose JSON schemas ``/schema`` publishes. This
adapter plays such a server turn by turn through OpenEnv's own ``GenericEnvClient``.

Where the server comes from, the first that is given: ``base_url`` (a running server), ``image``
(a local Docker image, started with its port published on 127.0.0.1 only and stopped at ``close``),
else ``serve`` (a registered turngym id served by :mod:`envs.adapters.openenv_server` from a thread of this
process, shared by every adapter with the same ``serve`` and ``serve_options``; the default,
``sokoban``, makes ``envs.make("openenv")`` work offline).

* Actions. The server's action schema decides how the model's text becomes an action. An action
  with one string field (``text``, ``message``, ``code``...; ``action_field`` picks one) gets the
  whole text. Otherwise the text must hold a JSON object (bare, in a code fence, or between the first
  ``{`` and the last ``}``) that validates against the schema; a single non-string field also takes
  a bare JSON value (``42``). Text that does not give a valid action is not sent: the observation
  explains what is expected, ``format_penalty`` is charged, ``info["action_is_valid"]`` is False.
  An action the server rejects (a validation or execution error) is treated the same way.
* Observations. From a turngym server (its observations carry ``text``, ``terminated``,
  ``truncated``...) everything maps one to one, its format penalty included, and ``oracle()``,
  ``valid_actions()``, ``instructions`` and ``tools`` come from the server. From any other server:
  ``observation_field`` (or the only field, else every non-empty field as ``name: value`` lines),
  ``done`` as terminated, ``reward`` (``None`` is 0), ``success`` when the final reward reaches
  ``success_threshold``.
* Failures of the server itself (unreachable, closed mid-episode, a timeout) raise
  :class:`ConnectionError` naming the URL: an infrastructure failure, not a model mistake.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Mapping
from typing import Any

from envs.adapters.openenv_server import import_openenv, local_server
from envs.cleanup import close_later, start_cleanup_thread
from envs.core import StepOutcome, TextEnv

__all__ = ["OpenEnvEnv", "TextActionCodec"]

DEFAULT_INSTRUCTIONS = "You interact with the environment {name} turn by turn. Action format: {action_format}"
_TURNGYM_FIELDS = {"text", "messages", "terminated", "truncated", "action_is_valid"}
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class TextActionCodec:
    """Model text to an OpenEnv action dict, for one action JSON schema (see the module docstring)."""

    def __init__(self, schema: Mapping[str, Any], action_field: str | None = None) -> None:
        import jsonschema

        self.schema = dict(schema)
        self.validator = jsonschema.Draft202012Validator(self.schema)
        properties = {k: v for k, v in self.schema.get("properties", {}).items() if k != "metadata"}
        if action_field is not None and action_field not in properties:
            raise ValueError(f"action_field {action_field!r} is not a field of the action: {sorted(properties)}")
        self.field = action_field or (next(iter(properties)) if len(properties) == 1 else None)
        self.text_field = self.field if self.field and properties[self.field].get("type") == "string" else None

    @property
    def action_format(self) -> str:
        if self.text_field:
            return f"free text (sent as the action's {self.text_field!r} field)"
        shown = dict(self.schema)  # without OpenEnv's optional ``metadata`` field, which a model never needs
        shown["properties"] = {k: v for k, v in shown.get("properties", {}).items() if k != "metadata"}
        return f"a JSON object matching this JSON schema: {json.dumps(shown, separators=(',', ':'))}"

    def encode(self, text: str) -> tuple[dict[str, Any] | None, str]:
        """``(action, "")`` or ``(None, why the text is not an action)``."""
        if self.text_field:
            return {self.text_field: text}, ""
        value = _find_json(text)
        if value is _NOTHING:
            return None, "no JSON object found in the answer"
        if self.field and not isinstance(value, dict):
            value = {self.field: value}
        if not isinstance(value, dict):
            return None, f"the answer is JSON but not an object: {json.dumps(value)[:200]}"
        errors = sorted(self.validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "the action"
            return None, f"{where}: {errors[0].message[:300]}"
        return value, ""


_NOTHING = object()


def _find_json(text: str) -> Any:
    """The first JSON value found in ``text``: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return _NOTHING


class OpenEnvEnv(TextEnv):
    """An OpenEnv server played turn by turn (the module docstring describes the mapping).

    Args:
        base_url: a running OpenEnv server, e.g. ``http://127.0.0.1:8000``.
        image: a local Docker image of an OpenEnv server (listening on its port 8000).
        serve: without ``base_url`` and ``image``: a registered turngym id to serve from this process.
        serve_options: constructor options of the served environment.
        action_field: the action field that receives the text (default: the only field, if there is one).
        observation_field: the observation field shown to the model (default: see the module docstring).
        instructions: the system prompt (default: from a turngym server, else a generic one).
        success_threshold: for other servers: ``success`` when an episode ends with reward >= this.
        max_turns: turngym's turn limit (truncation), on top of the server's own.
        format_penalty: charged for text that gives no valid action.
        max_action_chars: text beyond this many characters is cut before it is sent.
        connect_timeout_s, message_timeout_s: the WebSocket's timeouts.
        render_mode: ``"ansi"`` or ``None``.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        image: str | None = None,
        serve: str | None = "sokoban",
        serve_options: Mapping[str, Any] | None = None,
        action_field: str | None = None,
        observation_field: str | None = None,
        instructions: str | None = None,
        success_threshold: float | None = None,
        max_turns: int | None = None,
        format_penalty: float = 0.1,
        max_action_chars: int = 1 << 20,
        connect_timeout_s: float = 30.0,
        message_timeout_s: float = 60.0,
        render_mode: str | None = "ansi",
    ) -> None:
        super().__init__(max_turns=max_turns, format_penalty=format_penalty, render_mode=render_mode)
        if base_url and image:
            raise ValueError("give either base_url (a running server) or image (a Docker image), not both")
        if not (base_url or image or serve):
            raise ValueError("give base_url (a running server), image (a Docker image) or serve (a turngym env id)")
        if max_action_chars < 1:
            raise ValueError(f"max_action_chars must be positive, got {max_action_chars}")
        import_openenv()
        self.observation_field = observation_field
        self.success_threshold = success_threshold
        self.max_action_chars = int(max_action_chars)
        self._provider = None
        if base_url:
            self.base_url = base_url.rstrip("/")
        elif image:
            self._provider, self.base_url = _start_container(image)
        else:
            self.base_url = local_server(str(serve), serve_options).url
        schema = _get_json(self.base_url, "/schema", connect_timeout_s)
        self.name = _get_json(self.base_url, "/metadata", connect_timeout_s).get("name") or self.base_url
        self.codec = TextActionCodec(schema["action"], action_field)
        self.is_turngym = set(schema["observation"].get("properties", {})) >= _TURNGYM_FIELDS
        self.action_format = self.codec.action_format
        self._default_instructions = instructions
        generic = DEFAULT_INSTRUCTIONS.format(name=self.name, action_format=self.action_format)
        self.instructions = instructions or generic
        self._client = _connect(self.base_url, connect_timeout_s, message_timeout_s, self._provider)
        # Garbage collection may run the finalizer in any thread (a server's event loop, inside a lock), so
        # the session is closed from the cleanup thread (envs/cleanup.py).
        start_cleanup_thread()
        self._finalizer = weakref.finalize(self, close_later, _close_client, self._client)
        self._last_text = ""

    # ----------------------------------------------------------------------------------------------
    # TextEnv
    # ----------------------------------------------------------------------------------------------
    def _reset(self, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        seed = int(self.np_random.integers(2**31 - 1)) if self._reset_seed is None else self._reset_seed
        data = {"seed": seed, "options": dict(options)} if self.is_turngym else {"seed": seed, **options}
        result = self._call("reset", **data)
        observation = result.observation
        if self.is_turngym:
            self.instructions = self._default_instructions or observation.get("instructions") or self.instructions
            self.tools = observation.get("tools")
        self._last_text = self._observation_text(observation)
        info = dict(result.metadata or {}) if self.is_turngym else {"server_metadata": result.metadata or {}}
        return self._last_text, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed  # the server is reset with the same seed: envs.make("openenv") mirrors its env
        return super().reset(seed=seed, options=options)

    def _step(self, action: str) -> StepOutcome:
        text = action[: self.max_action_chars]
        payload, problem = self.codec.encode(text)
        extra = {"action_truncated": len(action) > len(text)}
        if payload is None:
            return self._format_error(problem, extra)
        try:
            result = self._call("step", payload)
        except _ActionRejected as exc:
            return self._format_error(str(exc), extra)
        observation = result.observation
        self._last_text = self._observation_text(observation)
        reward = float(result.reward or 0.0)
        if not self.is_turngym:
            extra["server_metadata"] = result.metadata or {}
            done = bool(result.done)
            success = done and self.success_threshold is not None and reward >= self.success_threshold
            return StepOutcome(self._last_text, reward=reward, terminated=done, success=success, extra_info=extra)
        extra.update((result.metadata or {}).items())
        valid = bool(observation.get("action_is_valid", True))
        messages = tuple(observation.get("messages") or ()) or None
        return StepOutcome(
            self._last_text,
            # The server's reward already carries its format penalty; TextEnv subtracts ours for an
            # invalid action, so it is added back here to charge the penalty once.
            reward=reward + (0.0 if valid else self.format_penalty),
            terminated=bool(observation.get("terminated")),
            truncated=bool(observation.get("truncated")),
            success=bool(observation.get("success")),
            action_is_valid=valid,
            metrics=observation.get("metrics") or {},
            extra_info=extra,
            observation_messages=messages if messages and messages[0].get("role") != "user" else None,
        )

    def render_text(self, color: bool = False) -> str:
        header = f"OpenEnv {self.name} at {self.base_url}, turn {self.turn}"
        body = self._state().get("render") if self.is_turngym else None
        return "\n".join([f"\x1b[1m{header}\x1b[0m" if color else header, body or self._last_text])

    def oracle(self) -> list[str] | None:
        if not self.is_turngym:
            return None
        return [] if self.episode_over else self._state().get("oracle")

    def valid_actions(self) -> list[str] | None:
        if not self.is_turngym or self.episode_over:
            return None
        return self._state().get("valid_actions")

    def close(self) -> None:
        if self._finalizer.detach() is not None:
            _close_client(self._client)

    # ----------------------------------------------------------------------------------------------
    # Helpers
    # ----------------------------------------------------------------------------------------------
    _reset_seed: int | None = None

    def _format_error(self, problem: str, extra: dict[str, Any]) -> StepOutcome:
        text = f"Invalid action ({problem}). Expected: {self.action_format}"
        return StepOutcome(text, action_is_valid=False, extra_info={**extra, "format_error": problem})

    def _state(self) -> dict[str, Any]:
        state = self._call("state")
        return state if isinstance(state, dict) else {}

    def _observation_text(self, observation: Mapping[str, Any]) -> str:
        fields = {k: v for k, v in observation.items() if k != "metadata"}
        if self.observation_field is not None:
            return _as_text(fields.get(self.observation_field, ""))
        if self.is_turngym:
            return str(fields.get("text", ""))
        if len(fields) == 1:
            return _as_text(next(iter(fields.values())))
        return "\n".join(f"{k}: {_as_text(v)}" for k, v in fields.items() if v not in (None, "", [], {}))

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, method)(*args, **kwargs)
        except RuntimeError as exc:  # OpenEnv's client raises RuntimeError("Server error: ... (code: ...)")
            message = str(exc)
            if method == "step" and ("VALIDATION_ERROR" in message or "EXECUTION_ERROR" in message):
                raise _ActionRejected(message) from exc
            raise ConnectionError(f"the OpenEnv server at {self.base_url} failed on {method}: {message}") from exc
        except (OSError, TimeoutError, ConnectionError) as exc:
            raise ConnectionError(f"the OpenEnv server at {self.base_url} is unreachable ({method}): {exc}") from exc
        except Exception as exc:  # websockets' ConnectionClosed and friends: the session is gone
            if type(exc).__module__.startswith("websockets"):
                raise ConnectionError(f"the OpenEnv session at {self.base_url} was lost ({method}): {exc}") from exc
            raise


class _ActionRejected(Exception):
    """The server refused an action (validation or execution error): a model mistake, not a failure."""


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _get_json(base_url: str, path: str, timeout_s: float) -> dict[str, Any]:
    import requests

    try:
        response = requests.get(base_url + path, timeout=timeout_s, proxies={"http": None, "https": None})
        response.raise_for_status()
        return response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ConnectionError(f"no OpenEnv server answers at {base_url}{path}: {exc}") from exc


def _connect(base_url: str, connect_timeout_s: float, message_timeout_s: float, provider: Any) -> Any:
    from openenv.core import GenericEnvClient

    # No keepalive pings: a busy machine can starve a client's or a server's event loop for longer than
    # the ping timeout, which would kill a healthy session; message_timeout_s bounds every wait instead.
    client = GenericEnvClient(
        base_url=base_url,
        connect_timeout_s=connect_timeout_s,
        message_timeout_s=message_timeout_s,
        websocket_ping_interval_s=None,
        websocket_ping_timeout_s=None,
        provider=provider,
    ).sync()
    try:
        client.connect()
    except Exception as exc:
        _close_client(client)
        raise ConnectionError(f"cannot open an OpenEnv session at {base_url}: {exc}") from exc
    return client


def _close_client(client: Any) -> None:
    try:
        client.close()
    except Exception:  # closing a session whose server is already gone: nothing left to release
        return


def _start_container(image: str) -> tuple[Any, str]:
    """Start the local ``image`` (never pulled) with its port 8000 on 127.0.0.1 only; stopped with the client."""
    from openenv.core.containers.runtime.providers import LocalDockerProvider

    class LoopbackDockerProvider(LocalDockerProvider):
        """OpenEnv's local Docker provider, publishing the server's port on the loopback interface only."""

        def start_container(self, image: str, port: int | None = None, env_vars: Any = None, **kwargs: Any) -> str:
            import subprocess

            port = port or self._find_available_port()
            self._container_name = self._generate_container_name(image)
            command = ["docker", "run", "-d", "--pull", "never", "--name", self._container_name]
            command += ["-p", f"127.0.0.1:{port}:8000"]
            for key, value in (env_vars or {}).items():
                command += ["-e", f"{key}={value}"]
            result = subprocess.run([*command, image], capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"docker run {image} failed: {result.stderr.strip()}")
            self._container_id = result.stdout.strip()
            return f"http://127.0.0.1:{port}"

    provider = LoopbackDockerProvider()
    base_url = provider.start_container(image)
    try:
        provider.wait_for_ready(base_url)
    except Exception:
        provider.stop_container()
        raise
    return provider, base_url
