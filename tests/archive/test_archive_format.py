"""The archive's file format: lossless Parquet rows, signed manifests, sealed shards."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from support.keyed_hash import KeyedHash

from shopbench.agents.reference import CarefulPolicy, RandomPolicy
from shopbench.archive.errors import SinkError
from shopbench.archive.layout import (
    SCHEMA,
    SCHEMA_DOC,
    from_table,
    partition_of,
    to_table,
    trajectory_json_schema,
)
from shopbench.archive.manifest import SHARD_GLOB, ShardManifest, read_manifest, verify_manifest
from shopbench.archive.shards import iter_manifests, read_shard, verify_shard, write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import ToolLogEntry, Trajectory
from shopbench.records.verdict import Verdict
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

VALIDATOR = "5Validator"


@pytest.fixture(scope="module")
def episodes(env: ShoppingEnv, catalog: Any) -> list[Trajectory]:
    """Real episodes of one partition (validator, day, intent), varied in every open part:
    a judge with fields of its own, a tool call whose arguments are a raw string, a
    signature, rotation fields set and unset."""
    products = next(iter(catalog.iter_products(batch_size=50)))[:4]
    out = []
    for i, p in enumerate(products):
        task = Task(
            id=f"t-{i}", intent="product", query=f"I'm looking for {p.title}.",
            reward=[Slot(product_id=p.product_id, title=[p.title])], cluster=f"c{i % 2}",
        )  # fmt: skip
        policy = CarefulPolicy(seed=i) if i % 2 == 0 else RandomPolicy(seed=i)
        t = asyncio.run(
            run_episode(
                env,
                task,
                policy,
                key=bytes([i + 1]) * 32,
                validator_hotkey=VALIDATOR,
                miner_uid=i,
                miner_hotkey=f"5Miner{i}",
                block=1000 + i,
            )  # fmt: skip
        )
        out.append(t)
    noon = out[0].timings.started_at // 86400 * 86400 + 43200.25  # one UTC day for all
    out = [
        t.model_copy(update={"timings": t.timings.model_copy(update={"started_at": noon + k})})
        for k, t in enumerate(out)
    ]
    judge = Verdict(score=0.625, gates={"cites": True}, rationale="ok", judge_id="j/1",
                         own_field=[1, 2.5, {"x": None}])  # fmt: skip
    raw = ToolLogEntry(turn=1, name="search", arguments='{"q": broken', result_digest="0" * 64,
                       error="bad_arguments", latency_ms=0.25)  # fmt: skip
    out[1] = out[1].model_copy(
        update={"judge": judge, "score": 0.5, "epoch": 7, "bucket": 3,
                "tool_log": [*out[1].tool_log, raw]}
    )  # fmt: skip
    out[2] = sign_trajectory(out[2], KeyedHash(VALIDATOR))
    return [Trajectory.model_validate_json(t.model_dump_json()) for t in out]


def _same(back: list[Trajectory], want: list[Trajectory]) -> None:
    assert back == want
    assert [t.signing_payload() for t in back] == [t.signing_payload() for t in want]


def test_rows_round_trip_exactly_through_arrow_duckdb_and_datasets(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    table = to_table(episodes)
    assert table.schema.equals(SCHEMA)
    _same(from_table(table), episodes)
    assert table.column("success").to_pylist() == [t.success for t in episodes]
    assert table.column("tool_calls").to_pylist() == [t.tool_calls for t in episodes]
    assert table.column("judge_score").to_pylist() == [None, 0.625, None, None]

    manifest = write_shard(episodes, tmp_path, signer=KeyedHash(VALIDATOR))
    con = duckdb.connect()
    glob = f"{tmp_path}/{SHARD_GLOB}"
    rel = con.sql(f"select * from read_parquet('{glob}', hive_partitioning=true)")
    _same(from_table(rel.to_arrow_table()), episodes)
    validator, n, tool = con.execute(
        f"select any_value(validator), count(*), "
        f"(select count(*) from (select unnest(tool_log) as e "
        f"from read_parquet('{glob}')) where e.name = 'search') "
        f"from read_parquet('{glob}', hive_partitioning=true) where intent = 'product'"
    ).fetchone()
    assert (validator, n) == (VALIDATOR, len(episodes))
    assert tool == sum(e.name == "search" for t in episodes for e in t.tool_log)

    import datasets

    ds = datasets.load_dataset("parquet", data_files=f"{tmp_path}/{SHARD_GLOB}", split="train")
    import pyarrow as pa

    _same(from_table(pa.Table.from_pylist(ds.to_list())), episodes)
    assert ds[0]["messages"][1]["content"] == episodes[0].query
    assert manifest.rows == len(ds)


def test_a_shard_and_its_signed_manifest(episodes: list[Trajectory], tmp_path: Path) -> None:
    key = KeyedHash(VALIDATOR)
    m = write_shard(episodes, tmp_path, signer=key, shard_id="0001-a")
    part = partition_of(episodes[0])
    assert m.path == f"{part.path()}/part-0001-a.parquet"
    assert m.path.startswith(f"validator={VALIDATOR}/date=") and "/intent=product/" in m.path
    shard = tmp_path / m.path
    assert m.sha256 == hashlib.sha256(shard.read_bytes()).hexdigest()
    assert (m.rows, m.bytes) == (4, shard.stat().st_size)
    assert (m.block_min, m.block_max, m.epoch_min, m.epoch_max) == (1000, 1003, 7, 7)
    assert m.started_min == episodes[0].timings.started_at
    assert m.started_max == episodes[3].timings.started_at
    assert m.signer == VALIDATOR and m.generator.startswith("shopbench ")
    assert pq.ParquetFile(shard).metadata.row_group(0).column(0).compression == "ZSTD"
    assert read_manifest(tmp_path / m.manifest_path()) == m
    assert [(p.name, x) for p, x in iter_manifests(tmp_path)] == [(f"{shard.name}.json", m)]
    _same(read_shard(shard), episodes)
    assert verify_manifest(m, key, VALIDATOR) and verify_shard(tmp_path, m) is None
    assert not list(tmp_path.rglob("*.tmp"))

    # The signature covers every field, the content hash among them, and the signer.
    for change in ({"sha256": "0" * 64}, {"rows": 3}, {"path": "elsewhere.parquet"},
                   {"block_max": 9999}, {"signer": "5Other"}):  # fmt: skip
        assert not verify_manifest(m.model_copy(update=change), key, VALIDATOR), change
    assert not verify_manifest(m, key, "5Other")
    impostor = write_shard(episodes, tmp_path / "x", signer=KeyedHash("5Other"))
    assert not verify_manifest(impostor, key, VALIDATOR)
    assert verify_manifest(impostor, key, "5Other")

    # Immutable: the same shard id again is refused and the first shard stays whole.
    with pytest.raises(SinkError, match="cannot write the shard"):
        write_shard(episodes[:1], tmp_path, signer=key, shard_id="0001-a")
    assert verify_shard(tmp_path, m) is None


def test_verify_shard_names_what_is_wrong(episodes: list[Trajectory], tmp_path: Path) -> None:
    m = write_shard(episodes, tmp_path, signer=KeyedHash(VALIDATOR))
    shard = tmp_path / m.path
    data = shard.read_bytes()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(flipped))
    assert "sha256" in (verify_shard(tmp_path, m) or "")
    shard.write_bytes(data[: len(data) // 2])
    assert f"{len(data) // 2} bytes, the manifest says {len(data)}" in (
        verify_shard(tmp_path, m) or ""
    )
    with pytest.raises(SinkError, match="not a readable shard"):
        read_shard(shard)
    shard.unlink()
    assert verify_shard(tmp_path, m) == f"{m.path}: missing"


def test_bad_batches_and_unwritable_roots_are_refused(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    key = KeyedHash(VALIDATOR)
    with pytest.raises(SinkError, match="at least one"):
        write_shard([], tmp_path, signer=key)
    other = episodes[0].model_copy(update={"validator_hotkey": "5Elsewhere"})
    with pytest.raises(SinkError, match="one partition.*validator=5Elsewhere"):
        write_shard([episodes[1], other], tmp_path, signer=key)
    slashed = episodes[0].model_copy(update={"validator_hotkey": "../../etc"})
    with pytest.raises(SinkError, match="no archive partition"):
        write_shard([slashed], tmp_path, signer=key)
    with pytest.raises(SinkError, match="shard id"):
        write_shard(episodes, tmp_path, signer=key, shard_id="a/b")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(SinkError, match="cannot write the shard"):
        write_shard(episodes, blocker, signer=key)
    assert not list(tmp_path.rglob("*.parquet"))
    assert partition_of(episodes[0].model_copy(update={"validator_hotkey": None})).validator == (
        "unknown"
    )


def test_a_manifest_that_does_not_parse_is_a_named_error(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"path": "x", "rows": 0}))
    with pytest.raises(SinkError, match=r"m\.json: not a shard manifest"):
        read_manifest(p)
    assert ShardManifest.model_fields["signature"].is_required()


def test_records_from_before_epoch_and_bucket_still_read(episodes: list[Trajectory]) -> None:
    data = json.loads(episodes[0].model_dump_json())
    del data["epoch"], data["bucket"]
    old = Trajectory.model_validate(data)
    assert (old.epoch, old.bucket, old.schema_version) == (None, None, 1)
    assert from_table(to_table([old])) == [old]


def test_the_json_schema_doc_matches_the_record() -> None:
    assert SCHEMA_DOC.read_text(encoding="utf-8") == trajectory_json_schema(), (
        "docs/trajectory.schema.json is stale: run "
        "`python -m shopbench.archive.layout docs/trajectory.schema.json`"
    )
    schema = json.loads(trajectory_json_schema())
    assert {"epoch", "bucket", "messages", "tool_log", "signature"} <= set(schema["properties"])


def test_the_agent_card_s_model_is_signed_and_records_without_it_verify_unchanged(
    episodes: list[Trajectory],
) -> None:
    from shopbench.archive.layout import record_of, table_rows
    from shopbench.archive.signing import verify_record, verify_trajectory

    key = KeyedHash(VALIDATOR)
    old = episodes[2]  # signed over a payload that names no agent model
    assert old.agent_model is None and b"agent_model" not in old.signing_payload()
    assert verify_trajectory(old, key)
    carded = sign_trajectory(
        old.model_copy(update={"agent_model": "Qwen/Qwen3-4B", "agent_revision": "r1"}), key
    )
    assert b'"agent_model":"Qwen/Qwen3-4B"' in carded.signing_payload()
    assert verify_trajectory(carded, key)
    for change in ({"agent_model": "gpt-5"}, {"agent_revision": "r2"}, {"agent_model": None}):
        assert not verify_trajectory(carded.model_copy(update=change), key), change
    table = to_table([old, carded])
    assert table.column("agent_model").to_pylist() == [None, "Qwen/Qwen3-4B"]
    for row, t in zip(table_rows(table), from_table(table), strict=True):
        assert verify_record(record_of(row), t, key)


def test_a_shard_written_before_the_agent_columns_reads_them_as_null(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    from shopbench.archive.layout import LATE_COLUMNS, scan_source_sql

    table = to_table(episodes)
    old = table.drop_columns(list(LATE_COLUMNS))  # layout 1: no agent columns
    path = tmp_path / "layout1.parquet"
    pq.write_table(old, path)
    _same(read_shard(path), episodes)
    _same(from_table(old), episodes)
    new = tmp_path / "layout2.parquet"
    pq.write_table(to_table([episodes[0].model_copy(update={"agent_model": "m/1"})]), new)
    for files in ([str(path)], [str(path), str(new)]):
        got = duckdb.connect().sql(
            f"SELECT * FROM {scan_source_sql()} ORDER BY episode_id", params=[files]
        ).to_arrow_table()
        assert sorted(got.schema.names) == sorted(SCHEMA.names)
        models = sorted(got.column("agent_model").to_pylist(), key=str)
        assert models == sorted([None] * len(episodes) + ["m/1"] * (len(files) - 1), key=str)


def test_an_agent_name_is_one_short_printable_line(episodes: list[Trajectory]) -> None:
    from pydantic import ValidationError

    from shopbench.records.trajectory import MAX_AGENT_NAME_CHARS

    data = json.loads(episodes[0].model_dump_json())
    for bad in ("", "x" * (MAX_AGENT_NAME_CHARS + 1), "a\nb", "evil\u202egnp.exe", "a\x00"):
        with pytest.raises(ValidationError, match="agent_model"):
            Trajectory.model_validate({**data, "agent_model": bad})
    ok = Trajectory.model_validate(
        {**data, "agent_model": "Qwen/Qwen3-4B <b>", "agent_revision": "é1"}
    )
    assert ok.agent_model == "Qwen/Qwen3-4B <b>"
