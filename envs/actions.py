"""Lenient parsing of action text: ``<think>`` / ``<answer>`` tags and word actions separated by ``||``.

The grammar the grid environments accept (RAGEN's convention, read leniently)::

    [<think> ... </think>] [<answer>] Word [|| Word]* [</answer>]

* Tags are case-insensitive. With several ``<answer>`` blocks the last complete one counts (a model
  often quotes the format while it thinks); an ``<answer>`` left open by a length cut-off counts from
  the tag to the end. ``<think>`` blocks are ignored.
* Outside ``require_tag`` mode, text without an ``<answer>`` tag is read whole (minus think blocks).
* Separators: ``||`` is canonical; ``|``, ``,``, ``;`` and new lines are accepted too.
* A word matches a vocabulary entry case-insensitively, ignoring surrounding whitespace, quotes and
  punctuation (``"up."`` is ``Up``). Aliases map other words onto vocabulary entries. A token that
  is not one entry but splits on whitespace into entries only is read as those (``"Up Left"``);
  prose such as ``"go up"`` is not an action.
* Parsing stops at the first token that is not an action: the actions before it are kept, the rest
  is reported. Parsing also stops once ``max_actions`` actions are read and one more is seen: what
  follows the cap is ignored unread (``over_cap``), so megabytes of text cost little.
* Each action read comes with its span in the text given (``ParsedActions.spans``): where the word that
  named it stands, so a learner can find the tokens that wrote each move.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ParsedActions", "WordActions", "extract_answer", "offset_words", "parse_actions"]

_ANSWER_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_SEPARATORS = re.compile(r"\|\||[|,;\n]")
_STRIP = " \t\r\"'`.!?:*()[]{}<>"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class ParsedActions:
    """The result of reading one turn's text.

    ``actions``: canonical vocabulary words in order (at most ``max_actions``). ``error``: why the
    text is not a fully valid action ("" when it is). ``over_cap``: more actions followed the cap
    (they are ignored, not an error). ``spans``: empty, or one ``(start, end)`` per action, the
    characters of the parsed text that named it (``text[start:end]`` is the word, quotes and
    punctuation stripped).
    """

    actions: tuple[str, ...]
    error: str = ""
    over_cap: bool = False
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def is_valid(self) -> bool:
        return not self.error


def extract_answer(text: str, *, require_tag: bool = False) -> str | None:
    """The text an agent meant as its answer, or ``None`` if ``require_tag`` and there is no ``<answer>`` tag."""
    region = _answer_region(text, require_tag=require_tag)
    if region is None:
        return None
    start, answer = region
    return answer if start >= 0 else _THINK_BLOCK.sub(" ", text)


def _answer_region(text: str, *, require_tag: bool) -> tuple[int, str] | None:
    """``(offset, answer)``: the answer as :func:`extract_answer` reads it, ``text[offset:]`` onwards, each
    ``<think>`` block blanked with as many spaces (so positions in it are positions in ``text``); offset -1 for
    an answer without a tag (the whole text)."""
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
        return last_block[0], text[last_block[0] : last_block[1]]
    if open_end is not None:
        return open_end, text[open_end:]
    if require_tag:
        return None
    return -1, _THINK_BLOCK.sub(lambda block: " " * len(block.group()), text)


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
    region = _answer_region(text, require_tag=require_tag)
    if region is None:
        return ParsedActions((), error="no <answer>...</answer> block found")
    offset, answer = max(region[0], 0), region[1]

    actions: list[str] = []
    spans: list[tuple[int, int]] = []
    over_cap = False
    error = ""
    for start, token in _tokens(answer):
        words = _read_token(token, lookup)
        if words is None:
            error = f"{_shorten(token.strip())!r} is not an action"
            break
        room = max_actions - len(actions)
        actions.extend(word for word, _ in words[:room])
        spans.extend((offset + start + a, offset + start + b) for _, (a, b) in words[:room])
        if len(words) > room:
            over_cap = True
            break
    if not actions and not error:
        error = "no action found"
    return ParsedActions(tuple(actions), error=error, over_cap=over_cap, spans=tuple(spans))


def _read_token(token: str, lookup: Mapping[str, str]) -> list[tuple[str, tuple[int, int]]] | None:
    """The vocabulary words in one token, each with its span in the token: a single entry, or entries
    separated by whitespace; else None."""
    word = lookup.get(token.strip(_STRIP).lower())
    if word is not None:
        return [(word, _stripped_span(token, 0, len(token)))]
    if not 2 <= len(token.split(None, 64)) <= 64:  # a long run of words is prose, not a list of moves
        return None
    parts = list(_WORD.finditer(token))
    words = [lookup.get(part.group().strip(_STRIP).lower()) for part in parts]
    if None in words:
        return None
    return [(word, _stripped_span(token, p.start(), p.end())) for word, p in zip(words, parts, strict=True)]


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` narrowed past the characters :data:`_STRIP` removes at either end."""
    while start < end and text[start] in _STRIP:
        start += 1
    while end > start and text[end - 1] in _STRIP:
        end -= 1
    return start, end


