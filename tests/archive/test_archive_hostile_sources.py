"""Hostile archive sources: names that try to leave the destination, shards that never end,
withheld shards, rolled-back manifests and heads, a missing shard among good ones, and
local folders holding shards another key signed. Each against a real HTTP server, a real
S3 server (moto) or a folder, through `pull` and the commands a researcher runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from support.hostile_source import Lies, hostile_source
from support.object_store import (
    CREDENTIALS,
    OTHER,
    SIGNER,
    VERIFIER,
    everyone_public,
    make_archive,
    play_episodes,
    s3_target,
)

from shopbench.archive.errors import UnsafePath
from shopbench.archive.head import head_path, publish_head, read_local_head
from shopbench.archive.manifest import manifest_path
from shopbench.archive.paths import inside, shard_path
from shopbench.archive.pull.run import pull
from shopbench.archive.pull.source import PullLimits
from shopbench.archive.reader import Trust, list_archive
from shopbench.archive.remote import RemoteTarget, ShardUploader
from shopbench.archive.shards import write_shard
from shopbench.archive.store import EMBARGO_FILE, EmbargoState
from shopbench.records.trajectory import Trajectory

HK = SIGNER.hotkey


@pytest.fixture(scope="module")
def episodes(env: Any, catalog: Any) -> list[Trajectory]:
    return play_episodes(env, catalog)


def snapshot(top: Path, skip: Path) -> dict[str, str]:
    """Every file under `top` but those under `skip`, with the sha256 of its bytes."""
    found = {}
    for p in top.rglob("*"):
        if p.is_file() and skip not in p.parents:
            found[p.relative_to(top).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found


def headed_archive(root: Path, episodes: list[Trajectory]) -> list[Any]:
    manifests = make_archive(root, episodes)
    publish_head(root, SIGNER, manifests)
    return manifests


def traces(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", *args],
        capture_output=True, text=True, env={**os.environ, **CREDENTIALS}, timeout=300,
    )  # fmt: skip


# -- names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        f"validator={HK}/../../escape.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/../../../../x.parquet",
        f"/validator={HK}/date=2025-01-01/intent=product/a.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/..\\..\\a.parquet",
        f"validator={HK}/date=2025-01-01/intent=product//a.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/.hidden.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/a.parquet/../../b.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/a\x00.parquet",
        f"validator={HK}/date=2025-01-01/intent=product/{'a' * 600}.parquet",
        "_embargo.json",
    ],
)
def test_a_name_that_is_not_a_shard_path_is_refused(name: str) -> None:
    with pytest.raises(UnsafePath):
        shard_path(name)


def test_a_shard_path_is_accepted_and_confined(tmp_path: Path) -> None:
    rel = f"validator={HK}/date=2025-01-01/intent=product/part-1.parquet"
    assert shard_path(rel) == rel
    assert inside(tmp_path, rel) == tmp_path / rel
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePath, match="outside"):
        inside(tmp_path / "out", "link/x.parquet")


def test_s3_keys_with_dot_dot_write_nothing_outside_the_destination(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = headed_archive(root, episodes)
    target = s3_target(s3, "traversal")
    report = asyncio.run(ShardUploader(root, target, is_public=everyone_public).sync())
    assert not report.failed and report.head == 1
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / EMBARGO_FILE).write_text(EmbargoState(epoch=9, bucket=1).model_dump_json())
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    lifted = EmbargoState(lifted=True).model_dump_json().encode()
    keys = [
        f"traversal/_manifests/validator={HK}/../../../victim/_embargo.json",
        f"traversal/_manifests/validator={HK}/date=2025-01-01/intent=product/"
        "../../../../../planted.parquet.json",
        f"traversal/_manifests/validator={HK}/../../../../escape.parquet.json",
    ]
    for key in keys:
        client.put_object(Bucket="traces", Key=key, Body=lifted)
    out = tmp_path / "deep" / "out"
    before = snapshot(tmp_path, out)
    pulled = pull(target, out, validator=HK, verifier=VERIFIER)
    assert snapshot(tmp_path, out) == before  # not one byte outside the destination
    assert len(pulled.rejected) == len(keys) and not pulled.complete
    assert sorted(pulled.fetched) == sorted(m.path for m in manifests)  # the rest delivered
    assert pulled.head is not None and pulled.head.sequence == 1
    for q in (out / "_quarantine").rglob("*") if (out / "_quarantine").exists() else []:
        assert out in q.resolve().parents


def test_an_http_source_cannot_write_outside_nor_past_the_signed_size(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = headed_archive(root, episodes)
    endless = manifests[1]
    listing = f"_manifests/validator={HK}"
    lies = Lies(
        links={listing: [f"/{listing}/../../../outside.parquet.json",
                         f"/{listing}/..%2f..%2f..%2foutside2.parquet.json",
                         "http://127.0.0.2:9/elsewhere.parquet.json"]},
        files={"outside.parquet.json": manifests[0].to_bytes()},
        endless={endless.path},
    )  # fmt: skip
    out = tmp_path / "pulled"
    before = snapshot(tmp_path, out)
    with hostile_source(root, lies) as url:
        report = pull(RemoteTarget(url=url), out, validator=HK, verifier=VERIFIER,
                      limits=PullLimits(quarantine_bytes=1 << 30), chunk_bytes=1 << 14)  # fmt: skip
    assert snapshot(tmp_path, out) == before
    assert "more than the signed" in report.quarantined[endless.path]
    shards = [p for p in out.rglob("*") if p.name.endswith((".parquet", ".partial"))]
    written = sum(p.stat().st_size for p in shards)
    signed = sum(m.bytes for m in manifests)
    assert written <= signed  # nothing beyond the signed sizes, quarantine included
    kept = out / "_quarantine" / endless.path
    assert kept.stat().st_size == endless.bytes
    assert sorted(report.fetched) == sorted(m.path for m in manifests if m is not endless)
    assert not report.complete


def test_the_quarantine_keeps_reasons_but_not_bytes_past_its_cap(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = headed_archive(root, episodes)
    tampered = root / manifests[2].path
    tampered.write_bytes(tampered.read_bytes()[:-8] + b"\0" * 8)
    out = tmp_path / "pulled"
    report = pull(RemoteTarget(url=str(root)), out, validator=HK, verifier=VERIFIER,
                  limits=PullLimits(quarantine_bytes=0))  # fmt: skip
    assert "quarantine is full" in report.quarantined[manifests[2].path]
    assert not (out / "_quarantine" / manifests[2].path).exists()
    assert (out / "_quarantine" / f"{manifest_path(manifests[2].path)}.reason.txt").exists()


# -- withholding, rollback, partial failure ------------------------------------------------


def test_withheld_and_missing_shards_are_named_and_the_rest_delivered(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = headed_archive(root, episodes)
    (root / manifest_path(manifests[2].path)).unlink()  # withheld: the head still names it
    (root / manifests[3].path).unlink()  # listed, but the shard is gone
    out = tmp_path / "pulled"
    done = traces("pull", "--from", str(root), "--validator", HK, "--out", str(out), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["withheld"] == [manifests[2].path]
    assert list(report["failed"]) == [manifests[3].path]
    assert sorted(report["fetched"]) == sorted(m.path for m in manifests[:2])
    assert f"withheld {manifests[2].path}" in done.stderr
    assert f"failed {manifests[3].path}" in done.stderr
    for m in manifests[:2]:
        assert (out / m.path).read_bytes() == (root / m.path).read_bytes()


def test_an_archive_without_a_head_is_pulled_with_a_warning(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    make_archive(root, episodes)
    done = traces("pull", "--from", str(root), "--validator", HK, "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "publishes no signed head" in done.stderr


def _two_versions(episodes: list[Trajectory], tmp_path: Path) -> tuple[Path, Path, str]:
    """An older and a newer source: the same shard path sealed twice (the newer with other
    rows), each with its head (sequence 1 and 2)."""
    old, new = tmp_path / "old", tmp_path / "new"
    first = write_shard(episodes[0:6], old, signer=SIGNER, shard_id="00000001-0000")
    publish_head(old, SIGNER, [first])
    shutil.copytree(old, new)
    (new / first.path).unlink()
    (new / manifest_path(first.path)).unlink()
    second = write_shard(episodes[6:12], new, signer=SIGNER, shard_id="00000001-0000")
    assert second.path == first.path and second.sha256 != first.sha256
    publish_head(new, SIGNER, [second])
    return old, new, first.path


def test_a_rolled_back_manifest_or_head_never_replaces_a_newer_shard(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    old, new, rel = _two_versions(episodes, tmp_path)
    out = tmp_path / "pulled"
    first = pull(RemoteTarget(url=str(new)), out, validator=HK, verifier=VERIFIER)
    assert first.fetched == [rel] and first.complete
    newest = (out / rel).read_bytes()

    back = pull(RemoteTarget(url=str(old)), out, validator=HK, verifier=VERIFIER)
    assert "older than head 2" in (back.head_problem or "")
    assert "signed head 2" in back.quarantined[rel]
    assert (out / rel).read_bytes() == newest

    mixed = tmp_path / "mixed"  # the newest head, an older manifest and shard
    shutil.copytree(new, mixed)
    shutil.copy(old / rel, mixed / rel)
    shutil.copy(old / manifest_path(rel), mixed / manifest_path(rel))
    swapped = pull(RemoteTarget(url=str(mixed)), tmp_path / "fresh", validator=HK,
                   verifier=VERIFIER)  # fmt: skip
    assert "older or substituted" in swapped.quarantined[rel] and not swapped.fetched

    (old / head_path(HK)).unlink()  # no head at all now: the one pulled before still holds
    bare = pull(RemoteTarget(url=str(old)), out, validator=HK, verifier=VERIFIER)
    assert "serves no head" in (bare.head_problem or "") and rel in bare.quarantined
    assert (out / rel).read_bytes() == newest
    assert read_local_head(out, HK).sequence == 2  # type: ignore[union-attr]


def test_without_heads_an_older_manifest_loses_to_the_held_one(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    old, new, rel = _two_versions(episodes, tmp_path)
    for src in (old, new):
        (src / head_path(HK)).unlink()
    out = tmp_path / "pulled"
    assert pull(RemoteTarget(url=str(new)), out, validator=HK, verifier=VERIFIER).fetched == [rel]
    newest = (out / rel).read_bytes()
    back = pull(RemoteTarget(url=str(old)), out, validator=HK, verifier=VERIFIER)
    assert "a rollback" in back.quarantined[rel]
    assert (out / rel).read_bytes() == newest


def test_the_store_signs_a_new_head_as_shards_seal_and_the_uploader_sends_it_last(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    from shopbench.archive.store import ArchiveStore

    root = tmp_path / "store"

    async def go() -> None:
        store = ArchiveStore(root, signer=SIGNER, roll_rows=6, fsync=False)
        await store.put(episodes[:6])
        await store.flush()  # epoch 0 is live: nothing public yet
        assert read_local_head(root, HK).shards == {}  # type: ignore[union-attr]
        await store.put(episodes[6:12])
        await store.close()

    asyncio.run(go())
    head = read_local_head(root, HK)  # epoch 1's bucket is live: its shard is not in the head
    assert head is not None and head.sequence == 2 and len(head.shards) == 1
    embargo = EmbargoState.model_validate_json((root / EMBARGO_FILE).read_bytes())
    target = s3_target(s3, "store-head")
    sent = asyncio.run(ShardUploader(root, target, is_public=embargo.is_public).sync())
    assert sent.head == 2 and len(sent.embargoed) == 1
    pulled = pull(target, tmp_path / "out", validator=HK, verifier=VERIFIER)
    assert pulled.complete and pulled.head is not None
    assert pulled.head.sequence == 2 and pulled.rows == 6


# -- a local folder is held to the validator's key ------------------------------------------


def forged_folder(episodes: list[Trajectory], root: Path) -> tuple[list[Any], list[Any]]:
    """Real shards by SIGNER, and forged ones: other episodes in SIGNER's partition under a
    manifest OTHER signed, and in OTHER's own partition."""
    real = make_archive(root, episodes[:12] + episodes[:12])[:2]
    for m in list(root.rglob("*.parquet")) + list((root / "_manifests").rglob("*.json")):
        if not any(str(m).endswith(r.path) or str(m).endswith(r.path + ".json") for r in real):
            m.unlink()
    fake = [e.model_copy(update={"episode_id": f"forged-{i}", "miner_uid": 7})
            for i, e in enumerate(episodes[12:18])]  # fmt: skip
    forged = [write_shard(fake, root, signer=OTHER)]
    other = [e.model_copy(update={"validator_hotkey": OTHER.hotkey}) for e in fake]
    forged.append(write_shard(other, root, signer=OTHER))
    return real, forged


