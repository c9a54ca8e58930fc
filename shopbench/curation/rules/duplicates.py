"""``duplicates``: episodes of one task with the same decisions, whatever their wording; one
is kept, that of the miner seen first (first block, then uid), else the earliest started.

A duplicate's decisions stay in the set, in the episode it duplicates: the report's
separation counts it as kept, and :func:`duplicates_by_miner` says whose episodes were kept
instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field

from shopbench.curation.features import decision_key
from shopbench.curation.registry import LIVE, Episode, LedgerOps, Rule, RuleParams
from shopbench.records.decisions import contains, episode_decisions
from shopbench.scoring.copies import TaskDecisions

DUPLICATES_TABLE = "dups"
_FOUND = pa.schema([
    ("seq", pa.int64()), ("of_miner", pa.string()), ("of_episode", pa.string()),
    ("why", pa.string()), ("miner", pa.string()), ("episode_id", pa.string()),
])  # fmt: skip


class DuplicatesParams(RuleParams):
    """Episodes of one task with the same decisions (whatever their wording): one is kept,
    that of the miner seen first (first block, then uid), else the earliest started."""

    compare: Literal["decisions", "calls", "picks"] = Field(
        default="decisions",
        description="decisions: the picks, and the searches (by what they returned), products "
        "opened and refused calls where one episode's contain the other's and add no "
        "exploration (shopbench.records.decisions, as the weights group copies); calls: every "
        "call's name and normalised arguments and the picks, exactly; picks: the products "
        "opened and the picks",
    )


def decision_columns(ep: Episode, p: DuplicatesParams) -> Mapping[str, Any]:
    """The ledger's decision columns: with ``compare = "decisions"`` the core of the
    episode's decisions (its picks) and the digests of its parts and explored searches
    (compared by containment), else the exact key of the mode and no parts."""
    if p.compare != "decisions":
        return {"decision": decision_key(ep.facts, p.compare), "parts": [], "explored": []}
    d = TaskDecisions.of(episode_decisions(ep.t))
    return {"decision": d.core, "parts": d.parts, "explored": d.explored}


def drop_duplicates(ledger: LedgerOps, p: DuplicatesParams) -> None:
    """Of the live episodes of one task with the same decisions, keep that of the miner
    seen first (its first block, then its uid, then its first episode's start), and of
    that miner's the earliest started; drop the others naming the kept one. Decisions
    are the same when their keys are equal and, where parts are recorded
    (``compare = "decisions"``), one episode's parts contain the other's with no exploration
    added: each episode is compared, in that order, with the episodes of its task kept so
    far."""
    rows = ledger.rows(
        f"""
        WITH seen AS (
            SELECT miner, min(block) AS block, min(uid) AS uid, min(started) AS started
            FROM ep GROUP BY miner)
        SELECT e.seq, e.task_id, e.decision, e.parts, e.explored, e.miner, e.episode_id
        FROM ep e JOIN seen s ON s.miner = e.miner
        WHERE e.{LIVE} AND e.decision IS NOT NULL
        ORDER BY e.task_id, e.decision, s.block NULLS LAST, s.uid NULLS LAST,
                 s.started NULLS LAST, e.miner, e.started NULLS LAST, e.seq"""
    )
    dropped: list[dict[str, Any]] = []
    kept: list[tuple[Any, ...]] = []
    group: tuple[Any, Any] | None = None
    for seq, task, decision, parts, explored, miner, episode in rows:
        if (task, decision) != group:
            group, kept = (task, decision), []
        mine, mine_explored = frozenset(parts or ()), frozenset(explored or ())
        match = next(
            (k for k in kept
             if contains(mine, k[0], mine_explored) or contains(k[0], mine, k[3])),
            None,
        )  # fmt: skip
        if match is None:
            kept.append((mine, miner, episode, mine_explored))
            continue
        dropped.append({
            "seq": seq, "of_miner": match[1], "of_episode": match[2],
            "why": f"same decisions as {match[2]}, kept, on this task",
            "miner": miner, "episode_id": episode,
        })  # fmt: skip
    ledger.load(DUPLICATES_TABLE, pa.Table.from_pylist(dropped, schema=_FOUND))
    ledger.drop_from("duplicates", DUPLICATES_TABLE)


def duplicates_by_miner(ledger: LedgerOps, examples: int) -> list[tuple[str, str, int, Any]]:
    """(miner, the miner whose episode was kept, count, up to `examples` pairs of the
    dropped episode's id and the kept one's) of the duplicates dropped (none when the rule
    did not run)."""
    present = ledger.rows(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [DUPLICATES_TABLE]
    )[0][0]
    if not present:
        return []
    return ledger.rows(
        f"""SELECT miner, of_miner, count(*) AS n,
                   list([episode_id, of_episode] ORDER BY seq)[1:{int(examples)}]
            FROM {DUPLICATES_TABLE} GROUP BY 1, 2 ORDER BY n DESC, 1, 2"""
    )


DUPLICATES = Rule(
    name="duplicates", params=DuplicatesParams, features=decision_columns,
    drop=drop_duplicates, keeps_decisions=True,
    columns={"decision": pa.string(), "parts": pa.list_(pa.string()),
             "explored": pa.list_(pa.string())},
)  # fmt: skip
