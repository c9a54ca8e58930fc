"""Secret catalog rotation: build from a secret seed, commit its hash, rotate, reveal.

A validator's catalog comes from a seed only it knows, so no miner can rebuild the catalog
and solve tasks offline. When a generation starts serving, the validator commits
``sha256(seed)`` on chain; every ``every_epochs`` epochs it builds the next generation from
a fresh seed (in the background: scoring goes on with the old catalog meanwhile), switches
to it, and reveals the retired seed in its next commitment, so anyone can rebuild that
catalog, check it against the earlier hash, and re-grade its archived trajectories.

A hotkey holds one commitment at a time, so each one carries the current hash and at most
one reveal, as ``sb1 c<gen>:<sha256> r<gen>:<seed>`` (at most 128 bytes);
:class:`CatalogCommitment` writes and reads it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import seed_hash
from template.base.state import CatalogGeneration, RetiredSeed, RotationState
from template.errors import ChainClientError

log = logging.getLogger("template.rotation")
COMMIT_VERSION = "sb1"
MAX_RETIRED_KEPT = 64
_COMMIT = re.compile(
    r"^sb1 c(?P<gen>\d{1,9}):(?P<hash>[0-9a-f]{64})(?: r(?P<rgen>\d{1,9}):(?P<seed>\d{1,20}))?$"
)
Builder = Callable[..., Any]
"""``build_catalog(out, n_products, seed, workers=...)``, replaceable in tests."""


class CatalogCommitment(BaseModel):
    """What a validator publishes about its catalogs: the current hash, maybe a reveal."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generation: int = Field(ge=0)
    seed_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    revealed_generation: int | None = Field(default=None, ge=0)
    revealed_seed: int | None = Field(default=None, ge=0)

    def text(self) -> str:
        """The commitment as published on chain."""
        out = f"{COMMIT_VERSION} c{self.generation}:{self.seed_hash}"
        if self.revealed_generation is not None and self.revealed_seed is not None:
            out += f" r{self.revealed_generation}:{self.revealed_seed}"
        return out

    @classmethod
    def parse(cls, text: str) -> CatalogCommitment:
        """Read a published commitment; ValueError when it is not one."""
        m = _COMMIT.match(text.strip())
        if m is None:
            raise ValueError(f"not a catalog commitment: {text[:80]!r}")
        reveal = m.group("rgen")
        return cls(
            generation=int(m.group("gen")),
            seed_hash=m.group("hash"),
            revealed_generation=int(reveal) if reveal is not None else None,
            revealed_seed=int(m.group("seed")) if reveal is not None else None,
        )


def reveal_matches(earlier: CatalogCommitment, later: CatalogCommitment) -> bool:
    """Whether `later` reveals the seed whose hash `earlier` committed."""
    return (
        later.revealed_generation == earlier.generation
        and later.revealed_seed is not None
        and seed_hash(later.revealed_seed) == earlier.seed_hash
    )


