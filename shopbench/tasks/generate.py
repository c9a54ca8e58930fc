"""Task generation: draft, validate, split and emit tasks of the registered intents.

For each intent and each task index ``i`` in ``0 .. n-1`` a random generator seeded from
(seed, intent, i) drafts a task with the intent's drafter (:mod:`shopbench.tasks.intents`),
then the task must prove itself before it is emitted: its targets
pass its own grader, each target is findable from the task's own words and filters, and
each slot has a non-empty satisfying set after the split filter (:mod:`validate`,
:mod:`satisfy`). A failed draft is retried with the same generator, at most
``max_attempts`` times; a task index that never succeeds is skipped and counted. The same
seed and catalog give the same tasks, byte for byte, with any number of workers.

Targets come only from eligible groups: for the live split, groups not held out (and, with
an epoch, in the rotation's current bucket); for the held-out split, held-out groups. The
satisfying sets of live tasks list live products only.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.catalog.schema import Product
from shopbench.catalog.search.filters import WINDOW
from shopbench.catalog.store import Catalog
from shopbench.outcome.grader import grade
from shopbench.tasks.draft import Draft, Rejection, Sampler
from shopbench.tasks.gen_product import constraint_kinds
from shopbench.tasks.gen_shop import base_key
from shopbench.tasks.intent_registry import IntentName, intent_spec
from shopbench.tasks.model import Task
from shopbench.tasks.phrase_search import SATISFY_WINDOW
from shopbench.tasks.pool import Pool
from shopbench.tasks.queries import load_phrasings
from shopbench.tasks.satisfy import satisfying_set, search_phrase
from shopbench.tasks.split import DEFAULT_BUCKETS, SPLIT_VERSION, Rotation, SplitRule, cluster_id

GENERATOR_VERSION = "2"
"""Version of the task generator; recorded in every task's meta."""

Progress = Callable[[str, int], None]
"""Called with an intent and how many more of its task indices are done."""


