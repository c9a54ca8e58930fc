"""The Ray engine: curation's two passes on a Ray cluster's workers, with Ray Data.

The driver (``shopbench curate --engine ray``) lists and verifies the shards exactly as the
local engine does (:mod:`shopbench.curation.source`: no row enters the pipeline before its
shard's signature and sha256 have been checked), then:

- **pass one**: one Ray Data row per verified shard (its file, manifest sha256, signer and
  first row number) → ``map_batches`` on a pool of actors, each holding the run's
  :class:`~shopbench.curation.curator.Curator` (config, loaded test sets, labels) →
  :func:`~shopbench.curation.stages.shard_ledger`, the shard's ledger rows as Arrow. A
  worker reads the shard's bytes and parses them only when they still match the verified
  manifest's sha256. The tables come back in row order and go into the driver's ledger;
- **the decisions**: the same rules over the same ledger as the local engine, on the driver;
- **pass two**: one row per shard with kept rows (the kept rows' numbers, weights, tags and
  masks as Arrow IPC) → ``map_batches`` → :func:`~shopbench.curation.stages.shard_kept`,
  the curated tables; the driver writes them in order with the local engine's writer.

So the kept episodes, the ledger, the report and the files are the local engine's. Ray is
imported only here, and only when this engine is asked for (``pip install
'shopbench[scale]'``).
"""

from __future__ import annotations

import io
import os
import resource
import socket
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from shopbench.curation.engine_config import EngineConfig, WorkerFigure
from shopbench.curation.errors import CurationError
from shopbench.curation.source import Shard
from shopbench.curation.stages import ShardWork, concat, shard_kept, shard_ledger

if TYPE_CHECKING:
    from shopbench.curation.curator import Curator

_UNIT, _CHUNK, _WORKER, _RSS, _CPU = "_unit", "_chunk", "_worker", "_rss_mib", "_cpu_s"
STATS = (_UNIT, _CHUNK, _WORKER, _RSS, _CPU)
_CONNECT_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 120.0
_ACTORS_TIMEOUT_S = 300
INSTALL_HINT = "pip install 'shopbench[scale]'"


def worker_id() -> str:
    """This Ray worker process, as the figures name it: its node's id (8 hex) and its pid."""
    import ray

    return f"{ray.get_runtime_context().get_node_id()[:8]}:{os.getpid()}"


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return round(use.ru_utime + use.ru_stime, 3)


def with_stats(table: pa.Table, unit: int, chunk: int, worker: str) -> pa.Table:
    """`table` (a stage's output for work unit `unit`) with the columns the driver reads
    and drops (:data:`STATS`): the unit, the chunk of it, the worker, its peak RSS and CPU."""
    n = table.num_rows
    return (
        table.append_column(_UNIT, pa.array([unit] * n, pa.int64()))
        .append_column(_CHUNK, pa.array([chunk] * n, pa.int64()))
        .append_column(_WORKER, pa.array([worker] * n, pa.string()))
        .append_column(_RSS, pa.array([_peak_mib()] * n, pa.float64()))
        .append_column(_CPU, pa.array([_cpu_s()] * n, pa.float64()))
    )


def _work_of(row: dict[str, Any]) -> ShardWork:
    from pathlib import Path

    shard = Shard(file=Path(row["file"]), rel=row["rel"], rows=int(row["rows"]),
                  signer=row["signer"], sha256=row["sha256"])  # fmt: skip
    return ShardWork(shard, int(row["first_seq"]))


def _item(unit: int, work: ShardWork) -> dict[str, Any]:
    s = work.shard
    return {
        "unit": unit, "file": str(s.file), "rel": s.rel, "rows": s.rows, "signer": s.signer,
        "sha256": s.sha256, "first_seq": work.first_seq,
    }  # fmt: skip