def _tokens(answer: str) -> Iterable[tuple[int, str]]:
    """Non-empty tokens between separators with their offsets in ``answer``, produced lazily."""
    start = 0
    for match in _SEPARATORS.finditer(answer):
        token = answer[start : match.start()]
        if token.strip():
            yield start, token
        start = match.end()
    tail = answer[start:]
    if tail.strip():
        yield start, tail


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class WordActions:
    """The action format of an environment whose turn is a list of words, e.g. ``<answer>Up || Left</answer>``.

    One object gives everything an environment says and does about the format, so that environments
    sharing it read and explain it identically: parsing, the sentence describing the format, the
    rules lines of the instructions, the feedback after a bad turn, and packing a plan into turns.
    """

    vocabulary: tuple[str, ...]
    max_actions_per_turn: int
    require_answer_tag: bool
    example: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.max_actions_per_turn < 1:
            raise ValueError(f"max_actions_per_turn must be at least 1, got {self.max_actions_per_turn}")

    def parse(self, text: str) -> ParsedActions:
        return parse_actions(
            text, self.vocabulary, max_actions=self.max_actions_per_turn, require_tag=self.require_answer_tag
        )

    def turn(self, words: Iterable[str]) -> str:
        """The text of one turn that sends ``words``."""
        text = " || ".join(words)
        return f"<answer>{text}</answer>" if self.require_answer_tag else text

    def turns(self, words: tuple[str, ...] | list[str]) -> list[str]:
        """A plan packed into turns of at most ``max_actions_per_turn`` words."""
        size = self.max_actions_per_turn
        return [self.turn(words[i : i + size]) for i in range(0, len(words), size)]

    def example_turn(self) -> str:
        return self.turn(self.example[: self.max_actions_per_turn])

    def describe(self) -> str:
        """One sentence on the format, for the instructions and for feedback after a bad turn."""
        *first, last = self.vocabulary
        words = f"{', '.join(first)} or {last}" if first else last
        several = "" if self.max_actions_per_turn == 1 else f" (up to {self.max_actions_per_turn}, separated by ||)"
        wrap = " inside <answer></answer>" if self.require_answer_tag else ""
        return f"Answer with {words}{several}{wrap}, e.g. {self.example_turn()}"

    def rules(self, unit: str = "moves") -> list[str]:
        """Rule lines about turns with several actions and about thinking first."""
        lines = []
        if self.max_actions_per_turn > 1:
            lines.append(f"- You may send up to {self.max_actions_per_turn} {unit} per turn; they are made in order.")
        if self.require_answer_tag:
            lines.append("- You may think first inside <think></think>; only the <answer> block is read.")
        return lines

    def feedback(self, parsed: ParsedActions, *, executed: int) -> list[str]:
        """What to tell the agent about the format of its turn (empty for a well-formed turn)."""
        lines = []
        if parsed.error:
            rest = "The rest of your answer was ignored" if executed else "Nothing happened"
            lines.append(f"Invalid action: {parsed.error}. {rest}. {self.describe()}.")
        if parsed.over_cap:
            cap = self.max_actions_per_turn
            lines.append(f"Only the first {cap} actions of a turn count; the others were ignored.")
        return lines


def offset_words(origin: tuple[int, int], point: tuple[int, int]) -> str:
    """Where grid cell ``point`` (row, column) lies from ``origin`` in move words: "2 up and 1 left", "1 down"
    (empty for the same cell); the relative lines of Sokoban and FrozenLake say it this way."""
    rows, cols = point[0] - origin[0], point[1] - origin[1]
    parts = [f"{abs(rows)} {'up' if rows < 0 else 'down'}"] if rows else []
    parts += [f"{abs(cols)} {'left' if cols < 0 else 'right'}"] if cols else []
    return " and ".join(parts)
