"""mkdocs hook: Sphinx roles in docstrings (``:func:`name```) render as the bare code ``name``.

The docstrings are plain text with double-backtick code and Sphinx roles; rendered as Markdown, a role would show
as a literal ``:func:`` before its code. The roles carry no meaning the page needs, so they are dropped.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const|term|ref):(?=<code)")


def on_page_content(html: str, page, config, files) -> str:  # mkdocs' hook signature
    return ROLE.sub("", html)
