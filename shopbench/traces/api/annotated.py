"""Annotations as the service serves them: only of episodes it serves, only bound to them.

An annotation is shown beside an episode when the service publishes the episode (the
embargo and the trusted validator already decided that: :meth:`ArchiveIndex.trajectory`),
its line verified by the service's verifier (:class:`~shopbench.traces.annotations.
AnnotationBook`), no later line of its annotator retracts it, and it was made on exactly
the record served (:func:`~shopbench.traces.annotations.bound`). The same signed
annotation is shown once however often its line is repeated, and each annotator shows at
most :attr:`~shopbench.traces.annotations.AnnotationSettings.max_per_annotator` on one
episode (the earliest; how many more are withheld is said). A service started without a
verifier for annotations shows none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from shopbench.archive.annotations.model import (
    LABEL_PATTERN,
    MAX_LABEL_CHARS,
    Annotation,
    record_digest,
)
from shopbench.archive.errors import FilterError
from shopbench.archive.filters import TraceFilter
from shopbench.records.trajectory import Trajectory
from shopbench.traces.annotations import AnnotationBook, AnnotationSettings, Shown
from shopbench.traces.api.index import ArchiveIndex

LABEL_PARAMETER = "label"
"""The list routes' annotation filter: the episodes a shown annotation labels with one of
its values (comma-separated, or the parameter repeated)."""
_BOUND_BATCH = 256
"""Labelled episodes read at once to check their annotations against their records."""


class ShownAnnotation(BaseModel):
    """One annotation as the API answers it: its id and its signed fields."""

    id: str
    episode_id: str
    turn: int | None
    label: str
    note: str
    annotator: str
    created_at: str
    record_sha256: str
    signature: str


class EpisodeAnnotations(BaseModel):
    """The annotations of one episode, bound to the record served."""

    episode_id: str
    record_sha256: str
    annotations: list[ShownAnnotation]
    withheld: dict[str, int] = Field(
        description="annotator hotkey → how many more of their annotations of this episode "
        "there are past the cap, not shown (only annotators with some withheld)"
    )
    max_per_annotator: int = Field(description="the cap: the most shown of one annotator")


def _shown(a: Annotation) -> ShownAnnotation:
    data = a.model_dump(mode="json", exclude={"annotation_version", "retracts"})
    return ShownAnnotation(id=a.id, **data)


def shown_of(book: AnnotationBook | None, t: Trajectory) -> Shown:
    """What is shown beside record `t`: its annotations oldest first, each annotator's
    capped, and how many are withheld (nothing without a book)."""
    if book is None:
        cap = AnnotationSettings().max_per_annotator
        return Shown(annotations=[], withheld={}, max_per_annotator=cap)
    return book.current().shown(t)


def of_record(book: AnnotationBook | None, t: Trajectory) -> list[Annotation]:
    """The annotations shown beside record `t`, oldest first."""
    return shown_of(book, t).annotations


def episode_annotations(book: AnnotationBook | None, t: Trajectory) -> EpisodeAnnotations:
    """The API's answer for record `t`."""
    shown = shown_of(book, t)
    return EpisodeAnnotations(
        episode_id=t.episode_id, record_sha256=record_digest(t),
        annotations=[_shown(a) for a in shown.annotations], withheld=shown.withheld,
        max_per_annotator=shown.max_per_annotator,
    )  # fmt: skip


def label_rows(
    index: ArchiveIndex, book: AnnotationBook | None, rows: list[dict[str, Any]]
) -> None:
    """Give each row of an episode list its shown annotations' count and distinct labels
    (``annotations``, ``labels``); the book is looked at once, and only rows someone
    annotated are looked up and bound."""
    shelf = book.current() if book is not None else None
    for row in rows:
        row["annotations"], row["labels"] = 0, []
        if shelf is None or not shelf.has(row["episode_id"]):
            continue
        t = index.trajectory(row["episode_id"])
        kept = shelf.shown(t).annotations if t is not None else []
        row["annotations"] = len(kept)
        row["labels"] = sorted({a.label for a in kept})


def by_turn(annotations: list[Annotation]) -> dict[int | None, list[Annotation]]:
    """The annotations keyed by the turn they name (None: the whole episode)."""
    out: dict[int | None, list[Annotation]] = {}
    for a in annotations:
        out.setdefault(a.turn, []).append(a)
    return out


def parse_labels(values: Sequence[str]) -> list[str]:
    """The labels of the ``label`` parameter's values (each comma-separated), distinct and
    sorted; FilterError naming ``label`` for one that is no annotation label."""
    labels = {x.strip() for v in values for x in v.split(",") if x.strip()}
    for label in sorted(labels):
        if not re.fullmatch(LABEL_PATTERN, label):
            reason = (
                f"{label[:40]!r} refused: an annotation label is a short slug (lowercase "
                f"letters, digits and '-', starting with a letter, at most {MAX_LABEL_CHARS})"
            )
            raise FilterError(f"label {reason}", filter=LABEL_PARAMETER, reason=reason)
    return sorted(labels)


def labelled_ids(
    index: ArchiveIndex, book: AnnotationBook | None, labels: Sequence[str]
) -> list[str]:
    """Ids of the served episodes (the embargo applied) that show an annotation labelled
    one of `labels` — verified, not retracted, made on exactly the record served, within its
    annotator's cap: what the episode's row and page show —, sorted. Kept until the
    annotations, the shards or the embargo change."""
    if book is None or not labels:
        return []
    shelf = book.current()
    wanted = sorted(set(labels))

    def compute() -> list[str]:
        candidates = shelf.labelled(wanted)
        out: list[str] = []
        for start in range(0, len(candidates), _BOUND_BATCH):
            for t in index.trajectories(candidates[start : start + _BOUND_BATCH]):
                if any(a.label in wanted for a in shelf.shown(t).annotations):
                    out.append(t.episode_id)
        return sorted(out)

    name = f"labelled:{shelf.generation}:{','.join(wanted)}"
    return index.memo(name, TraceFilter(), compute)


def label_choices(index: ArchiveIndex, book: AnnotationBook | None) -> list[str]:
    """The labels a list can be filtered by: those of the live annotations of the episodes
    the service serves (an embargoed episode's labels are not offered), sorted. Kept until
    the annotations, the shards or the embargo change."""
    if book is None:
        return []
    shelf = book.current()

    def compute() -> list[str]:
        return shelf.labels(index.served(shelf.annotated()))

    return index.memo(f"label_choices:{shelf.generation}", TraceFilter(), compute)


def with_labels(
    index: ArchiveIndex, book: AnnotationBook | None, filters: TraceFilter, labels: Sequence[str]
) -> TraceFilter:
    """`filters` narrowed to the episodes :func:`labelled_ids` finds (`filters` itself when
    no label is asked for; no episode at all when none is labelled so)."""
    if not labels:
        return filters
    ids = labelled_ids(index, book, labels)
    if filters.episode_id is not None:
        asked = set(filters.episode_id)
        ids = [i for i in ids if i in asked]
    return filters.model_copy(update={"episode_id": ids})
