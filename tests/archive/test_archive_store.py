"""The archive store: group commit, validation at write, rolling, recovery, the embargo.

The crash test runs a writer in a child process (this file, run as a script), kills it with
SIGKILL at random moments of a 10,000-episode ingest, and after each restart checks that the
store holds every acknowledged episode exactly once.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.keyed_hash import KeyedHash

from shopbench.archive.errors import RecordRefused, SinkError
from shopbench.archive.manifest import verify_manifest
from shopbench.archive.shards import iter_manifests, verify_shard
from shopbench.archive.sink import ArchiveSink
from shopbench.archive.store import (
    EMBARGO_FILE,
    QUARANTINE_DIR,
    WAL_DIR,
    ArchiveStore,
    EmbargoPolicy,
    load_embargo,
    read_store,
)
from shopbench.records.task import INTENTS
from shopbench.records.trajectory import Trajectory

HERE = Path(__file__).resolve()
TOTAL = 10_000


VALIDATOR = "5Validator"

def _trajectory(i: int, **over: Any) -> Trajectory:
    intent = INTENTS[i % len(INTENTS)]
    data: dict[str, Any] = {
        "episode_id": f"e{i:05d}", "task_id": f"t{i % 37}", "intent": intent,
        "query": f"query {i}", "split": "live", "agent": "a", "system_prompt_version": "1",
        "tools": [], "messages": [{"role": "user", "content": f"find thing {i}"}],
        "tool_log": [], "recommended": [], "recommended_ids": [], "token_map": {},
        "termination": "turn_limit", "turns": 0, "validator_hotkey": VALIDATOR,
        "miner_uid": i % 7, "block": 1000 + i, "epoch": 2, "bucket": 2,
        "outcome": {"task_id": f"t{i % 37}", "intent": intent, "success": i % 3 == 0,
                    "rule_scores": [], "mean_rule": 0.0, "slots": [], "shops": 0,
                    "matcher": "lexical"},
        "timings": {"started_at": 1_700_000_000 + i, "total_ms": 1, "policy_ms": 0,
                    "env_ms": 0, "grade_ms": 0},
    }  # fmt: skip
    data.update(over)
    return Trajectory.model_validate(data)


def _ids(root: Path) -> Counter[str]:
    return Counter(t.episode_id for t in read_store(root))


def _reopen(root: Path) -> ArchiveStore:
    """Open (recovering) and close the store at `root`, as a restart would."""
    store = ArchiveStore(root, signer=KeyedHash())
    asyncio.run(store.close())
    return store


# -- writing -------------------------------------------------------------------------------


def test_concurrent_puts_share_fsyncs_and_roll_into_verified_partitioned_shards(
    tmp_path: Path,
) -> None:
    async def ingest() -> ArchiveStore:
        store = ArchiveStore(tmp_path, signer=KeyedHash(), roll_rows=150, commit_window_ms=5)
        assert isinstance(store, ArchiveSink)
        counts = await asyncio.gather(*(store.put([_trajectory(i)]) for i in range(400)))
        assert sum(counts) == 400
        await store.close()
        return store

    store = asyncio.run(ingest())
    assert store.commits < 400 / 4  # a commit window shares one fsync among many puts
    assert _ids(tmp_path) == Counter(f"e{i:05d}" for i in range(400))
    manifests = [m for _, m in iter_manifests(tmp_path)]
    assert len(manifests) >= len(INTENTS)  # at least one shard per intent partition
    for m in manifests:
        assert not isinstance(m, SinkError)
        assert verify_manifest(m, KeyedHash(), VALIDATOR)
        assert verify_shard(tmp_path, m) is None
        assert m.path.startswith(f"validator={VALIDATOR}/date=2023-11-14/intent={m.intent}/")
    assert not list((tmp_path / WAL_DIR).iterdir())  # rolled, then the segment removed


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"split": "heldout"}, "held-out split"),
        ({"validator_hotkey": "5Other"}, "names validator 5Other"),
        ({"episode_id": "e00000"}, "appears twice in one batch"),
    ],
)
def test_a_bad_record_refuses_its_whole_batch_with_the_reason(
    tmp_path: Path, bad: dict[str, Any], reason: str
) -> None:
    async def go() -> None:
        store = ArchiveStore(tmp_path, signer=KeyedHash())
        with pytest.raises(RecordRefused, match=reason):
            await store.put([_trajectory(0), _trajectory(1), _trajectory(2, **bad)])
        await store.put([_trajectory(3)])
        await store.close()

    asyncio.run(go())
    assert _ids(tmp_path) == Counter(["e00003"])  # nothing of the refused batch


def test_a_record_mutated_past_validation_is_refused(tmp_path: Path) -> None:
    broken = _trajectory(0).model_copy(update={"turns": -4})

    async def go() -> None:
        store = ArchiveStore(tmp_path, signer=KeyedHash())
        with pytest.raises(RecordRefused, match="e00000.*invalid record"):
            await store.put([broken])
        await store.close()

    asyncio.run(go())
    assert _ids(tmp_path) == Counter()


def test_an_archive_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(SinkError, match="cannot open the archive"):
        ArchiveStore(blocker / "archive", signer=KeyedHash())


# -- recovery ------------------------------------------------------------------------------


def test_a_torn_segment_tail_is_cut_and_acknowledged_records_replayed(tmp_path: Path) -> None:
    async def crash() -> None:  # acknowledged, never closed: only the segment holds them
        store = ArchiveStore(tmp_path, signer=KeyedHash())
        await store.put([_trajectory(i) for i in range(5)])

    asyncio.run(crash())
    (segment,) = (tmp_path / WAL_DIR).iterdir()
    with segment.open("ab") as f:
        f.write(b"\x40\x00\x00\x00\x12\x34")  # a frame header cut short by a kill
    store = _reopen(tmp_path)
    assert store.recovery.torn_bytes == 6
    assert store.recovery.replayed_records == 5
    assert _ids(tmp_path) == Counter(f"e{i:05d}" for i in range(5))


def test_a_segment_replayed_after_its_shards_were_sealed_stores_nothing_twice(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved.wal"
    root = tmp_path / "archive"

    async def go() -> None:
        store = ArchiveStore(root, signer=KeyedHash())
        await store.put([_trajectory(i) for i in range(12)])
        (segment,) = (root / WAL_DIR).iterdir()
        shutil.copy(segment, saved)
        await store.close()
        shutil.copy(saved, segment)  # as if killed after sealing, before removing it

    asyncio.run(go())
    store = _reopen(root)
    assert store.recovery.replayed_records == 12
    assert store.recovery.shards_written == 0
    assert _ids(root) == Counter(f"e{i:05d}" for i in range(12))


def test_untrusted_shards_are_quarantined_with_a_reason_and_the_rest_stay_readable(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        store = ArchiveStore(tmp_path, signer=KeyedHash())
        # two episodes in each intent's partition
        await store.put([_trajectory(i) for i in range(2 * len(INTENTS))])
        await store.close()

    asyncio.run(go())
    manifests = sorted((m for _, m in iter_manifests(tmp_path)), key=lambda m: m.path)
    altered, orphan = manifests[0], manifests[1]
    data = bytearray((tmp_path / altered.path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / altered.path).write_bytes(bytes(data))
    (tmp_path / orphan.manifest_path()).unlink()  # a shard whose manifest never landed

    store = _reopen(tmp_path)
    reasons = "\n".join(store.recovery.quarantined)
    assert f"{altered.path}: {altered.path}: sha256" in reasons
    assert f"{orphan.path}: no manifest" in reasons
    quarantined = list((tmp_path / QUARANTINE_DIR).rglob("*.reason.txt"))
    assert len(quarantined) == 3  # the altered shard, its manifest, the orphan
    assert not (tmp_path / altered.path).exists()
    assert len(_ids(tmp_path)) == 2 * (len(INTENTS) - 2)  # the untouched partitions' rows


# -- the embargo ---------------------------------------------------------------------------


def test_the_live_bucket_is_embargoed_until_a_later_epoch_retires_it(tmp_path: Path) -> None:
    async def go() -> ArchiveStore:
        store = ArchiveStore(tmp_path, signer=KeyedHash())
        await store.put([_trajectory(i, epoch=5, bucket=1) for i in range(4)])
        assert store.embargo_view().live == {5: 1}
        await store.flush()
        assert not any(store.is_public(m) for _, m in iter_manifests(tmp_path))  # type: ignore[arg-type]
        await store.put([_trajectory(i, epoch=6, bucket=2) for i in range(4, 8)])
        await store.close()
        return store

    store = asyncio.run(go())
    assert store.embargo_view().live == {6: 2}
    assert load_embargo(tmp_path).epoch == 6  # readers of the root see the same
    public = {m.epoch_max for _, m in iter_manifests(tmp_path) if store.is_public(m)}  # type: ignore[union-attr,arg-type]
    assert public == {5}


def test_a_store_opened_with_the_embargo_lifted_says_so_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ArchiveStore(tmp_path, signer=KeyedHash(), embargo=EmbargoPolicy(lifted=True))
    assert "ARCHIVE EMBARGO LIFTED" in capsys.readouterr().err
    # once, in a process whose logging is not configured (as `shopbench arena` runs it)
    done = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path; from support.keyed_hash import "
         "KeyedHash; from shopbench.archive.store import ArchiveStore, EmbargoPolicy; "
         f"ArchiveStore(Path({str(tmp_path / 'once')!r}), signer=KeyedHash(), "
         "embargo=EmbargoPolicy(lifted=True))"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(HERE.parents[1])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("ARCHIVE EMBARGO LIFTED") == 1, done.stderr
    assert store.embargo_view().lifted and load_embargo(tmp_path).lifted
    asyncio.run(store.close())
    ArchiveStore(tmp_path, signer=KeyedHash())  # a validator's store: never lifted
    assert not load_embargo(tmp_path).lifted
    assert (tmp_path / EMBARGO_FILE).exists()


def test_put_waits_while_too_many_sealed_segments_wait_for_their_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backpressure: with the roll held up, puts past `max_sealed` sealed segments wait (what
    they wrote is durable already), and go on once the shards are sealed."""
    release = threading.Event()
    roll = ArchiveStore._roll_pending

    def slow_roll(self: ArchiveStore, *args: Any) -> int:
        assert release.wait(30), "the test never released the roll"
        return roll(self, *args)

    monkeypatch.setattr(ArchiveStore, "_roll_pending", slow_roll)

    async def go() -> None:
        store = ArchiveStore(tmp_path, signer=KeyedHash(), roll_rows=2, max_sealed=1)
        await store.put([_trajectory(0), _trajectory(1)])  # a full segment, rolling
        second = asyncio.create_task(store.put([_trajectory(2), _trajectory(3)]))
        await asyncio.sleep(0.3)
        assert not second.done()  # a second sealed segment waits: the put is held back...
        assert store.acknowledged == 4  # ...though its records are already durable
        release.set()
        assert await asyncio.wait_for(second, 30) == 2
        await store.close()

    asyncio.run(go())
    assert sorted(t.episode_id for t in read_store(tmp_path)) == [f"e{i:05d}" for i in range(4)]


