"""A catalog directory as one handle: open it, build it from a seed, or import one.

Building streams chunk by chunk: generator worker processes produce rows, the parent writes
each chunk to its Parquet part and to the search index, so memory stays bounded whatever
the size. The manifest is written last, so a directory without one is an unfinished build.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

import shopbench
from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import (
    FORMAT_VERSION,
    INDEX_DIR,
    KNOWLEDGE_FILE,
    MANIFEST,
    PRODUCTS_DIR,
    CatalogManifest,
    read_manifest,
    seed_hash,
    write_manifest,
)
from shopbench.catalog.parquet import read_products, write_products
from shopbench.catalog.schema import Product

if TYPE_CHECKING:
    from shopbench.catalog.knowledge import KnowledgePage
    from shopbench.catalog.search.index import SearchIndex

Progress = Callable[[int], None]
"""Called with the number of products just added."""

KNOWLEDGE_SCHEMA = pa.schema(
    [
        ("page_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        (
            "facts",
            pa.list_(
                pa.struct(
                    [
                        ("entity", pa.string()),
                        ("entity_kind", pa.string()),
                        ("attribute", pa.string()),
                        ("value", pa.string()),
                    ]
                )
            ),
        ),
    ]
)


class Catalog:
    """An opened catalog directory: manifest, search index, products and knowledge pages."""

    def __init__(self, path: Path, manifest: CatalogManifest, index: SearchIndex) -> None:
        self.path = path
        self.manifest = manifest
        self.index = index
        self._knowledge: list[KnowledgePage] | None = None

    @classmethod
    def open(cls, path: str | Path) -> Catalog:
        """Open a complete catalog; CatalogError (one line, naming the path) otherwise."""
        from shopbench.catalog.search.index import SearchIndex

        p = Path(path)
        manifest = read_manifest(p)
        return cls(p, manifest, SearchIndex.open(p / INDEX_DIR))

    def get(self, product_ids: Sequence[str]) -> list[Product | None]:
        """Products by catalog id, in order; None for an unknown id."""
        return self.index.get(product_ids)

    def iter_products(self, batch_size: int = 10_000) -> Iterator[list[Product]]:
        """Every product, in build order, in batches."""
        for f in self.manifest.product_files:
            yield from read_products(self.path / f, batch_size=batch_size)

    def knowledge(self) -> list[KnowledgePage]:
        """The knowledge corpus (empty for imported catalogs without one). Cached."""
        if self._knowledge is None:
            self._knowledge = read_knowledge(self.path / KNOWLEDGE_FILE)
        return self._knowledge

    def __len__(self) -> int:
        return self.manifest.n_products


def write_knowledge(path: Path, pages: Sequence[KnowledgePage]) -> None:
    """Write the knowledge corpus as Parquet (deterministic bytes for the same pages)."""
    rows = [p.model_dump() for p in pages]
    table = pa.Table.from_pylist(rows, schema=KNOWLEDGE_SCHEMA)
    pq.write_table(table, path, compression="zstd")


def read_knowledge(path: Path) -> list[KnowledgePage]:
    """Read the knowledge corpus; a missing file is an empty corpus."""
    from shopbench.catalog.knowledge import KnowledgePage

    if not path.exists():
        return []
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowInvalid) as e:
        raise CatalogError(f"{path}: unreadable knowledge file ({e})") from None
    return [KnowledgePage.model_validate(r) for r in rows]


def part_name(i: int) -> str:
    """The relative path of Parquet part `i`."""
    return f"{PRODUCTS_DIR}/part-{i:05d}.parquet"


def prepare_out(out: Path) -> Path:
    """A fresh staging directory beside `out`; refuses to clobber a non-catalog directory."""
    if out.exists() and not out.is_dir():
        raise CatalogError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise CatalogError(
            f"{out}: exists, is not empty and is not a catalog; refusing to overwrite"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    (staging / PRODUCTS_DIR).mkdir()
    return staging


def publish(staging: Path, out: Path) -> None:
    """Replace `out` with the finished staging directory."""
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)


def _ordered_chunks(cfg: Any, n: int, workers: int) -> Iterator[list[dict[str, Any]]]:
    """Chunks 0..n-1 in order, generated by worker processes with a bounded window."""
    from shopbench.catalog.generator import generate_chunk

    if workers <= 1 or n == 1:
        for i in range(n):
            yield generate_chunk(cfg, i)
        return
    # spawn: the parent holds the index writer's threads, which must not be forked.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        pending: deque[Future[list[dict[str, Any]]]] = deque()
        next_i = 0
        while next_i < n or pending:
            while next_i < n and len(pending) < workers + 1:
                pending.append(pool.submit(generate_chunk, cfg, next_i))
                next_i += 1
            yield pending.popleft().result()


MAX_WORKERS = 256
"""Generator processes one build may start."""


def check_build(n_products: int, chunk_size: int, workers: int) -> None:
    """CatalogError naming the flag when a build's size, chunking or workers are out of
    range (checked before anything is built or read)."""
    from shopbench.catalog.gen_ids import PRODUCT_ID_DOMAIN
    from shopbench.catalog.generator import MAX_CHUNK_SIZE

    for flag, value, most in (
        ("--products", n_products, PRODUCT_ID_DOMAIN),
        ("--chunk-size", chunk_size, MAX_CHUNK_SIZE),
        ("--workers", workers, MAX_WORKERS),
    ):
        if not 1 <= value <= most:
            raise CatalogError(f"{flag} must be between 1 and {most:,}, got {value:,}")


def build_catalog(
    out: str | Path,
    n_products: int,
    seed: int | None = None,
    *,
    chunk_size: int = 50_000,
    workers: int = 2,
    heap_mb: int = 512,
    progress: Progress | None = None,
) -> Catalog:
    """Generate a catalog of `n_products` from `seed` into `out` and index it.

    No seed draws a secret random one; only its sha256 is recorded. An existing catalog in
    `out` built with the same seed and parameters is reused as it is.
    """
    from shopbench.catalog.generator import (
        GENERATOR_VERSION,
        GeneratorConfig,
        n_chunks,
    )
    from shopbench.catalog.knowledge import generate_knowledge
    from shopbench.catalog.search.index import SearchIndex

    check_build(n_products, chunk_size, workers)
    out = Path(out)
    secret = seed if seed is not None else secrets.randbits(63)
    params: dict[str, str | int | float | None] = {
        "n_products": n_products,
        "chunk_size": chunk_size,
        "generator_version": GENERATOR_VERSION,
    }
    if (out / MANIFEST).exists():
        try:
            old = read_manifest(out)
        except CatalogError:
            old = None
        if old and old.seed_hash == seed_hash(secret) and old.build_params == params:
            try:
                reused = Catalog.open(out)
            except CatalogError:
                reused = None  # same products, but an index this version cannot read: rebuild
            if reused is not None:
                if progress:
                    progress(n_products)
                return reused

    cfg = GeneratorConfig(seed=secret, n_products=n_products, chunk_size=chunk_size)
    staging = prepare_out(out)
    try:
        files: list[str] = []
        shops: set[str] = set()
        leaves: set[str] = set()
        total = 0
        with SearchIndex.create(staging / INDEX_DIR, heap_mb=heap_mb, threads=2) as writer:
            for i, rows in enumerate(_ordered_chunks(cfg, n_chunks(cfg), workers)):
                write_products(staging / part_name(i), rows)
                writer.add(rows)
                files.append(part_name(i))
                shops.update(r["shop_id"] for r in rows)
                leaves.update(r["category"] for r in rows)
                total += len(rows)
                if progress:
                    progress(len(rows))
        pages = generate_knowledge(cfg)
        write_knowledge(staging / KNOWLEDGE_FILE, pages)
        manifest = CatalogManifest(
            format_version=FORMAT_VERSION,
            shopbench_version=shopbench.__version__,
            kind="generated",
            seed_hash=seed_hash(secret),
            generator_version=GENERATOR_VERSION,
            n_products=total,
            n_shops=len(shops),
            n_categories=len(leaves),
            n_knowledge_pages=len(pages),
            product_files=files,
            build_params=params,
        )
        write_manifest(staging, manifest)
        publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Catalog.open(out)


def catalog_size_bytes(path: Path) -> int:
    """Bytes on disk under a catalog directory."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def describe(catalog: Catalog) -> dict[str, Any]:
    """The facts `shopbench catalog info` prints."""
    m = catalog.manifest
    tops: dict[str, int] = {}
    if m.product_files:
        # Category counts come from the Parquet column alone; no product is materialised.
        for f in m.product_files:
            col = pq.read_table(catalog.path / f, columns=["category"]).column("category")
            for cat in col.to_pylist():
                top = cat.split(">", 1)[0].strip()
                tops[top] = tops.get(top, 0) + 1
    return {
        "path": str(catalog.path),
        "kind": m.kind,
        "products": m.n_products,
        "shops": m.n_shops,
        "leaf_categories": m.n_categories,
        "top_categories": dict(sorted(tops.items(), key=lambda kv: -kv[1])),
        "knowledge_pages": m.n_knowledge_pages,
        "seed_hash": m.seed_hash,
        "source": m.source,
        "format_version": m.format_version,
        "shopbench_version": m.shopbench_version,
        "size_bytes": catalog_size_bytes(catalog.path),
    }


def manifest_json(catalog: Catalog) -> str:
    """The manifest as indented JSON."""
    return json.dumps(catalog.manifest.model_dump(), indent=2, sort_keys=True)
