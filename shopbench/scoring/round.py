"""Scoring a round: one miner's judged episodes become scored trajectories.

This is what a validator does with a miner's episodes of a round once they are judged (by
:class:`RoundJudge`: the rubric on every episode, the LLM judge on a sample), and
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

import asyncio
import logging
import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.judging.errors import JudgeUnavailable
from shopbench.judging.judge import Judge
from shopbench.judging.llm.fallback import fallback_verdict
from shopbench.judging.llm.judge import LLMJudge
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict
from shopbench.scoring.combine import (
    DEFAULT_RULE,
    CombineRule,
    Judgement,
    LLMSampling,
    select_for_llm,
)
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


log = logging.getLogger(__name__)


class RoundJudge:
    """Judges a validator's round: the rubric on every episode, the LLM on a sample.

    Never raises for the LLM's troubles and never waits past its deadline: an episode whose
    LLM judgement failed or did not finish keeps the rubric's verdict, with the fallback
    recorded. A validator that judges miner by miner calls :meth:`pick` once per round (on
    the round's task list, so every miner is read on the same tasks) and :meth:`judge` per
    miner with the picked tasks and the round's deadline (:meth:`assess` gives the two
    verdicts apart, for :func:`shopbench.scoring.round.score_round`).
    """

    def __init__(
        self,
        rubric: Judge,
        llm: LLMJudge | None = None,
        sampling: LLMSampling | None = None,
        rule: CombineRule = DEFAULT_RULE,
    ) -> None:
        self.rubric = rubric
        self.llm = llm
        self.sampling = sampling or LLMSampling()
        self.rule = rule

    def pick(self, task_ids: Sequence[str], key: bytes) -> frozenset[str]:
        """The round's tasks the LLM reads (:func:`select_for_llm`; none without an LLM)."""
        if self.llm is None:
            return frozenset()
        return select_for_llm(task_ids, self.sampling.rate, key)

    async def judge_round(self, trajectories: Sequence[Trajectory], key: bytes) -> list[Verdict]:
        """:meth:`judge` with the sample picked from these trajectories' own tasks."""
        picked = self.pick([t.task_id for t in trajectories], key)
        return await self.judge(trajectories, picked)

    async def judge(
        self, trajectories: Sequence[Trajectory], picked: frozenset[str],
        deadline: float | None = None,
    ) -> list[Verdict]:
        """One verdict per trajectory, in order: the rubric's, combined by the rule with the
        LLM's for episodes of `picked` tasks (see :meth:`assess`)."""
        judged = await self.assess(trajectories, picked, deadline)
        return [j.combined(self.rule) for j in judged]

    async def assess(
        self, trajectories: Sequence[Trajectory], picked: frozenset[str],
        deadline: float | None = None,
    ) -> list[Judgement]:
        """One judgement per trajectory, in order: the rubric's verdict, and the LLM's for
        episodes of `picked` tasks; an LLM judgement that failed or did not finish leaves
        the rubric's verdict alone with the fallback recorded in it. `deadline` is a
        ``time.monotonic()`` instant (default: the sampling's round deadline from now)."""
        verdicts = [self.rubric.judge(t) for t in trajectories]
        llm_verdicts: dict[int, Verdict] = {}
        chosen = [i for i, t in enumerate(trajectories) if t.task_id in picked]
        if self.llm is None or not chosen:
            return [Judgement(rubric=v) for v in verdicts]
        llm = self.llm
        if deadline is None:
            deadline = time.monotonic() + self.sampling.round_deadline_s
        tasks = {i: asyncio.ensure_future(llm.assess(trajectories[i])) for i in chosen}
        left = max(0.0, deadline - time.monotonic())
        _, pending = await asyncio.wait(tasks.values(), timeout=left)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        fallbacks = 0
        for i, task in tasks.items():
            if task in pending:
                failure = JudgeUnavailable(
                    "deadline", "the round's time for LLM judgements ran out"
                )
            else:
                error = task.exception()
                if error is None:
                    llm_verdicts[i] = task.result()
                    continue
                if not isinstance(error, JudgeUnavailable):
                    raise error
                failure = error
            verdicts[i] = fallback_verdict(verdicts[i], failure, llm.judge_id)
            fallbacks += 1
        if fallbacks:
            log.warning("LLM judge fell back to the rubric on %d of %d sampled episodes",
                        fallbacks, len(chosen))
        return [Judgement(rubric=v, llm=llm_verdicts.get(i)) for i, v in enumerate(verdicts)]
