"""Which engine runs a curation (:mod:`shopbench.curation.engine`), and what it reports of
its workers. Light to import: the CLI builds its flags from it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EngineConfig(BaseModel):
    """Which engine runs a curation, and on what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["local", "ray"] = Field(
        default="local",
        description="local: this process; ray: a Ray cluster's workers, with Ray Data",
    )
    address: str | None = Field(
        default=None,
        description="the Ray cluster's address (HOST:PORT of its head, or auto); none: "
        "RAY_ADDRESS, else a Ray instance started here for the run",
    )
    workers: int | None = Field(
        default=None, ge=1, description="Ray workers per pass (none: one per CPU of the cluster)"
    )


class WorkerFigure(BaseModel):
    """One worker process of a run: where it ran (node:pid), the shards it took (in either
    pass), its peak memory and the CPU time it had used at its last shard."""

    worker: str
    shards: int = 0
    peak_rss_mib: float = 0.0
    cpu_seconds: float = 0.0
