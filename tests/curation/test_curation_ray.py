"""`shopbench curate --engine ray` on a real two-node Ray cluster on loopback (a head and a
worker node, separate processes): the same kept episodes, ledger, report and files as the
local engine, from a folder and from a real S3-compatible server; and one clear error,
nothing written, for a cluster that cannot be reached or cannot run shopbench."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "ray", reason="ray is not installed: pip install -e '.[scale]' for the Ray engine's tests"
)

from support.api_archives import run_arena  # noqa: E402
from support.ray_cluster import ray_cluster, ray_env  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head and a second worker node, one CPU each; the head's address."""
    with ray_cluster(2) as address:
        yield address


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An arena's output (3 miners, 2 rounds of 4 tasks): its archive is four signed shards."""
    out = tmp_path_factory.mktemp("arena") / "arena"
    run_arena(catalog_dir, out)
    return out


def _curate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`shopbench curate ARGS` as a process of its own (a Ray driver), run in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "curate", *args], cwd=cwd, env=ray_env(),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _files(out: Path) -> dict[str, bytes]:
    """Every file of a curated folder by its path in it, the folder's own name and path
    (which the card and the report name) replaced."""
    found = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix in (".json", ".md"):
            data = data.replace(str(out).encode(), b"OUT")
            data = data.replace(f'"{out.name}"'.encode(), b'"OUT"')  # the card's load_dataset
        found[path.relative_to(out).as_posix()] = data
    return found


def _assert_same(local: Path, ray: Path) -> dict[str, object]:
    a, b = _files(local), _files(ray)
    assert sorted(a) == sorted(b)
    assert [name for name in a if a[name] != b[name]] == []  # 0 differences, byte for byte
    return json.loads(a["report.json"])


