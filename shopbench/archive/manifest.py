"""The signed manifest of a shard: what the shard holds, its content hash, who vouches.

A manifest lives at ``_manifests/<the shard's relative path>.json`` beside the partition
tree. Its signature, made with the validator's hotkey through the :class:`Signer` protocol,
covers :meth:`ShardManifest.signing_payload` — every field but the signature, the sha256 of
the shard's bytes among them — so a reader holding a manifest that verifies and a file
whose hash matches holds exactly what the validator wrote.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.archive.errors import SinkError
from shopbench.archive.signing import Signer, Verifier
from shopbench.errors import first_problem

MANIFEST_VERSION = 1
"""Version of the manifest layout below."""

MANIFESTS_DIR = "_manifests"
"""The folder under an archive root that holds the manifests, mirroring the shard paths."""


class ShardManifest(BaseModel):
    """One shard's description and its signature (the signature covers all the rest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest_version: int = MANIFEST_VERSION
    path: str = Field(description="the shard's path relative to the archive root, '/'-separated")
    rows: int = Field(ge=1)
    bytes: int = Field(ge=1, description="the shard file's size")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the file's bytes")
    validator: str = Field(description="the hive partition values of the shard")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    intent: str
    block_min: int | None = Field(description="None when no row names a block")
    block_max: int | None
    epoch_min: int | None
    epoch_max: int | None
    started_min: float = Field(description="unix time of the earliest episode start")
    started_max: float
    schema_version: int = Field(description="the Trajectory schema version of the rows")
    layout_version: int = Field(description="the Parquet column layout version")
    generator: str = Field(description="the shopbench version that wrote the shard")
    created_at: float = Field(description="unix time the shard was sealed")
    signer: str = Field(description="the hotkey that signed the manifest")
    signature: str = Field(pattern=r"^(0x)?[0-9a-fA-F]+$", description="hex signature")

    def signing_payload(self) -> bytes:
        """The canonical bytes the signer signs: every field but ``signature`` as JSON with
        sorted keys, no spaces, UTF-8."""
        return canonical_payload(self.model_dump(mode="json", exclude={"signature"}))

    def manifest_path(self) -> str:
        """This manifest's path relative to the archive root."""
        return manifest_path(self.path)

    def to_bytes(self) -> bytes:
        """The manifest file's contents (canonical JSON, signature included, newline)."""
        return canonical_payload(self.model_dump(mode="json")) + b"\n"


def canonical_payload(data: dict[str, object]) -> bytes:
    """`data` as JSON with sorted keys, no spaces, UTF-8, NaN refused."""
    text = json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def manifest_path(shard_path: str) -> str:
    """The manifest path (relative to the root) of the shard at `shard_path`."""
    return f"{MANIFESTS_DIR}/{shard_path}.json"


manifest_path_for = manifest_path
"""The same function under the name the store imports."""

SHARD_GLOB = "validator=*/date=*/intent=*/*.parquet"
"""The sealed shards under an archive root, and nothing else (not ``_manifests/`` nor
``_quarantine/``): give it to DuckDB's ``read_parquet`` or to ``datasets.load_dataset(
"parquet", data_files=...)`` rather than the bare root, whose ``_`` folders both would read."""


def sign_manifest(unsigned: dict[str, object], signer: Signer) -> ShardManifest:
    """The manifest of `unsigned` (all fields but ``signer``/``signature``) signed by
    `signer`."""
    draft = ShardManifest.model_validate({**unsigned, "signer": signer.hotkey, "signature": "00"})
    signature = signer.sign(draft.signing_payload())
    return ShardManifest.model_validate({**draft.model_dump(), "signature": signature})


def verify_manifest(manifest: ShardManifest, verifier: Verifier, hotkey: str) -> bool:
    """Whether `manifest` was signed by `hotkey`: it names `hotkey` as its signer and
    `verifier` accepts its signature over :meth:`ShardManifest.signing_payload`."""
    if manifest.signer != hotkey:
        return False
    return verifier.verify(manifest.signing_payload(), manifest.signature, hotkey)


def parse_manifest(data: bytes, source: str = "manifest") -> ShardManifest:
    """The manifest in `data`; SinkError names `source` and the first problem."""
    try:
        return ShardManifest.model_validate_json(data)
    except ValidationError as e:
        why = first_problem(e, default="manifest")
        raise SinkError(f"{source}: not a shard manifest ({why})") from None


def read_manifest(path: str | Path) -> ShardManifest:
    """The manifest stored at `path`; SinkError when it cannot be read or parsed."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SinkError(f"{p}: cannot read ({e.strerror or e})") from None
    return parse_manifest(data, str(p))


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> tuple[str, int]:
    """(hex sha256, size in bytes) of the file at `path`."""
    h = hashlib.sha256()
    size = 0
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size
