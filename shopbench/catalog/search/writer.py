"""Writing a new search index: engine documents, the hit table and the commit marker."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import tantivy
from pydantic import ValidationError

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.schema import Product
from shopbench.catalog.search import fields as F
from shopbench.catalog.search.hit_table import HitTableWriter
from shopbench.errors import first_problem

INDEX_FORMAT = 3
"""Version of the schema and analysis; an index of another version must be rebuilt."""

MARKER = "shopbench-index.json"
"""Written into the index directory at each commit: format version and product count."""

_FIELDS = frozenset(Product.model_fields)


class IndexWriter:
    """Adds products to a new index; a context manager that commits when its block succeeds.

    Made by :meth:`SearchIndex.create`. Products are numbered in the order they are added;
    that order breaks ranking ties, so feed products in catalog order.
    """

    def __init__(self, path: Path, index: tantivy.Index, heap_mb: int, threads: int) -> None:
        self.path = path
        self._writer: Any = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
        self._hits = HitTableWriter(path)
        self._rows = 0
        self._closed = False

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Index `rows`, dicts with exactly :class:`Product`'s fields.

        Field names are checked on every row and the first row of each call is validated as
        a Product in full (validating every row would double the cost of a build); a row
        that fails raises CatalogError naming its product_id, and no row of the call is
        added.
        """
        self._check_open()
        if not rows:
            return
        _check_row(rows[0], full=True)
        if self._rows + len(rows) > F.MAX_ROWS:
            raise CatalogError(f"{self.path}: an index holds at most {F.MAX_ROWS} products")
        to_document = F.to_document
        docs = []
        for n, row in enumerate(rows, start=self._rows):
            if type(row) is not dict or row.keys() != _FIELDS:
                _check_row(row, full=False)
            try:
                docs.append(to_document(row, n))
            except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as e:
                raise CatalogError(
                    f"{self.path}: product {row.get('product_id')!r} cannot be indexed ({e})"
                ) from None
        try:
            self._hits.add(rows)
            add_document = self._writer.add_document
            for doc in docs:
                add_document(doc)
        except BaseException as e:
            # Half a batch in one store and not the other cannot be committed: give up.
            self.abort()
            if isinstance(e, pa.ArrowException):
                raise CatalogError(f"{self.path}: products cannot be indexed ({e})") from None
            raise
        self._rows += len(rows)

    def commit(self) -> None:
        """Make every product added so far durable and searchable by a new open()."""
        self._check_open()
        self._writer.commit()
        self._hits.commit()
        _write_marker(self.path, self._rows)

    def close(self) -> None:
        """Commit what is pending, wait for segment merges to finish and release the writer."""
        if self._closed:
            return
        self.commit()
        self._closed = True
        self._writer.wait_merging_threads()

    def abort(self) -> None:
        """Drop everything not yet committed and release the writer."""
        if self._closed:
            return
        self._closed = True
        self._writer.rollback()
        self._writer.wait_merging_threads()
        self._hits.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise CatalogError(f"{self.path}: index writer is closed; create a new index")

    def __len__(self) -> int:
        return self._rows

    def __enter__(self) -> IndexWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _check_row(row: dict[str, Any], *, full: bool) -> None:
    """Raise CatalogError naming the product if `row` is not a product row."""
    if not isinstance(row, dict):
        raise CatalogError(f"index rows must be dicts with Product's fields, got {type(row)}")
    pid = row.get("product_id")
    keys = set(row)
    if keys != _FIELDS:
        missing, extra = sorted(_FIELDS - keys), sorted(keys - _FIELDS)
        raise CatalogError(
            f"product {pid!r}: row fields differ from Product's (missing {missing}, extra {extra})"
        )
    if full:
        try:
            Product.model_validate(row)
        except ValidationError as e:
            raise CatalogError(f"product {pid!r}: invalid row ({first_problem(e)})") from None


def _write_marker(path: Path, n: int) -> None:
    tmp = path / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"index_format": INDEX_FORMAT, "products": n}) + "\n")
    os.replace(tmp, path / MARKER)
