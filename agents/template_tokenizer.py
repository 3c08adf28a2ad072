"""A tokenizer for rendering chats, on the ``tokenizers`` package and jinja2 alone: no transformers, no torch.

An environment actor only renders chat templates and encodes and decodes text, yet a transformers
tokenizer imports torch, which costs such a process about 330 MiB. :class:`TemplateTokenizer` is the part
of a Hugging Face fast tokenizer's interface that :class:`agents.chat.ChatRenderer` uses, read from a
model directory's ``tokenizer.json``, ``tokenizer_config.json`` (and ``special_tokens_map.json`` where
transformers still reads it) and ``chat_template.jinja``.

Guarantee: for a directory that transformers builds straight from its ``tokenizer.json`` (see
:func:`builds_like_transformers`), every method here returns exactly what the transformers 5.24 tokenizer
returns for the same arguments. ``apply_chat_template(..., tokenize=False)`` renders with
:func:`agents.template_rendering.render_chat_template` (transformers' jinja2 environment and input clean-up),
the special-token strings (``bos_token``, ``eos_token``, ...) and then the caller's keyword arguments being the
template's variables, as in transformers.

Not supported, with an error that says what to use instead: ``tokenize=True`` and the options that only
apply to it, ``continue_final_message``, tools given as Python functions, directories without a
``tokenizer.json``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, processors

from agents.template_rendering import render_chat_template

__all__ = ["TemplateTokenizer", "builds_like_transformers", "plain_text_copy"]

_NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
#: ``tokenizer_class`` values for which transformers loads ``tokenizer.json`` as it is (``TokenizersBackend``).
_GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")
#: Model types (``config.json``) for which transformers 5.24 swaps a generic ``tokenizer_class`` for its own class,
#: which rebuilds the backend (its ``MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`` with a model-specific tokenizer).
_MODEL_TYPES_WITH_OWN_TOKENIZER = frozenset(
    {"hyperclovax_vision_v2", "qwen2", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen4_exp", "siglip2"}
)
#: ``apply_chat_template`` options for tokenizing only: with ``tokenize=False`` transformers ignores them.
_TOKENIZE_OPTIONS = ("padding", "truncation", "max_length", "return_tensors", "return_dict", "tokenizer_kwargs")
#: ``apply_chat_template`` options about tokenized output; transformers refuses them with ``tokenize=False`` too.
_TOKENIZED_OUTPUTS = ("return_assistant_tokens_mask", "sanitize_control_tokens")


def builds_like_transformers(directory: str | Path) -> bool:
    """Whether transformers' ``AutoTokenizer`` builds ``directory``'s tokenizer straight from its ``tokenizer.json``
    (the generic ``TokenizersBackend``), which is what :class:`TemplateTokenizer` reproduces.

    False for a directory without ``tokenizer.json``, with custom tokenizer code (``auto_map``), with a Mistral
    ``tekken.json``, or whose ``tokenizer_class`` is model-specific (``Qwen2Tokenizer``, ``LlamaTokenizerFast``, ...)
    or absent, or is swapped for a model-specific one because of the ``config.json`` model type: such classes
    rebuild the backend with their own normalizer and pre-tokenizer, which may differ from ``tokenizer.json``.
    """
    directory = Path(directory)
    if not (directory / "tokenizer.json").is_file() or (directory / "tekken.json").is_file():
        return False
    settings = _read_json(directory / "tokenizer_config.json") or {}
    model = _read_json(directory / "config.json") or {}
    declared = settings.get("tokenizer_class") or model.get("tokenizer_class")
    return (
        "auto_map" not in settings
        and declared in _GENERIC_CLASSES
        and model.get("model_type") not in _MODEL_TYPES_WITH_OWN_TOKENIZER
    )


class TemplateTokenizer:
    """A fast tokenizer's chat-rendering, encoding and decoding, without transformers (see the module docstring).

    Build one with :meth:`from_directory`. Attributes and methods have the meaning, arguments and results of
    the transformers ones of the same name; ``<name>_token`` and ``<name>_token_id`` (``eos_token_id``, ...)
    exist for every named special token, ``None`` where the tokenizer has none.

    Args:
        backend: the ``tokenizers`` tokenizer, special and added tokens already in place.
        settings: the contents of ``tokenizer_config.json`` (``clean_up_tokenization_spaces``, ...).
        named_tokens: named special tokens, in order (``bos_token``, ..., then model-specific names).
        extra_tokens: the other special tokens (``additional_special_tokens``).
        chat_template: the template, a dict of named templates, or ``None``.
        name_or_path: where it was loaded from.
    """

    def __init__(
        self,
        backend: Tokenizer,
        settings: Mapping[str, Any],
        *,
        named_tokens: Mapping[str, str],
        extra_tokens: Sequence[str] = (),
        chat_template: str | dict[str, str] | None = None,
        name_or_path: str = "",
    ) -> None:
        self._backend = backend
        self._backend.no_truncation()  # transformers' encode does neither unless asked
        self._backend.no_padding()
        self._plain_backend: Tokenizer | None = None
        self._named_tokens = dict(named_tokens)
        self._extra_tokens = list(extra_tokens)
        self.chat_template = chat_template
        self.name_or_path = name_or_path
        self.clean_up_tokenization_spaces = bool(settings.get("clean_up_tokenization_spaces", False))
        self._clean_up_bpe = bool(
            settings.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")
        )
        self.split_special_tokens = bool(settings.get("split_special_tokens", False))

    @classmethod
    def from_directory(cls, directory: str | Path) -> TemplateTokenizer:
        """The tokenizer saved in ``directory`` (a model or tokenizer directory with a ``tokenizer.json``).

        Special tokens and added tokens are set up as transformers 5.24 sets them up (``TokenizersBackend``):
        tokens listed in ``tokenizer_config.json``'s ``added_tokens_decoder`` and special tokens missing from
        ``tokenizer.json`` are added to it. Matches transformers where :func:`builds_like_transformers` holds.

        Raises:
            FileNotFoundError: ``directory`` has no ``tokenizer.json``.
        """
        directory = Path(directory)
        if not (directory / "tokenizer.json").is_file():
            raise FileNotFoundError(
                f"{directory} has no tokenizer.json, the only format TemplateTokenizer reads; load this tokenizer "
                "with transformers instead (agents.models.load_tokenizer), which converts the other formats"
            )
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
        settings = _read_json(directory / "tokenizer_config.json") or {}
        named, extra = _special_tokens(settings, _read_json(directory / "special_tokens_map.json"))
        if "added_tokens_decoder" in settings:
            listed = [
                settings["added_tokens_decoder"][key] for key in sorted(settings["added_tokens_decoder"], key=int)
            ]
        else:  # older saves: transformers takes the added tokens from tokenizer.json itself
            listed = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8")).get("added_tokens", [])
        _add_tokens(backend, listed, named, extra)
        if backend.post_processor is None:  # transformers sets one that adds nothing (no bos/eos): the same ids
            backend.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1", special_tokens=[])
        return cls(
            backend,
            settings,
            named_tokens={name: _content(value) for name, value in named.items()},
            extra_tokens=[_content(value) for value in extra],
            chat_template=_chat_template(directory, settings),
            name_or_path=str(directory),
        )

    # ----------------------------------------------------------------------------------------------
    # Vocabulary and special tokens
    # ----------------------------------------------------------------------------------------------
    @property
    def backend_tokenizer(self) -> Tokenizer:
        """The ``tokenizers`` tokenizer underneath (shared: copy it before changing its settings)."""
        return self._backend

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens that are set, name to string (the template sees them as variables)."""
        return dict(self._named_tokens)

    @property
    def all_special_tokens(self) -> list[str]:
        """Named special tokens, then the extra ones, each once."""
        return list(dict.fromkeys([*self._named_tokens.values(), *self._extra_tokens]))

    @property
    def all_special_ids(self) -> list[int]:
        return [self.convert_tokens_to_ids(token) for token in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        return self._backend.get_added_tokens_decoder()

    def __len__(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int | None] | None:
        """The id of a token (or the ids of a list of them); an unknown token gets the ``unk_token``'s id."""
        if not isinstance(tokens, str):
            return [self.convert_tokens_to_ids(token) for token in tokens]
        token_id = self._backend.token_to_id(tokens)
        if token_id is None and "unk_token" in self._named_tokens:
            return self._backend.token_to_id(self._named_tokens["unk_token"])
        return token_id

    def __getattr__(self, name: str) -> Any:
        # eos_token, eos_token_id, pad_token_id, ...: the named special tokens, None where unset.
        token_name = name.removesuffix("_id")
        if token_name.endswith("_token") and (token_name in _NAMED_TOKENS or token_name in self._named_tokens):
            token = self._named_tokens.get(token_name)
            return token if name == token_name or token is None else self.convert_tokens_to_ids(token)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----------------------------------------------------------------------------------------------
    # Encoding and decoding
    # ----------------------------------------------------------------------------------------------
    def encode(
        self, text: str, add_special_tokens: bool = True, split_special_tokens: bool | None = None
    ) -> list[int]:
        """The ids of ``text``; with ``split_special_tokens`` special-token strings are encoded as plain text."""
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        backend = self._plain_text_backend() if split else self._backend
        return backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(
        self,
        token_ids: int | Sequence[int] | Sequence[Sequence[int]],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> str | list[str]:
        """The text of ``token_ids`` (a list of texts for a list of id lists).

        ``clean_up_tokenization_spaces`` (default: the tokenizer's setting) removes spaces before punctuation, as
        transformers does; for a BPE model it is ignored with a warning unless the tokenizer's config forces it.
        """
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if token_ids and isinstance(token_ids[0], (list, tuple)):
            return [self.decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in token_ids]
        text = self._backend.decode([int(i) for i in token_ids], skip_special_tokens=skip_special_tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if not clean_up_tokenization_spaces:
            return text
        if type(self._backend.model).__name__ == "BPE" and not self._clean_up_bpe:
            warnings.warn("clean_up_tokenization_spaces is ignored for a BPE tokenizer", UserWarning, stacklevel=2)
            return text
        for spaced, joined in _CLEAN_UP:
            text = text.replace(spaced, joined)
        return text

    def _plain_text_backend(self) -> Tokenizer:
        if self._plain_backend is None:
            self._plain_backend = plain_text_copy(self._backend)
        return self._plain_backend

    # ----------------------------------------------------------------------------------------------
    # Chat templates
    # ----------------------------------------------------------------------------------------------
    def apply_chat_template(
        self,
        conversation: Sequence[Any],
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        **kwargs: Any,
    ) -> str | list[str]:
        """The chat template's rendering of ``conversation`` (a list of messages, or a list of such lists).

        ``tokenize`` must be ``False`` (transformers' default is ``True``: say so explicitly, then
        :meth:`encode` the text with ``add_special_tokens=False``). Other keyword arguments are template
        variables (``enable_thinking``, ``date_string``, ...) and override the special-token strings.

        Raises:
            ValueError: ``tokenize=True``, ``continue_final_message``, ``return_assistant_tokens_mask`` or
                ``sanitize_control_tokens`` (they need tokenization), an empty conversation, or no template.
            TypeError: a tool that is a function rather than a JSON schema, a message or document that is not a dict.
        """
        if tokenize:
            raise ValueError(
                "TemplateTokenizer renders text only: pass tokenize=False and encode the text with encode(text, "
                "add_special_tokens=False), or use a transformers tokenizer (agents.models.load_tokenizer)"
            )
        unsupported = {"continue_final_message": continue_final_message}
        unsupported.update((option, kwargs.pop(option, False)) for option in _TOKENIZED_OUTPUTS)
        for option, value in unsupported.items():
            if value:
                raise ValueError(f"TemplateTokenizer does not support {option}; use agents.models.load_tokenizer")
        for option in _TOKENIZE_OPTIONS:
            kwargs.pop(option, None)
        template = self._select_template(chat_template, tools)
        if isinstance(conversation, (list, tuple)) and not conversation:
            raise ValueError("apply_chat_template needs at least one message")
        batched = isinstance(conversation, (list, tuple)) and (
            isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")
        )
        variables = {**self.special_tokens_map, **kwargs}  # the caller's arguments win over the special tokens
        rendered = [
            render_chat_template(
                template,
                chat,
                tools=tools,
                documents=documents,
                add_generation_prompt=add_generation_prompt,
                variables=variables,
            )
            for chat in (conversation if batched else [conversation])
        ]
        return rendered if batched else rendered[0]

    def _select_template(self, chat_template: str | None, tools: Any) -> str:
        """The template to render: by name from a dict of templates (``tool_use`` when tools are given, else
        ``default``), ``chat_template`` itself, or the tokenizer's own (transformers' ``get_chat_template``)."""
        templates = self.chat_template
        if isinstance(templates, dict):
            if chat_template is not None:
                return templates.get(chat_template, chat_template)
            if tools is not None and "tool_use" in templates:
                return templates["tool_use"]
            if "default" in templates:
                return templates["default"]
            raise ValueError(
                f"{self.name_or_path} has several chat templates and no default: pass chat_template=<name>, "
                f"one of {sorted(templates)}"
            )
        if chat_template is not None:
            return chat_template
        if templates is None:
            raise ValueError(f"{self.name_or_path} has no chat template; use an instruct/chat model's tokenizer")
        return templates


def plain_text_copy(backend: Tokenizer) -> Tokenizer:
    """A private copy of ``backend`` that encodes special-token strings as plain text, without truncation or padding.

    Flipping ``encode_special_tokens`` on a shared backend (as transformers' ``split_special_tokens=True`` does)
    would change what every other user of it gets (another thread, an engine calling the backend directly).
    """
    copy = Tokenizer.from_str(backend.to_str())
    copy.encode_special_tokens = True
    copy.no_truncation()
    copy.no_padding()
    return copy


_CLEAN_UP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


# --------------------------------------------------------------------------------------------------
# Reading a tokenizer directory as transformers 5.24 does
# --------------------------------------------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _is_token(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, dict) and "content" in value)


def _content(token: str | dict[str, Any]) -> str:
    return token if isinstance(token, str) else token["content"]


def _special_tokens(settings: dict[str, Any], legacy_map: dict[str, Any] | None) -> tuple[dict[str, Any], list[Any]]:
    """Named special tokens (the standard names in order, then model-specific ``*_token`` names) and extra
    special tokens, each a string or an AddedToken dict, as ``PreTrainedTokenizerBase`` collects them."""
    settings = dict(settings)
    if "additional_special_tokens" in settings and not settings.get("extra_special_tokens"):
        settings["extra_special_tokens"] = settings.pop("additional_special_tokens")
    custom = {
        key: settings.pop(key)
        for key in list(settings)
        if key not in _NAMED_TOKENS and key.endswith("_token") and isinstance(settings[key], str)
    }
    if isinstance(settings.get("extra_special_tokens"), dict):
        custom.update(settings.pop("extra_special_tokens"))
    if legacy_map and "added_tokens_decoder" not in settings:  # transformers reads it only for older saves
        for key, value in legacy_map.items():
            if key == "extra_special_tokens" and isinstance(value, list):
                merged = list(settings.get("extra_special_tokens") or [])
                value = merged + [token for token in value if token not in merged]
            settings[key] = value
        if isinstance(settings.get("extra_special_tokens"), dict):
            custom.update(settings.pop("extra_special_tokens"))
    if "additional_special_tokens" in settings and "extra_special_tokens" not in settings:
        settings["extra_special_tokens"] = settings.pop("additional_special_tokens")
    found = {
        key: value
        for key, value in settings.items()
        if key not in _NAMED_TOKENS and key.endswith("_token") and _is_token(value)
    }
    named = {key: settings[key] for key in _NAMED_TOKENS if settings.get(key) is not None}
    named.update((key, value) for key, value in {**found, **custom}.items() if value is not None)
    extra = settings.get("extra_special_tokens")
    return named, list(extra) if isinstance(extra, list) else []


def _add_tokens(backend: Tokenizer, listed: list[dict[str, Any]], named: dict[str, Any], extra: list[Any]) -> None:
    """Add the listed added tokens, then the special tokens the backend lacks, as ``TokenizersBackend.__init__``
    does (a string becomes a special token; a token with a special-token name is made special)."""
    present = {token.content for token in backend.get_added_tokens_decoder().values()}
    present |= {entry["content"] for entry in listed}
    wanted: list[str | dict[str, Any]] = list(listed)
    for value in [*named.values(), *extra]:
        if _content(value) not in present:
            present.add(_content(value))
            wanted.append(value)
    named_contents = {_content(value) for value in named.values()}
    fields = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
    tokens = []
    for value in wanted:
        if isinstance(value, str):
            tokens.append(AddedToken(value, special=True))
            continue
        token = AddedToken(**{key: value[key] for key in fields if key in value})
        token.special = token.special or token.content in named_contents
        tokens.append(token)
    if tokens:
        backend.add_tokens(tokens)


def _chat_template(directory: Path, settings: dict[str, Any]) -> str | dict[str, str] | None:
    """``chat_template.jinja`` and ``additional_chat_templates/*.jinja`` when present (they win), else the config's."""
    templates = {}
    if (directory / "chat_template.jinja").is_file():
        templates["default"] = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    extra_dir = directory / "additional_chat_templates"
    if extra_dir.is_dir():
        for path in sorted(extra_dir.glob("*.jinja")):
            templates[path.name.removesuffix(".jinja")] = path.read_text(encoding="utf-8")
    if list(templates) == ["default"]:
        return templates["default"]
    if templates:
        return templates
    template = settings.get("chat_template")
    if isinstance(template, list):  # saved as [{"name": ..., "template": ...}, ...]
        return {entry["name"]: entry["template"] for entry in template}
    return template
