"""Benchmark of the trajectory archive: ingest, a filtered query, bytes on disk, memory.

The records are real episodes (reference policies on product tasks over a 2,000-product
catalog from seed 7) copied with new episode ids and varied ids, intents, miners, blocks,
epochs, successes and scores, so that filters select a realistic fraction; the copies are
synthetic, the conversations in them are real. Figures, each beside its baseline measured
in the same run:

- ingest: episodes/s through :class:`~shopbench.archive.store.ArchiveStore` with group
  commit (many concurrent ``put`` calls sharing one fsync), and with one episode per
  fsync (one ``put`` at a time);
- query: intent + success + score range + miner over ``episodes`` archived episodes
  (DuckDB over the shards) against scanning the same episodes as JSONL (reading every
  line with ``json.loads`` and testing the same conditions, the fastest honest scan);
- bytes on disk per episode, shards against the JSONL file;
- peak RSS of a child process ingesting archives of several sizes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.records.task import INTENTS
from shopbench.records.trajectory import Trajectory

if TYPE_CHECKING:
    from shopbench.env.env import ShoppingEnv

class ArchiveBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = Field(
        default=1_000_000, ge=1000, description="archived episodes the query is measured over"
    )
    ingest: int = Field(
        default=20_000, ge=100,
        description="episodes ingested through the store for the ingest figures",
    )  # fmt: skip
    shard_rows: int = Field(default=50_000, ge=1000, description="rows per shard")
    rss_sizes: list[int] = Field(
        default=[10_000, 40_000, 160_000], description="archive sizes of the memory figure"
    )
    figures: list[Literal["ingest", "query", "rss"]] = Field(
        default=["ingest", "query", "rss"],
        description="ingest (rates), query (query time and bytes), rss (peak memory)",
    )
    base_episodes: int = Field(default=64, ge=4, description="real episodes played")
    work: str | None = Field(default=None, description="scratch folder (default: temp)")
    seed: int = Field(default=0, description="seed of the real episodes played")


class ArchiveBenchResult(BaseModel):
    """The measurement."""

    model_config = ConfigDict(frozen=True)

    base_episodes: int = Field(description="real episodes the copies were made from")
    ingest_episodes: int | None = None
    ingest_group_commit_per_s: float | None = Field(
        default=None, description="episodes/s acknowledged, many concurrent puts sharing each fsync"
    )
    ingest_group_commit_sealed_per_s: float | None = Field(
        default=None,
        description="the same ingest, counted until every episode is also in a signed shard",
    )
    ingest_per_episode_fsync_per_s: float | None = None
    query_episodes: int | None = None
    query_matches: int | None = None
    query_s: float | None = None
    jsonl_scan_s: float | None = None
    query_speedup: float | None = None
    shard_bytes_per_episode: float | None = None
    jsonl_bytes_per_episode: float | None = None
    bytes_ratio: float | None = Field(default=None, description="shard bytes / JSONL bytes")
    peak_rss_mib: dict[int, float] | None = Field(
        default=None, description="archive size → peak RSS while ingesting"
    )


def play_episodes(env: ShoppingEnv, n: int, seed: int) -> list[Trajectory]:
    """`n` real episodes: the reference policies on product tasks drawn from `env`'s
    catalog (the judge bench's tasks and players)."""
    from shopbench.bench.judge import _catalog_tasks, _play

    tasks = _catalog_tasks(env, max(4, n // 4), random.Random(seed))
    return asyncio.run(_play(env, tasks, n, seed))


def _base_records(n: int, seed: int, work: Path) -> list[Trajectory]:
    from shopbench.catalog.store import build_catalog
    from shopbench.env.env import ShoppingEnv

    catalog = work / "catalog"
    if not catalog.exists():
        build_catalog(catalog, 2000, seed=7, chunk_size=500, workers=1)
    return play_episodes(ShoppingEnv.open(catalog), n, seed)


def synthesise(base: list[Trajectory], n: int, seed: int, start: int = 0) -> list[Trajectory]:
    """`n` copies of `base` (the `start`-th onwards) with new episode ids and varied intent,
    miner, block, epoch, bucket, cluster, score and success; the validator hotkey is
    fixed and the start times are the base's, so the copies fall in one validator's
    partitions, one per intent and day."""
    rng = random.Random(seed + start)
    out = []
    for i in range(start, start + n):
        t = base[i % len(base)]
        score = round(rng.random(), 4)
        out.append(t.model_copy(update={
            "episode_id": hashlib.sha256(f"bench:{seed}:{i}".encode()).hexdigest()[:32],
            "validator_hotkey": "5BenchValidator",
            "intent": INTENTS[rng.randrange(len(INTENTS))],
            "miner_uid": rng.randrange(256),
            "miner_hotkey": f"5Miner{rng.randrange(256):03d}",
            "block": 1_000_000 + i // 10,
            "epoch": i // 36_000,
            "bucket": rng.randrange(4),
            "cluster": f"c{rng.randrange(16)}",
            "score": score,
            "outcome": t.outcome.model_copy(update={"success": score > 0.5}),
        }))  # fmt: skip
    return out


class _Key:
    hotkey = "5BenchValidator"

    def sign(self, payload: bytes) -> str:
        return hashlib.sha256(b"bench" + payload).hexdigest()


def _ingest_rate(records: list[Trajectory], root: Path, *, group: bool) -> tuple[float, float]:
    """Episodes/s acknowledged (durable in the segment), and episodes/s until every one of
    them is also sealed into a signed shard (the rate the store sustains)."""
    from shopbench.archive.store import ArchiveStore

    async def go() -> tuple[float, float]:
        store = ArchiveStore(root, signer=_Key())
        t0 = time.perf_counter()
        if group:
            await asyncio.gather(*(store.put([r]) for r in records))
        else:
            for r in records:
                await store.put([r])
        acked = time.perf_counter() - t0
        await store.close()
        sealed = time.perf_counter() - t0
        return len(records) / acked, len(records) / sealed

    return asyncio.run(go())


def seal_copies(
    base: list[Trajectory],
    root: Path,
    episodes: int,
    shard_rows: int,
    seed: int,
    jsonl: Path | None = None,
) -> None:
    """A fresh archive at `root` of `episodes` :func:`synthesise` copies of `base`, sealed
    `shard_rows` at a time into one shard per intent (and written as JSONL to `jsonl`)."""
    from shopbench.archive.shards import write_shard

    shutil.rmtree(root, ignore_errors=True)
    f = jsonl.open("w", encoding="utf-8") if jsonl is not None else None
    try:
        for start in range(0, episodes, shard_rows):
            batch = synthesise(base, min(shard_rows, episodes - start), seed, start)
            if f is not None:
                for r in batch:
                    f.write(r.model_dump_json() + "\n")
            by_intent: dict[str, list[Trajectory]] = {}
            for r in batch:
                by_intent.setdefault(r.intent, []).append(r)
            for group in by_intent.values():
                write_shard(group, str(root), signer=_Key())
    finally:
        if f is not None:
            f.close()


def _query_figures(
    base: list[Trajectory], cfg: ArchiveBenchConfig, work: Path
) -> tuple[int, float, float, int, int]:
    """Archive `cfg.episodes` copies as shards and as JSONL, then time the same filter."""
    from shopbench.archive.filters import TraceFilter
    from shopbench.archive.query import query

    root = work / "archive"
    jsonl = work / "episodes.jsonl"
    seal_copies(base, root, cfg.episodes, cfg.shard_rows, cfg.seed, jsonl=jsonl)
    miner = 17
    filt = TraceFilter(
        intent=["shop"], success=True, score_min=0.6, score_max=0.9, miner_uid=[miner]
    )
    query(root, filt)  # the first query warms the page cache, as the JSONL scan's read does
    t0 = time.perf_counter()
    table = query(root, filt)
    query_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    hits = 0
    with jsonl.open("rb") as f:
        for line in f:
            d = json.loads(line)
            if (
                d["intent"] == "shop"
                and d["outcome"]["success"]
                and d["score"] is not None
                and 0.6 <= d["score"] <= 0.9
                and d["miner_uid"] == miner
            ):
                hits += 1
    scan_s = time.perf_counter() - t0
    if hits != table.num_rows:
        raise RuntimeError(f"query found {table.num_rows} episodes, the JSONL scan {hits}")
    shard_bytes = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    return table.num_rows, query_s, scan_s, shard_bytes, jsonl.stat().st_size


_RSS_CHILD = """
import asyncio, pickle, resource, sys
from pathlib import Path
from shopbench.archive.store import ArchiveStore
from shopbench.bench.archive import _Key, synthesise
base = pickle.loads(Path(sys.argv[1]).read_bytes())
n, root = int(sys.argv[2]), Path(sys.argv[3])
async def go():
    store = ArchiveStore(root, signer=_Key())
    for start in range(0, n, 1000):
        await asyncio.gather(*(store.put([r]) for r in synthesise(base, 1000, 0, start)))
    await store.close()
asyncio.run(go())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_rss(base: list[Trajectory], sizes: list[int], work: Path) -> dict[int, float]:
    import pickle

    blob = work / "base.pickle"
    blob.write_bytes(pickle.dumps(base))
    out: dict[int, float] = {}
    for n in sizes:
        root = work / f"rss-{n}"
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, "-c", _RSS_CHILD, str(blob), str(n), str(root)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        out[n] = round(int(done.stdout.split()[-1]) / 1024, 1)
        shutil.rmtree(root, ignore_errors=True)
    return out


def run_archive_bench(cfg: ArchiveBenchConfig) -> ArchiveBenchResult:
    """Run every figure of the archive bench (minutes at the default sizes)."""
    owned = cfg.work is None
    work = Path(cfg.work or tempfile.mkdtemp(prefix="shopbench-archive-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    try:
        base = _base_records(cfg.base_episodes, cfg.seed, work)
        out["base_episodes"] = len(base)
        if "ingest" in cfg.figures:
            out |= _ingest_figures(base, cfg, work)
        if "query" in cfg.figures:
            matches, query_s, scan_s, shard_bytes, jsonl_bytes = _query_figures(base, cfg, work)
            out |= {
                "query_episodes": cfg.episodes, "query_matches": matches,
                "query_s": round(query_s, 4), "jsonl_scan_s": round(scan_s, 3),
                "query_speedup": round(scan_s / query_s, 1),
                "shard_bytes_per_episode": round(shard_bytes / cfg.episodes, 1),
                "jsonl_bytes_per_episode": round(jsonl_bytes / cfg.episodes, 1),
                "bytes_ratio": round(shard_bytes / jsonl_bytes, 4),
            }  # fmt: skip
        if "rss" in cfg.figures:
            out["peak_rss_mib"] = _peak_rss(base, cfg.rss_sizes, work)
    finally:
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    return ArchiveBenchResult(**out)


def _ingest_figures(base: list[Trajectory], cfg: ArchiveBenchConfig, work: Path) -> dict[str, Any]:
    ingest = synthesise(base, cfg.ingest, cfg.seed + 1)
    shutil.rmtree(work / "ingest", ignore_errors=True)
    group, group_sealed = _ingest_rate(ingest, work / "ingest" / "group", group=True)
    single_n = max(100, cfg.ingest // 20)  # one fsync each: a sample is enough
    single, _ = _ingest_rate(ingest[:single_n], work / "ingest" / "single", group=False)
    shutil.rmtree(work / "ingest", ignore_errors=True)
    return {
        "ingest_episodes": cfg.ingest,
        "ingest_group_commit_per_s": round(group, 1),
        "ingest_group_commit_sealed_per_s": round(group_sealed, 1),
        "ingest_per_episode_fsync_per_s": round(single, 1),
    }
