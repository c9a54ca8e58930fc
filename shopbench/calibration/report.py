"""What a judge calibration reports: the report's models, the AUC it rests on, its files.

:func:`shopbench.calibration.run.run_calibration` fills a :class:`CalibrationReport`;
:func:`write_report` writes it as ``report.json`` and ``report.md``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.calibration.errors import CalibrationError

Group = Literal["honest", "dishonest", "other"]
"""A policy's calibration group: its ``honest`` attribute True, False, or None."""


class PolicySummary(BaseModel):
    """How one policy fared under the judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str
    group: Group
    episodes: int
    asr: float
    mean_process: float = Field(
        description="mean process score after the round's penalties (template, decisions)"
    )
    mean_process_unpenalised: float
    mean_process_successes: float = Field(
        default=0.0, description="mean process score of its successful episodes"
    )
    mean_episode_score: float
    template_similarity: float = Field(description="mean over rounds")
    template_factor: float = Field(description="mean over rounds")
    decision_margin: float = Field(
        default=0.0, description="mean over rounds: how much better the best trivial rule "
        "explains the picks than the constraints do",
    )  # fmt: skip
    decision_factor: float = Field(default=1.0, description="mean over rounds")
    decision_rule: str | None = Field(
        default=None, description="the trivial rule that explained the picks best most often"
    )
    claims_false: float = Field(default=0.0, description="share of episodes with a false claim")
    grounding_caught: float = Field(description="share of episodes failing grounded_queries")
    stopped_at: dict[str, int] = Field(description="first failing gate → episodes")
    gate_pass_rate: dict[str, float]


class InjectionResult(BaseModel):
    """Score changes when judge-directed text is planted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int
    mean_delta: float
    max_delta: float
    by_variant: dict[str, float]
    by_group: dict[str, float]


class CalibrationReport(BaseModel):
    """The calibration's findings (written as report.json)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge_id: str
    rubric_version: str
    score_formula: str
    tasks: int
    tasks_by_intent: dict[str, int]
    auc_honest_vs_dishonest: float
    auc_unpenalised: float
    mean_score_by_policy: dict[str, float]
    injection_delta: float
    template_penalty_by_policy: dict[str, dict[str, float]]
    decision_penalty_by_policy: dict[str, dict[str, float]] = Field(default_factory=dict)
    template_penalty: bool = Field(default=True, description="whether it was applied")
    grounding_caught_by_policy: dict[str, float]
    injection: InjectionResult
    policies: list[PolicySummary]
    acceptance: dict[str, bool] = Field(description="the calibration targets, where measurable")
    agreement_with_rubric: float | None = Field(
        default=None, description="Spearman of this judge's process scores against the "
        "rubric's on the same episodes (LLM judges; fallbacks left out)",
    )
    llm_fallbacks: int = Field(default=0, description="episodes an LLM judge fell back on")


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a random positive scores above a random negative), ties counting one half."""
    if not positives or not negatives:
        raise CalibrationError("an AUC needs scores of both groups")
    ordered = sorted(negatives)
    total = 0.0
    for p in positives:
        below = bisect.bisect_left(ordered, p)
        ties = bisect.bisect_right(ordered, p) - below
        total += below + 0.5 * ties
    return total / (len(positives) * len(negatives))


def render_markdown(report: CalibrationReport) -> str:
    """The report as a Markdown page (report.md)."""
    lines = [
        "# Judge calibration",
        "",
        f"Judge `{report.judge_id}` (rubric v{report.rubric_version}), score formula "
        f"`{report.score_formula}`, {report.tasks} tasks "
        f"({', '.join(f'{k} {v}' for k, v in report.tasks_by_intent.items())}).",
        "",
        f"- AUC honest vs dishonest: **{report.auc_honest_vs_dishonest:.3f}** "
        f"(before the template penalty {report.auc_unpenalised:.3f})",
        *([f"- Agreement with the rubric (Spearman): {report.agreement_with_rubric} "
           f"({report.llm_fallbacks} LLM fallbacks)"]
          if report.agreement_with_rubric is not None or report.llm_fallbacks else []),
        f"- Injection: mean change {report.injection_delta:+.3f}, largest "
        f"{report.injection.max_delta:+.3f} over {report.injection.trials} trials",
        "",
        f"- Template penalty: {'applied' if report.template_penalty else 'switched off'}",
        "",
        "| policy | group | episodes | ASR | process | on successes | unpenalised | "
        "episode score | template sim | factor | decision margin | factor | false claims | "
        "grounding caught | first failing gate |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report.policies:
        top = ", ".join(f"{k} {v}" for k, v in list(s.stopped_at.items())[:3])
        lines.append(
            f"| {s.policy} | {s.group} | {s.episodes} | {s.asr:.2f} | {s.mean_process:.3f} | "
            f"{s.mean_process_successes:.3f} | {s.mean_process_unpenalised:.3f} | "
            f"{s.mean_episode_score:.3f} | {s.template_similarity:.2f} | "
            f"{s.template_factor:.2f} | {s.decision_margin:+.2f} ({s.decision_rule or '-'}) | "
            f"{s.decision_factor:.2f} | {s.claims_false:.2f} | {s.grounding_caught:.2f} | "
            f"{top} |"
        )
    lines += ["", "## Injection", "", "| variant | mean change |", "|---|---|"]
    lines += [f"| {k} | {v:+.3f} |" for k, v in report.injection.by_variant.items()]
    lines += [f"| (group) {k} | {v:+.3f} |" for k, v in report.injection.by_group.items()]
    lines += ["", "## Targets", ""]
    lines += [f"- [{'x' if ok else ' '}] {k}" for k, ok in report.acceptance.items()]
    return "\n".join(lines) + "\n"


def write_report(report: CalibrationReport, out: Path) -> tuple[Path, Path]:
    """Write report.json and report.md into `out` (created); return their paths."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        json_path, md_path = out / "report.json", out / "report.md"
        json_path.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
        md_path.write_text(render_markdown(report))
    except OSError as e:
        raise CalibrationError(f"{out}: cannot write the report ({e.strerror})") from None
    return json_path, md_path
