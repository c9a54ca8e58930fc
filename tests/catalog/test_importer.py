"""Importing ShoppingBench's product file: both line shapes, gzip, bad lines, --strict."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shopbench.catalog.importer import import_catalog
from shopbench.errors import ImportRecordError


def _doc(pid: str, shop: str, title: str, price: float, **extra: object) -> dict:
    product = {
        "product_id": pid,
        "shop_id": shop,
        "brand": "Sakura",
        "category": "Stationery > Art Supplies > Crayons",
        "title": title,
        "short_description": "Smooth oil pastels",
        "description": "Oil-based crayons for young artists.",
        "specification": "type_of_inks: oil-based",
        "price": price,
        "sold_count": 120,
        "sku_options": {"1": {"color_family": "multicolor"}, "2": {"color_family": "pastel"}},
        "attributes": {"type_of_inks": ["oil-based"], "brand": ["sakura"]},
        "main_image_url": "https://example.invalid/a.jpg",
        "product_url": "https://example.invalid/a",
        "service": ["COD", "freeShipping"],
        **extra,
    }
    return {"id": pid, "contents": title, "product": product}


def _write(path: Path, lines: list[str]) -> Path:
    data = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data)
    return path


GOOD = [
    json.dumps(_doc("3829481471", "100200", "Sakura Craypas Junior artist 50 colors", 419.0)),
    # a bare product record, string price with a thousands separator, sku keys as ints
    json.dumps(
        {
            **_doc("3829481472", "100200", "Sakura Craypas Specialist 25 colors", 0)["product"],
            "price": "1,250.50",
            "sold_count": "37",
            "sku_options": {1: {"color_family": "multicolor"}},
            "service": ["official", "unknownService"],
        }
    ),
    json.dumps(_doc("591486855", "100300", "Arborea Hybrid ghost crash cymbals B20", 8999)),
]
BAD = [
    "{not json",
    json.dumps({"product": {"shop_id": "1", "title": "no id", "price": 5}}),
    json.dumps(_doc("abc", "1", "letters in id", 5)),
    json.dumps(_doc("3829481471", "100200", "duplicate id", 5)),
    json.dumps(_doc("77", "1", "negative price", -3)),
]


@pytest.mark.parametrize("name", ["documents.jsonl", "documents.jsonl.gz"])
def test_import_keeps_good_lines_and_reports_bad_ones(tmp_path: Path, name: str) -> None:
    src = _write(tmp_path / name, [GOOD[0], BAD[0], GOOD[1], BAD[1], "", BAD[2], GOOD[2],
                                   BAD[3], BAD[4]])
    cat, report = import_catalog(src, tmp_path / "c", chunk_size=2)
    assert (report.lines_read, report.imported, report.rejected) == (8, 3, 5)
    assert [e.split(": ", 1)[0] for e in report.errors] == [
        f"{src}:2", f"{src}:4", f"{src}:6", f"{src}:8", f"{src}:9"
    ]
    assert "duplicate product_id" in report.errors[3]
    assert cat.manifest.kind == "imported" and cat.manifest.n_products == 3
    assert len(cat.manifest.product_files) == 2
    a, b, c = cat.get(["3829481471", "3829481472", "591486855"])
    assert a is not None and a.sku_options["1"] == {"color_family": "multicolor"}
    assert a.service == ["freeShipping", "COD"]
    assert b is not None and b.price == 1250.5 and b.sold_count == 37
    assert b.service == ["official"]
    assert c is not None and c.title.startswith("Arborea")
    hits = cat.index.search("crash cymbals")
    assert hits and hits[0].product_id == "591486855"


def test_strict_import_stops_at_the_first_bad_line(tmp_path: Path) -> None:
    src = _write(tmp_path / "d.jsonl", [GOOD[0], BAD[0], GOOD[1]])
    with pytest.raises(ImportRecordError, match=r"d\.jsonl:2"):
        import_catalog(src, tmp_path / "c", strict=True)
    assert not (tmp_path / "c").exists()


def test_cli_import_reports_counts(tmp_path: Path) -> None:
    src = _write(tmp_path / "d.jsonl", [GOOD[0], BAD[0], GOOD[2]])
    proc = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "catalog", "import", str(src),
         "--out", str(tmp_path / "c"), "--quiet"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 products from 3 lines (1 rejected)" in proc.stdout
    assert "d.jsonl:2" in proc.stderr
    strict = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "catalog", "import", str(src),
         "--out", str(tmp_path / "c2"), "--quiet", "--strict"],
        capture_output=True, text=True,
    )
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert "d.jsonl:2" in strict.stderr
