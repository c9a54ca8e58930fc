"""``narrator``: calls not driven by the agent's own reasoning, as one score with a threshold.

Three signals are the episode's own (the rubric judge's evidence, read per episode); the
fourth, how many of the miner's episodes share this one's call skeleton, is the miner's, so
the score and the reason are computed in SQL over every valid episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pydantic import Field

from shopbench.curation.registry import Episode, LedgerOps, Rule, RuleParams


class NarratorParams(RuleParams):
    """Calls not driven by the agent's own reasoning, as one score with a threshold."""

    threshold: float = Field(default=0.6, ge=0, description="score at or above: dropped")
    ungrounded_weight: float = Field(
        default=1.0, ge=0, description="x share of searches with words the agent never saw"
    )
    mismatch_weight: float = Field(
        default=0.5, ge=0, description="x share of calls the turn's reasoning does not name"
    )
    skeleton_weight: float = Field(
        default=0.6, ge=0,
        description="x share of the miner's episodes with this episode's call skeleton",
    )  # fmt: skip
    claims_weight: float = Field(
        default=0.25, ge=0, description="x 1 when the reasoning cites ids or prices never shown"
    )
    skeleton_min_episodes: int = Field(
        default=8, ge=2, description="a miner needs this many episodes for the skeleton signal"
    )
    skeleton_floor: float = Field(
        default=0.3, ge=0, le=1,
        description="skeleton shares up to this count as zero (tasks of one kind look alike)",
    )  # fmt: skip


def narrator_parts(ep: Episode, p: NarratorParams) -> dict[str, float]:
    """The per-episode narrator signals, each 0..1, weighted (the skeleton's comes later)."""
    s = ep.facts.signals
    searches = s.get("searches", 0.0)
    ungrounded = s.get("ungrounded_searches", 0.0) / searches if searches else 0.0
    mismatch = 1.0 - s.get("call_text_match", 1.0)
    claims = 1.0 if s.get("ids_fabricated", 0.0) or s.get("prices_unverified", 0.0) else 0.0
    return {
        "ungrounded": round(p.ungrounded_weight * ungrounded, 6),
        "mismatch": round(p.mismatch_weight * mismatch, 6),
        "claims": round(p.claims_weight * claims, 6),
    }


def narrator_signals(ep: Episode, p: NarratorParams) -> Mapping[str, Any]:
    """The ledger's narrator columns of one episode: the sum of its own signals, their
    account, and its call skeleton."""
    parts = narrator_parts(ep, p)
    return {
        "narrator_base": sum(parts.values()),
        "narrator_why": ", ".join(f"{k} {v:.2f}" for k, v in parts.items()),
        "skeleton": ep.facts.skeleton,
    }


def narrator_scores(ledger: LedgerOps, p: NarratorParams) -> None:
    """Each valid episode's score (its own signals plus the skeleton's, where its miner has
    `skeleton_min_episodes`), and the reason of those at or above the threshold."""
    floor = p.skeleton_floor
    span = max(1e-9, 1.0 - floor)
    part = f"{p.skeleton_weight} * greatest(0, (sk.share - {floor}) / {span})"
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE sk AS
        SELECT seq, count(*) OVER (PARTITION BY miner, skeleton)::DOUBLE
                    / count(*) OVER (PARTITION BY miner) AS share,
               count(*) OVER (PARTITION BY miner) AS n
        FROM ep WHERE {ledger.valid};
        UPDATE ep SET narrator_score = ep.narrator_base + CASE
            WHEN sk.n >= {p.skeleton_min_episodes}
            THEN {part} ELSE 0 END,
          narrator_why = ep.narrator_why || ', skeleton ' ||
            CASE WHEN sk.n >= {p.skeleton_min_episodes}
            THEN printf('%.2f', {part})
                 || printf(' (%d%% of the miner''s %d episodes share it)',
                           round(100 * sk.share)::INT, sk.n)
            ELSE '0 (too few episodes)' END
        FROM sk WHERE ep.seq = sk.seq;
        """
    )
    ledger.execute(
        "UPDATE ep SET r_narrator = printf('narrator score %.2f >= %s: ', narrator_score, ?) "
        "|| narrator_why WHERE narrator_score >= ?",
        [f"{p.threshold:g}", p.threshold],
    )


NARRATOR = Rule(
    name="narrator", params=NarratorParams, features=narrator_signals, flag=narrator_scores,
    columns={
        "narrator_base": pa.float64(), "narrator_why": pa.string(), "skeleton": pa.string(),
        "narrator_score": pa.float64(),
    },
)  # fmt: skip