def test_a_local_folder_read_with_a_validator_key_drops_what_others_signed(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "folder"
    real, forged = forged_folder(episodes, root)
    listing = list_archive(root, trust=Trust(validator=HK, verifier=VERIFIER))
    assert sorted(r.manifest.path for r in listing.shards) == sorted(m.path for m in real)
    reasons = {d.path: d.reason for d in listing.dropped}
    assert set(reasons) == {m.path for m in forged}
    assert "not signed by validator" in reasons[forged[0].path]
    assert "partition" in reasons[forged[1].path]
    done = traces("query", str(root), "--signed-by", HK, "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    shown = {json.loads(line)["episode_id"] for line in done.stdout.splitlines()}
    assert shown and not any(e.startswith("forged-") for e in shown)
    assert "left out" in done.stderr


def test_serve_with_a_validator_key_serves_only_its_verified_shards(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    from shopbench.traces.api.index import ArchiveIndex

    root = tmp_path / "folder"
    real, forged = forged_folder(episodes, root)
    index = ArchiveIndex(root, trust=Trust(validator=HK, verifier=VERIFIER))
    assert sorted(m.path for m in index.manifests()) == sorted(m.path for m in real)
    assert {d.path for d in index.dropped} == {m.path for m in forged}


def test_curate_with_a_validator_key_drops_a_local_folders_forged_shards(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    from shopbench.archive.signing import sign_trajectory
    from shopbench.cli import main

    root = tmp_path / "folder"
    real = [sign_trajectory(e, SIGNER) for e in episodes[:6]]
    write_shard(real, root, signer=SIGNER)
    forged = [
        sign_trajectory(e.model_copy(update={"episode_id": f"forged-{i}",
                                             "validator_hotkey": OTHER.hotkey}), OTHER)
        for i, e in enumerate(episodes[6:12])
    ]  # fmt: skip
    sealed = write_shard(forged, root, signer=OTHER)
    out = tmp_path / "curated"
    try:
        main(["curate", "--archive", str(root), "--validator", HK, "--out", str(out)])
    except SystemExit as e:  # nothing kept of these unjudged episodes is an error too
        assert e.code in (0, 2)
    report = json.loads((out / "report.json").read_text())
    assert report["episodes_in"] == 12
    validity = report["rules"]["validity"]
    assert validity["dropped"] == 6
    assert any(f"not in validator {HK}'s partition" in why for why in validity["reasons"])
    assert sealed.path.startswith(f"validator={OTHER.hotkey}/")
