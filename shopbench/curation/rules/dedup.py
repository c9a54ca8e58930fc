"""``dedup``: near-duplicate trajectories of one cluster collapse to the best-scored one
(MinHash signatures per episode; LSH bands and the confirming similarity in SQL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pydantic import Field

from shopbench.curation.features import content_words
from shopbench.curation.registry import LIVE, Episode, LedgerOps, Rule, RuleParams
from shopbench.curation.similarity import bands_for, minhash_words


class DedupParams(RuleParams):
    """Near-duplicate trajectories of one cluster collapse to the best-scored one."""

    threshold: float = Field(
        default=0.9, gt=0, le=1, description="estimated Jaccard similarity of two duplicates"
    )
    shingle: int = Field(default=3, ge=1, le=16, description="word shingle length")
    permutations: int = Field(default=64, ge=8, le=256, description="MinHash permutations")


def signature(ep: Episode, p: DedupParams) -> Mapping[str, Any]:
    """The episode's MinHash signature (None when the rule is off: nothing reads it)."""
    if not p.enabled:
        return {"sig": None}
    return {"sig": minhash_words(content_words(ep.facts), p.shingle, p.permutations)}


def drop_near_duplicates(ledger: LedgerOps, p: DedupParams) -> None:
    """Drop each live episode at least `threshold` alike (estimated Jaccard) to a
    better-scored live episode of its cluster; candidates come from LSH bands."""
    bands, rows = bands_for(p.permutations, p.threshold)
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE cand AS
        WITH live AS (
            SELECT seq, coalesce(cluster, task_id) AS grp, score, sig
            FROM ep WHERE {LIVE} AND sig IS NOT NULL),
        banded AS (
            SELECT seq, grp, score, b,
                   hash(list_slice(sig, b * {rows} + 1, (b + 1) * {rows})) AS bh
            FROM live, range({bands}) r(b)),
        ranked AS (
            SELECT seq, first_value(seq) OVER (
                PARTITION BY grp, b, bh ORDER BY score DESC NULLS LAST, seq) AS best
            FROM banded)
        SELECT DISTINCT seq, best FROM ranked WHERE seq <> best;
        CREATE OR REPLACE TEMP TABLE t AS
        WITH sim AS (
            SELECT c.seq, c.best, b.episode_id,
                   list_sum(list_transform(range(1, {p.permutations} + 1),
                            lambda i: (a.sig[i] = b.sig[i])::INT))::DOUBLE
                       / {p.permutations} AS j
            FROM cand c JOIN ep a ON a.seq = c.seq JOIN ep b ON b.seq = c.best)
        SELECT seq, printf('near-duplicate of %s (estimated Jaccard %.2f)',
                           arg_max(episode_id, j), max(j)) AS why
        FROM sim WHERE j >= {p.threshold} GROUP BY seq;
        """
    )
    ledger.drop_from("dedup", "t")


DEDUP = Rule(
    name="dedup", params=DedupParams, features=signature, drop=drop_near_duplicates,
    columns={"sig": pa.list_(pa.int64())},
)  # fmt: skip
