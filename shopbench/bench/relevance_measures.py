"""What the relevance bench measures, as pure functions of ids, terms and scores.

* Overlap: the Jaccard index of two engines' page-1 ids (two empty pages agree: 1.0).
* All words: a hit contains every query word when every analysed term of the query is
  among the analysed terms of the hit's ShoppingBench ``contents`` (both analysed by the
  same analyzer, whichever engine returned the hit).
* Ties: the 10th and 11th hits of an unfiltered search tie when their scores differ by at
  most :data:`TIE_EPSILON`. Anserini rounds Lucene's scores to 4 decimals and breaks the
  ties that leaves by document id, lowering each tied score by 1e-6 from the one before;
  a gap under 1e-5 is such a tie, and for tantivy's raw scores it is an equal score up to
  float noise. With an epsilon of 0 only equal scores tie: for Lucene, the scores as
  Pyserini returns them, after Anserini's adjustment, which leaves almost none equal.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

TIE_EPSILON = 1e-5
TIE_RANK = 10
"""The last hit of page 1: a tie between it and the next decides who makes the page."""


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|a ∩ b| / |a ∪ b| of two id collections; 1.0 when both are empty."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def has_all_words(query: Collection[str], contents: Collection[str]) -> bool:
    """Whether every analysed query term is among a document's analysed terms (a query with
    no term is contained in every document)."""
    have = contents if isinstance(contents, set | frozenset) else set(contents)
    return all(t in have for t in query)


def tie_at_cut(
    scores: Sequence[float], rank: int = TIE_RANK, epsilon: float = TIE_EPSILON
) -> bool | None:
    """Whether the `rank`-th and the next score tie (differ by at most `epsilon`); None when
    there are fewer than ``rank + 1`` scores, so no hit competes for the last place."""
    if len(scores) <= rank:
        return None
    return abs(scores[rank - 1] - scores[rank]) <= epsilon
