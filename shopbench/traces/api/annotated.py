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

from typing import Any

from pydantic import BaseModel, Field

from shopbench.records.trajectory import Trajectory
from shopbench.traces.annotations import (
    Annotation,
    AnnotationBook,
    AnnotationSettings,
    Shown,
    record_digest,
)
from shopbench.traces.api.index import ArchiveIndex


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
