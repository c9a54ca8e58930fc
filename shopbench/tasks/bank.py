"""Which tasks a round plays: a secret bank per epoch, drawn round by round.

For each (catalog generation, epoch) the validator generates a bank of tasks from the
epoch's rotation bucket, ``per_intent`` per intent, with a sampling seed derived from its
secret catalog seed — so nobody can predict them — and caches it as a JSONL task file
(a restart reuses it; the same seed gives the same bank anyway). Each round takes the next
tasks from a secret permutation of each intent's bank, intents interleaved, and every
miner of the round plays exactly that list.

The validator's loop (``template/base/validator.py``) keeps one bank per catalog generation;
``shopbench verify`` regenerates the same banks from a revealed seed to find an archived
episode's task.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from pathlib import Path

from shopbench.errors import ShopbenchError
from shopbench.records.task import Intent
from shopbench.tasks.errors import TaskError
from shopbench.tasks.model import Task

log = logging.getLogger(__name__)


def derived_seed(secret: int, purpose: str) -> int:
    """A 63-bit seed derived from `secret` for `purpose` (reveals nothing about `secret`)."""
    mac = hmac.new(str(secret).encode(), purpose.encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:8], "big") >> 1


def _rank(secret: int, purpose: str, task_id: str) -> bytes:
    return hmac.new(str(secret).encode(), f"{purpose}/{task_id}".encode(), hashlib.sha256).digest()


class TaskBank:
    """Task banks of one catalog generation, cached under `directory`."""

    def __init__(
        self,
        directory: Path,
        catalog_dir: Path,
        generation: int,
        secret: int,
        intents: Sequence[Intent],
        per_intent: int,
    ) -> None:
        self.directory = directory
        self.catalog_dir = catalog_dir
        self.generation = generation
        self.secret = secret
        self.intents = list(intents)
        self.per_intent = per_intent
        self._banks: dict[int, list[Task]] = {}

    def _path(self, epoch: int) -> Path:
        intents = "-".join(self.intents)
        name = f"bank-g{self.generation}-e{epoch}-{intents}-{self.per_intent}.jsonl"
        return self.directory / name

    def bank(self, epoch: int) -> list[Task]:
        """The epoch's bank: read from its cache file, else generated and cached.

        TaskError when the catalog yields no task at all for the epoch's bucket.
        """
        if epoch in self._banks:
            return self._banks[epoch]
        from shopbench.tasks.io import read_tasks, write_tasks

        path = self._path(epoch)
        tasks: list[Task] | None = None
        if path.exists():
            try:
                tasks = list(read_tasks(path, strict=True).tasks)
            except ShopbenchError as e:  # a damaged cache is regenerated, never trusted
                log.warning("task bank %s unreadable (%s); generating it again", path, e)
        if not tasks:
            tasks = self._generate(epoch)
            write_tasks(path, tasks)  # atomic: a temp file renamed into place
        self._banks = {epoch: tasks}  # one epoch at a time: the old bucket is retired
        return tasks

    def _generate(self, epoch: int) -> list[Task]:
        from shopbench.tasks.generate import BuildConfig, build_tasks

        seed = derived_seed(self.secret, f"shopbench/tasks/g{self.generation}/e{epoch}")
        result = build_tasks(
            BuildConfig(
                catalog=self.catalog_dir, intents=self.intents, n=self.per_intent,
                split="live", epoch=epoch, seed=seed,
            )
        )  # fmt: skip
        for report in result.reports:
            if report.unsupported:
                log.warning("epoch %d: %s tasks: %s", epoch, report.intent, report.unsupported)
        if not result.tasks:
            raise TaskError(
                f"catalog {self.catalog_dir} gives no task in epoch {epoch}'s rotation bucket"
            )
        log.info("epoch %d: task bank of %d tasks", epoch, len(result.tasks))
        return result.tasks

    def draw(self, epoch: int, round_index: int, k: int) -> list[Task]:
        """The `k` tasks of round `round_index`: the next ones of each intent's secret
        permutation, intents interleaved (fewer when the bank is smaller than `k`)."""
        tasks = self.bank(epoch)
        purpose = f"shopbench/order/g{self.generation}/e{epoch}"
        by_intent: dict[str, list[Task]] = {}
        for t in tasks:
            by_intent.setdefault(t.intent, []).append(t)
        for group in by_intent.values():
            group.sort(key=lambda t: _rank(self.secret, purpose, t.id))
        intents = [i for i in self.intents if i in by_intent]
        share = -(-k // len(intents))  # tasks per intent per round, rounded up
        chosen: list[Task] = []
        seen: set[str] = set()
        for j in range(share):
            for intent in intents:
                group = by_intent[intent]
                task = group[(round_index * share + j) % len(group)]
                if task.id not in seen and len(chosen) < k:
                    seen.add(task.id)
                    chosen.append(task)
        return chosen
