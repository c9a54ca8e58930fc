"""`shopbench traces pull`: a validator's shards fetched from S3 or a folder, every manifest's
signature and every shard's sha256 checked, partial downloads resumed, held shards skipped,
failures quarantined; what is pulled loads in DuckDB and Hugging Face datasets.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
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

from shopbench.archive.errors import UnknownValidator
from shopbench.archive.manifest import SHARD_GLOB, manifest_path
from shopbench.archive.pull.run import pull
from shopbench.archive.pull.source import PullFilters
from shopbench.archive.remote import RemoteTarget, ShardUploader
from shopbench.archive.shards import read_shard
from shopbench.archive.store import EMBARGO_FILE, EmbargoState
from shopbench.records.trajectory import Trajectory


@pytest.fixture(scope="module")
def episodes(env: Any, catalog: Any) -> list[Trajectory]:
    return play_episodes(env, catalog)


def publish(root: Path, target: RemoteTarget) -> None:
    report = asyncio.run(ShardUploader(root, target, is_public=everyone_public).sync())
    assert not report.failed


def traces(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``shopbench traces ARGS`` as a user does, with S3 credentials in the environment."""
    return subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", *args],
        capture_output=True, text=True, env={**os.environ, **CREDENTIALS}, timeout=300,
    )  # fmt: skip


def last_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_pulled_shards_verify_and_load_in_duckdb_and_datasets(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = make_archive(root, episodes)
    target = s3_target(s3, "roundtrip")
    publish(root, target)
    out = tmp_path / "pulled"
    args = ("pull", "--from", target.url, "--endpoint-url", s3, "--validator", SIGNER.hotkey,
            "--out", str(out), "--json")  # fmt: skip
    done = traces(*args)
    assert done.returncode == 0, done.stderr
    pulled = last_json(done)
    assert sorted(pulled["fetched"]) == sorted(m.path for m in manifests)
    assert pulled["rows"] == 24 and pulled["quarantined"] == {}
    for m in manifests:
        assert (out / m.path).read_bytes() == (root / m.path).read_bytes()
        assert (out / manifest_path(m.path)).read_bytes() == m.to_bytes()
    got = [t for m in manifests for t in read_shard(out / m.path)]
    assert sorted(got, key=lambda t: t.episode_id) == sorted(episodes, key=lambda t: t.episode_id)

    import duckdb

    rows = duckdb.sql(
        f"select count(*), count(distinct episode_id), count(distinct intent) from "
        f"read_parquet('{out}/{SHARD_GLOB}', hive_partitioning=true)"
    ).fetchall()
    assert rows == [(24, 24, 2)]

    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(out / SHARD_GLOB), split="train")
    assert sorted(ds["episode_id"]) == sorted(t.episode_id for t in episodes)

    again = traces(*args)
    assert again.returncode == 0, again.stderr
    held = last_json(again)
    assert held["fetched"] == [] and sorted(held["held"]) == sorted(m.path for m in manifests)


