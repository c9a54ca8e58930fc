"""The sampling pool: which catalog rows may be a task's target, read column-wise.

A million products never become a million Python objects here: the pool reads four columns
of the catalog's Parquet parts, maps each row to its product group (leaf × brand), shop and
brand as integers, and keeps numpy arrays of the rows a task may target. A target is then
fetched from the search index by id, one product at a time. Optionally
(:meth:`Pool.load_pair_text`) it also keeps every row's stored SKU and attribute JSON and an
id → row index, so satisfying-set candidates can be screened without loading them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shopbench.catalog.store import Catalog

GroupFilter = Callable[[str], bool]
"""Decides from a group key whether rows of that group may be targets."""

_COLUMNS = ["product_id", "shop_id", "category", "brand"]


def group_key_of(category: str, brand: str) -> str:
    """The product group of a (category, brand) pair, exactly as ``Product.group_key``."""
    return f"{category.strip().lower()}|{brand.strip().lower()}"


class Pool:
    """The target-eligible rows of a catalog, by row, by shop and by group."""

    def __init__(self, catalog: Catalog, eligible: GroupFilter) -> None:
        tables = [
            pq.read_table(catalog.path / f, columns=_COLUMNS)
            for f in catalog.manifest.product_files
        ]
        table = pa.concat_tables(tables) if tables else None
        if table is None or table.num_rows == 0:
            self._empty()
            return
        self.product_ids = table.column("product_id").combine_chunks()
        cat = table.column("category").combine_chunks().dictionary_encode()
        brand = table.column("brand").combine_chunks().dictionary_encode()
        shop = table.column("shop_id").combine_chunks().dictionary_encode()
        cat_codes = cat.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        brand_codes = brand.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        pair = cat_codes * max(len(brand.dictionary), 1) + brand_codes
        pairs, inverse = np.unique(pair, return_inverse=True)
        cats = cat.dictionary.to_pylist()
        brands = brand.dictionary.to_pylist()
        n_brands = max(len(brands), 1)
        # Pairs differing only in case or spaces are one group: key them by the group key.
        keys: dict[str, int] = {}
        pair_group = np.empty(len(pairs), dtype=np.int32)
        for i, code in enumerate(pairs.tolist()):
            key = group_key_of(cats[code // n_brands], brands[code % n_brands])
            pair_group[i] = keys.setdefault(key, len(keys))
        self.group_keys: list[str] = list(keys)
        self.row_group = pair_group[inverse]
        self.row_shop = shop.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        self.shop_ids: list[str] = shop.dictionary.to_pylist()
        self.row_brand = brand_codes.astype(np.int32)
        self._brand_code: dict[str, list[int]] = {}
        for code, name in enumerate(brands):
            self._brand_code.setdefault(name.strip().lower(), []).append(code)
        ok = np.array([eligible(k) for k in self.group_keys], dtype=bool)
        self._eligible_groups = {k for k, good in zip(self.group_keys, ok.tolist(), strict=True)
                                 if good}  # fmt: skip
        self.rows = np.flatnonzero(ok[self.row_group]).astype(np.int64)
        self._index_shops()

    def _empty(self) -> None:
        self.product_ids = pa.array([], pa.string())
        self.group_keys = []
        self.row_group = np.zeros(0, dtype=np.int32)
        self.row_shop = np.zeros(0, dtype=np.int32)
        self.shop_ids = []
        self.row_brand = np.zeros(0, dtype=np.int32)
        self._brand_code = {}
        self._eligible_groups = set()
        self.rows = np.zeros(0, dtype=np.int64)
        self._index_shops()

    def _index_shops(self) -> None:
        # Eligible rows sorted by shop: each shop's rows are one contiguous run.
        shops = self.row_shop[self.rows]
        order = np.argsort(shops, kind="stable")
        self._by_shop = self.rows[order]
        sorted_shops = shops[order]
        starts = (
            np.flatnonzero(np.r_[True, sorted_shops[1:] != sorted_shops[:-1]])
            if len(sorted_shops)
            else np.zeros(0, dtype=np.int64)
        )
        ends = np.r_[starts[1:], len(sorted_shops)] if len(starts) else starts
        self._shop_start = starts
        self._shop_count = ends - starts
        self._qualifying: dict[int, np.ndarray] = {}
        brands = self.row_brand[self.rows]
        order = np.argsort(brands, kind="stable")
        self._by_brand = self.rows[order]
        self._brand_sorted = brands[order]

    def load_pair_text(self, catalog: Catalog) -> bool:
        """Read every row's SKU options and attributes as their stored JSON text, and index the
        rows by product id, so that candidates can be screened without loading them.

        Returns False (and loads nothing) when some product id does not fit 64 bits.
        """
        if not len(self.product_ids):
            return False
        if pc.max(pc.utf8_length(self.product_ids)).as_py() > 19:
            return False
        # Product ids are digits (Product's pattern), so Arrow parses them as Python would.
        numeric = pc.cast(self.product_ids, pa.uint64()).to_numpy()
        self._id_order = np.argsort(numeric, kind="stable")
        self._id_sorted = numeric[self._id_order]
        columns = ["sku_options", "attributes"]
        tables = [pq.read_table(catalog.path / f, columns=columns)
                  for f in catalog.manifest.product_files]  # fmt: skip
        table = pa.concat_tables(tables)
        # Kept in chunks: rows are read one at a time, and joining the chunks would copy
        # hundreds of megabytes of text in every worker.
        self._sku_text = table.column("sku_options")
        self._attr_text = table.column("attributes")
        return True

    @property
    def has_pair_text(self) -> bool:
        """Whether :meth:`load_pair_text` loaded the screening data."""
        return hasattr(self, "_id_sorted")

    def rows_of(self, product_ids: Sequence[str]) -> list[int | None]:
        """The rows of these product ids (None for an id not in the catalog)."""
        if not product_ids:
            return []
        wanted = [int(p) if p.isdigit() and len(p) <= 19 else 0 for p in product_ids]
        keys = np.array(wanted, dtype=np.uint64)
        at = np.minimum(np.searchsorted(self._id_sorted, keys), len(self._id_sorted) - 1)
        rows = self._id_order[at]
        hit = self._id_sorted[at] == keys
        # Equal numbers can differ as text ("007" vs "7"): confirm the id itself.
        texts = self.product_ids.take(pa.array(rows, type=pa.int64())).to_pylist()
        return [
            row if ok and text == pid else None
            for pid, row, ok, text in zip(product_ids, rows.tolist(), hit.tolist(), texts,
                                          strict=True)
        ]  # fmt: skip

    def screen_pairs(self, rows: Sequence[int], pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """For each row, a necessary condition for its product to offer every (key, value)
        pair: each value, JSON-encoded, appears in its stored SKU options or attributes."""
        if not pairs:
            return [True] * len(rows)
        needles = [(json.dumps(v, ensure_ascii=False), json.dumps(v)) for _, v in pairs]
        out: list[bool] = []
        for row in rows:
            text = str(self._sku_text[row].as_py()) + str(self._attr_text[row].as_py())
            out.append(all(plain in text or escaped in text for plain, escaped in needles))
        return out

    def groups_of(self, rows: Sequence[int]) -> np.ndarray:
        """The group numbers (indices into ``group_keys``) of these rows."""
        return self.row_group[np.asarray(rows, dtype=np.int64)]

    def __len__(self) -> int:
        """The number of target-eligible rows."""
        return len(self.rows)

    @property
    def n_groups(self) -> int:
        """Distinct product groups in the catalog."""
        return len(self.group_keys)

    def eligible_group(self, group_key: str) -> bool:
        """Whether products of this group may be targets."""
        return group_key in self._eligible_groups

    def product_id(self, row: int) -> str:
        """The catalog id of a row."""
        return str(self.product_ids[int(row)].as_py())

    def group_of(self, row: int) -> str:
        """The group key of a row."""
        return self.group_keys[int(self.row_group[int(row)])]

    def sample_row(self, rng: random.Random) -> int | None:
        """A uniformly drawn eligible row; None when there is none."""
        if not len(self.rows):
            return None
        return int(self.rows[rng.randrange(len(self.rows))])

    def brand_rows(self, brand: str) -> np.ndarray:
        """The eligible rows of a brand (compared case-insensitively), in catalog order."""
        parts = []
        for code in self._brand_code.get(brand.strip().lower(), []):
            lo = np.searchsorted(self._brand_sorted, code, side="left")
            hi = np.searchsorted(self._brand_sorted, code, side="right")
            parts.append(self._by_brand[lo:hi])
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def shops_with(self, k: int) -> int:
        """How many shops have at least `k` eligible rows."""
        return int(np.count_nonzero(self._shop_count >= k))

    def sample_shop_rows(self, k: int, rng: random.Random, spare: int = 8) -> list[int] | None:
        """Up to `k + spare` distinct eligible rows of one shop with at least `k` of them,
        in random order (the spare rows replace rows a caller rejects); None if no shop has
        `k`. Shops are drawn uniformly among those that qualify."""
        qualifying = self._qualifying.get(k)
        if qualifying is None:
            qualifying = self._qualifying[k] = np.flatnonzero(self._shop_count >= k)
        if not len(qualifying):
            return None
        s = int(qualifying[rng.randrange(len(qualifying))])
        start, count = int(self._shop_start[s]), int(self._shop_count[s])
        picks = rng.sample(range(count), min(count, k + spare))
        return [int(self._by_shop[start + i]) for i in picks]
