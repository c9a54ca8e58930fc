"""Product rows to and from Parquet, with one fixed, portable schema.

`sku_options` and `attributes` are stored as JSON text (as in ShoppingBench's own files) so
that every Parquet reader — pyarrow, DuckDB, polars, Hugging Face `datasets` — reads them
without nested-map support; `service` is a list of strings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.schema import Product

PRODUCT_SCHEMA = pa.schema(
    [
        ("product_id", pa.string()),
        ("shop_id", pa.string()),
        ("brand", pa.string()),
        ("category", pa.string()),
        ("title", pa.string()),
        ("short_description", pa.string()),
        ("description", pa.string()),
        ("specification", pa.string()),
        ("price", pa.float64()),
        ("sold_count", pa.int64()),
        ("sku_options", pa.string()),
        ("attributes", pa.string()),
        ("service", pa.list_(pa.string())),
        ("base_id", pa.string()),
    ]
)
_PLAIN = (
    "product_id",
    "shop_id",
    "brand",
    "category",
    "title",
    "short_description",
    "description",
    "specification",
    "price",
    "sold_count",
    "service",
    "base_id",
)


def rows_to_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Columns in PRODUCT_SCHEMA order; rows are dicts with Product's fields."""
    cols: dict[str, list[Any]] = {name: [r.get(name) for r in rows] for name in _PLAIN}
    dumps = json.dumps
    cols["sku_options"] = [dumps(r.get("sku_options") or {}, ensure_ascii=False) for r in rows]
    cols["attributes"] = [dumps(r.get("attributes") or {}, ensure_ascii=False) for r in rows]
    return pa.table(
        {f.name: pa.array(cols[f.name], type=f.type) for f in PRODUCT_SCHEMA}, schema=PRODUCT_SCHEMA
    )


def write_products(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write one Parquet part; same rows give the same bytes. Atomic (temp file + rename)."""
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(
        rows_to_table(rows),
        tmp,
        compression="zstd",
        row_group_size=10_000,
        write_statistics=True,
        use_dictionary=["category", "brand", "shop_id", "base_id"],
    )
    os.replace(tmp, path)


def read_products(path: Path, batch_size: int = 10_000) -> Iterator[list[Product]]:
    """Stream a Parquet part back as validated Products."""
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise CatalogError(f"{path}: unreadable Parquet file ({e})") from None
    for batch in pf.iter_batches(batch_size=batch_size):
        out = []
        for r in batch.to_pylist():
            r["sku_options"] = json.loads(r["sku_options"] or "{}")
            r["attributes"] = json.loads(r["attributes"] or "{}")
            r["service"] = r["service"] or []
            out.append(Product.model_validate(r))
        yield out
