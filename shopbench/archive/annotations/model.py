"""An annotation: its model, the bytes its annotator signs, its limits and vocabulary, and
the record digest that binds it (see :mod:`shopbench.archive.annotations`)."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shopbench.archive.errors import AnnotationRefused
from shopbench.archive.signing import Signer
from shopbench.chat import MAX_TURNS
from shopbench.errors import first_problem

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory

ANNOTATIONS_DIR = "_annotations"
"""The folder under an archive root that holds the annotations (a ``_`` folder: never a
shard, never listed by the archive's readers, never pulled or published)."""
ANNOTATION_DOMAIN = b"shopbench/annotation/v1\n"
"""Prefixed to every annotation's signed bytes, so an annotation's signature can never pass
for a record's or a manifest's."""
ANNOTATION_VERSION = 1
LABELS: tuple[str, ...] = (
    "good", "bad", "interesting", "reward-hack", "judge-wrong", "grader-wrong",
    "tool-misuse", "hallucination", "needs-review",
)  # fmt: skip
"""The suggested labels; any other short slug (:data:`LABEL_PATTERN`) is accepted too."""
RETRACT = "retract"
"""The label of a retraction: an annotation withdrawing an earlier one of its annotator."""
LABEL_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
MAX_LABEL_CHARS = 32
MAX_NOTE_CHARS = 1000
MAX_LINE_BYTES = 8192
"""A line longer than this is reported as oversized and not parsed."""
MAX_PER_ANNOTATOR = 20
"""By default, the most annotations of one annotator shown on one episode
(:class:`~shopbench.traces.annotations.AnnotationSettings`)."""
MAX_PROBLEMS_KEPT = 1000
"""Problems kept per file; past them a reader only counts (a flood of bad lines costs no
memory)."""
EPISODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
HOTKEY_PATTERN = r"^[A-Za-z0-9]{1,64}$"
"""An annotator's hotkey (an ss58 address is base58); it names the annotator's file."""
ID_LENGTH = 24
_ID_PATTERN = rf"^[0-9a-f]{{{ID_LENGTH}}}$"
_SHA256 = r"^[0-9a-f]{64}$"
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def _control_free(text: str, what: str, allowed: str = "") -> str:
    for ch in text:
        if ch in allowed:
            continue
        if unicodedata.category(ch) == "Cc" or ord(ch) in _BIDI:
            raise ValueError(f"{what} holds a control character U+{ord(ch):04X}")
    return text


class Annotation(BaseModel):
    """One person's label (and note) on an episode or one of its turns, signed by them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    annotation_version: int = Field(default=ANNOTATION_VERSION, ge=1, le=ANNOTATION_VERSION)
    episode_id: str = Field(pattern=EPISODE_PATTERN, description="the annotated episode")
    turn: int | None = Field(
        default=None, ge=1, le=MAX_TURNS,
        description="the assistant turn annotated (1 is the first), None for the episode",
    )  # fmt: skip
    label: str = Field(
        max_length=MAX_LABEL_CHARS,
        description=f"one of {', '.join(LABELS)}, another short slug, or {RETRACT}",
    )
    note: str = Field(default="", max_length=MAX_NOTE_CHARS, description="free text")
    annotator: str = Field(pattern=HOTKEY_PATTERN, description="the annotator's hotkey")
    created_at: datetime = Field(description="when it was made (UTC)")
    record_sha256: str = Field(
        pattern=_SHA256, description="sha256 of the annotated record's signing payload"
    )
    retracts: str | None = Field(
        default=None, pattern=_ID_PATTERN,
        description="for a retraction, the id of the annotation it withdraws",
    )  # fmt: skip
    signature: str = Field(default="", max_length=512, description="the annotator's, in hex")

    @field_validator("label")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not re.fullmatch(LABEL_PATTERN, value):
            raise ValueError(
                f"label {value[:40]!r} is not a short slug (lowercase letters, digits and "
                f"'-', starting with a letter, at most {MAX_LABEL_CHARS}); suggested: "
                f"{', '.join(LABELS)}"
            )
        return value

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        return _control_free(value, "note", allowed="\n\t")

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created_at needs a time zone")
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _retraction(self) -> Annotation:
        if (self.label == RETRACT) != (self.retracts is not None):
            raise ValueError(f"label {RETRACT} goes with retracts, and retracts with it")
        return self

    def signing_bytes(self) -> bytes:
        """What the annotator signs: :data:`ANNOTATION_DOMAIN`, then every field but the
        signature as JSON with sorted keys, no spaces, UTF-8."""
        data = self.model_dump(mode="json", exclude={"signature"})
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return ANNOTATION_DOMAIN + text.encode("utf-8")

    @property
    def id(self) -> str:
        """The annotation's id: the start of the sha256 of its signed bytes."""
        return hashlib.sha256(self.signing_bytes()).hexdigest()[:ID_LENGTH]

    def line(self) -> bytes:
        """The annotation as its one line of the annotator's file."""
        data = self.model_dump(mode="json")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8") + b"\n"


def record_digest(t: Trajectory) -> str:
    """The sha256 (hex) of `t`'s signing payload: what an annotation is bound to."""
    return hashlib.sha256(t.signing_payload()).hexdigest()


def annotate(
    t: Trajectory, signer: Signer, *, label: str, note: str = "", turn: int | None = None,
    retracts: str | None = None, now: datetime | None = None,
) -> Annotation:  # fmt: skip
    """A signed annotation of record `t` (of its turn `turn`) by `signer`. AnnotationRefused
    says which field is wrong and why (a label that is no slug, a note too long or holding a
    control character, a turn the episode does not have)."""
    if turn is not None and not 1 <= turn <= t.turns:
        raise AnnotationRefused(f"turn {turn}: episode {t.episode_id} has turns 1 to {t.turns}")
    try:
        a = Annotation(
            episode_id=t.episode_id, turn=turn, label=label, note=note,
            annotator=signer.hotkey, created_at=now or datetime.now(UTC),
            record_sha256=record_digest(t), retracts=retracts,
        )  # fmt: skip
    except ValidationError as e:
        raise AnnotationRefused(annotation_problem(e)) from None
    return a.model_copy(update={"signature": signer.sign(a.signing_bytes())})


def annotation_problem(e: ValidationError) -> str:
    """The first problem of an annotation that does not validate, as one line."""
    return first_problem(e, default="annotation")


Entry = tuple[str, Annotation]
"""An annotation with its id (computed once: :attr:`Annotation.id` hashes its bytes)."""
