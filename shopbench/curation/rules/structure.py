"""``structure``: loops and repeated identical calls (per episode); optionally, in SQL over
the episodes still kept, every episode of a (task, miner) but its shortest success."""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from shopbench.curation.features import EpisodeFacts
from shopbench.curation.registry import LIVE, Episode, LedgerOps, Rule, RuleParams, safe


class StructureParams(RuleParams):
    """Loops and repeated identical calls; optionally the shortest success per task and miner."""

    max_identical_calls: int = Field(
        default=3, ge=1, description="the same call with the same arguments at most this often"
    )
    loop_repeats: int = Field(
        default=3, ge=2, description="a block of calls repeated this many times in a row is a loop"
    )
    max_loop_period: int = Field(default=4, ge=1, description="longest block a loop repeats")
    shortest_success: bool = Field(
        default=False, description="keep only the shortest success per (task, miner)"
    )


def loop_reason(facts: EpisodeFacts, p: StructureParams) -> str | None:
    """Why the calls loop or repeat, or None."""
    keys = facts.call_keys
    if keys:
        key, count = Counter(keys).most_common(1)[0]
        if count > p.max_identical_calls:
            return f"the same call {count} times ({safe(key.split(':', 1)[0])})"
    for period in range(1, p.max_loop_period + 1):
        need = period * (p.loop_repeats - 1)
        run = 0
        for i in range(len(keys) - period):
            run = run + 1 if keys[i] == keys[i + period] else 0
            if run >= need:
                return f"a block of {period} call(s) repeated {p.loop_repeats} times"
    return None


def _loops(ep: Episode, p: StructureParams) -> str | None:
    return loop_reason(ep.facts, p)


def shortest_success(ledger: LedgerOps, p: StructureParams) -> None:
    """With `shortest_success`, drop every live episode of a (task, miner) that solved the
    task but its shortest success."""
    if not p.shortest_success:
        return
    ledger.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE t AS
        WITH best AS (
            SELECT seq, task_id, miner, success, first_value(seq) OVER (
                PARTITION BY task_id, miner
                ORDER BY success DESC, turns, seq) AS keep,
              bool_or(success) OVER (PARTITION BY task_id, miner) AS solved
            FROM ep WHERE {LIVE})
        SELECT b.seq, 'a shorter success of this task by this miner: ' || e.episode_id AS why
        FROM best b JOIN ep e ON e.seq = b.keep
        WHERE b.solved AND b.seq <> b.keep
        """
    )
    ledger.drop_from("structure", "t")


STRUCTURE = Rule(
    name="structure", params=StructureParams, decide=_loops, drop=shortest_success,
    keep_in_reasons=(r"repeated [0-9]+ times",),
)  # fmt: skip
