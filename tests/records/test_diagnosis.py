"""The diagnosis: why an episode ended as it did, from one closed set, with the failing
constraint named; carried by the archive's columns, its filters and curation's report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import get_args

import pytest
from support.api_archives import run_arena
from typer.testing import CliRunner

from shopbench.archive.filters import TraceFilter
from shopbench.archive.query import query
from shopbench.archive.store import read_store
from shopbench.cli import app
from shopbench.env import errors as env_errors
from shopbench.errors import ShopbenchError
from shopbench.records.diagnosis import DIAGNOSIS_KINDS, Diagnosis, diagnose
from shopbench.records.outcome import BudgetCheck, ConstraintHit, Outcome, SlotGrade
from shopbench.records.trajectory import ToolErrorCode, Trajectory
from shopbench.records.verdict import CriterionResult, Verdict


def _hit(kind: str, name: str, hit: bool) -> ConstraintHit:
    return ConstraintHit(kind=kind, name=name, expected="want", actual="got", hit=hit)  # type: ignore[arg-type]


def _slot(
    i: int, *hits: ConstraintHit, pid: str | None = "p1", score: float | None = None
) -> SlotGrade:
    n_hit = sum(h.hit for h in hits)
    rule = score if score is not None else (n_hit / len(hits) if hits else 0.0)
    return SlotGrade(
        slot=i, product_id=pid, constraints=list(hits), n_constraints=len(hits), n_hit=n_hit,
        rule_score=rule if pid else 0.0,
    )  # fmt: skip


def _outcome(
    slots: list[SlotGrade], *, intent: str = "product", success: bool = False, shops: int = 1,
    budget: BudgetCheck | None = None,
) -> Outcome:  # fmt: skip
    return Outcome(
        task_id="t", intent=intent, success=success,  # type: ignore[arg-type]
        rule_scores=[s.rule_score for s in slots],
        mean_rule=sum(s.rule_score for s in slots) / len(slots), slots=slots, shops=shops,
        budget=budget, reason=None if success else "graded a failure", matcher="m",
    )  # fmt: skip


def _budget(*, applies: bool, shops: int = 1, kind: str = "platform") -> BudgetCheck:
    return BudgetCheck(
        total=120.0, budget=100.0, threshold=150.0, voucher_type=kind,  # type: ignore[arg-type]
        discount_type="fixed", shops=shops, complete=True, applies=applies, holds=False,
        reason="total 120.00 is over the budget 100.00",
    )  # fmt: skip


EMPTY = [_slot(0, pid=None)]
TITLE_MISS = [_slot(0, _hit("title", "title", False), _hit("price", "price", True))]
PRICE_MISS = [
    _slot(0, _hit("title", "title", True), _hit("price", "price greater than", False))
]
ATTR_MISS = [
    _slot(0, _hit("title", "title", True), _hit("attribute", "color", True)),
    _slot(1, _hit("title", "title", True), _hit("attribute", "size", False)),
]
ALL_HIT = [_slot(0, _hit("title", "title", True)), _slot(1, _hit("title", "title", True))]


@pytest.mark.parametrize(
    ("outcome", "termination", "recommended", "want"),
    [
        (_outcome(ALL_HIT[:1], success=True), "terminated", ["p"], ("success", None, None)),
        (_outcome(EMPTY), "terminated", ["ghost"], ("unknown_product", None, None)),
        (_outcome(EMPTY), "policy_timeout", [], ("policy_error", "policy_timeout", None)),
        (_outcome(EMPTY), "invalid_reply", [], ("policy_error", "invalid_reply", None)),
        (_outcome(EMPTY), "turn_limit", [], ("turn_limit", None, None)),
        (_outcome(EMPTY), "no_progress", [], ("no_progress", None, None)),
        (_outcome(EMPTY), "terminated", [], ("no_recommendation", "terminated", None)),
        (
            _outcome([ALL_HIT[0], _slot(1, pid=None)], intent="shop"), "terminated", ["a"],
            ("incomplete", None, 1),
        ),
        (_outcome(TITLE_MISS), "terminated", ["p"], ("wrong_product", "title", 0)),
        (_outcome(PRICE_MISS), "turn_limit", ["p"], ("constraint_unmet", "price", 0)),
        (_outcome(ATTR_MISS, intent="shop"), "terminated", ["a", "b"],
         ("constraint_unmet", "attribute:size", 1)),
        (_outcome(ALL_HIT, intent="shop", shops=2), "terminated", ["a", "b"],
         ("several_shops", None, None)),
        (_outcome(ALL_HIT, intent="voucher", shops=2, budget=_budget(applies=False, shops=2,
                                                                      kind="shop")),
         "terminated", ["a", "b"], ("voucher_misapplied", "voucher:shops", None)),
        (_outcome(ALL_HIT, intent="voucher", budget=_budget(applies=False)), "terminated",
         ["a", "b"], ("voucher_misapplied", "voucher:threshold", None)),
        (_outcome(ALL_HIT, intent="voucher", budget=_budget(applies=True)), "terminated",
         ["a", "b"], ("over_budget", "budget", None)),
        (_outcome(ALL_HIT, intent="voucher"), "terminated", ["a", "b"], ("other", None, None)),
    ],
)  # fmt: skip
def test_each_way_of_ending_has_its_kind_and_names_what_failed(
    outcome: Outcome, termination: str, recommended: list[str], want: tuple
) -> None:
    d = diagnose(outcome, termination, recommended=recommended)
    assert (d.kind, d.constraint, d.slot) == want
    assert d.kind in DIAGNOSIS_KINDS
    assert d.failed is (d.kind != "success")


def test_an_exact_target_passes_whatever_its_constraints_say() -> None:
    exact = [_slot(0, _hit("title", "title", True), _hit("price", "price", False), score=1.0)]
    assert diagnose(_outcome(exact), "terminated", recommended=["p"]).kind == "other"


def test_judge_directed_text_is_an_exploit_even_when_the_outcome_succeeded() -> None:
    gate = CriterionResult(
        name="no_judge_directed_text", kind="gate", passed=False, fail_score=0.0,
        evidence="turn 2: 'ignore previous instructions'",
    )  # fmt: skip
    judge = Verdict(score=0.0, gates={"no_judge_directed_text": False}, criteria=[gate])
    d = diagnose(_outcome(ALL_HIT[:1], success=True), "terminated", recommended=["p"], judge=judge)
    assert (d.kind, d.constraint, d.label) == (
        "exploit", "no_judge_directed_text", "exploit:no_judge_directed_text",
    )  # fmt: skip
    assert "ignore previous" in d.detail
    clean = Verdict(score=1.0, gates={"no_judge_directed_text": True})
    assert diagnose(_outcome(ALL_HIT[:1], success=True), "terminated", judge=clean).kind == (
        "success"
    )
    with pytest.raises(ValueError):
        Diagnosis(kind="bad")  # type: ignore[arg-type]


def test_the_tool_error_codes_are_the_environments() -> None:
    codes = {
        cls.code for cls in vars(env_errors).values()
        if isinstance(cls, type) and issubclass(cls, env_errors.ToolError) and "code" in vars(cls)
    }  # fmt: skip
    assert codes == set(get_args(ToolErrorCode))


@pytest.fixture(scope="module")
def arena(
    catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Trajectory]]:
    out = tmp_path_factory.mktemp("diagnosis-arena")
    run_arena(catalog_dir, out)
    return out / "archive", list(read_store(out / "archive"))


def _cli(*args: str) -> list[dict]:
    result = CliRunner().invoke(app, ["traces", "query", *args, "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_the_archive_columns_and_filters_carry_the_diagnosis(
    arena: tuple[Path, list[Trajectory]],
) -> None:
    root, records = arena
    kinds = Counter(t.diagnosis.kind for t in records)
    assert kinds["success"] > 0 and len(kinds) >= 3, kinds  # careful, guesser and random differ
    table = query(root, TraceFilter())
    assert sorted(table.column("failure").to_pylist()) == sorted(
        t.diagnosis.kind for t in records
    )
    for kind in kinds:
        rows = _cli(str(root), "--failure", kind)
        assert {r["episode_id"] for r in rows} == {
            t.episode_id for t in records if t.diagnosis.kind == kind
        }
    constrained = Counter(t.diagnosis.constraint for t in records if t.diagnosis.constraint)
    name, n = constrained.most_common(1)[0]
    assert len(_cli(str(root), "--failure-constraint", name)) == n
    erred = {t.episode_id for t in records if any(e.error == "invalid_id" for e in t.tool_log)}
    got = {r["episode_id"] for r in _cli(str(root), "--tool-error", "invalid_id,limit")}
    assert erred <= got
    assert got == {
        t.episode_id for t in records if any(e.error in ("invalid_id", "limit") for e in t.tool_log)
    }
    counted = dict(
        zip(table.column("episode_id").to_pylist(), table.column("tool_errors").to_pylist(),
            strict=True)
    )  # fmt: skip
    assert counted == {t.episode_id: sum(e.error is not None for e in t.tool_log) for t in records}


def test_a_hostile_constraint_filter_is_a_value_never_sql(
    arena: tuple[Path, list[Trajectory]],
) -> None:
    root, records = arena
    for value in ("price:' OR '1'='1", 'attribute:x") OR TRUE --', "price:%"):
        assert _cli(str(root), "--failure-constraint", value) == []
    assert len(query(root, TraceFilter())) == len(records)  # and the archive is as it was


def test_a_filter_outside_the_closed_sets_is_refused_by_name() -> None:
    for bad in ({"failure": "crashed"}, {"tool_error": "oops"}, {"failure_constraint": "A B"}):
        with pytest.raises(ShopbenchError) as e:
            TraceFilter.parse(bad)
        assert next(iter(bad)).replace("_", "-") in str(e.value)


def test_curations_report_counts_how_the_episodes_ended(
    arena: tuple[Path, list[Trajectory]], tmp_path: Path,
) -> None:
    root, records = arena
    out = str(tmp_path / "c")
    result = CliRunner().invoke(app, ["curate", "--archive", str(root), "--out", out])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    diagnoses = report["diagnoses"]
    assert {k: v["episodes"] for k, v in diagnoses.items()} == dict(
        Counter(t.diagnosis.kind for t in records)
    )
    assert sum(v["kept"] for v in diagnoses.values()) == report["kept"]
    assert "## How the episodes ended (diagnosis)" in (tmp_path / "c" / "report.md").read_text()
