"""`shopbench traces pull` writes only inside `--out`, whatever is already there, and reads a
local source folder only inside it; and the signed head's age is printed, and refused past
`--max-head-age`.

A symbolic link planted in `--out` (at a `.partial`, a shard, a manifest, a head, a temporary
name, a folder, the quarantine) stops the pull with one line naming it, and the file it
points at, outside `--out`, keeps its bytes. A link inside a source folder (a shard, a
manifest, a folder of manifests) is refused, never read through. Each runs the command as a
researcher does (`shopbench.cli.main`, one subprocess), on real signed archives in folders.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.object_store import SIGNER, make_archive, play_episodes

from shopbench.archive.errors import UnsafePath
from shopbench.archive.head import head_path, publish_head, sign_head, write_head
from shopbench.archive.manifest import manifest_path
from shopbench.archive.paths import shard_path
from shopbench.records.trajectory import Trajectory

HK = SIGNER.hotkey
VICTIM = b"a file outside --out that no pull may touch\n"


@pytest.fixture(scope="module")
def episodes(env: Any, catalog: Any) -> list[Trajectory]:
    return play_episodes(env, catalog)


@pytest.fixture
def source(episodes: list[Trajectory], tmp_path: Path) -> tuple[Path, list[Any]]:
    """A validator's archive folder with its signed head."""
    root = tmp_path / "source"
    manifests = make_archive(root, episodes)
    publish_head(root, SIGNER, manifests)
    return root, manifests


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``shopbench traces ARGS`` through the CLI's entry point: exit status, stdout, stderr."""
    from shopbench.cli import main

    try:
        main(["traces", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    got = capsys.readouterr()
    return code, got.out, got.err


def pull_cli(
    capsys: pytest.CaptureFixture[str], root: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    return cli(capsys, "pull", "--from", str(root), "--validator", HK, "--out", str(out), *extra)


def report_of(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def snapshot(top: Path, skip: Path) -> dict[str, str]:
    """Every file and folder under `top` but those under `skip`, with its bytes' sha256."""
    found = {}
    for p in top.rglob("*"):
        if skip == p or skip in p.parents:
            continue
        found[p.relative_to(top).as_posix()] = (
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
        )
    return found


# -- links planted in --out ----------------------------------------------------------------


def _tmp_of(rel: str) -> str:
    folder, _, name = rel.rpartition("/")
    return f"{folder}/.{name}.tmp"


PLANTED = {
    # where → (the link's path under --out, given the first shard's path; points at a folder)
    "partial": (lambda rel: f"{rel}.partial", False),
    "shard": (lambda rel: rel, False),
    "manifest": (lambda rel: manifest_path(rel), False),
    "manifest temporary": (lambda rel: _tmp_of(manifest_path(rel)), False),
    "head": (lambda rel: head_path(HK), False),
    "head temporary": (lambda rel: _tmp_of(head_path(HK)), False),
    "partition folder": (lambda rel: rel.split("/", 1)[0], True),
    "date folder": (lambda rel: "/".join(rel.split("/")[:2]), True),
    "quarantine": (lambda rel: "_quarantine", True),
}


@pytest.mark.parametrize("where", list(PLANTED))
def test_a_link_planted_in_out_is_refused_and_nothing_outside_changes(
    where: str, source: tuple[Path, list[Any]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    root, manifests = source
    rel = manifests[0].path
    if where == "quarantine":  # something must be refused for the quarantine to be written
        shard = root / manifests[1].path
        shard.write_bytes(shard.read_bytes()[:-8] + b"\0" * 8)
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    (victim_dir / "precious.txt").write_bytes(VICTIM)
    out = tmp_path / "out"
    name, to_folder = PLANTED[where]
    link = out / name(rel)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim_dir if to_folder else victim_dir / "precious.txt")
    before = snapshot(tmp_path, out)

    code, _, err = pull_cli(capsys, root, out)

    assert snapshot(tmp_path, out) == before  # not a byte outside --out, nor truncated
    assert (victim_dir / "precious.txt").read_bytes() == VICTIM
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "a symbolic link inside the pull's destination" in lines[0]
    assert str(link) in lines[0] and "never followed" in lines[0]
    assert link.is_symlink()  # refused, left as it was


def test_a_link_to_a_file_inside_out_is_refused_too(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    out = tmp_path / "out"
    notes = out / "notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_bytes(b"mine\n")
    planted = out / manifests[2].path
    planted.parent.mkdir(parents=True)
    planted.symlink_to(notes)
    code, _, err = pull_cli(capsys, root, out)
    assert code == 2 and "symbolic link" in err and str(planted) in err
    assert planted.is_symlink() and notes.read_bytes() == b"mine\n"


def test_the_command_prints_one_line_without_a_traceback(
    source: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    root, manifests = source
    out = tmp_path / "out"
    victim = tmp_path / "precious.txt"
    victim.write_bytes(VICTIM)
    partial = out / f"{manifests[0].path}.partial"
    partial.parent.mkdir(parents=True)
    partial.symlink_to(victim)
    done = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", "pull", "--from", str(root),
         "--validator", HK, "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {partial}: a symbolic link inside the pull's destination {out}; refused, "
        "never followed (remove it, or pull into another folder)"
    ]
    assert victim.read_bytes() == VICTIM


def test_a_pull_without_links_still_delivers_and_resumes_into_real_folders(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    out = tmp_path / "out"
    partial = out / f"{manifests[0].path}.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes((root / manifests[0].path).read_bytes()[:100])
    code, stdout, err = pull_cli(capsys, root, out, "--json")
    assert code == 0, err
    report = report_of(stdout)
    assert sorted(report["fetched"]) == sorted(m.path for m in manifests)
    assert report["resumed"] == [manifests[0].path]
    assert not [p for p in out.rglob("*") if p.is_symlink() or p.name.endswith(".tmp")]
    for m in manifests:
        assert (out / m.path).read_bytes() == (root / m.path).read_bytes()


# -- links inside a local source folder ----------------------------------------------------


def test_a_source_shard_that_is_a_link_is_never_read_through(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    # The very bytes the signed manifest names, kept outside the source: reading through the
    # link would pass every check, so only the link itself can be refused.
    secret = tmp_path / "elsewhere" / "secret.parquet"
    secret.parent.mkdir()
    shard = root / manifests[1].path
    shutil.move(shard, secret)
    shard.symlink_to(secret)
    out = tmp_path / "out"
    code, stdout, err = pull_cli(capsys, root, out, "--json")
    assert code == 1
    report = report_of(stdout)
    why = report["quarantined"][manifests[1].path]
    assert "symbolic link" in why and "never read through" in why
    assert not (out / manifests[1].path).exists()
    assert not (out / "_quarantine" / manifests[1].path).exists()  # no byte of it read
    assert sorted(report["fetched"]) == sorted(m.path for m in manifests if m is not manifests[1])
    assert f"quarantined {manifests[1].path}: the source's shard is a symbolic link" in err


def test_a_source_manifest_or_folder_that_is_a_link_is_rejected(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # One manifest file moved out and linked back; the folder of the shop intent's the same.
    linked_file = root / manifest_path(manifests[0].path)
    shutil.move(linked_file, elsewhere / "m.json")
    linked_file.symlink_to(elsewhere / "m.json")
    shop = (root / manifest_path(manifests[3].path)).parent
    assert shop.name == "intent=shop" and "/intent=shop/" in manifests[2].path
    shutil.move(shop, elsewhere / "shop")
    shop.symlink_to(elsewhere / "shop", target_is_directory=True)
    out = tmp_path / "out"
    code, stdout, _ = pull_cli(capsys, root, out, "--json")
    assert code == 1
    report = report_of(stdout)
    rejected = report["rejected"]
    assert rejected[manifest_path(manifests[0].path)].startswith("a symbolic link")
    assert rejected[shop.relative_to(root).as_posix()].startswith("a symbolic link")
    assert report["fetched"] == [manifests[1].path]  # the one manifest read without a link
    for m in (manifests[0], manifests[2], manifests[3]):
        assert not (out / m.path).exists()


def test_a_source_head_that_is_a_link_is_not_read(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = source
    head = root / head_path(HK)
    shutil.move(head, tmp_path / "head.json")
    head.symlink_to(tmp_path / "head.json")
    code, stdout, err = pull_cli(capsys, root, tmp_path / "out", "--json")
    assert code == 1
    assert "the source's head is a symbolic link" in report_of(stdout)["head_problem"]
    assert not (tmp_path / "out" / head_path(HK)).exists()


# -- names: ASCII digits only --------------------------------------------------------------


@pytest.mark.parametrize("date", ["٢٠٢٥-٠١-٠١", "2025-01-0\u0661", "２０２５-01-01"])
def test_a_shard_path_with_digits_of_another_script_is_refused(date: str) -> None:
    with pytest.raises(UnsafePath, match="not a shard path"):
        shard_path(f"validator={HK}/date={date}/intent=product/part-1.parquet")


def test_a_source_name_with_arabic_indic_digits_is_rejected_and_never_written(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    odd = f"validator={HK}/date=٢٠٢٥-٠١-٠١/intent=product/part-1.parquet"
    planted = root / manifest_path(odd)
    planted.parent.mkdir(parents=True)
    planted.write_bytes((root / manifest_path(manifests[0].path)).read_bytes())
    out = tmp_path / "out"
    code, stdout, _ = pull_cli(capsys, root, out, "--json")
    assert code == 1
    report = report_of(stdout)
    key = ascii(f"{odd}.json")[1:-1]
    assert "not a shard path" in report["rejected"][key]
    assert odd not in report["quarantined"]
    assert not [p for p in out.rglob("*") if "٢" in p.as_posix()]


# -- staleness -----------------------------------------------------------------------------


def _sign_old_head(root: Path, manifests: list[Any], age_s: float) -> None:
    """Replace `root`'s head with one signed as if `age_s` seconds ago."""
    head = sign_head(HK, manifests, SIGNER, 1)
    draft = head.model_copy(update={"created_at": time.time() - age_s, "signature": "00"})
    write_head(root, draft.model_copy(update={"signature": SIGNER.sign(draft.signing_payload())}))


AGE_LINE = r"head 1 signed {} ago \(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)"


def test_the_heads_age_is_printed(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    _sign_old_head(root, manifests, 5 * 3600 + 90)
    code, _, err = pull_cli(capsys, root, tmp_path / "out")
    assert code == 0, err
    assert re.search(AGE_LINE.format(r"5 h [12] min"), err), err


def test_a_head_older_than_max_head_age_is_refused_and_nothing_written(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    _sign_old_head(root, manifests, 5 * 3600 + 90)
    out = tmp_path / "out"
    code, _, err = pull_cli(capsys, root, out, "--max-head-age", "2h")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(
        rf"error: validator {HK}'s signed head 1 was signed 5 h [12] min ago "
        r"\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\), older than the 2 h 0 min accepted; "
        "nothing pulled",
        lines[0],
    ), lines[0]
    assert not out.exists()
    for accepted in ("6h", "1d", "400m", str(6 * 3600)):
        code, _, err = pull_cli(capsys, root, out, "--max-head-age", accepted)
        assert code == 0, (accepted, err)


def test_a_fresh_head_passes_and_no_head_is_refused_under_max_head_age(
    source: tuple[Path, list[Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, manifests = source
    code, stdout, err = pull_cli(capsys, root, tmp_path / "fresh", "--max-head-age", "90m",
                                 "--json")  # fmt: skip
    assert code == 0, err
    assert len(report_of(stdout)["fetched"]) == len(manifests)
    assert re.search(AGE_LINE.format(r"\d+ s"), err), err
    (root / head_path(HK)).unlink()
    code, _, err = pull_cli(capsys, root, tmp_path / "bare", "--max-head-age", "2d")
    assert code == 2
    assert err.strip() == (
        f"error: the source serves no verified signed head of validator {HK}: its age cannot "
        "be checked against the 2 d 0 h accepted; nothing pulled"
    )
    assert not (tmp_path / "bare").exists()


@pytest.mark.parametrize("value", ["soon", "0", "-5m", "6 weeks", "1h30"])
def test_a_max_head_age_that_is_no_duration_is_a_usage_error(
    value: str, source: tuple[Path, list[Any]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    root, _ = source
    code, _, err = pull_cli(capsys, root, tmp_path / "out", "--max-head-age", value)
    assert code == 2
    assert "--max-head-age" in err and "expected a positive duration" in err
    assert not (tmp_path / "out").exists()
