"""The cross-episode factors re-derived from a miner's whole round.

A round scores each miner's episodes together (:func:`~shopbench.scoring.round.score_round`):
the template factor from the miner's reasoning across the round's tasks, the decision
factor from its picks. The archive holds every episode a round scored (a miner's round is
handed to the store as one batch, all or nothing), and the episodes of one round share the
validator, the miner and the block, so the same function can be run again on the same
group. That holds for a whole archive only: a subset (a pull filtered by intent or date)
splits rounds, and the factors of a split round cannot reproduce.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from shopbench.records.trajectory import Trajectory
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.round import score_round
from shopbench.scoring.template_penalty import MinHasher

RoundKey = tuple[str | None, int, int | None]
"""(validator hotkey, miner uid, block): the episodes one round scored together."""


@dataclass(frozen=True)
class Judged:
    """One episode ready for the round check: the record, its replayed copy, its judgement."""

    record: Trajectory
    replayed: Trajectory
    judgement: Judgement


def round_key(record: Trajectory) -> RoundKey | None:
    """The round a record was scored in; None for a record without a miner uid (a local run)."""
    if record.miner_uid is None:
        return None
    return (record.validator_hotkey, record.miner_uid, record.block)


def factor_differences(
    group: Sequence[Judged], consensus: ConsensusConfig, hasher: MinHasher
) -> Iterator[tuple[str, str, Any, Any]]:
    """(episode id, field, recorded, re-derived) for each episode of one round whose
    recorded template or decision factor is not the one its round gives."""
    uid = group[0].record.miner_uid
    scored = score_round(
        str(uid), [g.replayed for g in group], [g.judgement for g in group], consensus, hasher
    )
    for g in group:
        recorded = g.record.judge
        if recorded is None:
            continue
        for name, value in (
            ("template_factor", scored.template.factor),
            ("decision_factor", scored.decisions.factor),
        ):
            if getattr(recorded, name) != value:
                yield g.record.episode_id, f"round.{name}", getattr(recorded, name), value
