"""Clarify tasks as the generator makes them: a product task's constraints, part held back
on a hidden card that the query names but does not state; validated, summarised, written in
ShoppingBench's format with the card as an extension field, the same bytes for a seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from shopbench.catalog.store import Catalog
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.hidden import visible_slot
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.shoppingbench_format import task_from_record, task_to_record
from shopbench.tasks.split import SplitRule
from shopbench.tasks.stats import task_stats
from shopbench.tasks.validate import check_task, validate_file


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=12, seed=2)).tasks


def test_a_clarify_task_holds_back_what_its_query_names(tasks: list[Task]) -> None:
    assert len(tasks) >= 5
    for t in tasks:
        assert t.intent == "clarify" and t.hidden is not None and len(t.reward) == 1
        assert t.hidden.fits(t.reward[0]) is None
        assert "in mind" in t.query
        shown = visible_slot(t.reward[0], t.hidden)
        assert shown.n_constraints() < t.reward[0].n_constraints()
        assert t.rules.question_cost > 0 and t.rules.max_questions > 0


def test_clarify_tasks_validate_and_a_leaking_query_does_not(
    tasks: list[Task], catalog: Catalog, catalog_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "clarify.jsonl"
    write_tasks(path, tasks)
    report = validate_file(path, catalog.index)
    assert report.ok, report.problems
    leaky = next(t for t in tasks if t.hidden is not None and t.hidden.pairs)
    key = leaky.hidden.pairs[0]  # type: ignore[union-attr]
    slot = leaky.reward[0]
    value = {k: v for o in slot.sku_options or [] for k, v in o.items()}.get(key) or next(
        vs[0] for a in slot.attributes or [] for k, vs in a.items() if k == key
    )
    said = f"{leaky.query} With {key.replace('_', ' ')} {value}."
    told = leaky.model_copy(update={"query": said})
    problems = check_task(told, catalog.index, SplitRule())
    assert any("states the held-back" in p for p in problems), problems


def test_the_card_travels_in_shoppingbench_records_and_stats(tasks: list[Task]) -> None:
    for t in tasks:
        record = task_to_record(t)
        assert record["hidden"] == t.hidden.model_dump()  # type: ignore[union-attr]
        back = task_from_record(record)
        assert back.intent == "clarify" and back.hidden == t.hidden
        assert back.reward == t.reward
    stats = task_stats(tasks).intents["clarify"]
    assert stats.mean_hidden is not None and stats.mean_hidden >= 1
    assert stats.hidden_kinds is not None and set(stats.hidden_kinds) <= {
        "price", "service", "attribute"
    }


def test_the_same_seed_gives_the_same_clarify_tasks(catalog_dir: Path, tasks: list[Task]) -> None:
    again = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=12, seed=2)).tasks
    assert [t.model_dump_json() for t in again] == [t.model_dump_json() for t in tasks]