def test_a_tampered_shard_and_a_tampered_manifest_fail_pull_into_quarantine(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = make_archive(root, episodes)
    target = s3_target(s3, "tampered")
    publish(root, target)
    fs, base = target.open()
    bad_shard, bad_manifest = manifests[0].path, manifests[1].path
    data = bytearray(fs.cat_file(f"{base}/{bad_shard}"))
    data[len(data) // 2] ^= 0xFF
    fs.pipe_file(f"{base}/{bad_shard}", bytes(data))
    doc = json.loads(fs.cat_file(f"{base}/{manifest_path(bad_manifest)}"))
    doc["rows"] += 1
    fs.pipe_file(f"{base}/{manifest_path(bad_manifest)}", json.dumps(doc).encode())

    out = tmp_path / "pulled"
    done = traces(
        "pull", "--from", target.url, "--endpoint-url", s3, "--validator", SIGNER.hotkey,
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1
    assert f"quarantined {bad_shard}: shard fails its signed manifest" in done.stderr
    assert "sha256" in done.stderr
    assert f"quarantined {bad_manifest}: manifest signature is not" in done.stderr
    for rel in (bad_shard, bad_manifest):
        assert not (out / rel).exists() and not (out / manifest_path(rel)).exists()
        reason = out / "_quarantine" / manifest_path(rel)
        assert reason.with_name(reason.name + ".reason.txt").read_text().startswith(rel)
    assert (out / "_quarantine" / bad_shard).read_bytes() == bytes(data)
    for m in manifests[2:]:
        assert (out / m.path).read_bytes() == (root / m.path).read_bytes()


def test_a_manifest_signed_by_another_key_is_not_the_validators(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    # A forger publishes shards in the validator's partition, signed with their own key.
    root = tmp_path / "forged"
    make_archive(root, episodes, signer=OTHER)
    out = tmp_path / "pulled"
    report = pull(RemoteTarget(url=str(root)), out, validator=SIGNER.hotkey, verifier=VERIFIER)
    assert report.fetched == [] and len(report.quarantined) == 4
    assert all("signature" in r for r in report.quarantined.values())
    assert not list(out.glob(SHARD_GLOB))


def test_an_interrupted_download_resumes_and_a_bad_partial_is_fetched_again(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    source = tmp_path / "published"
    manifests = make_archive(source, episodes)
    out = tmp_path / "pulled"
    good, bad = manifests[0].path, manifests[1].path
    # What an interrupted pull leaves: the first bytes of a shard under <shard>.partial.
    for rel, prefix in ((good, (source / good).read_bytes()), (bad, b"\0" * 1000)):
        partial = out / f"{rel}.partial"
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(prefix[: len(prefix) // 2])
    report = pull(
        RemoteTarget(url=f"file://{source}"), out, validator=SIGNER.hotkey, verifier=VERIFIER,
        chunk_bytes=1024,
    )  # fmt: skip
    assert report.quarantined == {} and len(report.fetched) == 4
    assert report.resumed == [good]
    for m in manifests:
        assert (out / m.path).read_bytes() == (source / m.path).read_bytes()
    assert not list(out.rglob("*.partial"))


def test_filters_pick_shards_by_block_and_intent(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    source = tmp_path / "published"
    manifests = make_archive(source, episodes)  # blocks 1000..1050, ..., 1180..1230
    late = pull(
        RemoteTarget(url=str(source)), tmp_path / "late", validator=SIGNER.hotkey,
        verifier=VERIFIER, filters=PullFilters(since_block=1150),
    )  # fmt: skip
    assert sorted(late.fetched) == sorted(m.path for m in manifests[2:]) and late.filtered == 2
    shops = pull(
        RemoteTarget(url=str(source)), tmp_path / "shop", validator=SIGNER.hotkey,
        verifier=VERIFIER, filters=PullFilters(intents=("shop",)),
    )  # fmt: skip
    assert shops.rows == 12 and all("/intent=shop/" in p for p in shops.fetched)
    # a validator the source holds nothing of is an error naming the ones it holds
    with pytest.raises(UnknownValidator, match=f"it holds: {SIGNER.hotkey}"):
        pull(RemoteTarget(url=str(source)), tmp_path / "none", validator=OTHER.hotkey,
             verifier=VERIFIER)  # fmt: skip


def test_pulling_a_stores_own_folder_leaves_its_live_bucket_out(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    source = tmp_path / "store"
    manifests = make_archive(source, episodes)  # shard i holds epoch i
    (source / EMBARGO_FILE).write_text(EmbargoState(epoch=3, bucket=0).model_dump_json())
    report = pull(RemoteTarget(url=str(source)), tmp_path / "out", validator=SIGNER.hotkey,
                  verifier=VERIFIER)  # fmt: skip
    assert report.embargoed == 1
    assert sorted(report.fetched) == sorted(m.path for m in manifests[:3])


def test_embargoed_shards_are_never_uploaded(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = make_archive(root, episodes)  # shard i holds epoch i
    embargo = EmbargoState(epoch=3, bucket=1)  # epoch 3's bucket is still being asked
    target = s3_target(s3, "embargo")
    done = traces("publish", str(root), "--to", target.url, "--endpoint-url", s3, "--json")
    assert done.returncode == 0, done.stderr
    assert len(last_json(done)["uploaded"]) == 4  # no embargo recorded: all public
    target = s3_target(s3, "embargo-live")
    (root / EMBARGO_FILE).write_text(embargo.model_dump_json())
    done = traces("publish", str(root), "--to", target.url, "--endpoint-url", s3, "--json")
    assert done.returncode == 0, done.stderr
    report = last_json(done)
    assert report["embargoed"] == [manifests[3].path] and len(report["uploaded"]) == 3
    fs, base = target.open()
    assert not fs.exists(f"{base}/{manifests[3].path}")
    assert not fs.exists(f"{base}/{manifest_path(manifests[3].path)}")


def test_a_validator_the_source_does_not_hold_exits_2_naming_the_ones_it_does(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "published"
    make_archive(root, episodes)
    (root / "_manifests" / "validator=<b>x y").mkdir()  # a name no hotkey has: not shown
    stranger = "5" + "F" * 47
    done = traces("pull", "--from", str(root), "--validator", stranger,
                  "--out", str(tmp_path / "pulled"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert f"holds nothing of validator {stranger}" in said
    assert f"it holds: {SIGNER.hotkey}" in said and "<b>" not in said
    assert not (tmp_path / "pulled").exists() or not list((tmp_path / "pulled").rglob("*.parquet"))
