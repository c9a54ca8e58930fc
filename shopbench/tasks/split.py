"""The held-out split, the rotation buckets and the cluster ids: consensus constants.

Every validator must put the same product groups (leaf category × brand, see
:attr:`Product.group_key`) in the held-out split, whatever its catalog, so the split is a
keyed hash of the group key whose key is public and versioned with the release
(:data:`SPLIT_KEY`, :data:`SPLIT_VERSION`): HMAC-SHA256(SPLIT_KEY, "split\\n" + group) read
as a fraction in [0, 1); groups below :data:`HELDOUT_FRACTION` are held out.

The live groups fall into ``n_buckets`` rotation buckets by a second keyed hash. A
:class:`Rotation` at epoch ``e`` makes bucket ``e mod n_buckets`` current; the buckets of the
earlier epochs of the same cycle are retired, so the tasks scored (and archived) in them are
not scored again until the cycle wraps. Which tasks are sampled inside the current bucket is
the only thing a validator's secret seed decides.

Changing any constant here changes which groups are held out: bump :data:`SPLIT_VERSION`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from shopbench.catalog.store import Catalog
    from shopbench.tasks.model import Task

SPLIT_VERSION = 1
"""Version of the split rule and its constants; recorded in every generated task's meta."""

SPLIT_KEY = b"shopbench-split-v1"
"""The public key of the split and bucket hashes."""

HELDOUT_FRACTION = 0.15
"""Share of product groups held out (in expectation over groups)."""

DEFAULT_BUCKETS = 4
"""Rotation buckets of the live groups; one is current per epoch."""

GroupSplit = Literal["live", "heldout"]

_SCALE = float(1 << 64)


