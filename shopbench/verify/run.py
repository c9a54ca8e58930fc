"""Verifying an archive: every episode replayed, graded, judged and scored again.

:func:`read_archive` reads the records through the archive's one verified reader
(:func:`~shopbench.archive.reader.list_archive`; with :class:`~shopbench.archive.reader.Trust`
only the named validator's signed shards, bytes checked). :func:`verify_records` replays and
re-grades each record against an environment on the verifier's own catalog, with tasks from
a :class:`TaskSource`, and reports every field that did not reproduce.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from shopbench.archive.errors import SinkError
from shopbench.archive.reader import Trust, list_archive
from shopbench.archive.shards import read_shard
from shopbench.archive.signing import verify_trajectory
from shopbench.env.env import ShoppingEnv
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.template_penalty import MinHasher
from shopbench.tasks.model import Task
from shopbench.verify.config import VerifyConfig
from shopbench.verify.diff import differences, short
from shopbench.verify.errors import VerifyError
from shopbench.verify.regrade import expected_record, rubric_version
from shopbench.verify.replay import (
    RevealedSeed,
    replay_differences,
    replay_episode,
    task_differences,
)
from shopbench.verify.report import Mismatch, VerifyReport
from shopbench.verify.rounds import Judged, RoundKey, factor_differences, round_key


class TaskSource(Protocol):
    """Where the verifier finds the task an archived episode was played on."""

    def task(self, record: Trajectory) -> Task | None:
        """The task `record` names (its id, from the epoch's bank it was drawn from), or None."""
        ...


class TaskIndex:
    """Tasks by id, from task files or a list."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self.tasks: dict[str, Task] = {}
        for t in tasks:
            self.tasks.setdefault(t.id, t)

    def task(self, record: Trajectory) -> Task | None:
        """The task with the record's task id."""
        return self.tasks.get(record.task_id)


def read_archive(
    root: str | Path, trust: Trust | None = None
) -> tuple[list[Trajectory], list[str]]:
    """Every record the verified reader lists under `root` (with `trust`, only that
    validator's signed shards, bytes checked), and each shard left out as "path: reason".
    A listed shard that cannot be read (a row over the record's limits, say) is left out
    too, and the rest read. VerifyError when `root` is no archive folder."""
    try:
        listing = list_archive(root, trust=trust, check_bytes=True)
    except SinkError as e:
        raise VerifyError(f"--archive: {e}") from None
    records: list[Trajectory] = []
    left_out = [f"{d.path}: {d.reason}" for d in listing.dropped]
    for ref in listing.shards:
        try:
            records.extend(read_shard(ref.file))
        except SinkError as e:
            left_out.append(f"{ref.manifest.path}: {e}")
    return records, left_out


class _Episode:
    """The mismatches of one episode, capped."""

    def __init__(self, episode_id: str, cap: int) -> None:
        self.episode_id = episode_id
        self.cap = cap
        self.found: list[Mismatch] = []
        self.more = 0
        self.derived = False  # replayed under its own key

    def add(self, diffs: Iterable[tuple[str, Any, Any]]) -> None:
        for field, expected, got in diffs:
            if len(self.found) < self.cap:
                self.found.append(Mismatch(
                    episode_id=self.episode_id, field=field, expected=short(expected),
                    got=short(got),
                ))  # fmt: skip
            else:
                self.more += 1

    def mismatches(self) -> list[Mismatch]:
        if not self.more:
            return self.found
        more = Mismatch(episode_id=self.episode_id, field="…", expected="",
                        got=f"{self.more} more mismatches")  # fmt: skip
        return [*self.found, more]


def _check(
    record: Trajectory,
    env: ShoppingEnv,
    tasks: TaskSource,
    consensus: ConsensusConfig,
    trust: Trust | None,
    seen: _Episode,
    revealed: RevealedSeed | None = None,
    derived_keys: bool = False,
) -> Judged | None:
    """Replay and re-grade one record into `seen`; what the round check needs, or None."""
    if trust is not None:
        sig = record.signature
        if (
            sig is None
            or sig.signer != trust.validator
            or not verify_trajectory(record, trust.verifier)
        ):
            seen.add([("signature", trust.validator, sig.signer if sig else None)])
    task = tasks.task(record)
    if task is None:
        seen.add([("task_id", record.task_id, "(not among the tasks given or regenerated)")])
        return None
    seen.add(task_differences(record, task))
    key = revealed.key_of(record) if revealed is not None else None
    seen.derived = key is not None
    if key is None and derived_keys:
        seen.add([("episode_id", record.episode_id,
                   "(no key derived from the revealed seed gives this id)")])  # fmt: skip
    replayed = replay_episode(env, task, record, key)
    seen.add(replay_differences(record, replayed))
    if record.judge is None:
        seen.add([("judge", None, "(the record is not judged)")])
        return None
    unjudged = replayed.applied_to(record)
    try:
        expected, judged = expected_record(unjudged, record.judge, consensus)
    except VerifyError as e:  # a rubric version this release does not package
        seen.add([("judge.rubric_version", rubric_version(record.judge), str(e))])
        return None
    assert expected.judge is not None  # expected_record judges it
    seen.add(differences(
        record.judge.model_dump(mode="json"), expected.judge.model_dump(mode="json"), "judge"
    ))  # fmt: skip
    seen.add(differences(record.score, expected.score, "score"))
    return Judged(record=record, replayed=unjudged, judgement=judged)


def _rounds(
    judged: Sequence[Judged], consensus: ConsensusConfig
) -> tuple[int, Iterator[tuple[str, str, Any, Any]]]:
    groups: dict[RoundKey, list[Judged]] = {}
    for j in judged:
        key = round_key(j.record)
        if key is not None:
            groups.setdefault(key, []).append(j)
    hasher = MinHasher(consensus.template.permutations, consensus.template.seed)

    def found() -> Iterator[tuple[str, str, Any, Any]]:
        for key in sorted(groups, key=lambda k: (k[0] or "", k[1], k[2] or -1)):
            yield from factor_differences(groups[key], consensus, hasher)

    return len(groups), found()


def verify_records(
    records: Sequence[Trajectory],
    env: ShoppingEnv,
    tasks: TaskSource,
    *,
    archive: str = "",
    left_out: Sequence[str] = (),
    trust: Trust | None = None,
    consensus: ConsensusConfig | None = None,
    config: VerifyConfig | None = None,
    progress: Callable[[int], None] | None = None,
    revealed: RevealedSeed | None = None,
) -> VerifyReport:
    """Replay, re-grade and re-score every record against `env` (see the module doc); the
    report names every (episode, field) that did not reproduce. With `trust`, each record's
    own signature must be the named validator's; `progress` is told of each record done.
    With `revealed`, each episode whose key that seed derives is replayed under it."""
    consensus = consensus or ConsensusConfig()
    config = config or VerifyConfig()
    started = time.perf_counter()
    seen: dict[str, _Episode] = {}
    judged: list[Judged] = []
    for record in records:
        episode = _Episode(record.episode_id, config.max_per_episode)
        if record.episode_id in seen:
            episode = seen[record.episode_id]
            episode.add([("episode_id", "(once)", "(archived twice)")])
        seen[record.episode_id] = episode
        done = _check(record, env, tasks, consensus, trust, episode, revealed,
                      config.derived_keys)  # fmt: skip
        if done is not None:
            judged.append(done)
        if progress is not None:
            progress(1)
    groups = 0
    if config.rounds:
        # A round with an episode that could not be judged again cannot be scored again.
        done_ids = {id(j.record) for j in judged}
        broken = {round_key(r) for r in records if id(r) not in done_ids}
        groups, found = _rounds([j for j in judged if round_key(j.record) not in broken],
                                consensus)  # fmt: skip
        for episode_id, field, expected, got in found:
            seen[episode_id].add([(field, expected, got)])
    mismatches = [m for e in seen.values() for m in e.mismatches()]
    bad = sum(1 for e in seen.values() if e.found)
    return VerifyReport(
        archive=archive,
        catalog=str(env.catalog.path),
        catalog_seed_hash=env.catalog.manifest.seed_hash,
        episodes=len(seen),
        verified=len(seen) - bad,
        mismatched=bad,
        mismatches=mismatches,
        left_out=list(left_out),
        signatures_checked=trust is not None,
        keys_derived=sum(e.derived for e in seen.values()),
        rounds_checked=groups,
        seconds=round(time.perf_counter() - started, 3),
    )
