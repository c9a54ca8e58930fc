"""``caps``: diversity caps, so that no cluster, miner or intent fills the set; the
lowest-scored live episodes beyond a cap are dropped."""

from __future__ import annotations

import math

from pydantic import Field

from shopbench.curation.registry import LIVE, LedgerOps, Rule, RuleParams


class CapsParams(RuleParams):
    """Diversity caps: no cluster, miner or intent may fill the set (0 = no cap)."""

    max_per_cluster: int = Field(default=0, ge=0, description="episodes per cluster")
    max_per_miner: int = Field(default=0, ge=0, description="episodes per miner")
    max_per_intent: int = Field(default=0, ge=0, description="episodes per intent")
    max_miner_share: float = Field(
        default=0.0, ge=0, le=1, description="share of the kept episodes per miner (0 = none)"
    )
    max_intent_share: float = Field(
        default=0.0, ge=0, le=1, description="share of the kept episodes per intent (0 = none)"
    )


def _cap(ledger: LedgerOps, column: str, limit: int, label: str) -> None:
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE t AS
        SELECT seq, '{label} cap: ' || coalesce({column}::VARCHAR, '(none)')
                    || ' already has {limit}' AS why
        FROM (SELECT seq, {column}, row_number() OVER (
                PARTITION BY {column} ORDER BY score DESC NULLS LAST, seq) AS rn
              FROM ep WHERE {LIVE})
        WHERE rn > {limit}
        """
    )
    ledger.drop_from("caps", "t")


def apply_caps(ledger: LedgerOps, p: CapsParams) -> None:
    """The cluster cap, then the miner's and the intent's (the tighter of the count and the
    share of what is kept at that point)."""
    if p.max_per_cluster:
        _cap(ledger, "cluster", p.max_per_cluster, "cluster")
    for column, count, share in (
        ("miner", p.max_per_miner, p.max_miner_share),
        ("intent", p.max_per_intent, p.max_intent_share),
    ):
        limits = [count] if count else []
        if share:
            limits.append(max(1, math.floor(share * ledger.kept_count())))
        if limits:
            _cap(ledger, column, min(limits), column)


CAPS = Rule(
    name="caps", params=CapsParams, drop=apply_caps, keep_in_reasons=(r"already has [0-9]+",)
)
