"""Decompression bombs in signed shards: one text of one row rewritten as 64 MiB of one letter
(a few kilobytes on disk), in a shard whose manifest the validator signed. Every reader —
the listing behind `verify`, `curate`, `traces query` and the trace service, a pull's check of
a download, and the row builder itself — refuses it by name, and the other shards are read.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.object_store import SIGNER, VERIFIER, play_episodes

from shopbench.archive.errors import SinkError
from shopbench.archive.layout import SCHEMA, from_table, record_of, table_rows, to_table
from shopbench.archive.manifest import sign_manifest
from shopbench.archive.reader import Trust, list_archive
from shopbench.archive.shards import (
    COMPRESSION,
    read_shard,
    verify_shard_file,
    write_durably,
    write_shard,
)
from shopbench.records.trajectory import MAX_FIELD_BYTES, Trajectory

HK = SIGNER.hotkey
BOMB = 64 << 20


@pytest.fixture(scope="module")
def episodes(env: Any, catalog: Any) -> list[Trajectory]:
    return play_episodes(env, catalog)


def with_query(table: pa.Table, row: int, text: str) -> pa.Table:
    queries = table.column("query").to_pylist()
    queries[row] = text
    at = table.schema.get_field_index("query")
    return table.set_column(at, SCHEMA.field("query"), pa.array(queries, pa.string()))


def bombed_archive(root: Path, episodes: list[Trajectory]) -> tuple[str, str]:
    """An archive of two honest shards and one whose second row's query is BOMB bytes of
    one letter; every file as the store writes it and every manifest signed by SIGNER.
    Returns the bomb's path and an honest shard's."""
    honest = write_shard(episodes[:6], root, signer=SIGNER)
    write_shard(episodes[6:12], root, signer=SIGNER)
    sealed = write_shard(episodes[12:18], root, signer=SIGNER)
    table = with_query(to_table(episodes[12:18]), 1, "a" * BOMB)
    (root / sealed.path).unlink()
    (root / sealed.manifest_path()).unlink()
    out = pa.BufferOutputStream()
    pq.write_table(table, out, compression=COMPRESSION, compression_level=6)
    data = out.getvalue().to_pybytes()
    unsigned = sealed.model_dump(mode="json", exclude={"signature"})
    unsigned |= {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = sign_manifest(unsigned, SIGNER)
    write_durably(root / manifest.path, data)
    write_durably(root / manifest.manifest_path(), manifest.to_bytes())
    assert len(data) < BOMB // 1000  # a bomb: a few kilobytes promise 64 MiB
    return manifest.path, honest.path


def test_every_listing_refuses_the_bomb_by_name_and_keeps_the_rest(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    bomb, honest = bombed_archive(root, episodes)
    for listing in (
        list_archive(root),  # traces query, exports
        list_archive(root, trust=Trust(validator=HK, verifier=VERIFIER)),  # verify, serve
        list_archive(root, verifier=VERIFIER, check_bytes=True),  # curate
    ):
        assert len(listing.shards) == 2 and honest in {r.manifest.path for r in listing.shards}
        [dropped] = listing.dropped
        assert dropped.path == bomb and "decompression bomb" in dropped.reason
    manifest = next(m for m in [json.loads(p.read_text())
                                for p in (root / "_manifests").rglob("*.json")]
                    if m["path"] == bomb)  # fmt: skip
    from shopbench.archive.manifest import ShardManifest

    why = verify_shard_file(root / bomb, ShardManifest.model_validate(manifest))
    assert why is not None and bomb in why and "decompression bomb" in why  # a pull's check
    with pytest.raises(SinkError, match="decompression bomb"):
        read_shard(root / bomb)


def test_verify_leaves_the_bomb_out_and_reads_the_rest(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    from shopbench.verify.run import read_archive

    root = tmp_path / "archive"
    bomb, _ = bombed_archive(root, episodes)
    records, left_out = read_archive(root, Trust(validator=HK, verifier=VERIFIER))
    assert len(records) == 12
    assert len(left_out) == 1 and left_out[0].startswith(f"{bomb}: ")


def test_a_row_over_the_records_limits_is_refused_alone_before_it_is_built(
    episodes: list[Trajectory],
) -> None:
    table = with_query(to_table(episodes[:3]), 1, "b" * (MAX_FIELD_BYTES + 1))
    rows = table_rows(table)
    assert rows[0]["query"] == episodes[0].query and rows[2]["episode_id"] == episodes[2].episode_id
    assert rows[1]["episode_id"] == episodes[1].episode_id and "query" not in rows[1]
    with pytest.raises(SinkError, match=f"query holds a text of {MAX_FIELD_BYTES + 1} bytes"):
        record_of(rows[1])
    with pytest.raises(SinkError, match="row 1 is not a trajectory"):
        from_table(table)
