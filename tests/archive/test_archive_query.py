"""Queries over real shards (write_shard): DuckDB selects what a Python scan selects."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.keyed_hash import KeyedHash

from shopbench.archive.errors import FilterError, QueryError, SinkError
from shopbench.archive.filters import TraceFilter
from shopbench.archive.jsonl import read_trajectories
from shopbench.archive.layout import from_table, partition_of
from shopbench.archive.query import EmbargoView, query, sealed_shards
from shopbench.archive.shards import write_shard
from shopbench.bench.archive import play_episodes, synthesise
from shopbench.records.trajectory import Trajectory
from shopbench.traces.formats import export

VALIDATOR = "5BenchValidator"


def seal(records: list[Trajectory], root: Path, signer: Any = None) -> None:
    """Seal `records` as shards under `root`, one per partition."""
    by: dict[str, list[Trajectory]] = {}
    for r in records:
        by.setdefault(partition_of(r).path(), []).append(r)
    for group in by.values():
        write_shard(group, root, signer=signer or KeyedHash(VALIDATOR))


@pytest.fixture(scope="module")
def archive(env, tmp_path_factory) -> tuple[Path, list[Trajectory]]:  # type: ignore[no-untyped-def]
    """400 episodes (copies of 8 real ones with varied fields) sealed under one root."""
    records = synthesise(play_episodes(env, 8, 0), 400, 0)
    root = tmp_path_factory.mktemp("archive")
    seal(records, root)
    return root, records


def _scan(records: list[Trajectory], keep: Callable[[Trajectory], bool]) -> list[str]:
    chosen = [r for r in records if keep(r)]
    return [r.episode_id for r in sorted(chosen, key=lambda r: (r.block, r.episode_id))]


CASES: list[tuple[dict[str, Any], Callable[[Trajectory], bool]]] = [
    ({}, lambda r: True),
    (
        {
            "intent": "shop",
            "success": "true",
            "score_min": "0.6",
            "miner_uid": ",".join(str(u) for u in range(128)),
        },
        lambda r: r.intent == "shop" and r.outcome.success and r.score >= 0.6 and r.miner_uid < 128,
    ),
    (
        {"block_min": "1000010", "block_max": "1000025", "success": "false"},
        lambda r: 1000010 <= r.block <= 1000025 and not r.outcome.success,
    ),
    (
        {"intent": "product,voucher", "score_max": "0.3", "cluster": "c1,c2,c3"},
        lambda r: (
            r.intent in ("product", "voucher")
            and r.score <= 0.3
            and r.cluster in ("c1", "c2", "c3")
        ),
    ),
    (
        {"miner_hotkey": "5Miner007,5Miner100", "validator": VALIDATOR},
        lambda r: r.miner_hotkey in ("5Miner007", "5Miner100"),
    ),
    ({"validator": "5Other"}, lambda r: False),
]


@pytest.mark.parametrize(("raw", "keep"), CASES)
def test_a_query_selects_what_a_scan_of_the_records_selects(
    archive: tuple[Path, list[Trajectory]], raw: dict[str, Any], keep: Callable[[Trajectory], bool]
) -> None:
    root, records = archive
    got = query(root, TraceFilter.parse(raw)).column("episode_id").to_pylist()
    assert got == _scan(records, keep)


def test_an_episode_id_filter_selects_those_episodes_and_an_empty_one_none(
    archive: tuple[Path, list[Trajectory]],
) -> None:
    root, records = archive
    picked = {r.episode_id for r in records[::97]}
    asked = TraceFilter.parse({"episode_id": ",".join([*sorted(picked), "nowhere"])})
    got = query(root, asked).column("episode_id").to_pylist()
    assert got == _scan(records, lambda r: r.episode_id in picked) and len(got) == len(picked)
    shop = TraceFilter.parse({"episode_id": ",".join(sorted(picked)), "intent": "shop"})
    assert query(root, shop).column("episode_id").to_pylist() == _scan(
        records, lambda r: r.episode_id in picked and r.intent == "shop"
    )
    assert query(root, TraceFilter(episode_id=[])).num_rows == 0


def test_rows_come_back_as_the_records_that_were_sealed(
    archive: tuple[Path, list[Trajectory]],
) -> None:
    root, records = archive
    back = from_table(query(root, TraceFilter.parse({"intent": "knowledge", "limit": "5"})))
    want = {r.episode_id: r for r in records}
    assert len(back) == 5
    assert all(t == want[t.episode_id] for t in back)


def test_quarantined_unlisted_and_unverified_shards_are_not_read(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    root, records = archive
    work = tmp_path / "a"
    shutil.copytree(root, work)
    listed = sealed_shards(work)
    first = Path(listed[0].file)
    # a copy in quarantine, and a shard whose manifest was never written
    (work / "_quarantine").mkdir()
    shutil.copy(first, work / "_quarantine" / first.name)
    shutil.copy(first, first.with_name("part-unlisted.parquet"))
    assert query(work).num_rows == len(records)
    # a shard sealed by another key is read only without a verifier
    extra = synthesise(records[:4], 3, 99, start=10_000)
    seal(extra, work, signer=KeyedHash("5Intruder"))
    assert query(work).num_rows == len(records) + 3
    verified = query(work, verifier=KeyedHash(VALIDATOR), validator=VALIDATOR)
    assert verified.num_rows == len(records)
    # a shard whose size differs from its manifest's is left out
    first.write_bytes(first.read_bytes() + b"x")
    assert query(work).num_rows == len(records) + 3 - listed[0].manifest.rows


def test_a_manifest_pointing_outside_the_tree_is_a_named_error(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    root, _ = archive
    work = tmp_path / "a"
    shutil.copytree(root, work)
    ref = sealed_shards(work)[0]
    bad = ref.manifest.model_copy(update={"path": "../elsewhere.parquet"})
    (work / ref.manifest.manifest_path()).write_bytes(bad.to_bytes())
    with pytest.raises(QueryError, match="not a partition path"):
        query(work)
    (work / ref.manifest.manifest_path()).write_text("{not json")
    with pytest.raises(QueryError, match="not a shard manifest"):
        query(work)


def test_the_embargo_drops_live_buckets_unless_lifted(
    archive: tuple[Path, list[Trajectory]],
) -> None:
    root, records = archive
    live = {records[0].epoch: records[0].bucket}
    kept = query(root, embargo=EmbargoView(live=live)).column("episode_id").to_pylist()
    assert kept == _scan(records, lambda r: (r.epoch, r.bucket) not in live.items())
    assert len(kept) < len(records)
    assert query(root, embargo=EmbargoView(live=live, lifted=True)).num_rows == len(records)


def test_malformed_filters_and_columns_are_named_errors(
    archive: tuple[Path, list[Trajectory]],
) -> None:
    root, _ = archive
    with pytest.raises(FilterError, match="--intent.*'knowledge'"):
        TraceFilter.parse({"intent": "shoes"})
    with pytest.raises(FilterError, match="--colour"):
        TraceFilter.parse({"colour": "red"})
    with pytest.raises(FilterError, match="unknown column 'colour'"):
        query(root, columns=["episode_id", "colour"])
    with pytest.raises(QueryError, match="no archive here"):
        query(root / "missing")


def test_a_datasets_export_loads_with_datasets_and_round_trips(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    import datasets

    root, records = archive
    table = query(root, TraceFilter.parse({"intent": "product"}))
    out = export(table, "datasets", tmp_path / "ds")
    ds = datasets.load_dataset(
        "parquet", data_dir=str(out), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert ds.num_rows == table.num_rows > 0
    want = {r.episode_id: r for r in records if r.intent == "product"}
    assert {t.episode_id: t for t in from_table(ds.data.table)} == want


def test_a_jsonl_export_reads_back_as_the_records(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    root, records = archive
    table = query(root, TraceFilter.parse({"success": "true"}))
    out = export(table, "jsonl", tmp_path / "t.jsonl")
    want = {r.episode_id: r for r in records if r.outcome.success}
    assert {t.episode_id: t for t in read_trajectories(out)} == want


def test_a_shoppingbench_export_holds_each_turn_and_the_catalog_ids(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    root, records = archive
    table = query(root, TraceFilter.parse({"limit": "20"}))
    out = export(table, "shoppingbench", tmp_path / "sb.jsonl")
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    by_id = {r.episode_id: r for r in records}
    chosen = [by_id[e] for e in table.column("episode_id").to_pylist()]
    assert len(lines) == len(chosen) == 20
    recommended = 0
    for steps, t in zip(lines, chosen, strict=True):
        assistant = [m for m in t.messages if m.role == "assistant"]
        assert [s["extra_info"]["step"] for s in steps] == list(range(1, len(assistant) + 1))
        assert all(s["prompt"][1] == {"role": "user", "content": t.query} for s in steps)
        calls = {c.id: c.function.arguments for m in assistant for c in m.tool_calls or []}
        for step in steps:
            for call in step["completion"]["message"].get("tool_call", []):
                if call["name"] == "recommend_product":
                    ids = call["parameters"]["product_ids"].split(",")
                    sent = json.loads(calls[call["tool_call_id"]])["product_ids"].split(",")
                    assert ids == [t.token_map.get(i.strip(), i.strip()) for i in sent]
                    recommended += 1
    assert recommended > 0
    with pytest.raises(SinkError, match="allowed: jsonl, parquet, chat, shoppingbench"):
        export(table, "csv", tmp_path / "x")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("lifted", [False, True])
def test_the_traces_cli_queries_and_exports_a_store_with_its_embargo(
    archive: tuple[Path, list[Trajectory]], tmp_path: Path, lifted: bool
) -> None:
    from shopbench.archive.store import ArchiveStore, EmbargoPolicy, load_embargo

    _, records = archive

    async def ingest() -> None:
        store = ArchiveStore(
            tmp_path / "store", signer=KeyedHash(VALIDATOR), embargo=EmbargoPolicy(lifted=lifted)
        )
        await store.put(records[:200])
        await store.close()

    asyncio.run(ingest())
    state = load_embargo(tmp_path / "store")
    public = [
        r for r in records[:200] if lifted or (r.epoch, r.bucket) != (state.epoch, state.bucket)
    ]
    assert lifted or 0 < len(public) < 200
    done = _cli("query", str(tmp_path / "store"), "--format", "jsonl", "--intent", "shop,product")
    assert done.returncode == 0, done.stderr
    got = [json.loads(line)["episode_id"] for line in done.stdout.splitlines()]
    assert got == _scan(public, lambda r: r.intent in ("shop", "product"))
    assert ("EMBARGO LIFTED" in done.stderr) is lifted
    table = _cli("query", str(tmp_path / "store"), "--success", "true", "--limit", "3")
    assert table.returncode == 0 and "3 episodes" in table.stdout
    out = tmp_path / "q.parquet"
    done = _cli("query", str(tmp_path / "store"), "--format", "parquet", "--out", str(out))
    assert done.returncode == 0 and pq.read_table(out).num_rows == len(public)
    done = _cli("export", str(tmp_path / "store"), "--format", "datasets", "--out",
                str(tmp_path / "ds"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert pq.read_table(tmp_path / "ds" / "data").num_rows == len(public)


def test_the_traces_cli_names_a_malformed_filter(
    archive: tuple[Path, list[Trajectory]],
) -> None:
    root, _ = archive
    done = _cli("query", str(root), "--intent", "shoes")
    assert done.returncode == 2
    assert "--intent" in done.stderr and "'knowledge'" in done.stderr
    done = _cli("query", str(root), "--score-min", "0.9", "--score-max", "0.1")
    assert done.returncode == 2 and "--score-min" in done.stderr
    done = _cli("query", str(root), "--format", "csv")
    assert done.returncode == 2 and "--format" in done.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--since", "1e18"),
        ("--until", "9999-12-31T23:00:00-05:00"),
        ("--score-min", "nan"),
        ("--limit", str(2**63)),
    ],
)
def test_the_traces_cli_refuses_a_value_the_archive_cannot_hold_in_one_line(
    archive: tuple[Path, list[Trajectory]], flag: str, value: str
) -> None:
    root, _ = archive
    done = _cli("query", str(root), flag, value)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: filter {flag}: {value!r} refused")
