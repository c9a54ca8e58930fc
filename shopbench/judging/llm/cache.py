"""Verdicts remembered by (trajectory hash, judge version).

A trajectory judged once is never sent again to the same judge: re-grading an archive,
recomputing a round after a restart, or the same episode seen by calibration twice costs
nothing. The key covers everything that could change the verdict — the judged content's
hash and the judge id with the release's fingerprint — so a new prompt, rubric, model or
budget misses the cache instead of reading a stale verdict. Only verdicts are cached, never
failures.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from shopbench.records.verdict import Verdict


def cache_key(trajectory_hash: str, judge_version: str) -> str:
    """The cache key of one trajectory under one judge version (hex sha256)."""
    return hashlib.sha256(f"{judge_version}\n{trajectory_hash}".encode()).hexdigest()


class VerdictCache(Protocol):
    """Where verdicts are kept."""

    def get(self, key: str) -> Verdict | None:
        """The verdict stored under `key`, or None."""
        ...

    def put(self, key: str, verdict: Verdict) -> None:
        """Store `verdict` under `key`."""
        ...


class MemoryCache:
    """An in-process cache holding the most recent `max_entries` verdicts."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[str, Verdict] = OrderedDict()

    def get(self, key: str) -> Verdict | None:
        """The verdict under `key` (now the most recently used), or None."""
        verdict = self._items.get(key)
        if verdict is not None:
            self._items.move_to_end(key)
        return verdict

    def put(self, key: str, verdict: Verdict) -> None:
        """Store `verdict`, dropping the least recently used entry when full."""
        self._items[key] = verdict
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class DiskCache:
    """One JSON file per verdict under a directory, written atomically; survives restarts.

    A file that cannot be read back (cut short, edited, from another verdict layout) is a
    miss, never an error.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        """The verdict stored under `key`, or None (also for an unreadable file)."""
        try:
            return Verdict.model_validate_json(self._path(key).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None

    def put(self, key: str, verdict: Verdict) -> None:
        """Write `verdict` under `key` (a temporary file renamed into place)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(verdict.model_dump_json().encode("utf-8"))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
