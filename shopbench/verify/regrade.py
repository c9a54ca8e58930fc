"""The verdict's deterministic core, re-derived: the rubric's verdict, the combined score
given the recorded LLM part, the recorded cross-episode factors applied, the episode score.

What a record's ``judge`` holds is made in three steps (``scoring/round.py``): the rubric's
verdict, maybe combined with an LLM judge's (``scoring/combine.py``) or marked as an LLM
fallback (``judging/llm/fallback.py``); then the miner's template and decision factors for
the round; then the episode score (``scoring/score.py``). The rubric is deterministic and
is run again, with the rubric version the record's rubric part names. An LLM's opinion
cannot be asked again identically, so its part is read back from the record's typed parts
(``judge.parts``: the LLM's part and the combine rule, or the LLM's failure) and combined
with the re-derived rubric verdict by the same functions; the factors are the recorded
ones (:mod:`shopbench.verify.rounds` re-derives them from the miner's whole round). The
verdict's prose (``judge_id``, ``rationale``, ``notes``, ``signals``) is never read: it is
re-derived from the parts and compared. A record written before typed parts has none; its
parts are read from its prose by :mod:`shopbench.verify.legacy_verdict`, the one reader of
that shape.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from shopbench.judging.llm.fallback import with_fallback
from shopbench.judging.rubric.judge import RubricJudge, load_rubric
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict, VerdictParts
from shopbench.scoring.combine import DEFAULT_RULE, CombineRule, Judgement, llm_verdict
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.decision_rules import penalise_decisions
from shopbench.scoring.template_penalty import penalise
from shopbench.verify.errors import VerifyError
from shopbench.verify.legacy_verdict import legacy_parts, without_parts


@cache
def rubric_judge(version: str) -> RubricJudge:
    """The rubric judge over the packaged rubric file of `version` (``rubric_v<N>.toml``);
    VerifyError when this release packages no such rubric."""
    name = f"rubric_v{version}.toml"
    data = resources.files("shopbench.judging.rubric").joinpath("data", name)
    if not version.isdigit() or not data.is_file():
        raise VerifyError(f"no packaged rubric of version {version!r} (looked for {name})")
    with resources.as_file(data) as path:
        return RubricJudge(load_rubric(path))


def rubric_version(recorded: Verdict) -> str:
    """The version of the rubric `recorded` was judged by: its rubric part's (a verdict
    written before typed parts: its own field's, 2 when empty)."""
    if recorded.parts is not None:
        return recorded.parts.rubric.rubric_version
    return recorded.rubric_version or "2"


def judgement_of(rubric: Verdict, parts: VerdictParts) -> tuple[Judgement, CombineRule]:
    """The round's judgement made of the re-derived `rubric` verdict and the recorded
    `parts`: the rubric's alone, standing in for the LLM's failure, or with the LLM's
    verdict; and the rule that combines them."""
    if parts.fallback is not None:
        return Judgement(rubric=with_fallback(rubric, parts.fallback)), DEFAULT_RULE
    if parts.llm is not None and parts.rule is not None:
        return Judgement(rubric=rubric, llm=llm_verdict(parts.llm)), CombineRule.of(parts.rule)
    return Judgement(rubric=rubric), DEFAULT_RULE


def judgement(replayed: Trajectory, recorded: Verdict) -> tuple[Judgement, CombineRule]:
    """The round's judgement of the episode, re-derived: the rubric's verdict on the replayed
    record with the recorded parts (:func:`judgement_of`). VerifyError when this release
    packages no rubric of the recorded version."""
    rubric = rubric_judge(rubric_version(recorded)).judge(replayed)
    parts = recorded.parts if recorded.parts is not None else legacy_parts(recorded, rubric)
    return judgement_of(rubric, parts)


def expected_record(
    replayed: Trajectory, recorded: Verdict, consensus: ConsensusConfig
) -> tuple[Trajectory, Judgement]:
    """`replayed` judged and scored as the round did, with the recorded LLM part and the
    recorded template and decision factors; and the judgement it was made from. A record
    written before typed parts is expected without them, as its release wrote it."""
    from shopbench.scoring.score import with_judgement

    judged, rule = judgement(replayed, recorded)
    verdict = judged.combined(rule)
    given = recorded.model_fields_set
    if "template_factor" in given or "unpenalised_score" in given:
        verdict = penalise(verdict, recorded.template_factor)
    if "decision_factor" in given:
        verdict = penalise_decisions(verdict, recorded.decision_factor)
    if recorded.parts is None:
        verdict = without_parts(verdict)
    return with_judgement(replayed, verdict, consensus.score), judged
