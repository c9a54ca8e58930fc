"""Annotations as the service serves them: only of episodes it serves, only bound to them.

An annotation is shown beside an episode when the service publishes the episode (the
embargo and the trusted validator already decided that: :meth:`ArchiveIndex.trajectory`),
its line verified by the service's verifier (:class:`~shopbench.archive.annotations.
AnnotationBook`), no later line of its annotator retracts it, and it was made on exactly
the record served (:func:`~shopbench.archive.annotations.bound`). A service started
without a verifier for annotations shows none.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shopbench.archive.annotations import Annotation, AnnotationBook, bound, record_digest
from shopbench.archive.api.index import ArchiveIndex
from shopbench.records.trajectory import Trajectory


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


def _shown(a: Annotation) -> ShownAnnotation:
    data = a.model_dump(mode="json", exclude={"annotation_version", "retracts"})
    return ShownAnnotation(id=a.id, **data)


def of_record(book: AnnotationBook | None, t: Trajectory) -> list[Annotation]:
    """The annotations shown beside record `t`, oldest first."""
    if book is None:
        return []
    kept, _ = bound(book.live(t.episode_id), t)
    return sorted(kept, key=lambda a: (a.created_at, a.id))


def episode_annotations(book: AnnotationBook | None, t: Trajectory) -> EpisodeAnnotations:
    """The API's answer for record `t`."""
    shown = [_shown(a) for a in of_record(book, t)]
    return EpisodeAnnotations(
        episode_id=t.episode_id, record_sha256=record_digest(t), annotations=shown
    )


def label_rows(
    index: ArchiveIndex, book: AnnotationBook | None, rows: list[dict[str, Any]]
) -> None:
    """Give each row of an episode list its annotations' count and distinct labels
    (``annotations``, ``labels``); only rows someone annotated are looked up and bound."""
    for row in rows:
        row["annotations"], row["labels"] = 0, []
        if book is None or not book.live(row["episode_id"]):
            continue
        t = index.trajectory(row["episode_id"])
        kept = of_record(book, t) if t is not None else []
        row["annotations"] = len(kept)
        row["labels"] = sorted({a.label for a in kept})


def by_turn(annotations: list[Annotation]) -> dict[int | None, list[Annotation]]:
    """The annotations keyed by the turn they name (None: the whole episode)."""
    out: dict[int | None, list[Annotation]] = {}
    for a in annotations:
        out.setdefault(a.turn, []).append(a)
    return out