class BuildConfig(BaseModel):
    """What to generate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Path = Field(description="catalog directory")
    intents: Sequence[IntentName] = Field(
        min_length=1, description="intents to generate, in order"
    )
    n: int = Field(ge=1, description="tasks per intent")
    split: Literal["live", "heldout"] = Field(default="live", description="split of the tasks")
    epoch: int | None = Field(
        default=None, ge=0, description="live only: draw targets from this epoch's bucket"
    )
    n_buckets: int = Field(default=DEFAULT_BUCKETS, ge=1, description="rotation buckets")
    seed: int = Field(description="the validator's secret sampling seed")
    forced_heldout: frozenset[str] = Field(
        default_factory=frozenset, description="groups forced into the held-out split"
    )
    max_attempts: int = Field(default=20, ge=1, description="drafts tried per task index")
    satisfy_window: int = Field(
        default=SATISFY_WINDOW, ge=50, le=10_000, description="search results per slot"
    )
    workers: int = Field(default=1, ge=1, description="worker processes")
    chunk: int = Field(default=100, ge=1, description="task indices per unit of work")

    @model_validator(mode="after")
    def _epoch_is_live(self) -> BuildConfig:
        if self.epoch is not None and self.split != "live":
            raise ValueError("epoch applies to the live split only")
        return self


class IntentReport(BaseModel):
    """How generation of one intent went."""

    model_config = ConfigDict(frozen=True)

    intent: IntentName
    requested: int
    produced: int
    attempts: int
    rejections: dict[str, int] = Field(description="failed drafts by reason")
    unsupported: str | None = Field(
        default=None, description="why the catalog cannot give (more) tasks of this intent"
    )


class BuildResult(BaseModel):
    """The generated tasks and one report per intent."""

    model_config = ConfigDict(frozen=True)

    tasks: list[Task]
    reports: list[IntentReport]


class _Context:
    """Everything one process needs to generate: catalog, pool, split and rotation."""

    def __init__(self, cfg: BuildConfig) -> None:
        self.cfg = cfg
        self.catalog = Catalog.open(cfg.catalog)
        self.rule = SplitRule(forced=cfg.forced_heldout)
        self.rotation = (
            Rotation(epoch=cfg.epoch, n_buckets=cfg.n_buckets, rule=self.rule)
            if cfg.epoch is not None and cfg.split == "live"
            else None
        )
        self._group_ok: dict[str, bool] = {}
        self._heldout: dict[str, bool] = {}
        pool = Pool(self.catalog, self.target_ok)
        pool.load_pair_text(self.catalog)
        # Per group number: whether a live task may not list its products.
        self._unlistable = np.array(
            [cfg.split == "live" and self._is_heldout(k) for k in pool.group_keys], dtype=bool
        )
        self.sampler = Sampler(
            pool, self.catalog.index, self.catalog.knowledge, window=cfg.satisfy_window
        )
        self.phrasings_version = load_phrasings().version

    def target_ok(self, group_key: str) -> bool:
        """Whether a product of this group may be a target of the tasks being built."""
        ok = self._group_ok.get(group_key)
        if ok is None:
            if self.cfg.split == "heldout":
                ok = self.rule.is_heldout(group_key)
            elif self.rotation is not None:
                ok = self.rotation.is_current(group_key)
            else:
                ok = not self.rule.is_heldout(group_key)
            self._group_ok[group_key] = ok
        return ok

    def screen_ids(self, ids: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """Candidates that may be listed, judged from the pool without loading them: a live
        task's candidate of a held-out group, or one lacking a pair value, is out."""
        pool = self.sampler.pool
        if not pool.has_pair_text:
            return [True] * len(ids)
        rows = pool.rows_of(ids)
        known = [r for r in rows if r is not None]
        unlistable = self._unlistable[pool.groups_of(known)].tolist() if known else []
        listable = [r for r, out in zip(known, unlistable, strict=True) if not out]
        passing = {r for r, ok in zip(listable, pool.screen_pairs(listable, pairs),
                                      strict=True) if ok}  # fmt: skip
        # An id unknown here passes: the loader decides.
        return [row is None or row in passing for row in rows]

    def _is_heldout(self, group_key: str) -> bool:
        held = self._heldout.get(group_key)
        if held is None:
            held = self._heldout[group_key] = self.rule.is_heldout(group_key)
        return held

    def listable(self, p: Product) -> bool:
        """Whether a satisfying product may be listed: live tasks list live products only."""
        return self.cfg.split != "live" or not self._is_heldout(p.group_key)

    def support(self, intent: str) -> str | None:
        """Why the catalog cannot give any task of `intent` here; None if it may."""
        where = self._where()
        if not len(self.sampler.pool):
            return f"no product is eligible as a target {where}"
        check = intent_spec(intent).support
        return check(self.sampler, where) if check is not None else None

    def _where(self) -> str:
        if self.cfg.split == "heldout":
            return "in the held-out split"
        if self.rotation is not None:
            return f"in rotation bucket {self.rotation.current} (epoch {self.rotation.epoch})"
        return "in the live split"


def build_scope(cfg: BuildConfig) -> str:
    """What besides the seed tells builds apart: the split and the epoch. A validator that
    keeps its seed across epochs still gets new task ids and draws each epoch."""
    return f"{cfg.split}/{'-' if cfg.epoch is None else cfg.epoch}"


def task_id(seed: int, scope: str, intent: str, index: int) -> str:
    """The task's id: a keyed hash of (scope, intent, index) under the seed (which it does
    not reveal)."""
    mac = hmac.new(str(seed).encode(), f"{scope}:{intent}:{index}".encode(), hashlib.sha256)
    return f"{intent}-{mac.hexdigest()[:16]}"


def task_rng(seed: int, scope: str, intent: str, index: int) -> random.Random:
    """The random generator of one task index (a string seed hashes the same everywhere)."""
    return random.Random(f"shopbench-tasks/{GENERATOR_VERSION}/{seed}/{scope}/{intent}/{index}")