def test_ray_across_two_nodes_writes_the_local_engines_set(
    cluster: str, arena: Path, tmp_path: Path, shoppingbench_data: Path
) -> None:
    args = ["--archive", str(arena / "archive"), "--truth", str(arena / "arena.json"),
            "--test-set", str(shoppingbench_data / "product_test.jsonl")]  # fmt: skip
    local = _curate(tmp_path, *args, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    ray = _curate(tmp_path, *args, "--out", str(tmp_path / "ray"), "--engine", "ray",
                  "--address", cluster)  # fmt: skip
    assert ray.returncode == 0, ray.stderr
    assert re.search(r"^ray: \d+ worker processes on 2 nodes took 8 shard passes", ray.stdout,
                     re.M)  # both nodes took shards; 4 shards, each read in both passes
    assert ray.stdout.splitlines()[:3] == local.stdout.splitlines()[:3]
    report = _assert_same(tmp_path / "local", tmp_path / "ray")
    assert report["episodes_in"] == 24 and 0 < report["kept"] < 24
    assert report["dropped_by_rule"]["validity"] > 0  # the guesser's episodes, on either engine


def test_the_ray_engine_hands_back_the_local_engines_ledger_rows(
    cluster: str, arena: Path
) -> None:
    import pyarrow as pa

    from shopbench.curation.config import load_config
    from shopbench.curation.curator import Curator
    from shopbench.curation.engine import EngineConfig, LocalEngine, open_engine
    from shopbench.curation.source import list_shards
    from shopbench.curation.stages import kept_by_shard, plan_shards
    from template.signing import HotkeyVerifier

    verifier = HotkeyVerifier()
    curator = Curator(load_config(), verifier, None)
    plan = plan_shards(list_shards(arena / "archive", verifier).shards)
    assert len(plan) == 4
    engine = open_engine(EngineConfig(kind="ray", address=cluster, workers=2))
    try:
        on_ray = pa.concat_tables(list(engine.ledger_tables(curator, plan)))
        every = [(s, 1.0 + s / 10, [f"t{s}"], None) for s in range(0, plan[-1].end, 3)]
        copied = list(engine.kept_tables(kept_by_shard(every, plan)))
        workers = engine.figures()
    finally:
        engine.close()
    here = pa.concat_tables(list(LocalEngine().ledger_tables(curator, plan)))
    assert on_ray.equals(here) and on_ray.num_rows == 24
    assert on_ray.column("seq").to_pylist() == list(range(24))
    expected = list(LocalEngine().kept_tables(kept_by_shard(every, plan)))
    assert len(copied) == len(expected) and all(
        a.equals(b) for a, b in zip(copied, expected, strict=True)
    )
    assert [r for t in copied for r in t.column("curation_tags").to_pylist()] == [
        [f"t{s}"] for s, *_ in every
    ]
    assert len({w.worker.split(":")[0] for w in workers}) == 2
    assert all(w.peak_rss_mib > 0 and w.shards > 0 for w in workers)


def test_ray_curates_a_bucket_as_the_local_engine_does(
    cluster: str, arena: Path, tmp_path: Path, s3: str
) -> None:
    from shopbench.archive.manifest import MANIFESTS_DIR

    manifest = next((arena / "archive" / MANIFESTS_DIR).rglob("*.json"))
    validator = json.loads(manifest.read_text())["validator"]
    url = "s3://traces/ray-engine"
    published = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", "publish", str(arena / "archive"),
         "--to", url, "--endpoint-url", s3],
        env=ray_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert published.returncode == 0, published.stderr
    args = ["--archive", url, "--validator", validator, "--endpoint-url", s3,
            "--storage-option", "key=testing", "--storage-option", "secret=testing"]  # fmt: skip
    local = _curate(tmp_path, *args, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    ray = _curate(tmp_path, *args, "--out", str(tmp_path / "ray"), "--engine", "ray",
                  "--address", cluster)  # fmt: skip
    assert ray.returncode == 0, ray.stderr
    report = _assert_same(tmp_path / "local", tmp_path / "ray")
    assert report["episodes_in"] == 24 and report["archive"] == url


def test_distill_build_on_ray_writes_the_local_builds_dataset(
    cluster: str, arena: Path, tmp_path: Path
) -> None:
    curated = tmp_path / "curated"
    done = _curate(tmp_path, "--archive", str(arena / "archive"), "--out", str(curated))
    assert done.returncode == 0, done.stderr
    outs = {}
    for engine in ("local", "ray"):
        outs[engine] = tmp_path / f"sft-{engine}"
        built = subprocess.run(
            [sys.executable, "-m", "shopbench.cli", "distill", "build", "--curated",
             str(curated), "--out", str(outs[engine]), "--format", "step",
             "--validation-fraction", "0.3", "--engine", engine, "--address", cluster],
            cwd=tmp_path, env=ray_env(), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
    local, ray = _files(outs["local"]), _files(outs["ray"])
    assert sorted(local) == sorted(ray) == [
        "README.md", "build.json", "train.parquet", "validation.parquet"
    ]
    assert [name for name in local if local[name] != ray[name]] == []
    report = json.loads(local["build.json"])
    assert report["episodes"] > 0 and report["rows"]["train"] > report["episodes"]


def test_shards_that_fail_verification_give_the_same_refusal_on_both_engines(
    cluster: str, arena: Path, tmp_path: Path
) -> None:
    import shutil

    from shopbench.archive.manifest import MANIFESTS_DIR

    root = tmp_path / "archive"
    shutil.copytree(arena / "archive", root)
    for path in (root / MANIFESTS_DIR).rglob("*.json"):  # every manifest's signature broken
        data = json.loads(path.read_text())
        path.write_text(json.dumps(data | {"created_at": data["created_at"] + 1}))
    outs = {}
    for engine in ("local", "ray"):
        outs[engine] = tmp_path / engine
        done = _curate(tmp_path, "--archive", str(root), "--out", str(outs[engine]),
                       "--engine", engine, "--address", cluster)  # fmt: skip
        assert done.returncode == 2
        assert done.stderr.strip().splitlines()[-1].startswith("error: nothing kept of 24")
        assert not (outs[engine] / "data").exists()  # no episode of a refused shard copied
    report = _assert_same(outs["local"], outs["ray"])
    assert report["dropped_by_rule"]["validity"] == 24
    assert all("manifest signature does not verify" in r
               for r in report["rules"]["validity"]["reasons"])  # fmt: skip


def test_an_unreachable_address_is_one_error_and_writes_nothing(
    arena: Path, tmp_path: Path
) -> None:
    from support.object_store import free_port

    address = f"127.0.0.1:{free_port()}"
    out = tmp_path / "out"
    done = _curate(tmp_path, "--archive", str(arena / "archive"), "--out", str(out),
                   "--engine", "ray", "--address", address)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --address {address}: no Ray cluster answers there "
        "([Errno 111] Connection refused)"
    ]
    assert not out.exists()


def test_more_workers_than_the_cluster_has_cpus_is_one_error_and_writes_nothing(
    cluster: str, arena: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = _curate(tmp_path, "--archive", str(arena / "archive"), "--out", str(out),
                   "--engine", "ray", "--address", cluster, "--workers", "3")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --workers 3: the Ray cluster has 2 CPUs (a worker takes one)"
    ]
    assert not out.exists()


def test_a_cluster_that_cannot_import_shopbench_is_one_error_and_writes_nothing(
    arena: Path, tmp_path: Path
) -> None:
    # The node's workers find this package before the installed one: as a node without
    # shopbench installed, importing it fails.
    shadow = tmp_path / "shadow" / "shopbench"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no shopbench on this node')\n")
    out = tmp_path / "out"
    with ray_cluster(1, node_env={"PYTHONPATH": str(shadow.parent)}) as address:
        done = _curate(tmp_path, "--archive", str(arena / "archive"), "--out", str(out),
                       "--engine", "ray", "--address", address)  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {address}: every node must run")
    assert "cannot import shopbench (ImportError: no shopbench on this node)" in lines[0]
    assert not out.exists()
