"""The on-disk layout of a catalog directory and its manifest.

A catalog directory holds::

    manifest.json            CatalogManifest (written last: its presence marks a complete build)
    products/part-NNNNN.parquet   the products, in generation order, chunked
    knowledge.parquet        the knowledge corpus (pages of facts); may be empty for imports
    index/                   the search index over the products (tantivy)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.catalog.errors import CatalogError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PRODUCTS_DIR = "products"
KNOWLEDGE_FILE = "knowledge.parquet"
INDEX_DIR = "index"


class CatalogManifest(BaseModel):
    """What a catalog directory contains and how it was made."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = Field(description="layout version; readers refuse another")
    shopbench_version: str = Field(description="version of the package that built it")
    kind: Literal["generated", "imported"]
    seed_hash: str | None = Field(
        default=None, description="sha256 of the secret seed; the seed itself is never stored"
    )
    generator_version: str | None = None
    n_products: int = Field(ge=0)
    n_shops: int = Field(ge=0)
    n_categories: int = Field(ge=0, description="number of leaf categories with products")
    n_knowledge_pages: int = Field(default=0, ge=0)
    product_files: list[str] = Field(default_factory=list)
    source: str | None = Field(default=None, description="imported file, for imports")
    build_params: dict[str, str | int | float | None] = Field(default_factory=dict)


def seed_hash(seed: int | str) -> str:
    """The public commitment to a catalog seed: sha256 of its decimal or text form."""
    return hashlib.sha256(str(seed).encode()).hexdigest()


def write_manifest(directory: Path, manifest: CatalogManifest) -> None:
    """Write the manifest atomically (temp file + rename)."""
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest.model_dump(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / MANIFEST)


def read_manifest(directory: str | Path) -> CatalogManifest:
    """Read and check a catalog's manifest; raise CatalogError naming the path and the fault."""
    d = Path(directory)
    if not d.exists():
        raise CatalogError(f"{d}: catalog directory does not exist")
    if not d.is_dir():
        raise CatalogError(f"{d}: not a directory")
    path = d / MANIFEST
    if not path.exists():
        raise CatalogError(f"{d}: no {MANIFEST} (not a catalog, or an unfinished build)")
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CatalogError(f"{path}: unreadable manifest ({e})") from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version != FORMAT_VERSION:
        raise CatalogError(
            f"{path}: catalog format version {version!r}, this shopbench reads {FORMAT_VERSION};"
            " rebuild it with `shopbench catalog build`"
        )
    try:
        manifest = CatalogManifest.model_validate(raw)
    except ValidationError as e:
        raise CatalogError(f"{path}: invalid manifest ({e.error_count()} errors)") from None
    for f in manifest.product_files:
        if not (d / f).exists():
            raise CatalogError(f"{d}: product file {f} listed in the manifest is missing")
    if not (d / INDEX_DIR).is_dir():
        raise CatalogError(f"{d}: search index directory {INDEX_DIR}/ is missing")
    return manifest