def _keyed_fraction(purpose: str, group_key: str) -> float:
    """A uniform fraction in [0, 1) from the keyed hash of (purpose, group)."""
    digest = hmac.new(SPLIT_KEY, f"{purpose}\n{group_key}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def group_fraction(group_key: str) -> float:
    """The group's position in [0, 1) on the split line; below HELDOUT_FRACTION is held out."""
    return _keyed_fraction("split", group_key)


def group_bucket(group_key: str, n_buckets: int = DEFAULT_BUCKETS) -> int:
    """The rotation bucket (0 .. n_buckets-1) of a live group."""
    if n_buckets < 1:
        raise ValueError(f"n_buckets must be at least 1, got {n_buckets}")
    return min(int(_keyed_fraction("bucket", group_key) * n_buckets), n_buckets - 1)


class SplitRule(BaseModel):
    """Which product groups are held out: the keyed hash, plus groups forced out.

    `forced` holds group keys put in the held-out split whatever their hash (for instance
    the targets' groups of a published test set on an imported catalog, `--exclude`).
    """

    model_config = ConfigDict(frozen=True)

    fraction: float = Field(default=HELDOUT_FRACTION, ge=0.0, le=1.0)
    forced: frozenset[str] = Field(default_factory=frozenset)

    def split_of(self, group_key: str) -> GroupSplit:
        """``heldout`` for a forced group or one hashing below the fraction, else ``live``."""
        if group_key in self.forced or group_fraction(group_key) < self.fraction:
            return "heldout"
        return "live"

    def is_heldout(self, group_key: str) -> bool:
        """Whether the group belongs to the held-out split."""
        return self.split_of(group_key) == "heldout"

    def with_forced(self, groups: Iterable[str]) -> SplitRule:
        """This rule with more groups forced into the held-out split."""
        return SplitRule(fraction=self.fraction, forced=self.forced | frozenset(groups))


class Rotation(BaseModel):
    """The rotation of live groups at one epoch: the current bucket and the retired ones.

    Bucket ``epoch mod n_buckets`` is current; the buckets of the earlier epochs of the same
    cycle (``0 .. current-1``) are retired; the rest are waiting. Held-out groups are in no
    bucket: :meth:`state` calls them ``heldout``.
    """

    model_config = ConfigDict(frozen=True)

    epoch: int = Field(ge=0)
    n_buckets: int = Field(default=DEFAULT_BUCKETS, ge=1)
    rule: SplitRule = Field(default_factory=SplitRule)

    @property
    def current(self) -> int:
        """The bucket whose groups live tasks are drawn from in this epoch."""
        return self.epoch % self.n_buckets

    @property
    def cycle(self) -> int:
        """How many full rotations came before this epoch."""
        return self.epoch // self.n_buckets

    @property
    def retired(self) -> list[int]:
        """Buckets already used in this cycle, oldest first."""
        return list(range(self.current))

    @property
    def waiting(self) -> list[int]:
        """Buckets not yet used in this cycle."""
        return list(range(self.current + 1, self.n_buckets))

    def bucket(self, group_key: str) -> int | None:
        """The group's bucket, or None for a held-out group."""
        if self.rule.is_heldout(group_key):
            return None
        return group_bucket(group_key, self.n_buckets)

    def state(self, group_key: str) -> Literal["heldout", "current", "retired", "waiting"]:
        """Where the group stands in this epoch."""
        b = self.bucket(group_key)
        if b is None:
            return "heldout"
        if b == self.current:
            return "current"
        return "retired" if b < self.current else "waiting"

    def is_current(self, group_key: str) -> bool:
        """Whether live tasks of this epoch may target the group."""
        return self.state(group_key) == "current"

    def heldout(self, group_keys: Iterable[str]) -> list[str]:
        """The held-out groups among `group_keys`, sorted."""
        return sorted({g for g in group_keys if self.rule.is_heldout(g)})


def cluster_id(intent: str, base_keys: Sequence[str], constraint_kinds: Iterable[str]) -> str:
    """The cluster of a task: intent, the slots' base products and the constraint kinds.

    Two tasks asking for the same base products (in any slot order) with the same kinds of
    constraints are near-duplicates and share a cluster, whatever the numbers, wording or
    listing chosen. A base product belongs to one group, so a cluster never spans splits.
    """
    body = "\n".join(
        [f"v{SPLIT_VERSION}", intent, *sorted(base_keys), "|", *sorted(set(constraint_kinds))]
    )
    return "c" + hashlib.sha256(body.encode()).hexdigest()[:16]


def target_groups(tasks: Iterable[Task], catalog: Catalog) -> tuple[set[str], int]:
    """The product groups of the tasks' targets, and how many targets could not be placed.

    A target is looked up in the catalog by id; a knowledge task imported from ShoppingBench
    also carries its target's record, whose category and brand are used when the id is not
    in the catalog.
    """
    from shopbench.tasks.pool import group_key_of

    groups: set[str] = set()
    unplaced = 0
    for task in tasks:
        ids = [i for i in task.targets if i]
        found = catalog.get(ids) if ids else []
        for pid, product in zip(ids, found, strict=True):
            if product is not None:
                groups.add(product.group_key)
                continue
            record = task.target_record or {}
            if str(record.get("product_id", "")) == pid and record.get("category"):
                groups.add(group_key_of(str(record["category"]), str(record.get("brand") or "")))
            else:
                unplaced += 1
        unplaced += len(task.targets) - len(ids)
    return groups, unplaced


def task_groups(tasks: Iterable[Task], catalog: Catalog) -> dict[str, str]:
    """Task id → the product group of its targets, looked up as :func:`target_groups` does.

    A task whose targets sit in several groups (a multi-slot task) gets its distinct groups,
    sorted, joined with ``+``, so two tasks asking for the same groups in any slot order
    share one; a task none of whose targets can be placed is its own group (its id).
    """
    from shopbench.tasks.pool import group_key_of

    chosen = list(tasks)
    ids = sorted({i for task in chosen for i in task.targets if i})
    found = dict(zip(ids, catalog.get(ids), strict=True)) if ids else {}
    out: dict[str, str] = {}
    for task in chosen:
        record = task.target_record or {}
        groups: set[str] = set()
        for pid in sorted(i for i in task.targets if i):
            product = found.get(pid)
            if product is not None:
                groups.add(product.group_key)
            elif str(record.get("product_id", "")) == pid and record.get("category"):
                groups.add(group_key_of(str(record["category"]), str(record.get("brand") or "")))
        out[task.id] = "+".join(sorted(groups)) if groups else task.id
    return out
