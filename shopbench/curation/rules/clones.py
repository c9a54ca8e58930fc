"""``clones``: miners whose replies are identical on shared tasks; the earliest registered
is kept (its first block seen, then its uid)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pydantic import Field

from shopbench.curation.registry import LIVE, Episode, LedgerOps, Rule, RuleParams


class ClonesParams(RuleParams):
    """Miners whose replies are identical on shared tasks: the earliest registered is kept."""

    min_shared_tasks: int = Field(
        default=4, ge=1, description="shared tasks needed before two miners can be clones"
    )
    min_identical_share: float = Field(
        default=1.0, gt=0, le=1, description="share of shared tasks with identical replies"
    )


def fingerprint(ep: Episode, p: ClonesParams) -> Mapping[str, Any]:
    """The episode's reply fingerprint (sha256 of its replies, tokens mapped)."""
    return {"fingerprint": ep.facts.reply_fingerprint}


def drop_clones(ledger: LedgerOps, p: ClonesParams) -> None:
    """Drop the live episodes of every miner whose replies match an earlier miner's."""
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE f AS
        SELECT miner, task_id, min(fingerprint) AS fp FROM ep WHERE {ledger.valid}
        GROUP BY miner, task_id;
        CREATE OR REPLACE TEMP TABLE first_seen AS
        SELECT miner, min(block) AS block, min(uid) AS uid FROM ep
        WHERE {ledger.valid} GROUP BY miner;
        CREATE OR REPLACE TEMP TABLE clone_of AS
        WITH pairs AS (
            SELECT a.miner AS later, b.miner AS earlier, count(*) AS shared,
                   sum((a.fp = b.fp)::INT) AS same
            FROM f a JOIN f b ON a.task_id = b.task_id AND a.miner <> b.miner
            JOIN first_seen fa ON fa.miner = a.miner
            JOIN first_seen fb ON fb.miner = b.miner
            WHERE (fb.block, fb.uid, fb.miner) < (fa.block, fa.uid, fa.miner)
            GROUP BY 1, 2)
        SELECT later, arg_min(earlier, earlier) AS earlier, max(shared) AS shared,
               max(same) AS same
        FROM pairs WHERE shared >= {p.min_shared_tasks}
          AND same >= {p.min_identical_share} * shared
        GROUP BY later;
        CREATE OR REPLACE TEMP TABLE t AS
        SELECT e.seq, printf('clone of miner %s (identical replies on %d of %d shared tasks)',
                             c.earlier, c.same, c.shared) AS why
        FROM ep e JOIN clone_of c ON e.miner = c.later WHERE e.{LIVE};
        """
    )
    ledger.drop_from("clones", "t")


CLONES = Rule(
    name="clones", params=ClonesParams, features=fingerprint, drop=drop_clones,
    columns={"fingerprint": pa.string()},
)  # fmt: skip
