"""The JSON that :class:`~agents.engines.sglang.SGLangEngine` exchanges with SGLang's native ``/generate``.

Pure functions, no I/O. The field names follow the native HTTP API of SGLang 0.5.23 (the PyPI release;
request fields as in ``sglang/srt/managers/io_struct.py::GenerateReqInput`` and the generated schema
``sglang/api/v1/api_types.py``, response as built by ``sglang/srt/managers/tokenizer_manager.py``).

Request (one prompt, token ids in, no streaming)::

    {"input_ids": [...], "return_logprob": true, "logprob_start_len": -1,
     "sampling_params": {"max_new_tokens": n, "temperature": t, "top_p": p, "top_k": k,
                         "stop_token_ids": [...], "sampling_seed": s}}

``logprob_start_len = -1`` asks for output-token logprobs only (prompt logprobs would force SGLang
to recompute the prompt instead of serving it from the radix cache). SGLang spells "no top-k" as
``top_k = -1`` (``0`` is rejected); ``stop_token_ids`` and ``sampling_seed`` are sent only when set
(``sampling_seed`` is a newer field: a server that predates it rejects a seeded request). SGLang adds
the model's own end-of-sequence ids to the stop set itself.

Response::

    {"text": "...", "output_ids": [...],
     "meta_info": {"finish_reason": {"type": "stop", "matched": id} | {"type": "length", "length": n}
                                    | {"type": "abort", "message": "...", "status_code": ...},
                   "prompt_tokens": n, "completion_tokens": n, "cached_tokens": n,
                   "output_token_logprobs": [[logprob, token_id, text_or_null], ...], ...}}

``output_ids`` run through the matched stop token (SGLang trims the stop token from ``text`` only), so
the stop token is the last id, as :mod:`agents.engines.base` requires. The reported logprob is
``log_softmax(logits / temperature)`` (SGLang's default, ``SGLANG_RETURN_ORIGINAL_LOGPROB`` unset), and
``log_softmax(logits)`` for greedy requests, which SGLang runs as ``top_k = 1`` at temperature 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.engines.base import FinishReason, Generation, SamplingParams

__all__ = ["SGLangProtocolError", "build_generate_request", "parse_generate_response", "sampling_params_json"]

_TOP_K_OFF = -1  # SGLang's "whole vocabulary"


class SGLangProtocolError(RuntimeError):
    """A server answered with JSON that does not have the shape of SGLang's ``/generate`` response."""


def sampling_params_json(sampling: SamplingParams) -> dict[str, Any]:
    """``SamplingParams`` as SGLang's ``sampling_params`` object (only fields SGLang 0.5.23's schema admits)."""
    params: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "top_k": sampling.top_k if sampling.top_k > 0 else _TOP_K_OFF,
    }
    if sampling.stop_token_ids:
        params["stop_token_ids"] = [int(t) for t in sampling.stop_token_ids]
    if sampling.seed is not None:
        params["sampling_seed"] = int(sampling.seed)
    return params


def build_generate_request(
    input_ids: Sequence[int], sampling: SamplingParams, rid: str | None = None
) -> dict[str, Any]:
    """The ``/generate`` body for one token-in-token-out request with output logprobs."""
    if len(input_ids) == 0:
        raise ValueError("input_ids is empty: SGLang needs at least one prompt token")
    body: dict[str, Any] = {
        "input_ids": [int(t) for t in input_ids],
        "sampling_params": sampling_params_json(sampling),
        "return_logprob": True,
        "logprob_start_len": -1,
    }
    if rid is not None:
        body["rid"] = rid
    return body


def _finish_reason(meta_info: Mapping[str, Any]) -> tuple[FinishReason, str]:
    """``(finish_reason, abort message)`` from ``meta_info["finish_reason"]``."""
    reason = meta_info.get("finish_reason")
    if not isinstance(reason, Mapping) or reason.get("type") not in ("stop", "length", "abort"):
        raise SGLangProtocolError(f"meta_info.finish_reason is {reason!r}; expected a type of stop|length|abort")
    return reason["type"], str(reason.get("message") or "")


def _logprobs(meta_info: Mapping[str, Any], output_ids: Sequence[int]) -> tuple[float, ...]:
    entries = meta_info.get("output_token_logprobs")
    if not isinstance(entries, list):
        raise SGLangProtocolError("meta_info.output_token_logprobs is missing: was return_logprob sent?")
    if len(entries) != len(output_ids):
        raise SGLangProtocolError(f"{len(output_ids)} output ids but {len(entries)} output_token_logprobs")
    logprobs = []
    for position, (entry, token_id) in enumerate(zip(entries, output_ids, strict=True)):
        if not isinstance(entry, list | tuple) or len(entry) < 2 or entry[0] is None:
            raise SGLangProtocolError(f"output_token_logprobs[{position}] is {entry!r}; expected [logprob, id, text]")
        if int(entry[1]) != token_id:
            raise SGLangProtocolError(
                f"output_token_logprobs[{position}] is for token {entry[1]} but output_ids[{position}] is {token_id}"
            )
        logprobs.append(float(entry[0]))
    return tuple(logprobs)


def parse_generate_response(body: Any) -> Generation:
    """A :class:`Generation` from a ``/generate`` response body.

    An abort whose ``status_code`` is 400 (SGLang's answer to a prompt longer than the context) raises
    ``ValueError`` with SGLang's message; any other abort is returned with ``finish_reason="abort"``.
    Raises :class:`SGLangProtocolError` when a field is missing or inconsistent.
    """
    if not isinstance(body, Mapping) or not isinstance(body.get("meta_info"), Mapping):
        raise SGLangProtocolError(f"not an SGLang /generate response (no meta_info): {str(body)[:200]}")
    meta_info = body["meta_info"]
    output_ids = body.get("output_ids")
    if not isinstance(output_ids, list):
        raise SGLangProtocolError("the /generate response has no output_ids list")
    finish_reason, message = _finish_reason(meta_info)
    if finish_reason == "abort" and meta_info["finish_reason"].get("status_code") == 400:
        raise ValueError(f"SGLang rejected the request: {message}")
    output_ids = [int(t) for t in output_ids]
    return Generation(
        output_ids=tuple(output_ids),
        logprobs=_logprobs(meta_info, output_ids),
        finish_reason=finish_reason,
        prompt_tokens=int(meta_info.get("prompt_tokens", 0)),
        cached_tokens=int(meta_info.get("cached_tokens", 0)),
    )