class PassOne:
    """A Ray Data actor of pass one: each row of its batch a shard, its output the shards'
    ledger rows (the stage of :func:`~shopbench.curation.stages.shard_ledger`)."""

    def __init__(self, held: list[Any]) -> None:
        import ray

        # The curator comes by reference (put once by the driver, fetched once per actor).
        self.curator: Curator = ray.get(held[0])
        self.worker = worker_id()

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = []
        for row in batch.to_pylist():
            table = concat(shard_ledger(self.curator, _work_of(row), check=True),
                           self.curator.schema)  # fmt: skip
            out.append(with_stats(table, int(row["unit"]), 0, self.worker))
        return pa.concat_tables(out)


class PassTwo:
    """A Ray Data actor of pass two: each row of its batch a shard and its kept rows, its
    output their curated tables (:func:`~shopbench.curation.stages.shard_kept`), each
    row marked with the batch of the shard it came from."""

    def __init__(self) -> None:
        self.worker = worker_id()

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = []
        for row in batch.to_pylist():
            kept = pa.ipc.open_stream(io.BytesIO(row["kept"])).read_all()
            for chunk, table in enumerate(shard_kept(_work_of(row), kept, check=True)):
                out.append(with_stats(table, int(row["unit"]), chunk, self.worker))
        return pa.concat_tables(out)


