"""Lenient parsing of action text: ``<think>`` / ``<answer>`` tags and word actions separated by ``||``.

The grammar the grid environments accept (RAGEN's convention, read leniently)::

    [<think> ... </think>] [<answer>] Word [|| Word]* [</answer>]

* Tags are case-insensitive. With several ``<answer>`` blocks the last complete one counts (a model
  often quotes the format while it thinks); an ``<answer>`` left open by a length cut-off counts from
  the tag to the end. ``<think>`` blocks are ignored.
* Outside ``require_tag`` mode, text without an ``<answer>`` tag is read whole (minus think blocks).
* Separators: ``||`` is canonical; ``|``, ``,``, ``;`` and new lines are accepted too.
* A word matches a vocabulary entry case-insensitively, ignoring surrounding whitespace, quotes and
  punctuation (``"up."`` is ``Up``). Aliases map other words onto vocabulary entries.
* Parsing stops at the first token that is not an action: the actions before it are kept, the rest
  is reported. Nothing is read beyond ``max_actions + 1`` tokens, so megabytes of text cost little.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ParsedActions", "extract_answer", "parse_actions"]

_ANSWER_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_SEPARATORS = re.compile(r"\|\||[|,;\n]")
_STRIP = " \t\r\"'`.!?:*()[]{}<>"


@dataclass(frozen=True)
class ParsedActions:
    """The result of reading one turn's text.

    ``actions``: canonical vocabulary words in order (at most ``max_actions``). ``error``: why the
    text is not a fully valid action ("" when it is). ``dropped``: valid actions beyond the cap.
    """

    actions: tuple[str, ...]
    error: str = ""
    dropped: int = 0

    @property
    def is_valid(self) -> bool:
        return not self.error


def extract_answer(text: str, *, require_tag: bool = False) -> str | None:
    """The text an agent meant as its answer, or ``None`` if ``require_tag`` and there is no ``<answer>`` tag."""
    # One linear scan over the tags (a regex for whole blocks goes quadratic on many unclosed tags).
    open_end: int | None = None
    last_block: tuple[int, int] | None = None
    for tag in _ANSWER_TAG.finditer(text):
        if not tag.group(1):
            open_end = tag.end()
        elif open_end is not None:
            last_block = (open_end, tag.start())
            open_end = None
    if last_block is not None:
        return text[last_block[0] : last_block[1]]
    if open_end is not None:
        return text[open_end:]
    if require_tag:
        return None
    return _THINK_BLOCK.sub(" ", text)


def parse_actions(
    text: str,
    vocabulary: Iterable[str],
    *,
    max_actions: int,
    require_tag: bool = False,
    aliases: Mapping[str, str] | None = None,
) -> ParsedActions:
    """Read up to ``max_actions`` vocabulary words from ``text`` (see the module docstring for the grammar)."""
    if max_actions < 1:
        raise ValueError(f"max_actions must be at least 1, got {max_actions}")
    lookup = {word.lower(): word for word in vocabulary}
    for alias, word in (aliases or {}).items():
        lookup[alias.lower()] = word
    answer = extract_answer(text, require_tag=require_tag)
    if answer is None:
        return ParsedActions((), error="no <answer>...</answer> block found")

    actions: list[str] = []
    dropped = 0
    error = ""
    for token in _tokens(answer):
        word = lookup.get(token.strip(_STRIP).lower())
        if word is None:
            error = f"{_shorten(token.strip())!r} is not an action"
            break
        if len(actions) < max_actions:
            actions.append(word)
        else:
            dropped += 1
            break  # one token past the cap is enough to know some were dropped
    if not actions and not error:
        error = "no action found"
    return ParsedActions(tuple(actions), error=error, dropped=dropped)


def _tokens(answer: str) -> Iterable[str]:
    """Non-empty tokens between separators, produced lazily."""
    start = 0
    for match in _SEPARATORS.finditer(answer):
        token = answer[start : match.start()]
        start = match.end()
        if token.strip():
            yield token
    tail = answer[start:]
    if tail.strip():
        yield tail


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
