"""The experiment's report drawn from a real one: the third design's committed report.json
(the scripted baselines and `curated` on 300 held-out tasks, the other arms pending)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from shopbench.experiment.plot import render_plot
from shopbench.experiment.report import render_markdown
from shopbench.experiment.results import ExperimentReport

REPORT = Path(__file__).parents[2] / "docs" / "experiments" / "smollm2-cpu-equal.json"


def _report() -> ExperimentReport:
    return ExperimentReport.model_validate_json(REPORT.read_text(encoding="utf-8"))


def test_labels_that_would_meet_are_drawn_on_two_lines() -> None:
    svg = ET.fromstring(render_plot(_report()))
    ys = {t.text: float(t.attrib["y"]) for t in svg.iter() if t.tag.endswith("text")}
    # "first_hit" and "first_hit_filtered" side by side would overlap on one line
    assert ys["first_hit"] != ys["first_hit_filtered"]


def test_a_report_without_base_says_whose_rate_its_detectable_difference_is_at() -> None:
    report = _report()
    curated = next(a for a in report.arms if a.arm == "curated")
    shown = render_markdown(report.model_copy(update={"arms": [curated]}))
    assert "(80% power, at curated's rate)" in shown and "base rate" not in shown
    # the tokens column is the arm's sample, the equal-cost budget
    assert curated.sample is not None and f"| {curated.sample['tokens']:,} |" in shown
    only_floors = render_markdown(report.model_copy(update={"arms": []}))
    assert f"at {report.baselines[0].policy}'s rate" in only_floors
