"""Import ShoppingBench's own product file into a catalog directory, streaming.

Accepts `documents.jsonl` or `documents.jsonl.gz` whose lines are either ShoppingBench's
search documents ``{"id", "contents", "product": {...}}`` or bare product records with the
fields of :class:`~shopbench.catalog.schema.Product`. Extra fields (image and product URLs)
are dropped; ids, prices and counts given as strings are converted. A malformed line is
reported with its line number and skipped, or fatal with ``strict``.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

import shopbench
from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import FORMAT_VERSION, INDEX_DIR, CatalogManifest, write_manifest
from shopbench.catalog.parquet import write_products
from shopbench.catalog.schema import SERVICES, Product
from shopbench.catalog.store import Catalog, part_name, prepare_out, publish
from shopbench.errors import ImportRecordError, first_problem

_FIELDS = set(Product.model_fields)
_SERVICE_BY_LOWER = {s.lower(): s for s in SERVICES}
MAX_LINE_BYTES = 1_000_000


class ImportReport(BaseModel):
    """What an import read, kept and rejected."""

    source: str
    lines_read: int
    imported: int
    rejected: int
    errors: list[str]
    """The first rejections, as `path:line: reason` (at most 100 kept)."""


def _open_lines(path: Path) -> Iterator[str]:
    if not path.exists():
        raise CatalogError(f"{path}: file does not exist")
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
        yield from f


def _as_str_id(v: Any, name: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"{name} must be a digit string, got {type(v).__name__}")
    s = str(v).strip()
    if not s.isdigit():
        raise ValueError(f"{name} must be digits, got {s[:40]!r}")
    return s


def _as_float(v: Any) -> float:
    if isinstance(v, str):
        v = v.replace(",", "").replace("₱", "").replace("PHP", "").strip()
    return float(v)


def normalise_record(obj: Any) -> dict[str, Any]:
    """One ShoppingBench record (document or bare product) → a dict of Product's fields."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    rec = obj.get("product") if isinstance(obj.get("product"), dict) else obj
    if "product_id" not in rec and "id" in obj:
        rec = {**rec, "product_id": obj["id"]}
    for required in ("product_id", "shop_id", "title", "price"):
        if rec.get(required) in (None, ""):
            raise ValueError(f"missing field {required!r}")
    row: dict[str, Any] = {k: v for k, v in rec.items() if k in _FIELDS}
    row["product_id"] = _as_str_id(rec["product_id"], "product_id")
    row["shop_id"] = _as_str_id(rec["shop_id"], "shop_id")
    row["price"] = _as_float(rec["price"])
    row["sold_count"] = int(_as_float(rec.get("sold_count") or 0))
    for text in ("brand", "category", "short_description", "description", "specification"):
        row[text] = str(rec.get(text) or "")
    sku = rec.get("sku_options") or {}
    if not isinstance(sku, dict):
        raise ValueError("sku_options must be an object {index: {key: value}}")
    row["sku_options"] = {
        str(i): {str(k): str(v) for k, v in kv.items()} for i, kv in sku.items() if kv
    }
    attrs = rec.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise ValueError("attributes must be an object {key: [values]}")
    row["attributes"] = {
        str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in attrs.items()
    }
    service = rec.get("service") or []
    if isinstance(service, str):
        service = [s for s in service.replace(";", ",").split(",") if s.strip()]
    known = {_SERVICE_BY_LOWER.get(str(s).strip().lower()) for s in service} - {None}
    row["service"] = sorted(known, key=SERVICES.index)
    row.setdefault("base_id", None)
    Product.model_validate(row)
    return row


def import_catalog(
    source: str | Path,
    out: str | Path,
    *,
    strict: bool = False,
    chunk_size: int = 50_000,
    heap_mb: int = 512,
    progress: Callable[[int], None] | None = None,
) -> tuple[Catalog, ImportReport]:
    """Stream ShoppingBench products from `source` into a new catalog at `out`."""
    from shopbench.catalog.search.index import SearchIndex

    src, out = Path(source), Path(out)
    lines = _open_lines(src)
    staging = prepare_out(out)
    errors: list[str] = []
    rejected = read = kept = 0
    seen: set[str] = set()
    shops: set[str] = set()
    leaves: set[str] = set()
    files: list[str] = []
    try:
        with SearchIndex.create(staging / INDEX_DIR, heap_mb=heap_mb, threads=2) as writer:
            batch: list[dict[str, Any]] = []

            def flush() -> None:
                name = part_name(len(files))
                write_products(staging / name, batch)
                writer.add(batch)
                files.append(name)
                if progress:
                    progress(len(batch))
                batch.clear()

            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                read += 1
                try:
                    if len(line) > MAX_LINE_BYTES:
                        raise ValueError(f"line longer than {MAX_LINE_BYTES} bytes")
                    row = normalise_record(json.loads(line))
                    if row["product_id"] in seen:
                        raise ValueError(f"duplicate product_id {row['product_id']}")
                except (ValueError, ValidationError) as e:
                    reason = (
                        str(e).splitlines()[0]
                        if not isinstance(e, ValidationError)
                        else f"invalid product: {first_problem(e)}"
                    )
                    err = ImportRecordError(str(src), lineno, reason)
                    if strict:
                        raise err from None
                    rejected += 1
                    if len(errors) < 100:
                        errors.append(str(err))
                    continue
                seen.add(row["product_id"])
                shops.add(row["shop_id"])
                leaves.add(row["category"])
                batch.append(row)
                kept += 1
                if len(batch) >= chunk_size:
                    flush()
            if batch:
                flush()
        if kept == 0:
            raise CatalogError(f"{src}: no valid product in {read} lines")
        write_manifest(
            staging,
            CatalogManifest(
                format_version=FORMAT_VERSION,
                shopbench_version=shopbench.__version__,
                kind="imported",
                n_products=kept,
                n_shops=len(shops),
                n_categories=len(leaves),
                product_files=files,
                source=src.name,
            ),
        )
        publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report = ImportReport(
        source=str(src), lines_read=read, imported=kept, rejected=rejected, errors=errors
    )
    return Catalog.open(out), report
