"""``claims``: miners whose claims of success the validator's grader refutes too often.

Whether each episode claims its pick fits, and whether the grader refutes that, is read per
episode (the rubric judge's evidence); the verdict is the miner's, with a Wilson interval
over its claiming episodes, in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import pyarrow as pa
from pydantic import Field

from shopbench.curation.features import EpisodeFacts
from shopbench.curation.registry import Episode, LedgerOps, Rule, RuleParams


class ClaimsParams(RuleParams):
    """Miners whose claims of success the validator's grader refutes too often: all their
    episodes go (their lucky successes are luck, not checking). Decided per miner with an
    interval, not a fixed minimum of episodes, so a liar split over many hotkeys with a few
    episodes each is judged on each: a miner goes when, at `confidence`, its refuted share
    is above `honest_share` (the Wilson interval's lower bound)."""

    honest_share: float = Field(
        default=0.05, ge=0, lt=1,
        description="refuted share of claims an honest miner stays below (honest reference "
        "policies: 0 of 232)",
    )  # fmt: skip
    confidence: float = Field(
        default=0.95, ge=0.5, lt=1,
        description="one-sided confidence that the miner's refuted share exceeds honest_share",
    )  # fmt: skip
    min_episodes: int = Field(
        default=1, ge=1, description="claiming episodes a miner needs before it is judged"
    )
    count_unsupported: bool = Field(
        default=True,
        description="a claim about a missed constraint in details the agent never opened "
        "counts as refuted",
    )
    count_beaten: bool = Field(
        default=True,
        description="a pick meeting fewer visible constraints than a product the agent "
        "opened counts as refuted",
    )


def claimed(facts: EpisodeFacts) -> bool:
    """Whether the episode claims its pick fits: a sentence saying so, or
    ``terminate(status="success")`` (the rubric's claims, read from the validator's log)."""
    return facts.signals.get("claims", 0.0) > 0


def refuted_reason(facts: EpisodeFacts, p: ClaimsParams) -> str | None:
    """Why the grader refutes the episode's claim that its pick fits, or None: a claimed
    constraint the pick misses although the agent had been shown its value, one in details
    it never opened (`count_unsupported`), or a product it opened that meets more of the
    visible constraints than its pick (`count_beaten`). The rubric judge's decision
    evidence: the task's constraints as the validator's grader recorded them, the
    observations bound to the validator's tool log."""
    if not claimed(facts):
        return None
    s = facts.signals
    parts = []
    if s.get("claims_false", 0.0):
        parts.append(f"{int(s['claims_false'])} false claim(s)")
    if p.count_unsupported and s.get("claims_unsupported", 0.0):
        parts.append(f"{int(s['claims_unsupported'])} unsupported claim(s)")
    if p.count_beaten and s.get("decisions_beaten", 0.0):
        parts.append(f"{int(s['decisions_beaten'])} pick(s) beaten by a product it opened")
    return ", ".join(parts) or None


def claim_columns(ep: Episode, p: ClaimsParams) -> Mapping[str, Any]:
    """Whether the episode claims, and why the grader refutes it (or None)."""
    return {"claimed": claimed(ep.facts), "refuted": refuted_reason(ep.facts, p)}


def refuted_miners(ledger: LedgerOps, p: ClaimsParams) -> None:
    """Flag every valid episode of a miner (with at least `min_episodes` claiming episodes)
    whose refuted share of claims is, at `confidence`, above `honest_share`: the lower bound
    of its Wilson score interval is."""
    z = NormalDist().inv_cdf(p.confidence)
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE cm AS
        WITH c AS (
            SELECT miner, count(*) FILTER (claimed) AS n,
                   count(*) FILTER (claimed AND refuted IS NOT NULL) AS bad
            FROM ep WHERE {ledger.valid} GROUP BY miner)
        SELECT miner, n, bad, CASE WHEN n = 0 THEN 0.0 ELSE
               (bad / n + {z * z} / (2 * n)
                - {z} * sqrt(bad / n * (1 - bad / n) / n + {z * z} / (4 * n * n)))
               / (1 + {z * z} / n) END AS low
        FROM c;
        UPDATE ep SET r_claims = printf(
            'the grader refutes the claims of %d of the miner''s %d claiming episodes '
            || '(%d%%; at %d%% confidence at least %d%% > %s%%); this one: %s',
            cm.bad, cm.n, floor(100 * cm.bad / cm.n)::INT, round(100 * {p.confidence})::INT,
            floor(100 * cm.low)::INT, '{100 * p.honest_share:g}',
            coalesce(ep.refuted, CASE WHEN ep.claimed THEN 'not refuted'
                                      ELSE 'claims nothing' END))
        FROM cm WHERE ep.miner = cm.miner AND {ledger.valid}
          AND cm.n >= {p.min_episodes} AND cm.low > {p.honest_share};
        """
    )


CLAIMS = Rule(
    name="claims", params=ClaimsParams, features=claim_columns, flag=refuted_miners,
    columns={"claimed": pa.bool_(), "refuted": pa.string()},
    keep_in_reasons=(r"at [0-9]+% confidence",),
)  # fmt: skip
