"""Benchmark: build (generate + write Parquet + index) a catalog, then reopen it.

Peak memory is the larger of the parent's and the generator workers' maximum resident set
(`getrusage`), so the figure covers the whole build.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CatalogBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    products: int = Field(default=100_000, ge=1, description="number of products")
    seed: int = Field(default=1, description="catalog seed")
    out: Path | None = Field(default=None, description="where to build (default: a temp dir)")
    workers: int = Field(default=2, ge=1, description="generator processes")
    keep: bool = Field(default=False, description="keep the temp catalog")


def run(products: int, seed: int, out: Path | None, workers: int, keep: bool) -> dict[str, Any]:
    """Build a catalog of `products` from `seed`, time it, reopen it, and report figures."""
    from shopbench.catalog.store import Catalog, build_catalog, catalog_size_bytes

    target = out or Path(tempfile.mkdtemp(prefix="shopbench-bench-")) / "catalog"
    if target.exists():
        shutil.rmtree(target)
    t0 = time.perf_counter()
    build_catalog(target, products, seed, workers=workers)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    cat = Catalog.open(target)
    open_s = time.perf_counter() - t1
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = {
        "products": cat.manifest.n_products,
        "shops": cat.manifest.n_shops,
        "build_s": round(build_s, 2),
        "products_per_s": round(products / build_s, 1),
        "peak_rss_mb": round(max(self_kb, child_kb) / 1024, 1),
        "parent_rss_mb": round(self_kb / 1024, 1),
        "worker_rss_mb": round(child_kb / 1024, 1),
        "open_s": round(open_s, 3),
        "size_mb": round(catalog_size_bytes(target) / 2**20, 1),
        "workers": workers,
        "path": str(target) if keep or out else None,
    }
    if not keep and out is None:
        shutil.rmtree(target.parent, ignore_errors=True)
    return result
