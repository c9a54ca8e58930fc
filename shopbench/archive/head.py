"""A validator's signed head: which manifests it has published, so a reader sees what is
withheld or rolled back.

Beside its manifests a validator's archive keeps ``_heads/validator=<hotkey>.json``: a
sequence number that grows by one with every head, the time it was made, and for every
public shard its path and the sha256 of its manifest's canonical bytes, all signed by the
validator's key. The store writes a new head whenever it seals shards or its embargo moves;
an uploader publishes it once every shard it names is at the destination. A reader that
holds a verified head knows exactly which manifests must be there (a missing one was
withheld), which manifest is the current one for a path (an older one served in its place
is a rollback), and, keeping the newest head it has seen, when a source serves an older head.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.durable import replace_durably
from shopbench.archive.errors import SinkError
from shopbench.archive.manifest import ShardManifest, canonical_payload
from shopbench.archive.paths import SHARD_PATH, validator_name
from shopbench.archive.signing import Signer, Verifier
from shopbench.errors import first_problem

HEAD_VERSION = 1
HEADS_DIR = "_heads"
"""The folder under an archive root (or a bucket prefix) that holds one head per validator."""
MAX_HEAD_BYTES = 32 << 20
"""The largest head a reader fetches (about 200,000 shards)."""


class ArchiveHead(BaseModel):
    """One validator's published manifests at one moment, signed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    head_version: int = HEAD_VERSION
    validator: str = Field(description="the hotkey whose shards the head covers")
    sequence: int = Field(ge=1, description="grows by one with every head the validator makes")
    created_at: float = Field(description="unix time the head was made")
    shards: dict[str, str] = Field(
        description="shard path → sha256 of its manifest's canonical bytes (every public shard)"
    )
    signer: str
    signature: str = Field(pattern=r"^(0x)?[0-9a-fA-F]+$")

    def signing_payload(self) -> bytes:
        """Every field but ``signature``, as canonical JSON (sorted keys, no spaces, UTF-8)."""
        return canonical_payload(self.model_dump(mode="json", exclude={"signature"}))

    def to_bytes(self) -> bytes:
        """The head file's contents."""
        return canonical_payload(self.model_dump(mode="json")) + b"\n"


def head_path(validator: str) -> str:
    """The head's path relative to an archive root; UnsafePath for a hotkey that cannot be a
    file name."""
    return f"{HEADS_DIR}/validator={validator_name(validator)}.json"


def manifest_digest(manifest: ShardManifest) -> str:
    """The sha256 a head records for `manifest` (of its canonical bytes, signature included)."""
    return hashlib.sha256(manifest.to_bytes()).hexdigest()


def sign_head(
    validator: str, manifests: list[ShardManifest], signer: Signer, sequence: int
) -> ArchiveHead:
    """The head of `manifests` (all of `validator`'s public shards) with `sequence`."""
    entries = {m.path: manifest_digest(m) for m in manifests}
    draft = ArchiveHead(
        validator=validator, sequence=sequence, created_at=time.time(), shards=entries,
        signer=signer.hotkey, signature="00",
    )  # fmt: skip
    return draft.model_copy(update={"signature": signer.sign(draft.signing_payload())})


def parse_head(data: bytes, source: str) -> ArchiveHead:
    """The head in `data`; SinkError names `source` and the first problem."""
    if len(data) > MAX_HEAD_BYTES:
        raise SinkError(f"{source}: a head larger than {MAX_HEAD_BYTES} bytes")
    try:
        head = ArchiveHead.model_validate_json(data)
    except ValidationError as e:
        why = first_problem(e, default="head")
        raise SinkError(f"{source}: not an archive head ({why})") from None
    bad = next((p for p in head.shards if not SHARD_PATH.fullmatch(p)), None)
    if bad is not None:
        raise SinkError(f"{source}: the head names {bad[:160]!r}, not a shard path")
    return head


def head_problem(head: ArchiveHead, validator: str, verifier: Verifier) -> str | None:
    """Why `head` is not `validator`'s signed head, or None."""
    if head.validator != validator or head.signer != validator:
        return f"the head is {head.signer[:64]!r}'s, not validator {validator}'s"
    if any(not p.startswith(f"validator={validator}/") for p in head.shards):
        return "the head names shards outside the validator's partition"
    if not verifier.verify(head.signing_payload(), head.signature, validator):
        return f"the head's signature is not {validator}'s"
    return None


def read_local_head(root: Path, validator: str) -> ArchiveHead | None:
    """The head stored under `root` for `validator`, or None when there is none or it does
    not parse (a reader then verifies it before trusting it)."""
    path = root / head_path(validator)
    try:
        return parse_head(path.read_bytes(), str(path))
    except (OSError, SinkError):
        return None


def write_head(root: Path, head: ArchiveHead) -> None:
    """Store `head` under `root`, durably."""
    try:
        replace_durably(root / head_path(head.validator), head.to_bytes())
    except OSError as e:
        raise SinkError(f"{root}: cannot write the head ({e.strerror or e})") from None


def publish_head(root: Path, signer: Signer, manifests: list[ShardManifest]) -> ArchiveHead:
    """Sign and store the next head of `root` over `manifests` (the public ones of
    ``signer``'s partition); the sequence follows the stored head's. An unchanged set of
    manifests keeps the stored head."""
    own = sorted((m for m in manifests if m.validator == signer.hotkey), key=lambda m: m.path)
    prior = read_local_head(root, signer.hotkey)
    if prior is not None and prior.shards == {m.path: manifest_digest(m) for m in own}:
        return prior
    head = sign_head(signer.hotkey, own, signer, (prior.sequence if prior else 0) + 1)
    write_head(root, head)
    return head
