"""The ``openai`` engine: any OpenAI-compatible chat endpoint, text in and text out. Evaluation only.

OpenAI's API, vLLM, SGLang's ``/v1/chat/completions``, llama.cpp's server and the hosted providers
speak the same chat-completions JSON. This engine sends chat messages and returns the reply as
text: :meth:`OpenAIEngine.chat` returns a :class:`~agents.engines.base.Generation` with ``text`` set
and *empty* ``output_ids`` and ``logprobs``. Without the sampled token ids there is no trajectory to
train on (token ids are never re-derived from text), so this engine serves evaluation and play, never
training; :meth:`OpenAIEngine.generate` and :meth:`OpenAIEngine.update_weights` raise.

Tool calls. An endpoint that parses tool calls returns them as OpenAI ``tool_calls`` instead of text.
The engine writes each one back into the text as a Hermes block, after the message content (one
newline between parts)::

    <tool_call>
    {"name": "move", "arguments": {"direction": "up"}}
    </tool_call>

so the agent parses the reply the same way whichever engine produced it. ``arguments`` that are not
valid JSON are kept as the raw string (a malformed call is the model's mistake, reported downstream).

Sampling: ``max_new_tokens`` is sent as ``max_completion_tokens`` (or ``max_tokens``, see
:class:`OpenAIConfig`), ``temperature``, ``top_p`` and ``seed`` as themselves; ``top_k > 0`` and
``stop_token_ids`` have no OpenAI field and go in the request body as ``top_k`` and
``stop_token_ids``, which vLLM and SGLang read (OpenAI's own API rejects them, so leave them unset
there). Finish reasons: ``stop`` and ``tool_calls`` (and the legacy ``function_call``) are ``stop``,
``length`` is ``length``, anything else (``content_filter``) is ``abort``. Usage numbers feed
:meth:`OpenAIEngine.stats` (``prompt_tokens_details.cached_tokens`` as cached prompt tokens).

Retries with backoff on connection errors, 408/409/429 and 5xx are the ``openai`` SDK's own
(``max_retries``); at most ``max_concurrency`` requests are in flight at once. ``openai`` is imported
when the engine is built; without it an ImportError says ``pip install openai``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agents.engines.base import EngineStats, FinishReason, Generation, SamplingParams, WeightSync

if TYPE_CHECKING:
    from agents.engines.registry import EngineSpec

__all__ = ["OpenAIConfig", "OpenAIEngine", "connect_openai", "render_tool_calls"]

_FINISH_REASONS: dict[str | None, FinishReason] = {
    "stop": "stop",
    "tool_calls": "stop",
    "function_call": "stop",
    "length": "length",
}


@dataclass(frozen=True)
class OpenAIConfig:
    """An endpoint (``base_url``; ``None`` = OpenAI's), a model name, and the client's limits.

    ``api_key`` falls back to ``$OPENAI_API_KEY``; local servers that need no key accept any string.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    max_concurrency: int = 16
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must name the endpoint's model")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def render_tool_calls(content: str | None, tool_calls: Sequence[Any] | None) -> str:
    """The message content followed by one Hermes ``<tool_call>`` block per OpenAI tool call.

    ``tool_calls`` items are SDK objects or dicts with ``function.name`` and ``function.arguments``
    (a JSON string).
    """
    parts = [content] if content else []
    for call in tool_calls or ():
        function = call["function"] if isinstance(call, Mapping) else call.function
        name = function["name"] if isinstance(function, Mapping) else function.name
        raw = function.get("arguments") if isinstance(function, Mapping) else function.arguments
        payload = json.dumps({"name": name, "arguments": _arguments(raw)}, ensure_ascii=False)
        parts.append(f"<tool_call>\n{payload}\n</tool_call>")
    return "\n".join(parts)


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as error:
        raise ImportError("the openai engine needs the OpenAI SDK: pip install openai") from error
    return openai


class OpenAIEngine:
    """Chat completions from an OpenAI-compatible endpoint (contract: module docstring)."""

    name = "openai"
    weight_sync: WeightSync = "none"

    def __init__(self, config: OpenAIConfig) -> None:
        self._openai = _import_openai()
        api_key = config.api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ValueError(
                "no API key: pass api_key or set OPENAI_API_KEY (any non-empty string for servers that need none)"
            )
        self.config = config
        self._client = self._openai.AsyncOpenAI(
            api_key=api_key, base_url=config.base_url, timeout=config.timeout_s, max_retries=config.max_retries
        )
        self._semaphore = asyncio.Semaphore(config.max_concurrency)
        self._stats = EngineStats()
        self._in_flight = 0
        self._busy_since = 0.0
        self._closed = False

    def _request(self, messages: Sequence[Mapping[str, Any]], sampling: SamplingParams, tools: Any) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(message) for message in messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            self.config.max_tokens_field: sampling.max_new_tokens,
        }
        if sampling.seed is not None:
            request["seed"] = sampling.seed
        if tools:
            request["tools"] = list(tools)
        extra_body: dict[str, Any] = {}
        if sampling.top_k > 0:
            extra_body["top_k"] = sampling.top_k
        if sampling.stop_token_ids:
            extra_body["stop_token_ids"] = list(sampling.stop_token_ids)
        if extra_body:
            request["extra_body"] = extra_body
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        async with self._semaphore:
            if self._in_flight == 0:
                self._busy_since = time.perf_counter()
            self._in_flight += 1
            try:
                return await self._client.chat.completions.create(**request)
            except self._openai.BadRequestError as error:
                raise ValueError(f"the endpoint rejected the request (too long a conversation?): {error}") from error
            finally:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._stats.busy_seconds += time.perf_counter() - self._busy_since

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        sampling: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Generation:
        """The assistant's reply to ``messages`` as text (tool calls as Hermes blocks); ids and logprobs empty."""
        if self._closed:
            raise RuntimeError("this OpenAIEngine is closed")
        response = await self._create(self._request(messages, sampling, tools))
        if not response.choices:
            raise RuntimeError(f"{self.config.base_url or 'OpenAI'} returned no choices: {response}")
        choice = response.choices[0]
        text = render_tool_calls(choice.message.content, choice.message.tool_calls)
        usage = response.usage
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached_tokens = int(getattr(details, "cached_tokens", 0) or 0)
        self._stats.requests += 1
        self._stats.prompt_tokens += prompt_tokens
        self._stats.cached_prompt_tokens += cached_tokens
        self._stats.generated_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        return Generation(
            output_ids=(),
            logprobs=(),
            finish_reason=_FINISH_REASONS.get(choice.finish_reason, "abort"),
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
            text=text,
        )

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        raise NotImplementedError(
            "OpenAIEngine is text-level: call chat(messages, sampling, tools); for token ids use hf or sglang"
        )

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        raise NotImplementedError("OpenAIEngine serves evaluation only: an OpenAI-compatible endpoint takes none")

    def stats(self) -> EngineStats:
        snapshot = EngineStats(**{name: getattr(self._stats, name) for name in EngineStats.__dataclass_fields__})
        snapshot.extra = {}
        if self._in_flight:
            snapshot.busy_seconds += time.perf_counter() - self._busy_since
        return snapshot

    async def stats_async(self) -> EngineStats:
        return self.stats()

    async def instance_async(self) -> str:
        return f"openai-{id(self):x}"  # the endpoint's weights are not ours to lose

    async def close(self) -> None:
        """Close the HTTP client; later calls raise. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._client.close()


def connect_openai(spec: EngineSpec) -> OpenAIEngine:
    """The ``openai`` row of :mod:`agents.engines.registry`: the endpoint ``spec.urls[0]`` serving ``spec.model``."""
    if len(spec.urls) != 1:
        raise ValueError(f"the openai engine talks to one endpoint (a .../v1 URL), got {len(spec.urls)}")
    config = OpenAIConfig(
        model=spec.model, base_url=spec.urls[0], api_key=spec.api_key, max_concurrency=spec.max_batch_size
    )
    return OpenAIEngine(config)
