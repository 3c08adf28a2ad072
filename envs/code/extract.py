"""Finding the program in a model's answer.

Rules, applied to the answer with ``<think>...</think>`` blocks removed (an unclosed one runs to the
end of the text):

* Without a tag: the code is the last complete fenced block whose info string is empty or names
  Python (```` ```python ````, ```` ```py ````, ```` ```python3 ````, any case). A fence opens on a line
  that starts (after indentation) with three or more backticks and closes on a line holding only at
  least as many backticks. A block left open (a length cut-off) does not count.
* With a tag (``tag="answer"``): only the last ``<answer>...</answer>`` block is read (an unclosed one
  runs to the end); inside it the last Python fenced block if there is one, else the whole content.

No code (or only whitespace) is ``None``: a format failure for the environment. The scan is linear in
the length of the text.
"""

from __future__ import annotations

import re

__all__ = ["PYTHON_FENCE_LANGUAGES", "extract_code", "fenced"]

PYTHON_FENCE_LANGUAGES = frozenset({"", "python", "py", "python3", "py3"})
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"[ \t]*(`{3,})[ \t]*([^`\s]*)[^`]*$")
_CLOSING = re.compile(r"[ \t]*(`{3,})[ \t]*$")


def extract_code(text: str, *, tag: str | None = None) -> str | None:
    """The program in ``text`` by the rules of this module, or ``None`` if there is none."""
    text = _THINK_BLOCK.sub("\n", text)
    if tag is not None:
        content = _last_tag_block(text, tag)
        if content is None:
            return None
        code = _last_python_block(content)
        if code is None:
            code = content
    else:
        code = _last_python_block(text)
    if code is None or not code.strip():
        return None
    return code.strip("\n") + "\n"


def fenced(code: str) -> str:
    """``code`` as a Markdown ```` ```python ```` block, the form :func:`extract_code` reads back."""
    return "```python\n" + code.strip("\n") + "\n```"


def _last_python_block(text: str) -> str | None:
    last: str | None = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        ticks, language = len(opening.group(1)), opening.group(2).lower()
        j = i + 1
        while j < len(lines):
            closing = _CLOSING.match(lines[j])
            if closing is not None and len(closing.group(1)) >= ticks:
                break
            j += 1
        if j == len(lines):
            break  # an unclosed block: cut off, not a program
        if language in PYTHON_FENCE_LANGUAGES:
            last = "\n".join(lines[i + 1 : j])
        i = j + 1
    return last


def _last_tag_block(text: str, tag: str) -> str | None:
    pattern = re.compile(rf"<(/?){re.escape(tag)}>", re.IGNORECASE)
    open_end: int | None = None
    last_block: tuple[int, int] | None = None
    for match in pattern.finditer(text):
        if not match.group(1):
            open_end = match.end()
        elif open_end is not None:
            last_block = (open_end, match.start())
            open_end = None
    if last_block is not None:
        return text[last_block[0] : last_block[1]]
    if open_end is not None:
        return text[open_end:]
    return None
