"""Chat rendering as token ids that only ever grow: prompt, sampled turns, and the template's glue between them.

A multi-turn episode is one token sequence::

    prompt_ids(messages)                      system + first observation + generation prompt
    + sampled ids of turn 1                   exactly as the engine returned them (stop token included)
    + continuation_ids(...)                   end-of-turn glue, next observation(s), generation prompt
    + sampled ids of turn 2
    + ...

so the ids at turn ``k`` are always a prefix of the ids at turn ``k + 1`` (the engine's prefix cache
and the learner see one consistent sequence), and sampled tokens are never decoded and re-encoded.
The episode loop uses it like this::

    renderer = ChatRenderer(tokenizer, tools=env.tools)
    prompt_ids = renderer.prompt_ids(env.messages())          # after env.reset()
    # each turn: generation = await engine.generate(prompt_ids + response_ids, sampling with
    #            stop_token_ids=renderer.stop_token_ids)
    action = renderer.decode_action(generation.output_ids)
    env.step(action)
    new_messages = env.observation_messages()
    history = env.messages()[: -len(new_messages)]            # ends with the assistant action
    response_ids += generation.output_ids                      # mask 1
    response_ids += renderer.continuation_ids(history, new_messages, generation.output_ids,
                                              generation.finish_reason)   # mask 0

How the glue is found, for any Hugging Face tokenizer with a chat template: the conversation so far
is rendered with the current assistant turn's content replaced by a unique marker string, once
without and once with the new messages (and the generation prompt). Everything after the marker in
the first rendering is the end-of-turn glue (``<|im_end|>\\n``, ``<|eot_id|>``); the difference
between the two renderings is the new observation plus the next generation prompt. When the turn's
last sampled id is a stop token whose text begins the glue (the model wrote ``<|im_end|>`` itself),
that part of the glue is not added again; a turn cut off by the token limit gets the whole glue.

Tokenisation of rendered text: the template's own text (role headers, ``<|im_start|>``, tool blocks)
is encoded with special tokens recognised; message *contents* are encoded as plain text with
special tokens split, so an observation that contains the string ``<|im_end|>`` cannot forge the
structure of the conversation. Contents are located by rendering once more with markers as
contents; a template may render a content verbatim or whitespace-stripped (Llama 3's ``| trim``).
Where a content cannot be located (a template that rewrites contents otherwise), that piece of
rendered text is encoded whole, special tokens recognised, as ``apply_chat_template`` would.

What decoding the ids gives, compared with ``template_text`` of the same conversation (each
assistant message's content being :meth:`ChatRenderer.decode_action` of that turn's sampled ids) —
the allow-list of differences:

1. Assistant contents (and only they) appear exactly as sampled. A template that transforms assistant contents
   renders the transformed text instead: Llama 3 strips whitespace at both ends; DeepSeek-R1-style
   templates drop ``<think>...</think>`` blocks of assistant turns.
2. A turn ended by a stop token that is not the template's end-of-turn token (``<|endoftext|>`` for a
   ChatML template whose turns end in ``<|im_end|>``) keeps that token, followed by the full glue.
3. Characters the vocabulary has no token for are lost, wherever they occur: SmolLM2's byte-level
   vocabulary lacks the bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1d and the UTF-8 lead bytes of code
   points from U+40000 up, so such characters in an observation cannot reach the model.
4. Everything else (default system prompts, dates, tool lists, grouped tool messages) is the
   template's own rendering, because it comes from the template.

Templates this cannot handle are refused at construction with :class:`ChatTemplateError`: those
whose rendering of an assistant turn does not start with the generation prompt followed by the
content verbatim (Qwen3's empty ``<think></think>`` insertion, say), and those whose rendering of
earlier turns changes as the conversation grows (which breaks the prefix invariant).

``ChatRenderer(tokenizer, allow_history_rewrite=True)`` accepts them for callers that never append
to a rendered conversation: ``append_only`` is then ``False``, :meth:`ChatRenderer.continuation_ids`
raises, and :meth:`ChatRenderer.prompt_ids` renders each conversation whole. The OpenAI-compatible
gateway (:mod:`agents.gateway`) works this way with such templates: when a request's rendering does
not extend the tokens recorded so far, it starts a new segment (a separate trainable sample) rather
than re-encoding sampled text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ChatRenderer", "ChatTemplateError", "Message"]

Message = Mapping[str, Any]
_FINISH_REASONS = ("stop", "length", "abort")


class ChatTemplateError(ValueError):
    """A chat template the renderer cannot use, or a conversation the template cannot render."""


def _marker(index: int) -> str:
    # Letters and digits only: survives ``| trim``, HTML-free, and never occurs in real text.
    return f"TurnGymContentMarker{index}Q"


class ChatRenderer:
    """Token ids of a multi-turn conversation, rendered by ``tokenizer``'s chat template without drift.

    Args:
        tokenizer: a Hugging Face tokenizer with a ``chat_template``.
        tools: tool schemas (OpenAI function format) passed to the template's ``tools`` argument.
        template_kwargs: extra template variables (``date_string``, ``enable_thinking``, ...).
        stop_token_ids: the ids that end an assistant turn; by default the template's end-of-turn
            token (the first token of the glue after an assistant message) and the tokenizer's eos.
        allow_history_rewrite: accept a template that breaks the prefix invariant; ``append_only``
            says whether it holds, and :meth:`continuation_ids` is refused when it does not.

    Raises:
        ChatTemplateError: the tokenizer has no chat template, or the template breaks the prefix
            invariant (see the module docstring) and ``allow_history_rewrite`` is false.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        stop_token_ids: Sequence[int] | None = None,
        allow_history_rewrite: bool = False,
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
            raise ChatTemplateError(f"tokenizer {name!r} has no chat_template; use an instruct/chat model's tokenizer")
        self.tokenizer = tokenizer
        self.tools = [dict(t) for t in tools] if tools else None
        self.template_kwargs = dict(template_kwargs or {})
        self._options = {"stop_token_ids": stop_token_ids, "allow_history_rewrite": allow_history_rewrite}
        self._variants: dict[str, ChatRenderer] = {}
        self._content_tokenizer = _plain_text_copy(tokenizer)
        #: Whether token sequences grow by appending: earlier turns render the same as the conversation grows.
        self.append_only = True
        glue = self._check_template(strict=not allow_history_rewrite)
        self.supports_tool_messages = self._check_tool_messages(strict=not allow_history_rewrite)
        self.stop_token_ids: tuple[int, ...] = (
            tuple(int(i) for i in stop_token_ids) if stop_token_ids is not None else self._default_stop_ids(glue)
        )
        if not self.stop_token_ids:
            raise ChatTemplateError("no stop token found (no end-of-turn token, no eos); pass stop_token_ids")

    # ----------------------------------------------------------------------------------------------
    # Public API
    # ----------------------------------------------------------------------------------------------
    def template_text(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        """The template's own rendering of ``messages`` (with this renderer's tools and template kwargs)."""
        try:
            return self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                tools=self.tools,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                **self.template_kwargs,
            )
        except Exception as exc:  # jinja2 errors, raise_exception() in templates, ...
            roles = [m.get("role") for m in messages]
            raise ChatTemplateError(f"the chat template failed on a conversation with roles {roles}: {exc}") from exc

    def with_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> ChatRenderer:
        """This renderer with the template's ``tools`` set to ``tools``: itself when they are the same, else a
        renderer with every other option the same, made once per distinct list of tools and kept.

        The episode loop calls it with the environment's ``tools`` after each reset, so a prompt always shows
        the tools of the environment being played, however the renderer was built (a rollout actor's renderer
        serves episodes of several environment configurations).
        """
        wanted = [dict(t) for t in tools] if tools else None
        if wanted == self.tools:
            return self
        key = json.dumps(wanted, sort_keys=True, default=str)
        if key not in self._variants:
            self._variants[key] = ChatRenderer(
                self.tokenizer, tools=wanted, template_kwargs=self.template_kwargs, **self._options
            )
        return self._variants[key]

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The template's rendering of ``messages`` as ids, ending with the generation prompt."""
        if not messages:
            raise ValueError("prompt_ids needs at least one message (the system prompt and first observation)")
        self._check_roles(messages)
        return self._encode_appended([], "", list(messages), prefix_text="")

    def continuation_ids(
        self,
        history: Sequence[Message],
        new_messages: Sequence[Message],
        sampled_ids: Sequence[int],
        finish_reason: str,
    ) -> list[int]:
        """The ids to append after a turn's ``sampled_ids`` so that the next turn can be generated.

        ``history`` is the conversation rendered so far (what the prompt and earlier continuations
        came from), with or without the current turn's assistant message at the end (its content is
        taken from ``sampled_ids`` either way). ``new_messages`` are the observation messages that
        follow the turn (user or tool messages). ``finish_reason`` is the engine's (``stop``,
        ``length`` or ``abort``); the glue depends on whether the last sampled id is a stop token.
        The sampled ids themselves are never re-encoded.
        """
        if not self.append_only:
            raise ChatTemplateError(
                "this chat template re-renders earlier turns as the conversation grows, so a conversation cannot "
                "be continued by appending ids; render each conversation whole with prompt_ids"
            )
        if finish_reason not in _FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {_FINISH_REASONS}, got {finish_reason!r}")
        if not new_messages:
            raise ValueError("continuation_ids needs the new observation messages (at least one)")
        self._check_roles(new_messages)
        earlier = list(history)
        if earlier and earlier[-1].get("role") == "assistant":
            earlier = earlier[:-1]
        turn_marker = _marker(0)
        rendered = [*earlier, {"role": "assistant", "content": turn_marker}]
        base = self.template_text(rendered, add_generation_prompt=False)
        glue = base[base.rindex(turn_marker) + len(turn_marker) :]
        stop_text = self._stop_text(sampled_ids)
        if stop_text is not None and glue.startswith(stop_text):
            glue = glue[len(stop_text) :]
        return self._encode_appended(rendered, base, list(new_messages), prefix_text=glue)

    def decode_action(self, sampled_ids: Sequence[int]) -> str:
        """The text the environment receives: the sampled turn without its final stop token.

        Special tokens other than that final stop token are kept as text (a model that writes
        ``<|im_start|>`` mid-turn produced a malformed action, which the environment judges).
        """
        ids = list(sampled_ids)
        if ids and ids[-1] in self.stop_token_ids:
            ids.pop()
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def assistant_ids(self, text: str) -> list[int]:
        """The ids a model would sample to answer ``text`` and end its turn: the content as the template
        renders it (plain text, special-token strings split) followed by the end-of-turn stop token.

        Used for teacher-forced turns (supervised warm-up from an environment's oracle): appended
        where sampled ids go, they give the same sequence as a model that wrote ``text`` itself.
        """
        return [*self._encode_content(text), self.stop_token_ids[0]]

    # ----------------------------------------------------------------------------------------------
    # Encoding rendered text
    # ----------------------------------------------------------------------------------------------
    def _encode_appended(
        self, rendered: list[Message], base: str, new_messages: list[Message], prefix_text: str
    ) -> list[int]:
        """Ids of ``prefix_text`` + the rendering of ``rendered + new_messages`` (generation prompt) after ``base``."""
        full = self.template_text([*rendered, *new_messages], add_generation_prompt=True)
        markers = [_marker(i + 1) for i in range(len(new_messages))]
        masked_messages = [{**m, "content": k} for m, k in zip(new_messages, markers, strict=True)]
        masked = self.template_text([*rendered, *masked_messages], add_generation_prompt=True)
        if not (full.startswith(base) and masked.startswith(base)):
            raise ChatTemplateError(
                "the chat template re-rendered earlier turns differently after new messages were added; "
                "the token sequence can no longer grow by appending (see agents/chat.py for supported templates)"
            )
        delta, masked_delta = full[len(base) :], masked[len(base) :]
        contents = [m["content"] if isinstance(m.get("content"), str) else None for m in new_messages]
        pieces = _split_contents(delta, masked_delta, markers, contents)
        if pieces is None:  # the template rewrites contents: encode what it rendered, as apply_chat_template does
            return self._encode_structure(prefix_text + delta)
        ids: list[int] = []
        for i, piece in enumerate(pieces):
            if i % 2 == 0:
                ids += self._encode_structure(prefix_text + piece if i == 0 else piece)
            else:
                ids += self._encode_content(piece)
        return ids

    def _encode_structure(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def _encode_content(self, text: str) -> list[int]:
        if not text:
            return []
        if self._content_tokenizer is not None:
            return self._content_tokenizer.encode(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)

    # ----------------------------------------------------------------------------------------------
    # Checks made once, at construction
    # ----------------------------------------------------------------------------------------------
    def _check_template(self, strict: bool) -> str:
        """Probe the template for the prefix invariant (set ``append_only``; raise when ``strict``); return
        the glue after an assistant turn."""
        roles = ["system", "user", "assistant", "user", "assistant", "user"]
        conversation = [{"role": r, "content": _marker(i)} for i, r in enumerate(roles)]
        glue = ""
        for k in (2, 4):
            prompt = self.template_text(conversation[:k], add_generation_prompt=True)
            turn = self.template_text(conversation[: k + 1], add_generation_prompt=False)
            grown = self.template_text(conversation[: k + 2], add_generation_prompt=True)
            if _marker(k) in turn:
                glue = turn[turn.rindex(_marker(k)) + len(_marker(k)) :]
            if not strict:
                self.append_only = self.append_only and turn.startswith(prompt + _marker(k)) and grown.startswith(turn)
                continue
            if not turn.startswith(prompt + _marker(k)):
                raise ChatTemplateError(
                    "the chat template does not render an assistant turn as its generation prompt followed by the "
                    f"content verbatim (prompt ends {prompt[-60:]!r}, turn ends {turn[-80:]!r}); sampled tokens "
                    "could not be appended to the prompt. Templates that insert text before assistant content "
                    "(e.g. an empty <think></think> block) are not supported."
                )
            if not grown.startswith(turn):
                raise ChatTemplateError(
                    "the chat template renders earlier turns differently as the conversation grows "
                    f"(after one more user message, {turn[-80:]!r} is no longer a prefix); the token sequence "
                    "of an episode could not grow by appending. Use a template without history rewriting."
                )
        return glue

    def _check_tool_messages(self, strict: bool) -> bool:
        """Whether the template renders tool messages after an assistant turn (and keeps the invariant)."""
        roles = ["system", "user", "assistant", "tool", "tool"]
        conversation = [{"role": r, "content": _marker(i)} for i, r in enumerate(roles)]
        try:
            turn = self.template_text(conversation[:3], add_generation_prompt=False)
            grown = self.template_text(conversation, add_generation_prompt=True)
            answered = self.template_text([*conversation, {"role": "assistant", "content": "x"}], False)
        except ChatTemplateError:
            return False
        if not (grown.startswith(turn) and answered.startswith(grown + "x")):
            if not strict:
                self.append_only = False
                return all(_marker(i) in grown for i in (3, 4))
            raise ChatTemplateError(
                "the chat template renders tool messages in a way that breaks the prefix invariant"
            )
        return all(_marker(i) in grown for i in (3, 4))

    def _check_roles(self, messages: Sequence[Message]) -> None:
        if not self.supports_tool_messages and any(m.get("role") == "tool" for m in messages):
            raise ChatTemplateError("this chat template cannot render tool messages; use user messages for feedback")

    def _default_stop_ids(self, glue: str) -> tuple[int, ...]:
        stop: list[int] = []
        glue_ids = self._encode_structure(glue)
        special = set(getattr(self.tokenizer, "all_special_ids", ()))
        added = getattr(self.tokenizer, "added_tokens_decoder", {})
        if glue_ids and (glue_ids[0] in special or glue_ids[0] in added):
            stop.append(glue_ids[0])
        eos = self.tokenizer.eos_token_id
        for token_id in eos if isinstance(eos, list) else [eos]:
            if token_id is not None and token_id not in stop:
                stop.append(int(token_id))
        return tuple(stop)

    def _stop_text(self, sampled_ids: Sequence[int]) -> str | None:
        """The text of the final sampled id if it is a stop token, else ``None``."""
        if not sampled_ids or sampled_ids[-1] not in self.stop_token_ids:
            return None
        return self.tokenizer.decode([sampled_ids[-1]], skip_special_tokens=False)


def _plain_text_copy(tokenizer: Any) -> Any:
    """A private copy of a fast tokenizer's backend that encodes special-token strings as plain text
    (:func:`agents.template_tokenizer.plain_text_copy`): the caller's tokenizer stays untouched. ``None`` for
    slow (pure Python) tokenizers, which take the ``split_special_tokens`` argument instead.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    from agents.template_tokenizer import plain_text_copy

    return plain_text_copy(backend)


def _split_contents(delta: str, masked_delta: str, markers: list[str], contents: list[str | None]) -> list[str] | None:
    """Split rendered ``delta`` into [structure, content, structure, ..., structure], or ``None``.

    ``masked_delta`` is the same rendering with each content replaced by its marker; each content
    must appear verbatim or whitespace-stripped, once, in order.
    """
    parts = re.split("(" + "|".join(re.escape(k) for k in markers) + ")", masked_delta)
    structure, found = parts[0::2], parts[1::2]
    if found != markers or any(c is None for c in contents):
        return None
    pieces: list[str] = []
    position = 0
    for i, content in enumerate(contents):
        if not delta.startswith(structure[i], position):
            return None
        position += len(structure[i])
        following = structure[i + 1]
        for candidate in dict.fromkeys((content, content.strip())):
            if delta.startswith(candidate + following, position):
                break
        else:
            return None
        pieces += [structure[i], candidate]
        position += len(candidate)
    if delta[position:] != structure[-1]:
        return None
    return [*pieces, structure[-1]]
