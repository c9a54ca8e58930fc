"""What the leaderboard and the stats routes compute from the archived episodes.

The leaderboard rebuilds each miner's EMA the way a validator keeps it
(:func:`~shopbench.traces.ema.ema_rounds`: a round is one block of one miner's episodes,
scored by their mean, folded with the release's ``ema_alpha``). An archive holds only the
episodes that were archived, so a round whose episodes were lost scores over those kept.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.filters import TraceFilter
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.traces.api.index import ArchiveIndex
from shopbench.traces.ema import RoundEma, ema_rounds


class MinerRow(BaseModel):
    """One miner of the leaderboard."""

    model_config = ConfigDict(frozen=True)

    uid: int | None
    hotkey: str | None
    episodes: int
    successes: int
    asr: float = Field(description="successes / episodes")
    process_score: float = Field(description="mean judge score (0 where unjudged)")
    mean_score: float = Field(description="mean final episode score")
    rounds: int
    ema: float = Field(description="the EMA after the last round")
    history: list[RoundEma] = Field(description="the EMA after each round, oldest first")


class Leaderboard(BaseModel):
    """Every miner, best EMA first."""

    ema_alpha: float
    miners: list[MinerRow]


def leaderboard(
    index: ArchiveIndex, filters: TraceFilter, alpha: float | None = None
) -> Leaderboard:
    """The leaderboard of the episodes matching `filters` (see the module docstring)."""
    alpha = ConsensusConfig().ema_alpha if alpha is None else alpha
    return index.memo(f"leaderboard:{alpha}", filters, lambda: _leaderboard(index, filters, alpha))


def _leaderboard(index: ArchiveIndex, filters: TraceFilter, alpha: float) -> Leaderboard:
    rows = index.sql(
        "miner_uid, miner_hotkey, block, count(*), sum(CAST(success AS INTEGER)), "
        "sum(coalesce(judge_score, 0)), sum(coalesce(score, 0))",
        filters,
        tail="GROUP BY miner_uid, miner_hotkey, block "
        "ORDER BY miner_uid NULLS FIRST, block NULLS FIRST, miner_hotkey",
    )
    acc: dict[tuple[int | None, str | None], dict[str, float]] = {}
    for uid, hotkey, _, n, wins, process, score in rows:
        a = acc.setdefault((uid, hotkey), {"n": 0, "wins": 0, "process": 0.0, "score": 0.0})
        a["n"] += n
        a["wins"] += wins
        a["process"] += process
        a["score"] += score
    history: dict[tuple[int | None, str | None], list[RoundEma]] = {}
    for r in ema_rounds(((u, h, b, n, total) for u, h, b, n, _, _, total in rows), alpha):
        history.setdefault((r.uid, r.hotkey), []).append(r)
    miners = [
        MinerRow(
            uid=uid, hotkey=hotkey, episodes=int(a["n"]), successes=int(a["wins"]),
            asr=round(a["wins"] / a["n"], 6), process_score=round(a["process"] / a["n"], 6),
            mean_score=round(a["score"] / a["n"], 6), rounds=len(history[(uid, hotkey)]),
            ema=history[(uid, hotkey)][-1].ema, history=history[(uid, hotkey)],
        )
        for (uid, hotkey), a in acc.items()
    ]  # fmt: skip
    miners.sort(key=lambda m: (-m.ema, -m.asr, m.uid if m.uid is not None else -1))
    return Leaderboard(ema_alpha=alpha, miners=miners)


class GateCount(BaseModel):
    """How often one judge gate was checked and failed."""

    model_config = ConfigDict(frozen=True)

    judged: int
    failed: int


class Stats(BaseModel):
    """Counts of the matching episodes."""

    episodes: int
    by_intent: dict[str, int]
    by_split: dict[str, int]
    by_termination: dict[str, int]
    by_gate: dict[str, GateCount] = Field(description="judge gate → episodes judged and failed")


def stats(index: ArchiveIndex, filters: TraceFilter) -> Stats:
    """Counts by intent, split, termination and failed judge gate."""
    return index.memo("stats", filters, lambda: _stats(index, filters))


def _stats(index: ArchiveIndex, filters: TraceFilter) -> Stats:
    grouped = index.sql(
        "grouping(intent), grouping(split), grouping(termination), intent, split, termination, "
        "count(*)",
        filters,
        tail="GROUP BY GROUPING SETS ((intent), (split), (termination), ())",
    )
    total = 0
    by: dict[str, dict[str, int]] = {"intent": {}, "split": {}, "termination": {}}
    for g_intent, g_split, g_term, intent, split, term, n in grouped:
        if g_intent and g_split and g_term:
            total = n
        elif not g_intent:
            by["intent"][str(intent)] = n
        elif not g_split:
            by["split"][str(split)] = n
        else:
            by["termination"][str(term)] = n
    gates = _gates(index, filters)
    return Stats(
        episodes=total,
        by_intent=dict(sorted(by["intent"].items())),
        by_split=dict(sorted(by["split"].items())),
        by_termination=dict(sorted(by["termination"].items())),
        by_gate=gates,
    )


def _gates(index: ArchiveIndex, filters: TraceFilter) -> dict[str, GateCount]:
    rows = index.sql(
        "unnest(json_keys(judge_json, '$.gates')) AS gate, judge_json",
        filters,
        tail="AND judge_json IS NOT NULL",
        outer="SELECT gate, count(*), count(*) FILTER (WHERE json_extract_string(judge_json, "
        "'$.gates.\"' || gate || '\"') = 'false') FROM ({inner}) GROUP BY gate ORDER BY gate",
    )
    return {str(k): GateCount(judged=n, failed=f) for k, n, f in rows}