def _mapped(ds: Any, stage: type, pool: Any, kwargs: dict[str, Any] | None) -> Any:
    """`ds` mapped by `stage`, one shard per call, on `pool`'s actors (a CPU each). An
    actor that dies is not restarted: the run fails with the reason (Ray 2.60 takes that
    only as a remote argument, which it marks deprecated)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return ds.map_batches(
            stage, fn_constructor_kwargs=kwargs, batch_size=1, batch_format="pyarrow",
            compute=pool, num_cpus=1, max_restarts=0,
        )  # fmt: skip


def _probe() -> dict[str, str]:
    """What a node runs: its shopbench, Python and Ray (or why shopbench does not import).
    Imports nothing of shopbench at module level so a node without it can answer."""
    import importlib
    import importlib.metadata
    import platform

    try:
        importlib.import_module("shopbench.curation.stages")
        version = importlib.metadata.version("shopbench")
    except Exception as e:  # noqa: BLE001 (any failure to import is the answer)
        return {"error": f"{type(e).__name__}: {e}"}
    return {"shopbench": version, "python": platform.python_version()}


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _reachable(address: str) -> None:
    """CurationError unless something accepts TCP connections at `address` (HOST:PORT)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise CurationError(f"--address {address!r}: expected HOST:PORT of a Ray head, or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        raise CurationError(f"--address {address}: no Ray cluster answers there ({e})") from None


def _task_error(e: BaseException) -> CurationError:
    """The one error a failed Ray run becomes: a CurationError a worker raised, as it was;
    anything else named as the cluster's failure."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, CurationError):
            return CurationError(str(seen))
        cause = getattr(seen, "cause", None)
        seen = cause if isinstance(cause, BaseException) else seen.__cause__
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return CurationError(f"the Ray cluster failed the run: {first}")


class RayEngine:
    """Curation's passes on a Ray cluster (see the module doc)."""

    name = "ray"

    def __init__(self, cfg: EngineConfig, workers: int) -> None:
        self.cfg = cfg
        self.workers = workers
        self._figures: dict[str, WorkerFigure] = {}
        self._shards: dict[str, set[tuple[str, int]]] = {}

    @classmethod
    def connect(cls, cfg: EngineConfig) -> RayEngine:
        """Connect to the cluster `cfg` names (or start one here without an address) and
        check that every node runs this shopbench; CurationError saying what is wrong."""
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            import ray
        except ImportError:
            raise CurationError(f"--engine ray needs Ray: {INSTALL_HINT}") from None
        address = cfg.address or os.environ.get("RAY_ADDRESS") or None
        if address is not None and address != "auto":
            _reachable(address.removeprefix("ray://"))
        options: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
        if address is None:  # a Ray instance of this run alone, never one found running here
            options |= {"include_dashboard": False, "num_cpus": cfg.workers}
        try:
            ray.init(address=address or "local", **options)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"--address {address}" if address else "a local Ray instance"
            raise CurationError(f"{where}: cannot connect ({e})") from None
        try:
            cpus = _check_nodes(ray, address or "a local Ray instance")
            if cfg.workers is not None and cfg.workers > cpus:
                raise CurationError(
                    f"--workers {cfg.workers}: the Ray cluster has {cpus} CPUs (a worker "
                    "takes one)"
                )
        except BaseException:
            ray.shutdown()
            raise
        _quiet_data()
        return cls(cfg, cfg.workers or max(1, cpus))

    def ledger_tables(self, curator: Curator, plan: list[ShardWork]) -> Iterator[pa.Table]:
        import ray

        if not plan:
            return
        items = [_item(i, w) for i, w in enumerate(plan)]
        ds = self._dataset(items, PassOne, {"held": [ray.put(curator)]})
        expect = 0
        for table in self._run("one", ds):
            first = table.column("seq")[0].as_py() if table.num_rows else None
            if first is not None and first != expect:
                raise CurationError(f"the Ray run returned row {first} where {expect} was due")
            expect += table.num_rows
            yield table.drop_columns(list(STATS))

    def kept_tables(self, kept: Iterable[tuple[ShardWork, pa.Table]]) -> Iterator[pa.Table]:
        items = []
        for unit, (work, rows) in enumerate(kept):
            items.append(_item(unit, work) | {"kept": _ipc(rows)})
        if not items:
            return
        ds = self._dataset(items, PassTwo, None)
        pending: list[pa.Table] = []
        key: tuple[int, int] | None = None
        for table in self._run("two", ds):
            units, chunks = table.column(_UNIT).to_pylist(), table.column(_CHUNK).to_pylist()
            start = 0
            for i in range(1, len(units) + 1):  # one table per batch of a shard, in order
                if i < len(units) and (units[i], chunks[i]) == (units[start], chunks[start]):
                    continue
                part_key = (units[start], chunks[start])
                if key is not None and part_key != key:
                    if part_key < key:
                        raise CurationError("the Ray run returned the kept rows out of order")
                    yield pa.concat_tables(pending)
                    pending = []
                key = part_key
                pending.append(table.slice(start, i - start).drop_columns(list(STATS)))
                start = i
        if pending:
            yield pa.concat_tables(pending)

    def map_units(
        self, stage: str, items: list[dict[str, Any]], cls: type,
        kwargs: dict[str, Any] | None = None,
    ) -> Iterator[pa.Table]:  # fmt: skip
        """Any stage over work units on the pool: `cls` (a Ray Data callable class built
        with `kwargs`) maps each item (a dict with its ``unit`` number) to a table stamped
        by :func:`with_stats`; the tables come back in the items' order, stats dropped."""
        if not items:
            return
        ds = self._dataset(items, cls, kwargs)
        last = -1
        for table in self._run(stage, ds):
            units = table.column(_UNIT).to_pylist()
            if units and (units[0] < last or units != sorted(units)):
                raise CurationError(f"the Ray run returned {stage}'s units out of order")
            last = units[-1] if units else last
            yield table.drop_columns(list(STATS))

    def _dataset(
        self, items: list[dict[str, Any]], stage: type, kwargs: dict[str, Any] | None
    ) -> Any:
        """A Ray dataset of `items`, one block each, mapped by `stage` (built with `kwargs`)
        on a pool of this engine's actors, one item per call (:func:`_mapped`)."""
        import ray.data

        source = ray.data.from_items(items, override_num_blocks=len(items))
        return _mapped(source, stage, self._pool(len(items)), kwargs)

    def _pool(self, shards: int) -> Any:
        """A fixed pool of actors: one per worker, no more than there are shards, each
        given one shard at a time (a shard is a large unit: queueing several on the first
        actor up would leave the others idle)."""
        from ray.data import ActorPoolStrategy

        return ActorPoolStrategy(
            size=min(self.workers, shards), max_tasks_in_flight_per_actor=1
        )

    def _run(self, stage: str, ds: Any) -> Iterator[pa.Table]:
        """The dataset's output blocks in order, each worker's figures noted; a failure on
        the cluster as one CurationError."""
        try:
            for table in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                self._note(stage, table)
                yield table
        except CurationError:
            raise
        except Exception as e:  # noqa: BLE001 (Ray's errors share no base: one boundary)
            raise _task_error(e) from None

    def _note(self, stage: str, table: pa.Table) -> None:
        """Each worker's shards, peak RSS and CPU seconds so far, from a block's stats (one
        aggregate per worker in the block: the driver's cost stays per block, not per row)."""
        if table.num_rows == 0:
            return
        import pyarrow.compute as pc

        stats = table.select([_UNIT, _WORKER, _RSS, _CPU]).group_by(_WORKER).aggregate(
            [(_UNIT, "distinct"), (_RSS, "max"), (_CPU, "max")]
        )  # fmt: skip
        for worker, units, rss, cpu in zip(
            stats.column(_WORKER).to_pylist(), stats.column(f"{_UNIT}_distinct").to_pylist(),
            pc.cast(stats.column(f"{_RSS}_max"), pa.float64()).to_pylist(),
            pc.cast(stats.column(f"{_CPU}_max"), pa.float64()).to_pylist(), strict=True,
        ):  # fmt: skip
            seen = self._shards.setdefault(worker, set())
            seen.update((stage, u) for u in units)
            old = self._figures.get(worker)
            self._figures[worker] = WorkerFigure(
                worker=worker, shards=len(seen),
                peak_rss_mib=max(old.peak_rss_mib if old else 0.0, rss),
                cpu_seconds=max(old.cpu_seconds if old else 0.0, cpu),
            )  # fmt: skip

    def figures(self) -> list[WorkerFigure]:
        return sorted(self._figures.values(), key=lambda f: f.worker)

    def close(self) -> None:
        import ray

        ray.shutdown()


def _check_nodes(ray: Any, where: str) -> int:
    """The cluster's CPUs; CurationError naming each live node that cannot run this
    shopbench (not installed, or another version or Python than the driver's)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    mine = _probe()
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
    if not nodes:
        raise CurationError(f"{where}: the Ray cluster has no live node with a CPU")
    # A copy of the probe whose globals are the builtins alone: Ray sends it by value, so a
    # node without shopbench runs it and says so, rather than failing to load it.
    import builtins
    import types

    by_value = types.FunctionType(_probe.__code__, {"__builtins__": builtins}, "_probe")
    probe = ray.remote(num_cpus=0)(by_value)
    refs = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
        .remote()
        for n in nodes
    ]  # fmt: skip
    try:
        answers = ray.get(refs, timeout=_PROBE_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 (a node that cannot even run the probe)
        raise CurationError(f"{where}: a node of the Ray cluster cannot run shopbench ({e})") \
            from None  # fmt: skip
    bad = []
    for node, answer in zip(nodes, answers, strict=True):
        name = f"node {node['NodeID'][:8]} ({node.get('NodeManagerAddress', '?')})"
        if "error" in answer:
            bad.append(f"{name} cannot import shopbench ({answer['error']})")
        elif answer != mine:
            bad.append(
                f"{name} runs shopbench {answer['shopbench']} on Python {answer['python']}, "
                f"this driver {mine['shopbench']} on {mine['python']}"
            )
    if bad:
        raise CurationError(
            f"{where}: every node must run this shopbench ({INSTALL_HINT} on each): "
            + "; ".join(bad)
        )
    return int(sum(n["Resources"]["CPU"] for n in nodes))


def _quiet_data() -> None:
    """No progress bars or execution logs from Ray Data; outputs in input order (so both
    passes hand back their tables in row order); a pass starts once its actors are up."""
    import logging

    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.execution_options.preserve_order = True
    # Every actor of a pass up before the first shard is handed out, so each takes a share
    # (a cluster short of the CPUs asked for fails here, saying so).
    ctx.wait_for_min_actors_s = _ACTORS_TIMEOUT_S
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.enable_auto_log_stats = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
