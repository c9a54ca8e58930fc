"""The `web_search` engine: BM25 over the catalog's knowledge pages, held in memory.

ShoppingBench's knowledge tasks let the agent search the web; ours search the catalog's own
knowledge corpus (pages stating brand, line, material and place facts), so an episode needs
nothing outside the validator. The index is built once per environment and shared by its
episodes; searching is read-only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import tantivy

from shopbench.env.results import WebResult

if TYPE_CHECKING:
    from shopbench.catalog.knowledge import KnowledgePage

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Words too common to tell sentences apart when picking a snippet.
_STOP_WORDS = (
    "a an and are as at be by for from in is it its of on or that the this to was what "
    "which who with where when how does do i me my you your buy find"
)
_STOP = frozenset(_STOP_WORDS.split(" "))
_TITLE_BOOST = 2.0


def query_words(text: str) -> list[str]:
    """The lower-cased words of a query; operators and punctuation are dropped."""
    return [w.lower() for w in _WORD.findall(text)]


def snippet(text: str, words: Sequence[str], max_chars: int) -> str:
    """The page's sentences that share the most query words, in page order, within max_chars.

    Sentences are ranked by how many distinct non-trivial query words they contain (ties
    keep page order); when none matches, the page's opening is returned.
    """
    terms = {w for w in words if w not in _STOP}
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    if not sentences:
        return ""

    def hits(s: str) -> int:
        present = {w.lower() for w in _WORD.findall(s)}
        return sum(1 for t in terms if t in present or t.rstrip("s") in present)

    ranked = sorted(range(len(sentences)), key=lambda i: (-hits(sentences[i]), i))
    if hits(sentences[ranked[0]]) == 0:
        ranked = list(range(len(sentences)))
    chosen: list[int] = []
    used = 0
    for i in ranked:
        cost = len(sentences[i]) + (1 if chosen else 0)
        if used + cost > max_chars:
            if not chosen:  # the best sentence alone is too long: cut it
                return sentences[i][: max_chars - 3].rstrip() + "..."
            continue
        chosen.append(i)
        used += cost
    return " ".join(sentences[i] for i in sorted(chosen))


class KnowledgeIndex:
    """An in-memory BM25 index over knowledge pages (title boosted over text)."""

    def __init__(self, pages: Sequence[KnowledgePage]) -> None:
        self._pages = list(pages)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("doc", stored=True, indexed=False)
        builder.add_text_field("title", stored=False, tokenizer_name="en_stem")
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self._index = tantivy.Index(builder.build())
        writer = self._index.writer(heap_size=15_000_000, num_threads=1)
        for i, page in enumerate(self._pages):
            writer.add_document(tantivy.Document(doc=i, title=page.title, text=page.text))
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def __len__(self) -> int:
        return len(self._pages)

    def search(self, q: str, max_results: int, max_chars: int) -> list[WebResult]:
        """The best `max_results` pages for the query words, each with a query-led snippet.

        The query is read as plain words (any term may match, BM25-ranked), so punctuation
        or operator syntax never fails; a query without words returns no results.
        """
        words = query_words(q)
        if not words or not self._pages or max_results < 1:
            return []
        query = self._index.parse_query(
            " ".join(words), ["title", "text"], field_boosts={"title": _TITLE_BOOST}
        )
        hits = self._searcher.search(query, max_results).hits
        results: list[WebResult] = []
        for _score, address in hits:
            page = self._pages[self._searcher.doc(address)["doc"][0]]
            results.append(
                WebResult(
                    url=f"kb://{page.page_id}",
                    title=page.title,
                    content=snippet(page.text, words, max_chars),
                )
            )
        return results
