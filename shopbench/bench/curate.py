"""Benchmark of curation: episodes per second and peak memory, per engine, as the archive grows.

The archive is the archive bench's: real episodes (reference policies on product tasks over a
2,000-product catalog from seed 7), judged by the rubric as a validator archives them,
copied with new ids and varied intents, miners, clusters,
scores and successes (:func:`shopbench.bench.archive.synthesise`), each copy signed by the
given signer and sealed into signed shards. Each size is curated with the release's config
by each engine asked for, in a fresh process (so its peak RSS is its own), one DuckDB
thread, ``OMP_NUM_THREADS=1``: the local engine, and Ray with each number of workers (a Ray
instance of that many CPUs started in the process for the run, its start excluded; each
worker an actor process whose own peak RSS is reported). The figure is the whole run (both
passes, the ledger's rules, the report, the output), imports excluded.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.signing import Signer, Verifier, sign_trajectory

SHARD_ROWS = 8000


class CurateBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sizes: list[int] = Field(
        default=[4000, 16000], min_length=1, description="archive sizes curated (episodes)"
    )
    base_episodes: int = Field(default=64, ge=4, description="real episodes played")
    verify: bool = Field(default=True, description="check every signature")
    signatures: Literal["record", "shard"] = Field(
        default="record", description="record: each record's signature; shard: each manifest's"
    )
    work: str | None = Field(default=None, description="scratch folder (default: temp)")
    engines: list[Literal["local", "ray"]] = Field(
        default=["local"], min_length=1,
        description="local or ray; repeat to compare them on each archive",
        json_schema_extra={"flag": "engine"},
    )  # fmt: skip
    workers: list[int] = Field(
        default=[1], min_length=1, description="Ray workers of each Ray run (one run per count)"
    )
    seed: int = Field(default=0, description="seed of the real episodes played")


class SizeFigure(BaseModel):
    """One run: an archive size under one engine."""

    engine: str = "local"
    workers: int = 1
    episodes: int
    archive_bytes: int = Field(default=0, description="the archive's shards on disk")
    kept: int
    seconds: float
    episodes_per_s: float
    pass_one_seconds: float = Field(
        default=0.0, description="from the start until the ledger holds every episode"
    )
    peak_rss_mib: float = Field(description="the driver process (all of the local engine)")
    worker_peak_rss_mib: list[float] = Field(
        default_factory=list, description="each Ray worker process's peak RSS"
    )
    driver_cpu_s: float = Field(default=0.0, description="CPU time of the driver process")
    worker_cpu_s: list[float] = Field(
        default_factory=list, description="each Ray worker process's CPU time"
    )


class CurateBenchResult(BaseModel):
    """The measurement."""

    base_episodes: int
    verify: bool
    signatures: str
    runs: list[SizeFigure]


def _archive(base: list, n: int, root: Path, signer: Signer, seed: int) -> None:  # type: ignore[type-arg]
    from shopbench.archive.shards import write_shard
    from shopbench.bench.archive import synthesise

    for start in range(0, n, SHARD_ROWS):
        batch = synthesise(base, min(SHARD_ROWS, n - start), seed, start)
        batch = [
            sign_trajectory(t.model_copy(update={"validator_hotkey": signer.hotkey}), signer)
            for t in batch
        ]
        by_intent: dict[str, list] = {}  # type: ignore[type-arg]
        for t in batch:
            by_intent.setdefault(str(t.intent), []).append(t)
        for group in by_intent.values():
            write_shard(group, str(root), signer=signer)


def _judged(base: list) -> list:  # type: ignore[type-arg]
    """The base episodes as a validator archives them: judged by the rubric and scored."""
    from shopbench.judging.rubric.judge import RubricJudge
    from shopbench.scoring.score import with_judgement

    judge = RubricJudge()
    return [with_judgement(t, judge.judge(t)) for t in base]


def _curate_child(
    root: str, out: str, verifier: Verifier | None, signatures: str,
    engine: Literal["local", "ray"] = "local", workers: int = 1,
) -> tuple[int, int, float, float, float, list[float], float, list[float]]:  # fmt: skip
    os.environ["OMP_NUM_THREADS"] = "1"
    from shopbench.curation.config import load_config
    from shopbench.curation.engine import open_engine
    from shopbench.curation.engine_config import EngineConfig
    from shopbench.curation.pipeline import curate

    cfg = load_config()
    validity = cfg.validity.model_copy(
        update={"verify_signatures": verifier is not None, "signatures": signatures}
    )
    cfg = cfg.model_copy(update={"validity": validity})
    # Imports are excluded: DuckDB and Arrow import pandas on first use where it exists.
    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401
    runner = open_engine(EngineConfig(kind=engine, workers=workers))  # a Ray start excluded
    last = [0.0]

    def progress(rows: int) -> None:
        last[0] = time.perf_counter()

    try:
        t0, cpu0 = time.perf_counter(), time.process_time()
        report = curate(root, Path(out), cfg, verifier=verifier, engine=runner, progress=progress)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        figures = [f.peak_rss_mib for f in runner.figures()]
        cpus = [f.cpu_seconds for f in runner.figures()]
    finally:
        runner.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report.episodes_in, report.kept, seconds, last[0] - t0, peak, figures, cpu, cpus


def _bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*.parquet"))


def _runs(cfg: CurateBenchConfig) -> list[tuple[Literal["local", "ray"], int]]:
    """(engine, workers) of each run on an archive: local once, Ray once per count."""
    out: list[tuple[Literal["local", "ray"], int]] = []
    for engine in cfg.engines:
        out += [("local", 1)] if engine == "local" else [("ray", n) for n in cfg.workers]
    return out


def run_curate_bench(
    cfg: CurateBenchConfig, *, signer: Signer, verifier: Verifier
) -> CurateBenchResult:
    """Build each archive size and curate it in a fresh process (minutes at the defaults)."""
    from shopbench.bench.archive import _base_records

    owned = cfg.work is None
    work = Path(cfg.work or tempfile.mkdtemp(prefix="shopbench-curate-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[SizeFigure] = []
    try:
        base = _judged(_base_records(cfg.base_episodes, cfg.seed, work))
        context = multiprocessing.get_context("spawn")
        for n in cfg.sizes:
            root, out = work / f"archive-{n}", work / f"curated-{n}"
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            _archive(base, n, root, signer, cfg.seed)
            size = _bytes(root)
            for engine, workers in _runs(cfg):
                shutil.rmtree(out, ignore_errors=True)
                with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                    job = pool.submit(
                        _curate_child, str(root), str(out), verifier if cfg.verify else None,
                        cfg.signatures, engine, workers,
                    )  # fmt: skip
                    episodes, kept, seconds, first, peak, each, cpu, cpus = job.result()
                runs.append(SizeFigure(
                    engine=engine, workers=workers, episodes=episodes, archive_bytes=size,
                    kept=kept, seconds=round(seconds, 2), pass_one_seconds=round(first, 2),
                    episodes_per_s=round(episodes / seconds, 1), peak_rss_mib=round(peak, 1),
                    worker_peak_rss_mib=each, driver_cpu_s=round(cpu, 2), worker_cpu_s=cpus,
                ))  # fmt: skip
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
    finally:
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    return CurateBenchResult(
        base_episodes=cfg.base_episodes, verify=cfg.verify, signatures=cfg.signatures, runs=runs
    )