def _finish(ctx: _Context, draft: Draft, index: int) -> Task | Rejection:
    """Validate a draft and turn it into a task, or say why it cannot be one."""
    cfg = ctx.cfg
    if not all(ctx.target_ok(p.group_key) for p in draft.targets):
        return Rejection(reason="a target's group is not eligible for this split")
    meta: dict[str, str | int | float] = {
        **draft.meta,
        "generator": GENERATOR_VERSION,
        "split_version": SPLIT_VERSION,
        "phrasings": ctx.phrasings_version,
    }
    if ctx.rotation is not None:
        meta |= {"epoch": ctx.rotation.epoch, "bucket": ctx.rotation.current,
                 "n_buckets": ctx.rotation.n_buckets}  # fmt: skip
    kinds = [k for s in draft.slots for k in constraint_kinds(s)]
    if draft.voucher is not None:
        kinds += [f"voucher:{draft.voucher.voucher_type}:{draft.voucher.discount_type}"]
    if draft.knowledge_attribute is not None:
        kinds += [f"knowledge:{draft.meta.get('knowledge_kind', '')}"]
    if draft.hidden is not None:
        kinds += [f"hidden:{t}" for t in draft.hidden.topics()]
    task = Task(
        id=task_id(cfg.seed, build_scope(cfg), draft.intent, index),
        intent=draft.intent,
        query=draft.query,
        split=cfg.split,
        cluster=cluster_id(draft.intent, [base_key(p) for p in draft.targets], kinds),
        reward=draft.slots,
        voucher=draft.voucher,
        knowledge_attribute=draft.knowledge_attribute,
        hidden=draft.hidden,
        phrases=draft.phrases,
        meta=meta,
    )
    outcome = grade(task, draft.targets)
    if not outcome.success:
        return Rejection(reason="the target fails its own grader")
    sets: list[list[str]] = []
    index = ctx.catalog.index
    for i, slot in enumerate(task.reward):
        # One search serves both checks: its top 50 is find_product's window.
        hits = ctx.sampler.slot_hits(slot, search_phrase(task, i))
        if not any(h.product_id == slot.product_id for h in hits[:WINDOW]):
            return Rejection(reason="a target is not in the top 50 for its own words")
        ids = satisfying_set(
            index, task, i, window=cfg.satisfy_window,
            allow=ctx.listable, hits=hits, screen_ids=ctx.screen_ids,
        )  # fmt: skip
        if not ids:
            return Rejection(reason="a satisfying set is empty after the split filter")
        sets.append(ids)
    return task.model_copy(update={"satisfying": sets})


class _Unit(BaseModel):
    """One unit of work: task indices [start, stop) of one intent, and what came of them."""

    intent: IntentName
    start: int
    stop: int
    tasks: list[Task] = Field(default_factory=list)
    attempts: int = 0
    rejections: dict[str, int] = Field(default_factory=dict)


def _run_unit(ctx: _Context, unit: _Unit) -> _Unit:
    drafter = intent_spec(unit.intent).draft
    reasons: Counter[str] = Counter()
    tasks: list[Task] = []
    attempts = 0
    for index in range(unit.start, unit.stop):
        rng = task_rng(ctx.cfg.seed, build_scope(ctx.cfg), unit.intent, index)
        for _ in range(ctx.cfg.max_attempts):
            attempts += 1
            got = drafter(ctx.sampler, rng)
            if isinstance(got, Draft):
                got = _finish(ctx, got, index)
            if isinstance(got, Task):
                tasks.append(got)
                break
            reasons[got.reason] += 1
    return unit.model_copy(
        update={"tasks": tasks, "attempts": attempts, "rejections": dict(reasons)}
    )


_WORKER: _Context | None = None


def _worker_init(cfg: BuildConfig) -> None:
    global _WORKER
    _WORKER = _Context(cfg)