# -- SIGKILL during a 10,000-episode ingest -------------------------------------------------


def _writer(root: Path, start: int) -> None:
    """Ingest episodes start..TOTAL-1 from four concurrent producers in batches of 10,
    printing each batch's ids once put() has acknowledged it."""

    async def main() -> None:
        store = ArchiveStore(
            root, signer=KeyedHash(), roll_rows=400, roll_seconds=0.2, commit_window_ms=2
        )
        print("READY", flush=True)
        queue = list(range(start, TOTAL))

        async def producer(k: int) -> None:
            batch_starts = range(k * 10, len(queue), 40)
            for b in batch_starts:
                batch = [_trajectory(i) for i in queue[b : b + 10]]
                await store.put(batch)
                sys.stdout.write(" ".join(t.episode_id for t in batch) + "\n")
                sys.stdout.flush()

        await asyncio.gather(*(producer(k) for k in range(4)))
        await store.close()
        print("DONE", flush=True)

    asyncio.run(main())


def _run_writer(root: Path, start: int, kill_after: float | None) -> tuple[set[str], bool]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE), "writer", str(root), str(start)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
             "PYTHONPATH": str(HERE.parents[1])},  # the suite's support/ package
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                ready.set()
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if kill_after is not None:
        assert ready.wait(60), "the writer never opened its store"
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=300)
    reader.join(timeout=30)
    done = any(line.strip() == "DONE" for line in lines)
    acked = {i for line in lines if line.strip() not in ("READY", "DONE") for i in line.split()}
    return acked, done


