"""``report.md``, the curation report for a person, and both files written (see
:mod:`shopbench.curation.report`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shopbench.curation.registry import safe
from shopbench.curation.report.model import (
    REPORT_JSON,
    REPORT_MD,
    CurationReport,
    PolicyCounts,
    headline,
)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _total(policies: dict[str, PolicyCounts], honest: bool) -> PolicyCounts:
    """The policies of one label summed (a row of the table, its totals)."""
    mine = [p for p in policies.values() if p.honest is honest]
    by_rule: dict[str, int] = {}
    for p in mine:
        for rule, n in p.dropped_by_rule.items():
            by_rule[rule] = by_rule.get(rule, 0) + n
    return PolicyCounts(
        honest=honest, episodes=sum(p.episodes for p in mine), kept=sum(p.kept for p in mine),
        retained=sum(p.retained for p in mine), dropped_by_rule=dict(sorted(by_rule.items())),
        recovery=sum(p.recovery for p in mine),
    )  # fmt: skip


def _headline_sentence(r: CurationReport) -> str:
    """What the headline's figures are, in the per-policy table's counts."""
    h = headline(r.policies)
    honest_removed = h.honest - h.honest_retained
    return (
        f"From the table *By true policy*: honest retention {_cell(h.retention)} = "
        f"{h.honest_retained} of the honest policies' {h.honest} episodes retained "
        f"({h.honest_kept} kept, {h.honest_retained - h.honest_kept} dropped as duplicates "
        f"of a kept episode); dishonest removal recall {_cell(h.recall)} = "
        f"{h.dishonest_removed} of the dishonest policies' {h.dishonest} episodes removed; "
        f"precision {_cell(h.precision)} = {h.dishonest_removed} dishonest of the "
        f"{h.dishonest_removed + honest_removed} dishonest and honest episodes removed."
    )


def render_markdown(r: CurationReport) -> str:
    """The report as Markdown: the headline, each rule, the policies, contamination."""
    lines = [
        "# Curation report",
        "",
        f"Archive `{r.archive}`: **{r.episodes_in}** episodes in, **{r.kept}** kept.",
        "",
    ]
    if r.dishonest_removal_precision is not None or r.honest_retention is not None:
        lines += [
            "| dishonest removal precision | dishonest removal recall | honest retention |",
            "|---|---|---|",
            f"| {_cell(r.dishonest_removal_precision)} | {_cell(r.dishonest_removal_recall)} "
            f"| {_cell(r.honest_retention)} |",
            "",
        ]
        if r.policies:
            lines += [_headline_sentence(r), ""]
    lines += [
        "## Rules (pipeline order; each drop charged to the first rule that drops it)",
        "",
        "| rule | on | dropped | dishonest | honest | neither | precision | recall | "
        "honest loss | alone: precision | alone: recall | alone: honest loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in r.rules.items():
        t, a = e.truth, e.alone
        lines.append(
            f"| {name} | {'yes' if e.enabled else 'no'} | {e.dropped} | "
            f"{_cell(t and t.dishonest)} | {_cell(t and t.honest)} | {_cell(t and t.neither)} | "
            f"{_cell(t and t.precision)} | {_cell(t and t.recall)} | "
            f"{_cell(t and t.honest_loss)} | {_cell(a and a.precision)} | "
            f"{_cell(a and a.recall)} | {_cell(a and a.honest_loss)} |"
        )
    lines += ["", "### Commonest reasons", ""]
    for name, e in r.rules.items():
        for why, n in e.reasons.items():
            lines.append(f"- **{name}** ({n}): {why}")
    if r.policies:
        lines += [
            "", "## By true policy", "",
            "Retained: kept, or dropped as a duplicate of a kept episode (its decisions stay in "
            "the set). The headline is computed from the two totals rows.",
            "",
            "| policy | honest | episodes | kept | retained | recovery kept | dropped by rule |",
            "|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        rows = list(r.policies.items())
        for label, honest in (("all honest policies", True), ("all dishonest policies", False)):
            rows.append((f"**{label}**", _total(r.policies, honest)))
        for name, p in rows:
            rules = ", ".join(f"{k} {v}" for k, v in p.dropped_by_rule.items())
            lines.append(
                f"| {name} | {_cell(p.honest)} | {p.episodes} | {p.kept} | {p.retained} "
                f"| {p.recovery} | {rules} |"
            )
    if r.duplicates_per_miner:
        lines += [
            "", "## Duplicates (the same decisions as a kept episode of the same task)", "",
            "| miner | duplicates dropped | kept instead (miner: episodes) |",
            "|---|---|---|",
        ]  # fmt: skip
        for miner, d in r.duplicates_per_miner.items():
            of = ", ".join(f"{safe(k, 64)}: {v}" for k, v in d.of.items())
            lines.append(f"| {safe(miner, 64)} | {d.dropped} | {of} |")
    lines += [
        "", "## Recovery", "",
        f"Recovery share of the kept episodes: {_cell(r.recovery_share)} (of the kept "
        f"successes: {_cell(r.recovery_share_of_successes)}); by kind: "
        + ", ".join(f"{k} {v}" for k, v in r.recovery_kinds.items()) + ".",
        "", "## Contamination", "",
    ]  # fmt: skip
    if r.contaminated:
        lines += [
            "| test set | test queries | contaminated | clean | kept contaminated | kept clean |",
            "|---|---|---|---|---|---|",
        ]
        for name, c in r.contaminated.items():
            lines.append(
                f"| `{name}` | {c.test_queries} | {c.contaminated} | {c.clean} | "
                f"{c.kept_contaminated} | {c.kept_clean} |"
            )
    else:
        lines.append("No test set given.")
    if r.diagnoses:
        lines += [
            "", "## How the episodes ended (diagnosis)", "",
            "| diagnosis | episodes | kept | dropped by rule |", "|---|---|---|---|",
        ]  # fmt: skip
        for kind, counts_of in r.diagnoses.items():
            rules = ", ".join(f"{k} {v}" for k, v in counts_of.dropped_by_rule.items()) or "–"
            lines.append(f"| {kind} | {counts_of.episodes} | {counts_of.kept} | {rules} |")
    lines += ["", "## Kept", ""]
    for title, counts in (("intent", r.kept_per_intent), ("miner", r.kept_per_miner)):
        shown = ", ".join(f"{safe(k, 64)} {v}" for k, v in counts.items())
        lines.append(f"- per {title}: {shown}")
    lines.append(f"- clusters: {len(r.kept_per_cluster)}")
    lines.append(f"- weights: {r.weights}")
    return "\n".join(lines) + "\n"


def write_report(report: CurationReport, out: Path) -> None:
    """Write ``report.json`` and ``report.md`` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_JSON).write_text(
        json.dumps(report.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
    )
    (out / REPORT_MD).write_text(render_markdown(report), encoding="utf-8")
