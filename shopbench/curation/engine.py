"""Where curation's two passes run: in this process (the default) or on a Ray cluster.

An :class:`Engine` runs the per-shard stages of :mod:`shopbench.curation.stages` over the
verified shards and hands back their tables in row order; the pipeline does everything else
the same way whatever the engine (the ledger, the rules' decisions, the report, the writer),
so an engine changes where the work runs and nothing in the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from shopbench.curation.engine_config import EngineConfig, WorkerFigure

if TYPE_CHECKING:  # the CLI reads EngineConfig at start: nothing heavy at import
    import pyarrow as pa

    from shopbench.curation.curator import Curator
    from shopbench.curation.stages import ShardWork


class Engine(Protocol):
    """Runs curation's per-shard passes; every table comes back in row order."""

    name: str

    def ledger_tables(self, curator: Curator, plan: list[ShardWork]) -> Iterator[pa.Table]:
        """Pass one over `plan`'s shards: ledger tables, in row order."""
        ...

    def kept_tables(self, kept: Iterable[tuple[ShardWork, pa.Table]]) -> Iterator[pa.Table]:
        """Pass two: each shard's kept rows as curated tables, one per batch the shard is
        read in, in row order."""
        ...

    def figures(self) -> list[WorkerFigure]:
        """Each worker process that took part so far (none for the local engine)."""
        ...

    def close(self) -> None:
        """Let the cluster go (the cluster itself is left running)."""
        ...


class LocalEngine:
    """Both passes in this process, one shard after another."""

    name = "local"

    def ledger_tables(self, curator: Curator, plan: list[ShardWork]) -> Iterator[pa.Table]:
        from shopbench.curation.stages import shard_ledger

        for work in plan:
            yield from shard_ledger(curator, work)

    def kept_tables(self, kept: Iterable[tuple[ShardWork, pa.Table]]) -> Iterator[pa.Table]:
        from shopbench.curation.stages import shard_kept

        for work, rows in kept:
            yield from shard_kept(work, rows)

    def figures(self) -> list[WorkerFigure]:
        return []

    def close(self) -> None:
        return None


def open_engine(cfg: EngineConfig) -> Engine:
    """The engine `cfg` names, ready: for Ray, connected to the cluster and every node
    checked to run this shopbench (CurationError naming the address or the node when not,
    before anything is read or written)."""
    if cfg.kind == "local":
        return LocalEngine()
    from shopbench.curation.ray_engine import RayEngine

    return RayEngine.connect(cfg)
