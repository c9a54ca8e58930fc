"""The validator's saved state: what a restart must not lose.

Scores (EMA per uid with its hotkey), the round counter, the catalog rotation (the current
secret seed and generation, seeds awaiting their reveal) and the last weight block are
written after every round to one JSON file, atomically: a temporary file in the same
directory is written, flushed to disk and renamed over the old one, so a kill at any moment
leaves either the old state or the new one, never a torn file. The file holds the secret
catalog seed, so it is created readable by its owner only.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.errors import ShopbenchError, first_problem
from shopbench.scoring.copies import CopyBook
from shopbench.scoring.weights import ScoreBook

STATE_VERSION = 1
STATE_FILE = "state.json"


class StateError(ShopbenchError):
    """A state file cannot be read, belongs to another neuron, or cannot be written."""


class CatalogGeneration(BaseModel):
    """One secret catalog: its seed, where it is built, and since when it serves."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0, description="generation number, from 0")
    seed: int = Field(ge=0, description="the secret seed (revealed when retired)")
    seed_hash: str = Field(description="sha256 of the seed, as committed on chain")
    products: int = Field(ge=1)
    directory: str = Field(description="the catalog directory")
    started_epoch: int = Field(ge=0, description="epoch the generation began serving")
    committed: bool = Field(default=False, description="its hash is on chain")


class RetiredSeed(BaseModel):
    """A retired generation's seed, published so anyone can rebuild it and re-grade."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    seed: int = Field(ge=0)
    seed_hash: str
    revealed: bool = Field(default=False, description="the seed is on chain")


class RotationState(BaseModel):
    """Where the catalog rotation stands."""

    model_config = ConfigDict(extra="forbid")

    current: CatalogGeneration | None = None
    pending: CatalogGeneration | None = Field(
        default=None, description="the next generation while it is being built"
    )
    retired: list[RetiredSeed] = Field(default_factory=list)


class ValidatorState(BaseModel):
    """Everything a validator restores on start."""

    model_config = ConfigDict(extra="forbid")

    version: int = STATE_VERSION
    hotkey: str
    netuid: int = Field(ge=0)
    round: int = Field(default=0, ge=0, description="rounds completed")
    scores: ScoreBook = Field(default_factory=ScoreBook)
    copies: CopyBook = Field(
        default_factory=CopyBook, description="each miner's recent decisions (copy groups)"
    )
    rotation: RotationState = Field(default_factory=RotationState)
    last_weight_block: int | None = Field(default=None, description="block of the last weights")
    last_weights: dict[int, float] = Field(default_factory=dict)
    saved_at: float = Field(default=0.0, description="unix time of the save")


def save_state(state: ValidatorState, path: Path) -> None:
    """Write `state` to `path` atomically (see the module docstring); StateError on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stamped = state.model_copy(update={"saved_at": time.time()})
    data = stamped.model_dump_json(indent=1).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _sync_dir(path.parent)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StateError(f"{path}: cannot save the validator state ({e.strerror or e})") from None


def _sync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (POSIX; a no-op where directories can't be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the rename itself has happened
    finally:
        os.close(fd)


def load_state(path: Path, hotkey: str, netuid: int) -> ValidatorState | None:
    """The state saved at `path`, or None when there is none yet.

    StateError when the file is unreadable or not a state, or was saved by another hotkey
    or for another netuid (a copied directory would otherwise mix two validators' scores).
    """
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise StateError(f"{path}: unreadable validator state ({e})") from None
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != STATE_VERSION:
        raise StateError(f"{path}: state version {version!r}; this validator reads {STATE_VERSION}")
    try:
        state = ValidatorState.model_validate(raw)
    except ValidationError as e:
        raise StateError(f"{path}: invalid validator state at {first_problem(e)}") from None
    if state.hotkey != hotkey or state.netuid != netuid:
        raise StateError(
            f"{path}: saved by hotkey {state.hotkey} on netuid {state.netuid}, not {hotkey} on "
            f"netuid {netuid}; use another --neuron.full_path"
        )
    return state
