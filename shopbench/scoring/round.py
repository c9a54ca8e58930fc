"""Scoring a round: one miner's judged episodes become scored trajectories.

This is what a validator does with a miner's episodes of a round once they are judged, and
what calibration certifies, since it calls the same function:

1. where the LLM judge read an episode, the consensus combine rule lowers the rubric's
   score by the LLM's (:class:`~shopbench.scoring.combine.Judgement`);
2. the template penalty across the miner's episodes of the round
   (:mod:`shopbench.scoring.template_penalty`): one factor for the miner, multiplied into
   every episode's process score;
3. the decision check across the same episodes
   (:mod:`shopbench.scoring.decision_rules`): where a trivial rule (cheapest opened, first
   listed, ...) explains the miner's picks better than the task's constraints do, one factor
   for the miner, multiplied in beside the template factor;
4. the episode score from the outcome and that process score by the consensus formula
   (:func:`shopbench.scoring.score.with_judgement`), recorded on the trajectory beside its
   judge record.

Every parameter comes from one :class:`~shopbench.scoring.consensus.ConsensusConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.judging.judge import Verdict
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.decision_rules import (
    DecisionReport,
    decision_report,
    penalise_decisions,
)
from shopbench.scoring.score import with_judgement
from shopbench.scoring.template_penalty import (
    MinHasher,
    TemplateReport,
    miner_template,
    penalise,
    reasoning_of,
)
from shopbench.trajectory.record import Trajectory


class ScoredRound(BaseModel):
    """One miner's round, scored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trajectories: list[Trajectory] = Field(
        description="the episodes in input order, each with its judge record and score"
    )
    verdicts: list[Verdict] = Field(
        description="each episode's final verdict: combined, then template-penalised"
    )
    template: TemplateReport = Field(description="the miner's template similarity and factor")
    decisions: DecisionReport = Field(
        description="how well trivial rules explain the miner's picks, and the factor"
    )


def score_round(
    miner: str,
    trajectories: Sequence[Trajectory],
    judgements: Sequence[Judgement],
    consensus: ConsensusConfig,
    hasher: MinHasher | None = None,
) -> ScoredRound:
    """Score `miner`'s episodes of one round from their judgements (same order).

    `hasher` is the round's MinHasher (made from ``consensus.template`` when None; pass one
    to share its permutations across the miners of a round). ValueError when the two
    sequences differ in length.
    """
    if len(trajectories) != len(judgements):
        raise ValueError(
            f"score_round needs one judgement per trajectory: {len(trajectories)} "
            f"trajectories, {len(judgements)} judgements"
        )
    template = consensus.template
    report = miner_template(
        miner, [(t.task_id, reasoning_of(t)) for t in trajectories], template,
        hasher or MinHasher(template.permutations, template.seed),
    )  # fmt: skip
    combined = [j.combined(consensus.combine) for j in judgements]
    decisions = decision_report(miner, combined, consensus.decisions)
    verdicts = [
        penalise_decisions(penalise(v, report.factor), decisions.factor) for v in combined
    ]
    scored = [
        with_judgement(t, v, consensus.score) for t, v in zip(trajectories, verdicts, strict=True)
    ]
    return ScoredRound(
        trajectories=scored, verdicts=verdicts, template=report, decisions=decisions
    )
