"""The uploader: sealed shards go to object storage shard first, manifest second; a failure
never blocks the caller and is retried from the state kept on disk; nothing embargoed leaves.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support.object_store import SIGNER, everyone_public, make_archive, play_episodes, s3_target

from shopbench.archive.errors import RemoteError
from shopbench.archive.manifest import manifest_path
from shopbench.archive.remote import (
    RemoteTarget,
    ShardUploader,
    UploadConfig,
    UploadReport,
    parse_storage_options,
)
from shopbench.archive.shards import write_shard
from shopbench.records.trajectory import Trajectory


@pytest.fixture(scope="module")
def episodes(env: Any, catalog: Any) -> list[Trajectory]:
    return play_episodes(env, catalog)


def test_sealed_shards_reach_s3_byte_for_byte_with_their_manifests(
    s3: str, episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = make_archive(root, episodes)
    target = s3_target(s3, "sealed")
    report = asyncio.run(ShardUploader(root, target, is_public=everyone_public).sync())
    assert sorted(report.uploaded) == sorted(m.path for m in manifests) and not report.failed
    fs, base = target.open()
    for m in manifests:
        assert fs.cat_file(f"{base}/{m.path}") == (root / m.path).read_bytes()
        assert fs.cat_file(f"{base}/{manifest_path(m.path)}") == m.to_bytes()
    again = asyncio.run(ShardUploader(root, target, is_public=everyone_public).sync())
    assert again.uploaded == [] and again.held == 4


def test_a_failed_upload_publishes_no_manifest_and_succeeds_on_a_later_pass(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    manifests = make_archive(root, episodes)
    dest = tmp_path / "mount"
    blocked = dest / manifests[0].path
    blocked.mkdir(parents=True)  # a directory where the shard must go: every put fails
    (blocked / "x").write_text("in the way")
    config = UploadConfig(attempts=2, backoff_s=0.01, interval_s=0.05)
    target = RemoteTarget(url=f"file://{dest}")

    async def until(check: Any) -> None:
        for _ in range(250):
            await asyncio.sleep(0.02)
            if check():
                return

    passes: list[UploadReport] = []

    async def scenario() -> None:
        uploader = ShardUploader(
            root, target, is_public=everyone_public, config=config, on_pass=passes.append
        )
        uploader.start()  # the caller goes on; passes run beside it
        await until(lambda: len(uploader.state().uploaded) + len(uploader.state().failures) == 4)
        state = uploader.state()
        assert manifests[0].path in state.failures and len(state.uploaded) == 3
        assert not (dest / manifest_path(manifests[0].path)).exists()
        assert not list(dest.rglob("*.partial"))  # a failed put leaves nothing behind
        (blocked / "x").unlink()
        blocked.rmdir()
        uploader.notify()
        await until(lambda: len(uploader.state().uploaded) == 4)
        await uploader.close()

    asyncio.run(scenario())
    # Each background pass said what it did: the blocked shard failed until it was cleared,
    # and every shard and every one of its episodes went out once.
    assert sum(len(p.uploaded) for p in passes) == 4
    assert sum(p.episodes for p in passes) == sum(m.rows for m in manifests)
    assert passes[0].failed.keys() == {manifests[0].path} and passes[-1].failed == {}
    assert all(p.error is None for p in passes)
    # A fresh uploader reads the state from disk: all sent, nothing failed, nothing twice.
    fresh = ShardUploader(root, target, is_public=everyone_public)
    assert len(fresh.state().uploaded) == 4 and fresh.state().failures == {}
    for m in manifests:
        assert (dest / m.path).read_bytes() == (root / m.path).read_bytes()
        assert (dest / manifest_path(m.path)).read_bytes() == m.to_bytes()
    assert asyncio.run(fresh.sync()).held == 4


def test_an_unreachable_store_fails_the_pass_without_raising(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    from support.object_store import free_port

    root = tmp_path / "archive"
    write_shard(episodes[:6], root, signer=SIGNER)
    target = RemoteTarget(
        url="s3://traces/down",
        storage_options={
            "endpoint_url": f"http://127.0.0.1:{free_port()}", "key": "k", "secret": "s",
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
        },
    )  # fmt: skip
    config = UploadConfig(attempts=2, backoff_s=0.0)
    uploader = ShardUploader(root, target, is_public=everyone_public, config=config)
    report = asyncio.run(uploader.sync())
    assert report.uploaded == [] and len(report.failed) == 1
    (failure,) = ShardUploader(root, target, is_public=everyone_public).state().failures.values()
    assert failure.attempts == 2 and "connect" in failure.error.lower()


def test_storage_options_and_urls_are_checked() -> None:
    assert parse_storage_options(["anon=true", "region_name=auto"], "https://r2.example") == {
        "anon": True, "region_name": "auto", "endpoint_url": "https://r2.example",
    }  # fmt: skip
    with pytest.raises(RemoteError, match="'anon': expected KEY=VALUE"):
        parse_storage_options(["anon"])
    with pytest.raises(RemoteError, match="cannot open 'nosuch://x'"):
        RemoteTarget(url="nosuch://x").open()


def test_a_background_pass_that_fails_as_a_whole_is_reported_and_the_passes_go_on(
    episodes: list[Trajectory], tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    write_shard(episodes[:6], root, signer=SIGNER)
    passes: list[UploadReport] = []
    uploader = ShardUploader(
        root, RemoteTarget(url="nosuchstore://bucket/prefix"), is_public=everyone_public,
        config=UploadConfig(interval_s=0.01), on_pass=passes.append,
    )  # fmt: skip

    async def scenario() -> None:
        uploader.start()
        for _ in range(250):
            await asyncio.sleep(0.02)
            if len(passes) >= 2:
                break
        await uploader.close()

    asyncio.run(scenario())
    assert len(passes) >= 2  # the first failure did not end the background task
    assert all(p.uploaded == [] and p.error is not None for p in passes)
    assert "nosuchstore" in (passes[0].error or "")
