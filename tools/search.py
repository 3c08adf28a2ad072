"""BM25 search over a fixed set of documents (``bm25s``, an optional dependency: ``pip install bm25s``).

Documents and queries are lower-cased and split into words of two or more letters or digits,
English stop words removed, no stemming. A query returns up to ``k`` documents with a positive
score, best first (ties: the earlier document first); a query that matches no word of any
document returns a result saying so, not an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.base import Stateless, ToolResult

__all__ = ["Document", "SearchTool"]


@dataclass(frozen=True)
class Document:
    title: str
    text: str


def _import_bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise ImportError("the search tool needs bm25s: pip install bm25s") from None
    return bm25s


class SearchTool(Stateless):
    """Searches documents by BM25 and returns the best ``k`` (title and full text)."""

    def __init__(
        self,
        documents: Sequence[Document],
        *,
        name: str = "search",
        description: str = "Search the documents by keywords; returns the best matches with their text",
        max_k: int = 5,
    ) -> None:
        if not documents:
            raise ValueError("SearchTool needs at least one document")
        bm25s = _import_bm25s()
        self.name = name
        self.description = description
        self.documents = tuple(documents)
        self._bm25s = bm25s
        self._retriever = bm25s.BM25()
        corpus = [f"{doc.title}\n{doc.text}" for doc in self.documents]
        self._retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
        self.parameters: Mapping[str, Any] = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Keywords to search for"},
                "k": {"type": "integer", "minimum": 1, "maximum": max_k, "description": "Results wanted (default 3)"},
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    def search(self, query: str, k: int = 3) -> list[tuple[Document, float]]:
        """Up to ``k`` documents with a positive score for ``query``, best first."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return []
        scores = self._retriever.get_scores(tokens)
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
        return [(self.documents[i], float(scores[i])) for i in order[:k] if scores[i] > 0]

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        hits = self.search(arguments["query"], int(arguments.get("k", 3)))
        if not hits:
            return ToolResult(f"No document matches {arguments['query']!r}; try other keywords.", metrics={"hits": 0})
        blocks = [f"[{rank}] {doc.title}\n{doc.text}" for rank, (doc, _) in enumerate(hits, start=1)]
        return ToolResult("\n\n".join(blocks), metrics={"hits": float(len(hits))})
