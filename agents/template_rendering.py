"""Chat templates rendered exactly as transformers 5.24 renders them, with jinja2 alone (no transformers, no torch).

:func:`render_chat_template` is the jinja2 half of transformers' ``apply_chat_template(..., tokenize=False)``
(``render_jinja_template`` and ``_compile_jinja_template`` in ``transformers/utils/chat_template_utils.py``):

* the environment: jinja2's ``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks`` and loop
  controls; ``{% generation %}...{% endgeneration %}`` blocks render their body; ``tojson`` keeps non-ASCII and
  HTML characters as they are; the globals ``raise_exception``, ``strftime_now``, and a ``dict`` and
  ``namespace`` that reach no Python internals;
* the inputs: every message, tool, document and variable is rebuilt from plain JSON types (a template is
  untrusted code), keys of a message whose value is ``None`` are dropped, and a message's reasoning is given
  under ``reasoning_content`` and ``thinking`` both.

Templates are compiled once per distinct text.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

import jinja2
import jinja2.ext
import jinja2.sandbox
import jinja2.utils

__all__ = ["render_chat_template"]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def render_chat_template(
    template: str,
    conversation: Any,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    variables: Mapping[str, Any] | None = None,
) -> str:
    """``template`` (jinja2 text) rendered for one conversation (a list of messages, or an object with ``messages``).

    The template sees ``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and ``variables`` (the
    special-token strings and the caller's template arguments, in transformers).

    Raises:
        TypeError: a tool that is a Python function rather than a JSON schema, a message or document not a dict.
        ValueError: another tool that is not a dict.
        jinja2.exceptions.TemplateError: the template's own errors (``raise_exception``), sandbox refusals included.
    """
    return _compile(template).render(
        messages=_template_messages(conversation),
        tools=_tool_schemas(tools),
        documents=_documents(documents),
        add_generation_prompt=add_generation_prompt,
        **_plain_data(dict(variables or {})),
    )


# --------------------------------------------------------------------------------------------------
# Template inputs, cleaned as transformers cleans them
# --------------------------------------------------------------------------------------------------
def _plain_data(value: Any) -> Any:
    """``value`` rebuilt from plain JSON types, anything else as an inert ``"<TypeName>"``: a template is untrusted
    code and must not reach the methods of the caller's objects (transformers' ``_plain_template_data``)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    for base in (str, int, float):  # subclasses (enums, ...) back to the base type
        if isinstance(value, base):
            return getattr(base, f"__{base.__name__}__")(value)
    if isinstance(value, Mapping):
        return {_plain_data(key): _plain_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain_data(item) for item in value)
    numpy = sys.modules.get("numpy")  # never imported here: a numpy scalar implies numpy is loaded
    if numpy is not None and isinstance(value, numpy.generic):
        return _plain_data(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain_data(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):  # pydantic models
        return _plain_data(value.model_dump())
    return f"<{type(value).__name__}>"


def _template_messages(chat: Any) -> list[dict[str, Any]]:
    """Messages as the template sees them: plain dicts without ``None`` values, a message's reasoning (under any of
    ``_REASONING_FIELDS``) also as ``thinking`` and ``reasoning_content``."""
    messages = []
    for message in _plain_data(getattr(chat, "messages", chat)):
        if not isinstance(message, dict):
            raise TypeError(f"chat messages must be dicts, dataclasses or pydantic models, got {message!r}")
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        messages.append(message)
    return messages


def _tool_schemas(tools: Sequence[Any] | None) -> list[Any] | None:
    if tools is None:
        return None
    for tool in tools:
        if callable(tool):
            raise TypeError(
                f"tool {getattr(tool, '__name__', tool)!r} is a function, and only JSON schemas are rendered here: "
                "convert it with transformers.utils.get_json_schema, or use agents.models.load_tokenizer"
            )
        if not isinstance(tool, dict):
            raise ValueError(f"a tool must be a JSON schema (a dict), got {tool!r}")
    return _plain_data(list(tools))


def _documents(documents: Sequence[Any] | None) -> list[Any] | None:
    if documents is not None and not all(isinstance(document, dict) for document in documents):
        raise TypeError("documents must be a list of dicts with 'title' and 'text' keys")
    return _plain_data(documents)


# --------------------------------------------------------------------------------------------------
# The jinja2 environment of transformers' _compile_jinja_template
# --------------------------------------------------------------------------------------------------
class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` renders its body (transformers also notes where, for masks)."""

    tags = frozenset({"generation"})

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: jinja2.runtime.Macro) -> str:
        return caller()


class _TemplateDict:
    """The template's ``dict``: builds dicts, and nothing of the ``dict`` type itself is reachable."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """The template's ``namespace``: refuses underscore-prefixed attributes (a way towards Python internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # jinja2's signature trick: ``namespace(self=...)`` works
        self, args = args[0], args[1:]
        attributes = dict(*args, **kwargs)
        for name in attributes:
            _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__init__(self, attributes)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template may not set {name!r} on a namespace")


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Not jinja2's own tojson, which escapes HTML characters.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    version = re.match(r"(\d+)\.(\d+)\.(\d+)", jinja2.__version__)
    if version is None or tuple(int(part) for part in version.groups()) < (3, 1, 6):
        # older releases have known sandbox escapes, and chat templates are untrusted code
        raise ImportError(f"chat templates need jinja2>=3.1.6 (found {jinja2.__version__}): pip install -U jinja2")
    environment = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals.update(
        raise_exception=_raise_exception,
        strftime_now=_strftime_now,
        dict=_TemplateDict(),
        namespace=_TemplateNamespace,
    )
    return environment.from_string(template)
