"""render_chat_template against transformers' own rendering (``render_jinja_template`` after the message clean-up
of ``apply_chat_template``): the jinja2 environment, the cleaned inputs, the template's errors."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import jinja2
import numpy as np
import pytest
from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

from agents.template_rendering import render_chat_template

TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object", "properties": {}}}}]


def transformers_rendering(template: str, conversation: list, **options: Any) -> str:
    """What transformers 5.24's ``apply_chat_template(..., tokenize=False)`` renders (its special tokens aside)."""
    variables = options.pop("variables", {})
    rendered, _ = render_jinja_template(
        [_normalize_chat_messages(conversation)], chat_template=template, **options, **variables
    )
    return rendered[0]


def test_the_environment_and_the_inputs_are_transformers_own() -> None:
    template = (
        "{{ bos_token }}|{{ messages | length }}|"
        "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
        "{% generation %}[{{ m.role }}:{{ m.content }}]{% endgeneration %}{% endfor %}|"
        "{{ messages[0] | tojson }}|{{ 'name' in messages[1] }}|{{ messages[1].thinking }}|"
        "{% set ns = namespace(n=0) %}{% for t in tools %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}|"
        "{{ dict(a=1) | tojson }}|{{ dict.fromkeys(['k']) | tojson }}|{{ strftime_now('%Y') | length }}|"
        "{{ documents[0].title }}{% if add_generation_prompt %}>{% endif %}"
    )
    messages = [
        {"role": "user", "content": 'é <b>"x"</b>'},
        {"role": "assistant", "content": "ok", "name": None, "reasoning": "hm"},
        {"role": "user", "content": "never rendered: the loop breaks"},
    ]
    options = {
        "tools": TOOLS,
        "documents": [{"title": "T", "text": "body"}],
        "add_generation_prompt": True,
        "variables": {"bos_token": "<s>"},
    }
    text = render_chat_template(template, messages, **options)
    # {% generation %} renders its body; {% break %} ends the loop after two messages; tojson keeps non-ASCII and
    # HTML as they are; a None-valued key is dropped; "reasoning" is also given as "thinking"; strftime_now('%Y')
    # is four digits.
    assert text == (
        '<s>|3|[user:é <b>"x"</b>][assistant:ok]|{"role": "user", "content": "é <b>\\"x\\"</b>"}|False|hm|1|'
        '{"a": 1}|{"k": null}|4|T>'
    )
    assert transformers_rendering(template, messages, **options) == text


class Colour(str, enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Note:
    role: str
    content: Any


class Model:
    """Stands in for a pydantic model: only ``model_dump`` is read."""

    def model_dump(self) -> dict[str, Any]:
        return {"role": "user", "content": ("a", 1)}


def test_inputs_are_rebuilt_from_plain_data_as_transformers_does() -> None:
    template = "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{{ flag }}|{{ thing }}|{{ colour }}"
    messages = [Note("user", Colour.RED), Model(), {"role": "tool", "content": np.float32(0.5)}]
    variables = {"flag": np.bool_(False), "thing": object(), "colour": Colour.RED}
    text = render_chat_template(template, messages, variables=variables)
    # The enum is its plain string, the tuple stays one, numpy scalars are Python's, any other object a placeholder.
    assert text == "user=red;user=('a', 1);tool=0.5;False|<object>|red"
    assert transformers_rendering(template, messages, variables=variables) == text


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{{ raise_exception('no tools here') }}", jinja2.exceptions.TemplateError),
        ("{% set ns = namespace() %}{% set ns._x = 1 %}", jinja2.exceptions.SecurityError),
        ("{{ ''.__class__.__mro__ }}", jinja2.exceptions.SecurityError),
        ("{{ messages.append(1) }}", jinja2.exceptions.SecurityError),  # immutable: no changing the caller's list
    ],
)
def test_templates_fail_as_under_transformers(template: str, error: type) -> None:
    for render in (render_chat_template, transformers_rendering):
        with pytest.raises(error):
            render(template, [{"role": "user", "content": "x"}])


def test_bad_inputs_are_refused_as_transformers_refuses_them() -> None:
    def move(direction: str) -> str:
        """Move.

        Args:
            direction: where.
        """
        return direction

    with pytest.raises(TypeError, match=r"'move' is a function, and only JSON schemas .*get_json_schema"):
        render_chat_template("x", [], tools=[move])  # transformers converts it: a refusal, said clearly
    for render in (render_chat_template, transformers_rendering):
        with pytest.raises(ValueError):
            render("x", [], tools=["move"])
        with pytest.raises(TypeError):
            render("x", [], documents=["text"])
        with pytest.raises(TypeError):
            render("x", ["hi"])