def _worker_run(unit: _Unit) -> _Unit:
    assert _WORKER is not None, "worker not initialised"
    return _run_unit(_WORKER, unit)


def _worker_support(intent: str) -> str | None:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.support(intent)


def _units(cfg: BuildConfig, intent: str) -> Iterator[_Unit]:
    for start in range(0, cfg.n, cfg.chunk):
        yield _Unit(intent=intent, start=start, stop=min(start + cfg.chunk, cfg.n))


def _give_up(done: _Unit, produced: int, cfg: BuildConfig) -> str | None:
    """A whole unit with no task, after enough tries, means the intent is not supported."""
    if done.tasks or produced:
        return None
    top = max(done.rejections, key=lambda r: done.rejections[r], default="unknown")
    return (
        f"no valid task in the first {done.attempts} drafts "
        f"({cfg.max_attempts} per task); most common reason: {top}"
    )


def build_tasks(cfg: BuildConfig, progress: Progress | None = None) -> BuildResult:
    """Generate up to `cfg.n` validated tasks per intent (see the module docstring).

    An intent the catalog cannot support gives fewer (maybe no) tasks and a report naming
    the reason; generation never loops without bound. Raises CatalogError for a missing or
    broken catalog, TaskError for a bad configuration.
    """
    for intent in cfg.intents:
        intent_spec(intent)  # TaskError naming the allowed intents
    runner: _Inline | _Workers = _Workers(cfg) if cfg.workers > 1 else _Inline(cfg)
    reports: list[IntentReport] = []
    tasks: list[Task] = []
    try:
        for intent in cfg.intents:
            report, got = _build_intent(cfg, runner, intent, progress)
            reports.append(report)
            tasks += got
    finally:
        runner.close()
    return BuildResult(tasks=tasks, reports=reports)


class _Inline:
    """Generation in this process."""

    def __init__(self, cfg: BuildConfig) -> None:
        self.ctx = _Context(cfg)

    def support(self, intent: str) -> str | None:
        return self.ctx.support(intent)

    def run(self, units: Iterator[_Unit]) -> Iterator[_Unit]:
        for unit in units:
            yield _run_unit(self.ctx, unit)

    def close(self) -> None:
        pass


class _Workers:
    """Generation in worker processes, each with its own context; results come in order."""

    def __init__(self, cfg: BuildConfig) -> None:
        Catalog.open(cfg.catalog)  # a missing or broken catalog fails here, as one line
        self.ahead = 2 * cfg.workers
        self.pool = ProcessPoolExecutor(
            max_workers=cfg.workers, mp_context=get_context("spawn"),
            initializer=_worker_init, initargs=(cfg,),
        )  # fmt: skip

    def support(self, intent: str) -> str | None:
        return self.pool.submit(_worker_support, intent).result()

    def run(self, units: Iterator[_Unit]) -> Iterator[_Unit]:
        pending: list[Future[_Unit]] = []
        for unit in units:
            pending.append(self.pool.submit(_worker_run, unit))
            if len(pending) > self.ahead:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def _build_intent(
    cfg: BuildConfig, runner: _Inline | _Workers, intent: str, progress: Progress | None
) -> tuple[IntentReport, list[Task]]:
    unsupported = runner.support(intent)
    reasons: Counter[str] = Counter()
    tasks: list[Task] = []
    attempts = 0
    if unsupported is None:
        for done in runner.run(_units(cfg, intent)):
            tasks += done.tasks
            attempts += done.attempts
            reasons.update(done.rejections)
            if progress:
                progress(intent, done.stop - done.start)
            unsupported = _give_up(done, len(tasks) - len(done.tasks), cfg)
            if unsupported:
                break
    report = IntentReport(
        intent=intent,
        requested=cfg.n,
        produced=len(tasks),
        attempts=attempts,
        rejections=dict(reasons.most_common()),
        unsupported=unsupported,
    )
    return report, tasks