class RotationConfig(BaseModel):
    """Where catalogs are built, how large, and how often they change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: Path = Field(description="catalogs are built in ROOT/g<generation>")
    products: int = Field(ge=100)
    every_epochs: int = Field(ge=0, description="epochs per generation; 0: never rotate")
    workers: int = Field(default=2, ge=1)


def _default_builder(out: Path, n_products: int, seed: int, *, workers: int) -> Any:
    from shopbench.catalog.store import build_catalog

    return build_catalog(out, n_products, seed, workers=workers)


class CatalogRotator:
    """Keeps a validator's :class:`RotationState` moving; the state object is mutated in place.

    `new_seed` draws secret seeds; `build` builds a catalog (both replaceable in tests).
    """

    def __init__(
        self,
        state: RotationState,
        config: RotationConfig,
        *,
        build: Builder = _default_builder,
        new_seed: Callable[[], int] = lambda: secrets.randbits(63),
    ) -> None:
        self.state = state
        self.config = config
        self._build = build
        self._new_seed = new_seed
        self._pending_task: asyncio.Task[Any] | None = None

    def _generation(self, index: int, epoch: int) -> CatalogGeneration:
        seed = self._new_seed()
        return CatalogGeneration(
            index=index,
            seed=seed,
            seed_hash=seed_hash(seed),
            products=self.config.products,
            directory=str(self.config.root / f"g{index:05d}"),
            started_epoch=epoch,
        )

    def _build_generation(self, gen: CatalogGeneration) -> None:
        self._build(Path(gen.directory), gen.products, gen.seed, workers=self.config.workers)

    def begin(self, epoch: int) -> CatalogGeneration:
        """The serving generation, drawing the first seed when there is none (not built yet:
        save the state now, so that a restart during the first build keeps the seed)."""
        if self.state.current is None:
            self.state.current = self._generation(0, epoch)
        return self.state.current

    async def ensure_current(self, epoch: int) -> CatalogGeneration:
        """The serving generation, built first when there is none or its directory is gone.

        A generation is rebuilt from its saved seed, which gives the same catalog byte for
        byte. Blocks (off the event loop) for as long as a build takes.
        """
        gen = self.begin(epoch)
        if not _is_built(Path(gen.directory), gen.seed_hash):
            self._remove_unfinished()
            log.info("building catalog generation %d (%d products)", gen.index, gen.products)
            await asyncio.to_thread(self._build_generation, gen)
        return gen

    def _remove_unfinished(self) -> None:
        """Delete the staging directories of builds a kill interrupted."""
        root = self.config.root
        if root.is_dir():
            for stale in root.glob(".g*.building-*"):
                shutil.rmtree(stale, ignore_errors=True)

    def adopt(self, directory: Path, seed: int, products: int, epoch: int) -> CatalogGeneration:
        """Serve a catalog already built from `seed` in `directory` (the arena's cache).

        CatalogError when the directory's manifest is not that seed's.
        """
        if not _is_built(directory, seed_hash(seed)):
            raise CatalogError(f"{directory}: not a finished catalog built from the given seed")
        current = self.state.current
        if current is not None and current.seed == seed:
            self.state.current = current.model_copy(update={"directory": str(directory)})
        else:
            index = current.index + 1 if current is not None else 0
            self.state.current = CatalogGeneration(
                index=index, seed=seed, seed_hash=seed_hash(seed), products=products,
                directory=str(directory), started_epoch=epoch,
            )  # fmt: skip
        return self.state.current

    def due(self, epoch: int) -> bool:
        """Whether the serving generation has served its epochs."""
        gen = self.state.current
        every = self.config.every_epochs
        return gen is not None and every > 0 and epoch >= gen.started_epoch + every

    @property
    def building(self) -> bool:
        """A next generation is being built."""
        return self._pending_task is not None and not self._pending_task.done()

    async def step(self, epoch: int) -> bool:
        """Advance the rotation at `epoch`; True when a new generation started serving.

        Starts the next build when one is due (or resumes a build a restart interrupted),
        and switches to it once it is finished. Never blocks on a build.
        """
        if self.state.pending is None and self.due(epoch):
            assert self.state.current is not None
            self.state.pending = self._generation(self.state.current.index + 1, epoch)
        pending = self.state.pending
        if pending is None:
            return False
        if self._pending_task is None:
            log.info("building catalog generation %d in the background", pending.index)
            self._pending_task = asyncio.create_task(
                asyncio.to_thread(self._build_generation, pending)
            )
        if not self._pending_task.done():
            return False
        task, self._pending_task = self._pending_task, None
        error = task.exception()
        if error is not None:
            # A failed build is retried at the next step; scoring goes on meanwhile.
            log.error("building catalog generation %d failed: %s", pending.index, error)
            return False
        self._switch(pending, epoch)
        return True

    def _switch(self, nxt: CatalogGeneration, epoch: int) -> None:
        old = self.state.current
        self.state.current = nxt.model_copy(update={"started_epoch": epoch, "committed": False})
        self.state.pending = None
        if old is not None:
            self.state.retired.append(
                RetiredSeed(index=old.index, seed=old.seed, seed_hash=old.seed_hash)
            )
            self.state.retired = self.state.retired[-MAX_RETIRED_KEPT:]
            # The seed will be public: the old catalog can be rebuilt by anyone, us included.
            if Path(old.directory).resolve().is_relative_to(self.config.root.resolve()):
                shutil.rmtree(old.directory, ignore_errors=True)
        log.info("catalog generation %d serves from epoch %d", nxt.index, epoch)

    def commitment(self) -> CatalogCommitment | None:
        """What should be on chain now, or None when everything is published."""
        gen = self.state.current
        if gen is None:
            return None
        reveal = next((r for r in self.state.retired if not r.revealed), None)
        if gen.committed and reveal is None:
            return None
        return CatalogCommitment(
            generation=gen.index,
            seed_hash=gen.seed_hash,
            revealed_generation=reveal.index if reveal else None,
            revealed_seed=reveal.seed if reveal else None,
        )

    async def publish(self, chain: Any) -> CatalogCommitment | None:
        """Commit the pending hash / reveal through `chain`; what was published, or None.

        A chain failure is logged and left for the next call (scoring never waits on it).
        """
        commitment = self.commitment()
        if commitment is None:
            return None
        try:
            await chain.commit(commitment.text())
        except ChainClientError as e:
            log.warning("catalog commitment not published yet: %s", e)
            return None
        gen = self.state.current
        assert gen is not None
        self.state.current = gen.model_copy(update={"committed": True})
        for r in self.state.retired:
            if r.index == commitment.revealed_generation:
                r.revealed = True
        return commitment


def _is_built(directory: Path, expected_hash: str) -> bool:
    """Whether `directory` holds a finished catalog built from the seed with this hash."""
    from shopbench.catalog.layout import read_manifest

    try:
        return read_manifest(directory).seed_hash == expected_hash
    except CatalogError:
        return False
