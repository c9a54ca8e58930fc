"""The rubric judge: the default process judge — deterministic, no model.

The criteria, their order, fail scores and bonus weights live in a versioned TOML file
(``data/rubric_v2.toml``, read by :mod:`shopbench.judging.rubric.file`); each criterion's
name selects a check of :mod:`shopbench.judging.rubric.checks`, which reads the trajectory's
:class:`~shopbench.judging.rubric.evidence.Evidence`.

Scoring follows SN15's gated rubric: the first failing gate, in file order, sets the score
to its fail_score; a trajectory that passes every gate scores pass_score plus the bonuses it
earned, capped at max_score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shopbench.judging.rubric.checks import CHECKS
from shopbench.judging.rubric.decisions import Decisions
from shopbench.judging.rubric.evidence import Evidence, extract
from shopbench.judging.rubric.file import Rubric, load_rubric
from shopbench.records.tools import Tool
from shopbench.records.trajectory import Trajectory
from shopbench.records.verdict import Verdict

__all__ = ["JUDGE_VERSION", "Rubric", "RubricJudge", "load_rubric"]

JUDGE_VERSION = "2"
"""Version of the rubric judge's code (its checks); a consensus parameter with the rubric's."""


def _signals(ev: Evidence) -> dict[str, float]:
    searches = ev.calls(Tool.FIND_PRODUCT)
    judged = [c for c in ev.calls() if c.matches_text is not None]
    return {
        "turns": len(ev.turns),
        "calls_run": len(ev.calls()),
        "calls_not_run": sum(not c.executed for t in ev.turns for c in t.calls),
        "searches": len(searches),
        "ungrounded_searches": sum(
            1 for c in searches if c.grounding is not None and not c.grounding.grounded
        ),
        "views": len(ev.calls(Tool.VIEW_PRODUCT_INFORMATION)),
        "ids_cited": sum(len(t.ids_grounded) for t in ev.turns),
        "ids_fabricated": len({i for t in ev.turns for i in t.ids_fabricated}),
        "prices_cited": sum(t.prices_cited for t in ev.turns),
        "prices_unverified": sum(len(t.prices_unverified) for t in ev.turns),
        "attributes_cited": sum(t.attributes_cited for t in ev.turns),
        "max_products_named": max((len(t.mentioned) for t in ev.turns), default=0),
        "call_text_match": (
            sum(bool(c.matches_text) for c in judged) / len(judged) if judged else 1.0
        ),
        "judge_directed": sum(len(t.judge_directed) for t in ev.turns),
        **(ev.decisions.signals() if ev.decisions is not None else _NO_DECISIONS),
    }


_NO_DECISIONS = Decisions().signals()


class RubricJudge:
    """The deterministic rubric judge (see the module docstring)."""

    id = "rubric"
    version = JUDGE_VERSION

    def __init__(self, rubric: Rubric | None = None) -> None:
        self.rubric = rubric or load_rubric()
        self._rules = self.rubric.evidence_rules()
        info = self.rubric.rubric
        self.judge_id = f"{self.id}-judge/{self.version}+{info.name}/{info.version}"

    def evidence(self, trajectory: Trajectory | Mapping[str, Any]) -> Evidence:
        """The evidence this judge decides on (for inspection and reports)."""
        return extract(trajectory, self._rules)

    def judge(self, trajectory: Trajectory | Mapping[str, Any]) -> Verdict:
        """The verdict on one trajectory; never raises for anything inside the record."""
        return self.judge_evidence(self.evidence(trajectory))

    def judge_evidence(self, ev: Evidence) -> Verdict:
        """The verdict on already-extracted evidence."""
        info = self.rubric.rubric
        params = self.rubric.params
        results: list[dict[str, Any]] = []
        stopped: dict[str, Any] | None = None
        bonus = 0.0
        for spec in self.rubric.criteria:
            passed, why = CHECKS[spec.name](ev, params)
            earned = (spec.weight or 0.0) if spec.kind == "bonus" and passed else 0.0
            result = {
                "name": spec.name, "kind": spec.kind, "passed": passed,
                "fail_score": spec.fail_score, "bonus": earned, "evidence": why,
            }
            results.append(result)
            if spec.kind == "gate" and not passed and stopped is None:
                stopped = result
            bonus += earned
        if stopped is not None:
            score = float(stopped["fail_score"] or 0.0)
            rationale = f"stopped at {stopped['name']} ({score:g}): {stopped['evidence']}"
        else:
            score = min(info.max_score, info.pass_score + bonus)
            earned_names = [r["name"] for r in results if r["kind"] == "bonus" and r["passed"]]
            extra = f" + {', '.join(earned_names)}" if earned_names else ""
            rationale = f"all gates passed ({info.pass_score:g}{extra})"
        if ev.notes:
            rationale += " | input: " + "; ".join(ev.notes)
        # One validation of plain data (pydantic-core) is cheaper than building each model.
        return Verdict.model_validate({
            "score": round(score, 6),
            "gates": {r["name"]: r["passed"] for r in results if r["kind"] == "gate"},
            "rationale": rationale,
            "judge_id": self.judge_id,
            "judge_version": self.version,
            "rubric_version": info.version,
            "stopped_at": stopped["name"] if stopped else None,
            "criteria": results,
            "notes": list(ev.notes),
            "signals": _signals(ev),
            "parts": {"rubric": {
                "judge_id": self.judge_id, "judge_version": self.version,
                "rubric_version": info.version, "score": round(score, 6),
            }},
        })  # fmt: skip