def test_sigkill_at_random_moments_loses_nothing_acknowledged_and_stores_nothing_twice(
    tmp_path: Path,
) -> None:
    rng = random.Random(15)
    acked: set[str] = set()
    start = kills = 0
    for kill_after in [rng.uniform(0.05, 0.8) for _ in range(4)] + [None]:
        kills += kill_after is not None
        got, done = _run_writer(tmp_path, start, kill_after)
        acked |= got
        store = _reopen(tmp_path)  # the restart: recover, roll what the segment held
        found = _ids(tmp_path)
        assert max(found.values(), default=1) == 1, "an episode stored twice"
        lost = sorted(acked - set(found))
        assert not lost, f"lost acknowledged episodes: {lost[:5]}"
        # what is stored and unacknowledged was in flight at a kill: at most the batches
        # the four producers had handed to put() each time
        assert len(set(found) - acked) <= 40 * kills
        assert store.recovery.quarantined == [] or kill_after is not None
        if kill_after is None:
            assert done
        start = max(int(i[1:]) for i in found) + 1 if found else 0
    assert len(found) > TOTAL * 0.9
    assert f"e{TOTAL - 1:05d}" in found


if __name__ == "__main__" and sys.argv[1:2] == ["writer"]:
    _writer(Path(sys.argv[2]), int(sys.argv[3]))
