"""Benchmark of the trace API: list pages, one trajectory, bulk JSONL, over real HTTP.

The archive is the archive bench's (:mod:`shopbench.bench.archive`): real episodes copied
with new ids and varied intent, miner, block, epoch, score and success, sealed as shards of
one validator. The service is ``shopbench traces serve`` itself, in a process of its own
(the rate limit set out of the way), on a loopback port, driven by an httpx client from
this process, one request at a time. Figures:

- a filtered list page (intent + success + score range, 50 episodes, random intent, the
  first page or a later one through the cursor): p50 and p99 latency;
- one trajectory by id (random ids of the archive): p50 and p99;
- a page of a full-text search (a scan of every conversation): p50 over five words;
- bulk JSONL streaming (``format=jsonl``): episodes per second, whole records;
- the service's start (spawn to first answer: imports, listing the shards, the id index)
  and the server process's peak RSS.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.bench.archive import _base_records, seal_copies
from shopbench.records.task import INTENTS


class ApiBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = Field(
        default=1_000_000, ge=1000, description="archived episodes the API serves"
    )
    requests: int = Field(default=200, ge=10, description="requests timed per latency figure")
    stream: int = Field(
        default=20_000, ge=100, description="episodes streamed for the JSONL figure"
    )
    shard_rows: int = Field(default=50_000, ge=1000, description="rows per sealed batch")
    base_episodes: int = Field(default=64, ge=4, description="real episodes played")
    work: str | None = Field(
        default=None, description="scratch folder, kept; an archive of the same size there is "
        "reused (default: a temp dir)"
    )
    seed: int = Field(default=0, description="seed of the real episodes played")


class ApiBenchResult(BaseModel):
    """The measurement (milliseconds unless named otherwise)."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    shards: int
    start_s: float = Field(description="spawn to first answer (imports, shards, id index)")
    list_page_p50_ms: float
    list_page_p99_ms: float
    list_page_mean_rows: float
    trajectory_p50_ms: float
    trajectory_p99_ms: float
    text_search_p50_ms: float = Field(
        description="a page of a full-text search (query and reasoning): a scan"
    )
    jsonl_episodes: int
    jsonl_episodes_per_s: float
    jsonl_mb_per_s: float
    server_peak_rss_mib: float


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _archive(cfg: ApiBenchConfig, work: Path) -> Path:
    root = work / f"api-archive-{cfg.episodes}"
    if not (root / ".complete").exists():
        base = _base_records(cfg.base_episodes, cfg.seed, work)
        seal_copies(base, root, cfg.episodes, cfg.shard_rows, cfg.seed)
        (root / ".complete").write_text("sealed\n")
    return root


def _free_port() -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run_api_bench(cfg: ApiBenchConfig) -> ApiBenchResult:
    """Build (or reuse) the archive, serve it with ``shopbench traces serve``, and time the
    requests."""
    import httpx

    work = Path(cfg.work or tempfile.mkdtemp(prefix="shopbench-api-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    root = _archive(cfg, work)
    port = _free_port()
    t0 = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "shopbench.cli", "traces", "serve", "--root", str(root),
         "--port", str(port), "--rate", "1e9", "--burst", "1000000000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    rng = random.Random(cfg.seed)
    try:
        with httpx.Client(base_url=url, timeout=120) as c:
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"traces serve exited with {server.returncode}")
                try:
                    c.get("/v1/trajectories", params={"limit": 1}).raise_for_status()
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            start_s = time.perf_counter() - t0
            pages, rows, ids = _pages(c, cfg, rng)
            singles = _singles(c, rng.sample(ids, min(cfg.requests, len(ids))))
            searches = _searches(c, ("cheapest", "budget", "compare", "official", "shop"))
            lines, size, stream_s = _stream(c, cfg.stream)
        rss = _peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    shards = sum(1 for _ in (root / "_manifests").rglob("*.parquet.json"))
    return ApiBenchResult(
        episodes=cfg.episodes, shards=shards, start_s=round(start_s, 2),
        list_page_p50_ms=_pct(pages, 0.5), list_page_p99_ms=_pct(pages, 0.99),
        list_page_mean_rows=round(rows / len(pages), 1),
        trajectory_p50_ms=_pct(singles, 0.5), trajectory_p99_ms=_pct(singles, 0.99),
        text_search_p50_ms=_pct(searches, 0.5),
        jsonl_episodes=lines, jsonl_episodes_per_s=round(lines / stream_s, 1),
        jsonl_mb_per_s=round(size / stream_s / 1e6, 2), server_peak_rss_mib=rss,
    )  # fmt: skip


def _pages(c: Any, cfg: ApiBenchConfig, rng: random.Random) -> tuple[list[float], int, list[str]]:
    """Filtered list pages: a first page of a random intent, or the next one by its cursor."""
    pages: list[float] = []
    rows = 0
    ids: list[str] = []
    cursor: str | None = None
    last: dict[str, str] = {}
    for i in range(cfg.requests):
        params = {"intent": rng.choice(INTENTS), "success": "true",
                  "score_min": "0.6", "score_max": "0.9", "limit": "50"}  # fmt: skip
        if cursor and i % 2:
            params = {**last, "cursor": cursor}
        t = time.perf_counter()
        r = c.get("/v1/trajectories", params=params)
        pages.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
        body = r.json()
        rows += len(body["items"])
        ids += [x["episode_id"] for x in body["items"][:3]]
        cursor, last = body["next_cursor"], params
    return pages, rows, ids


def _singles(c: Any, ids: list[str]) -> list[float]:
    out: list[float] = []
    for episode_id in ids:
        t = time.perf_counter()
        r = c.get(f"/v1/trajectories/{episode_id}")
        out.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    return out


def _searches(c: Any, words: tuple[str, ...]) -> list[float]:
    out: list[float] = []
    for word in words:
        t = time.perf_counter()
        c.get("/v1/trajectories", params={"text": word, "limit": "50"}).raise_for_status()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _stream(c: Any, n: int) -> tuple[int, int, float]:
    t = time.perf_counter()
    lines = size = 0
    with c.stream("GET", "/v1/trajectories", params={"format": "jsonl", "limit": n}) as s:
        s.raise_for_status()
        for chunk in s.iter_bytes():
            lines += chunk.count(b"\n")
            size += len(chunk)
    return lines, size, time.perf_counter() - t
