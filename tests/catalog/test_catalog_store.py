"""Building, reopening, reusing and rejecting catalog directories, through the CLI too."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import MANIFEST, seed_hash
from shopbench.catalog.store import Catalog, build_catalog


def _digest(d: Path) -> dict[str, str]:
    """sha256 of every Parquet file and the knowledge file, by relative path."""
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*.parquet"))
    }


def test_same_seed_gives_byte_identical_parquet(tmp_path: Path) -> None:
    a = build_catalog(tmp_path / "a", 1200, seed=11, chunk_size=500, workers=1)
    b = build_catalog(tmp_path / "b", 1200, seed=11, chunk_size=500, workers=2)
    c = build_catalog(tmp_path / "c", 1200, seed=12, chunk_size=500, workers=1)
    da, db, dc = _digest(a.path), _digest(b.path), _digest(c.path)
    assert len(da) == 4  # three product parts and the knowledge corpus
    assert da == db
    assert da["products/part-00000.parquet"] != dc["products/part-00000.parquet"]


def test_manifest_records_only_the_seed_hash(catalog: Catalog) -> None:
    m = catalog.manifest
    assert m.kind == "generated"
    assert m.seed_hash == seed_hash(7)
    assert m.n_products == 2000 == len(catalog)
    raw = (catalog.path / MANIFEST).read_text()
    assert '"seed": ' not in raw and '"seed":7' not in raw


def test_products_round_trip_and_fetch_by_id(catalog: Catalog) -> None:
    batches = list(catalog.iter_products(batch_size=700))
    products = [p for b in batches for p in b]
    assert len(products) == 2000
    assert len({p.product_id for p in products}) == 2000
    picked = [products[0], products[999], products[-1]]
    got = catalog.get([p.product_id for p in picked] + ["1"])
    assert got[:3] == picked
    assert got[3] is None


def test_parquet_is_readable_by_duckdb(catalog: Catalog) -> None:
    glob = str(catalog.path / "products" / "*.parquet")
    con = duckdb.connect()
    n, shops = con.execute(
        f"select count(*), count(distinct shop_id) from read_parquet('{glob}')"
    ).fetchone()
    assert n == 2000
    assert shops == catalog.manifest.n_shops
    attrs = con.execute(f"select attributes from read_parquet('{glob}') limit 1").fetchone()[0]
    assert isinstance(json.loads(attrs), dict)
    assert pq.read_table(catalog.path / "knowledge.parquet").num_rows == (
        catalog.manifest.n_knowledge_pages
    )


def test_identical_build_is_reused(tmp_path: Path) -> None:
    out = tmp_path / "c"
    build_catalog(out, 600, seed=3, chunk_size=500, workers=1)
    stamp = (out / MANIFEST).stat().st_mtime_ns
    build_catalog(out, 600, seed=3, chunk_size=500, workers=1)
    assert (out / MANIFEST).stat().st_mtime_ns == stamp
    build_catalog(out, 700, seed=3, chunk_size=500, workers=1)
    assert Catalog.open(out).manifest.n_products == 700


def test_build_replaces_an_index_this_version_cannot_read(tmp_path: Path) -> None:
    out = tmp_path / "c"
    build_catalog(out, 600, seed=3, chunk_size=500, workers=1)
    marker = out / "index" / "shopbench-index.json"
    marker.write_text(json.dumps({"index_format": 1, "products": 600}))
    with pytest.raises(CatalogError):
        Catalog.open(out)
    rebuilt = build_catalog(out, 600, seed=3, chunk_size=500, workers=1)
    assert len(rebuilt.index) == 600


def test_random_seed_when_none_given(tmp_path: Path) -> None:
    a = build_catalog(tmp_path / "a", 300, workers=1)
    b = build_catalog(tmp_path / "b", 300, workers=1)
    assert a.manifest.seed_hash != b.manifest.seed_hash


@pytest.mark.parametrize(
    "damage, message",
    [
        ("missing", "does not exist"),
        ("no_manifest", "no manifest.json"),
        ("corrupt_manifest", "unreadable manifest"),
        ("old_version", "format version 0"),
        ("missing_part", "is missing"),
        ("missing_index", "search index"),
    ],
)
def test_damaged_catalog_gives_one_line_error(
    tmp_path: Path, catalog_dir: Path, damage: str, message: str
) -> None:
    import shutil

    d = tmp_path / "c"
    if damage != "missing":
        shutil.copytree(catalog_dir, d)
    if damage == "no_manifest":
        (d / MANIFEST).unlink()
    elif damage == "corrupt_manifest":
        (d / MANIFEST).write_text("{not json")
    elif damage == "old_version":
        m = json.loads((d / MANIFEST).read_text())
        m["format_version"] = 0
        (d / MANIFEST).write_text(json.dumps(m))
    elif damage == "missing_part":
        (d / "products" / "part-00001.parquet").unlink()
    elif damage == "missing_index":
        shutil.rmtree(d / "index")
    with pytest.raises(CatalogError, match=message):
        Catalog.open(d)
    proc = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "catalog", "info", str(d)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(d) in proc.stderr


def test_build_refuses_to_overwrite_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(CatalogError, match="refusing to overwrite"):
        build_catalog(tmp_path / "notes", 100, seed=1, workers=1)
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"


def test_cli_build_info_and_search(tmp_path: Path) -> None:
    out = tmp_path / "c"
    run = [sys.executable, "-m", "shopbench.cli"]
    proc = subprocess.run(
        [*run, "catalog", "build", "--products", "1500", "--seed", "1", "--out", str(out),
         "--quiet", "--workers", "1"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1500 products" in proc.stdout
    info = subprocess.run(
        [*run, "catalog", "info", str(out), "--json"], capture_output=True, text=True
    )
    facts = json.loads(info.stdout)
    assert facts["products"] == 1500
    assert facts["seed_hash"] == seed_hash(1)
    assert sum(facts["top_categories"].values()) == 1500
