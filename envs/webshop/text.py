"""WebShop's action grammar, read leniently, and the words the environment says to the agent.

Grammar: ``search[keywords]`` or ``click[value]`` (the name case-insensitive, spaces allowed before the
bracket; the argument is one line without brackets, stripped and lowercased). ``<think>`` blocks are
ignored and, as in the grid environments, an ``<answer>...</answer>`` block (the last complete one) is read
when present and required with ``require_answer_tag``. When the text holds several actions, the last one
counts: a model often quotes the format while it reasons before it acts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envs.actions import extract_answer

__all__ = ["ParsedAction", "action_format", "instructions", "parse_action"]

_ACTION = re.compile(r"\b(search|click)\s*\[([^\[\]\n]*)\]", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAction:
    """``name`` ("search" or "click") and ``argument`` (lowercased), or ``error`` saying why there is none."""

    name: str = ""
    argument: str = ""
    error: str = ""


def parse_action(text: str, *, require_answer_tag: bool = False) -> ParsedAction:
    """The action in a model's text (see the module docstring); never raises on content."""
    answer = extract_answer(text, require_tag=require_answer_tag)
    if answer is None:
        return ParsedAction(error="no <answer>...</answer> block found")
    last = None
    for last in _ACTION.finditer(answer):  # noqa: B007 - the loop keeps the last match without a list
        pass
    if last is None:
        return ParsedAction(error="no action found; write search[keywords] or click[value]")
    return ParsedAction(name=last.group(1).lower(), argument=last.group(2).strip().lower())


def action_format(require_answer_tag: bool) -> str:
    return "<answer>click[buy now]</answer>" if require_answer_tag else "search[keywords] or click[value]"


def instructions(max_turns: int | None, require_answer_tag: bool, show_available_actions: bool) -> str:
    """The system prompt: the task, the pages, the two actions and the reward."""
    wrap = "inside <answer>...</answer>, " if require_answer_tag else ""
    turns = f" You have at most {max_turns} actions." if max_turns is not None else ""
    listed = " Each observation ends with the actions available on the page." if show_available_actions else ""
    return (
        "You are shopping on WebShop, an online store. An instruction describes the product to buy: its "
        "attributes, its options (such as size or color) and the highest price you may pay.\n"
        "Pages: the search page; search results (10 per page); a product page with its options, price and "
        "the buttons Description, Features, Reviews and Buy Now.\n"
        f"Each turn, write exactly one action, {wrap}in one of two forms:\n"
        "  search[keywords]  (only on the search page), e.g. search[long clip-in hair extension]\n"
        "  click[value]      a button, a product id or an option value shown on the page, e.g. click[next >], "
        "click[b0abc12345], click[black], click[buy now]\n"
        "Choose every option the instruction asks for before you click Buy Now. Buying ends the episode with a "
        "score from 0 to 1: the share of asked-for attributes, options and the price limit the purchase meets, "
        f"scaled down if the product is of another type.{turns}{listed}"
    )
