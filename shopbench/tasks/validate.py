"""Tasks validate themselves: the checks every generated task passes, and a whole-file check.

A task is valid against a catalog when:

1. every slot's target is in the catalog and the targets pass the task's own grader
   (success, voucher budget and one-shop rule included);
2. every slot has a non-empty satisfying set, every listed product passes its slot, and the
   target is in it;
3. every target is findable: it is in the top-50 window of ``find_product`` for the slot's
   phrase (``satisfy.search_phrase``: the words the query names the item with, which the
   query must contain) under the slot's own filters (price bound, services);
4. the split holds: a live task has no held-out product group among its targets or its
   satisfying sets; a held-out task's targets are all held out.

Across a file, a cluster id never appears in two splits. No model is needed for any check.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.schema import Product
from shopbench.catalog.search.filters import WINDOW
from shopbench.catalog.search.index import SearchIndex
from shopbench.outcome.grader import grade
from shopbench.outcome.title import TitleMatcher
from shopbench.tasks.model import Task
from shopbench.tasks.satisfy import slot_passes, slot_search
from shopbench.tasks.split import SplitRule

_MAX_PROBLEMS_SHOWN = 50


def findable(index: SearchIndex, task: Task, i: int, window: int = WINDOW) -> bool:
    """Whether slot `i`'s target is in the top `window` for its phrase under its filters."""
    target = task.reward[i].product_id
    return target is not None and any(
        h.product_id == target for h in slot_search(index, task, i, window)
    )


def split_problems(task: Task, products: Iterable[Product], rule: SplitRule) -> list[str]:
    """Split violations of `task` among `products` (its targets and satisfying products)."""
    if task.split == "live":
        bad = sorted({p.group_key for p in products if rule.is_heldout(p.group_key)})
        return [f"live task lists held-out group {g!r}" for g in bad[:3]]
    return []


def check_task(
    task: Task,
    index: SearchIndex,
    rule: SplitRule,
    matcher: TitleMatcher | None = None,
) -> list[str]:
    """Every problem of one task against a catalog's index; empty when it is valid."""
    problems: list[str] = []
    ids = [s.product_id for s in task.reward]
    targets = index.get([i or "" for i in ids])
    missing = [n + 1 for n, (i, p) in enumerate(zip(ids, targets, strict=True)) if p is None]
    if missing:
        return [f"slot(s) {missing}: target not in the catalog"]
    found = [p for p in targets if p is not None]
    outcome = grade(task, found, matcher)
    if not outcome.success:
        problems.append(f"target fails its own grader: {outcome.reason}")
    if task.split == "heldout":
        live = sorted({p.group_key for p in found if not rule.is_heldout(p.group_key)})
        problems += [f"held-out task targets live group {g!r}" for g in live[:3]]
    listed: list[Product] = list(found)
    sets = task.satisfying
    if sets is None:
        problems.append("no satisfying sets")
    for i in range(len(task.reward)):
        if task.phrases is not None and task.phrases[i] not in task.query:
            problems.append(f"slot {i + 1}: its phrase {task.phrases[i]!r} is not in the query")
        if not findable(index, task, i):
            problems.append(f"slot {i + 1}: target not in the top {WINDOW} for its own words")
        if sets is None:
            continue
        if not sets[i]:
            problems.append(f"slot {i + 1}: empty satisfying set")
            continue
        if ids[i] not in sets[i]:
            problems.append(f"slot {i + 1}: target missing from its satisfying set")
        members = index.get(sets[i])
        for pid, p in zip(sets[i], members, strict=True):
            if p is None:
                problems.append(f"slot {i + 1}: satisfying id {pid} not in the catalog")
            elif not slot_passes(task, i, p, matcher):
                problems.append(f"slot {i + 1}: satisfying id {pid} fails the slot")
            else:
                listed.append(p)
    if task.hidden is not None:
        from shopbench.tasks.gen_clarify import hidden_problems

        problems += hidden_problems(task.query, task.reward[0], task.hidden)
    problems += split_problems(task, listed, rule)
    return problems


class ValidationReport(BaseModel):
    """The result of validating a task file against a catalog."""

    model_config = ConfigDict(frozen=True)

    path: str
    tasks: int
    valid: int
    rejected_lines: int = Field(description="lines the task reader could not load")
    per_intent: dict[str, int]
    problems: list[str] = Field(description='"task id: problem", the first 50')
    n_problems: int
    split_clusters: list[str] = Field(
        default_factory=list, description="clusters found in more than one split"
    )

    @property
    def ok(self) -> bool:
        """Whether every task is valid, every line loaded and no cluster spans splits."""
        return self.valid == self.tasks and not self.rejected_lines and not self.split_clusters


def clusters_across_splits(tasks: Sequence[Task]) -> list[str]:
    """Cluster ids that appear in more than one split, sorted."""
    splits: dict[str, set[str]] = defaultdict(set)
    for t in tasks:
        if t.cluster:
            splits[t.cluster].add(t.split)
    return sorted(c for c, s in splits.items() if len(s) > 1)


def validate_file(
    path: str | Path,
    index: SearchIndex,
    rule: SplitRule | None = None,
    matcher: TitleMatcher | None = None,
) -> ValidationReport:
    """Check every task of a file (see the module docstring); raises TaskError only when the
    file cannot be read."""
    from shopbench.tasks.io import read_tasks

    load = read_tasks(path)
    rule = rule or SplitRule()
    problems: list[str] = []
    valid = 0
    for task in load.tasks:
        found = check_task(task, index, rule, matcher)
        problems += [f"{task.id}: {p}" for p in found]
        valid += not found
    return ValidationReport(
        path=str(path),
        tasks=len(load.tasks),
        valid=valid,
        rejected_lines=len(load.rejected),
        per_intent=dict(Counter(t.intent for t in load.tasks)),
        problems=(load.rejected + problems)[:_MAX_PROBLEMS_SHOWN],
        n_problems=len(load.rejected) + len(problems),
        split_clusters=clusters_across_splits(load.tasks),
    )
