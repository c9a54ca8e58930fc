"""The verdict's deterministic core, re-derived: the rubric's verdict, the combined score
given the recorded LLM part, the recorded cross-episode factors applied, the episode score.

What a record's ``judge`` holds is made in three steps (``scoring/round.py``): the rubric's
verdict, maybe combined with an LLM judge's (``scoring/combine.py``) or marked as an LLM
fallback (``judging/llm/fallback.py``); then the miner's template and decision factors for
the round; then the episode score (``scoring/score.py``). The rubric is deterministic and
is run again, with the rubric version the record names. An LLM's opinion cannot be asked
again identically, so its part is read back from the record (its score, criteria,
rationale, notes, judge id and version, and the combine rule's id and weight) and combined
with the re-derived rubric verdict by the same functions; the factors are the recorded
ones (:mod:`shopbench.verify.rounds` re-derives them from the miner's whole round).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from shopbench.judging.errors import JudgeUnavailable
from shopbench.judging.llm.fallback import FALLBACK_SIGNAL, fallback_verdict
from shopbench.judging.rubric.judge import RubricJudge, load_rubric
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict
from shopbench.scoring.combine import CombineRule, Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.decision_rules import penalise_decisions
from shopbench.scoring.template_penalty import penalise
from shopbench.verify.errors import VerifyError

_FALLBACK_NOTE = re.compile(
    r"^llm judge (?P<id>.+) unavailable \((?P<kind>[a-z_]+)\): (?P<message>.*); "
    r"the rubric verdict stands$",
    re.S,
)


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


def _llm_part(recorded: Verdict, rubric: Verdict) -> tuple[Verdict, CombineRule]:
    """The LLM verdict and combine rule a combined `recorded` verdict was made from, read
    back around the re-derived `rubric` verdict (``combine``'s own layout, undone)."""
    rule_id = recorded.judge_id.rsplit("+", 1)[-1]
    weight = recorded.signals.get("combine_weight", CombineRule().weight)
    if not 0.0 <= weight <= 1.0:  # no rule has it: the signals' mismatch will say so
        weight = CombineRule().weight
    rule = CombineRule(id=rule_id, weight=weight)
    judge_id = recorded.judge_id.removesuffix(f"+{rule_id}")
    judge_id = judge_id.removeprefix(f"{rubric.judge_id}+")
    version = recorded.judge_version.removeprefix(f"{rubric.judge_version}+")
    score = recorded.signals.get("llm_score", 0.0)
    _, _, rationale = recorded.rationale.partition(f"({rule_id}): ")
    return Verdict(
        score=score, judge_id=judge_id, judge_version=version, rationale=rationale,
        criteria=[c.model_copy(update={"name": c.name.removeprefix("llm:")})
                  for c in recorded.criteria if c.name.startswith("llm:")],
        notes=[n.removeprefix("llm: ") for n in recorded.notes[len(rubric.notes):]
               if n.startswith("llm: ")],
    ), rule  # fmt: skip


def _fallback(recorded: Verdict, rubric: Verdict) -> Verdict:
    """`rubric` marked as standing in for the failed LLM judgement `recorded` names."""
    for note in reversed(recorded.notes):
        m = _FALLBACK_NOTE.match(note)
        if m is not None:
            failure = JudgeUnavailable(m["kind"], m["message"])  # type: ignore[arg-type]
            return fallback_verdict(rubric, failure, m["id"])
    return fallback_verdict(rubric, JudgeUnavailable("down", "(no note recorded)"), "?")


def judgement(replayed: Trajectory, recorded: Verdict) -> tuple[Judgement, CombineRule]:
    """The round's judgement of the episode, re-derived: the rubric's verdict on the replayed
    record (with the recorded LLM fallback, if any) and the recorded LLM verdict, if any."""
    version = recorded.rubric_version or "2"
    rubric = rubric_judge(version).judge(replayed)
    if recorded.signals.get(FALLBACK_SIGNAL, 0.0) >= 1.0:
        return Judgement(rubric=_fallback(recorded, rubric)), CombineRule()
    if "llm_score" in recorded.signals:
        llm, rule = _llm_part(recorded, rubric)
        return Judgement(rubric=rubric, llm=llm), rule
    return Judgement(rubric=rubric), CombineRule()


def expected_record(
    replayed: Trajectory, recorded: Verdict, consensus: ConsensusConfig
) -> tuple[Trajectory, Judgement]:
    """`replayed` judged and scored as the round did, with the recorded LLM part and the
    recorded template and decision factors; and the judgement it was made from."""
    from shopbench.scoring.score import with_judgement

    judged, rule = judgement(replayed, recorded)
    verdict = judged.combined(rule)
    given = recorded.model_fields_set
    if "template_factor" in given or "unpenalised_score" in given:
        verdict = penalise(verdict, recorded.template_factor)
    if "decision_factor" in given:
        verdict = penalise_decisions(verdict, recorded.decision_factor)
    return with_judgement(replayed, verdict, consensus.score), judged
