"""A real S3-compatible server for the archive's tests, and a small signed archive.

The object store is the outside world: moto's standalone server on a loopback port, spoken
to over HTTP by s3fs exactly as R2 or MinIO would be.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shopbench.agents.reference import CarefulPolicy
from shopbench.archive.remote import RemoteTarget
from shopbench.archive.shards import write_shard
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet

BUCKET = "traces"
SIGNER = HotkeySigner(LocalWallet.derive("archive-validator").hotkey)
OTHER = HotkeySigner(LocalWallet.derive("someone-else").hotkey)
VERIFIER = HotkeyVerifier()
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def s3_server() -> Iterator[str]:
    """Run moto's S3 server on a loopback port with an empty bucket; yields its endpoint."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        ).create_bucket(Bucket=BUCKET)  # fmt: skip
        yield endpoint
    finally:
        server.stop()


def s3_target(endpoint: str, prefix: str) -> RemoteTarget:
    """The destination ``s3://traces/<prefix>`` on the server at `endpoint`."""
    return RemoteTarget(
        url=f"s3://{BUCKET}/{prefix}",
        storage_options={"endpoint_url": endpoint, "key": "testing", "secret": "testing"},
    )


def play_episodes(env: Any, catalog: Any) -> list[Trajectory]:
    """24 episodes built from four real ones of a careful policy (copied with new ids),
    spread over two intents, blocks 1000..1230 and three miners, all by SIGNER's validator."""
    products = next(iter(catalog.iter_products(batch_size=8)))
    played: list[Trajectory] = []
    for i, p in enumerate(products[:4]):
        task = Task(
            id=f"t-{i}", intent="product", query=f"I'm looking for {p.title}.",
            reward=[Slot(product_id=p.product_id, title=[p.title])], split="live",
        )  # fmt: skip
        played.append(asyncio.run(run_episode(env, task, CarefulPolicy(seed=i), key=b"k" * 32)))
    return [
        played[n % len(played)].model_copy(
            update={
                "episode_id": f"ep-{n:03d}",
                "validator_hotkey": SIGNER.hotkey,
                "intent": ("product", "shop")[n // 12],
                "block": 1000 + 10 * n,
                "epoch": n // 6,
                "miner_uid": n % 3,
            }
        )
        for n in range(24)
    ]


def make_archive(root: Path, episodes: list[Trajectory], signer: Any = SIGNER) -> list[Any]:
    """Four sealed shards of six episodes each (two per intent), as the store seals them;
    the i-th holds epoch i."""
    return [write_shard(episodes[i : i + 6], root, signer=signer) for i in range(0, 24, 6)]


def everyone_public(manifest: Any) -> bool:
    """An embargo that keeps nothing back."""
    return True
