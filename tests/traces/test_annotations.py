"""Annotations on an archive the arena wrote: made and listed through the CLI with a real
hotkey wallet, served by the API and the browser's pages, exported beside the traces; a
tampered or foreign line is named and never shown, the record's bytes never change, the
embargo holds, and a person's text is escaped like a miner's."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.api_archives import HOSTILE, embargoed, run_arena
from support.keyed_hash import KeyedHash

from shopbench.archive.annotations.append import append_annotation
from shopbench.archive.annotations.model import (
    ANNOTATIONS_DIR,
    MAX_NOTE_CHARS,
    Annotation,
    annotate,
    record_digest,
)
from shopbench.archive.annotations.read import read_annotations
from shopbench.archive.manifest import sha256_file
from shopbench.archive.reader import list_archive
from shopbench.archive.store import read_store
from shopbench.cli import main
from shopbench.commands.archive import annotation_book
from shopbench.records.trajectory import Trajectory
from shopbench.traces.annotations import AnnotationBook
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from template.base.neuron import write_local_wallet
from template.signing import HotkeySigner, HotkeyVerifier


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("annotations-arena")
    run_arena(catalog_dir, out)
    return out / "archive"


@pytest.fixture(scope="module")
def wallets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wallets")
    for name in ("annotator-a", "annotator-b"):
        write_local_wallet(folder, name)
    return folder


def _hotkey(wallets: Path, name: str) -> str:
    return HotkeySigner.from_wallet(write_local_wallet(wallets, name)).hotkey


@pytest.fixture
def root(arena: Path, tmp_path: Path) -> Path:
    """A copy of the arena's archive of the test's own, annotated or not as it likes."""
    return Path(shutil.copytree(arena, tmp_path / "archive"))


def _records(root: Path) -> dict[str, Trajectory]:
    return {t.episode_id: t for t in read_store(root)}


def _multi_turn(root: Path) -> Trajectory:
    return next(t for t in sorted(_records(root).values(), key=lambda t: t.episode_id)
                if t.turns >= 2)  # fmt: skip


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _cli(*args: str) -> Ran:
    """``shopbench traces ARGS`` through the CLI's own entry point (its error boundary
    included), in this process."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(["traces", *args])
        except SystemExit as e:
            code = int(e.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


def _annotate(
    root: Path, wallets: Path, episode: str, *extra: str, who: str = "annotator-a"
) -> Ran:
    return _cli("annotate", "--root", str(root), "--episode", episode, *extra,
                "--wallet.name", who, "--wallet.path", str(wallets))  # fmt: skip


def _listing(root: Path, *extra: str) -> tuple[int, dict, str]:
    result = _cli("annotations", "--root", str(root), "--json", *extra)
    return result.exit_code, json.loads(result.stdout), result.stderr


@contextmanager
def _client(root: Path) -> Iterator[TestClient]:
    config = ApiConfig(root=str(root), burst=10_000, rate_per_s=1000)
    app = create_app(config, annotations=AnnotationBook(root, HotkeyVerifier()))
    with TestClient(app) as client:
        yield client


@pytest.fixture
def annotated(root: Path, wallets: Path) -> tuple[Path, Trajectory, dict[str, str]]:
    """The copy with two annotations by annotator-a made through the CLI: the episode as a
    whole (``good``) and its second turn (``reward-hack`` with a note). Returns the root,
    the record and the annotations' ids by label."""
    t = _multi_turn(root)
    ids = {}
    for extra in (["--label", "good"], ["--turn", "2", "--label", "reward-hack",
                                        "--note", "guessed without searching"]):  # fmt: skip
        result = _annotate(root, wallets, t.episode_id, *extra)
        assert result.exit_code == 0, result.output
        said = result.stdout
        ids[extra[extra.index("--label") + 1]] = said.split("(id ")[1].split(")")[0]
    return root, t, ids


def test_the_cli_signs_each_annotation_and_lists_it(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path
) -> None:
    root, t, ids = annotated
    hotkey = _hotkey(wallets, "annotator-a")
    lines = (root / ANNOTATIONS_DIR / f"{hotkey}.jsonl").read_bytes().splitlines()
    assert len(lines) == 2
    made = [Annotation.model_validate_json(line) for line in lines]
    assert [(a.label, a.turn) for a in made] == [("good", None), ("reward-hack", 2)]
    verifier = HotkeyVerifier()
    for a in made:
        assert a.annotator == hotkey and a.episode_id == t.episode_id
        assert a.record_sha256 == record_digest(t)  # bound to exactly this record
        assert verifier.verify(a.signing_bytes(), a.signature, hotkey)
        assert not verifier.verify(a.signing_bytes(), a.signature, _hotkey(wallets, "annotator-b"))
    assert {a.id for a in made} == set(ids.values())

    code, listed, err = _listing(root)
    assert code == 0, err
    assert listed["problems"] == []
    rows = {r["id"]: r for r in listed["annotations"]}
    assert rows[ids["reward-hack"]]["note"] == "guessed without searching"
    assert {r["state"] for r in rows.values()} == {"shown"}
    table = _cli("annotations", "--root", str(root), "--episode", "no-such-episode")
    assert table.exit_code == 0 and "0 annotations" in table.stdout


def test_annotating_changes_no_byte_of_the_record(root: Path, wallets: Path) -> None:
    def files() -> dict[str, str]:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*"))
                if p.is_file() and p.relative_to(root).parts[0] != ANNOTATIONS_DIR}  # fmt: skip

    before, listing = files(), list_archive(root, check_bytes=True)
    digests = {i: record_digest(t) for i, t in _records(root).items()}
    t = _multi_turn(root)
    for n in range(3):
        assert _annotate(root, wallets, t.episode_id, "--label", f"look-{n}").exit_code == 0
    assert files() == before
    after = list_archive(root, check_bytes=True)
    assert after.dropped == [] and [s.manifest for s in after.shards] == [
        s.manifest for s in listing.shards
    ]
    for ref in after.shards:
        assert sha256_file(Path(ref.file))[0] == ref.manifest.sha256
    assert {i: record_digest(t) for i, t in _records(root).items()} == digests


def test_the_api_and_the_pages_show_the_annotations(
    annotated: tuple[Path, Trajectory, dict[str, str]],
) -> None:
    root, t, ids = annotated
    with _client(root) as client:
        answer = client.get(f"/v1/episodes/{t.episode_id}/annotations")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["record_sha256"] == record_digest(t)
        assert [(a["id"], a["label"], a["turn"]) for a in body["annotations"]] == [
            (ids["good"], "good", None), (ids["reward-hack"], "reward-hack", 2),
        ]  # fmt: skip
        assert client.get("/v1/episodes/nope/annotations").status_code == 404

        items = client.get("/v1/trajectories", params={"limit": 500}).json()["items"]
        labelled = {i["episode_id"]: (i["annotations"], i["labels"]) for i in items}
        assert labelled.pop(t.episode_id) == (2, ["good", "reward-hack"])
        assert all(v == (0, []) for v in labelled.values())

        listing = client.get("/episodes", params={"limit": 500}).text
        row = listing.split(f'href="/episodes/{t.episode_id}"')[1].split("</tr>")[0]
        assert '<span class="label">good</span><span class="label">reward-hack</span>' in row

        page = client.get(f"/episodes/{t.episode_id}").text
        whole = page.split('id="annotations"')[1].split("<h2>")[0]
        assert 'class="label">good<' in whole and "reward-hack" not in whole
        second = page.split('id="turn-2"')[1].split('<section class="turn"')[0]
        assert 'class="label">reward-hack<' in second and "guessed without searching" in second
        first = page.split('id="turn-1"')[1].split('id="turn-2"')[0]
        assert "reward-hack" not in first


def test_the_list_filters_by_label(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path
) -> None:
    root, t, _ = annotated
    ordered = sorted(_records(root).values(), key=lambda x: (x.block or -1, x.episode_id))
    u, v, w = [x for x in ordered if x.episode_id != t.episode_id][:3]
    bad = _annotate(root, wallets, u.episode_id, "--label", "bad", who="annotator-b")
    assert bad.exit_code == 0, bad.output
    # v: a "good" made on another record; w: a "good" retracted. Neither is listed as good.
    b_signer = HotkeySigner.from_wallet(write_local_wallet(wallets, "annotator-b"))
    other = Annotation(episode_id=v.episode_id, label="good", annotator=b_signer.hotkey,
                       created_at=datetime.now(UTC), record_sha256="0" * 64)  # fmt: skip
    append_annotation(root, other.model_copy(
        update={"signature": b_signer.sign(other.signing_bytes())}))  # fmt: skip
    made = _annotate(root, wallets, w.episode_id, "--label", "good", who="annotator-b")
    made_id = made.stdout.split("(id ")[1].split(")")[0]
    retracted = _annotate(root, wallets, w.episode_id, "--retract", made_id, who="annotator-b")
    assert retracted.exit_code == 0, retracted.output
    both = [x.episode_id for x in ordered if x.episode_id in (t.episode_id, u.episode_id)]

    with _client(root) as client:

        def listed(**params: object) -> list[str]:
            answer = client.get("/v1/trajectories", params={"limit": 500, **params})
            assert answer.status_code == 200, answer.text
            return [i["episode_id"] for i in answer.json()["items"]]

        assert listed(label="good") == [t.episode_id]
        assert listed(label="reward-hack") == [t.episode_id]  # a turn's label
        assert listed(label="good,bad") == both == listed(label=["bad", "good"])
        assert listed(label="needs-review") == []
        assert listed(label="bad", intent=next(x.intent for x in ordered
                                               if x.intent != u.intent)) == []  # fmt: skip
        assert listed(label="good,bad", episode_id=u.episode_id) == [u.episode_id]
        first = client.get("/v1/trajectories", params={"label": "good,bad", "limit": 1}).json()
        assert [i["episode_id"] for i in first["items"]] == both[:1]
        rest = client.get("/v1/trajectories", params={
            "label": "good,bad", "limit": 1, "cursor": first["next_cursor"]}).json()  # fmt: skip
        assert [i["episode_id"] for i in rest["items"]] == both[1:] and rest["next_cursor"] is None
        exported = client.get("/v1/trajectories", params={"label": "bad", "format": "jsonl"})
        lines = exported.text.splitlines()
        assert [Trajectory.model_validate_json(x).episode_id for x in lines] == [u.episode_id]
        assert client.get("/v1/stats", params={"label": "good,bad"}).json()["episodes"] == 2
        board = client.get("/v1/leaderboard", params={"label": "bad"}).json()
        assert [(m["uid"], m["episodes"]) for m in board["miners"]] == [(u.miner_uid, 1)]

        refused = client.get("/v1/trajectories", params={"label": "<script>alert(1)</script>"})
        assert refused.status_code == 422
        detail = refused.json()["detail"][0]
        assert detail["loc"] == ["query", "label"]
        assert "an annotation label is a short slug" in detail["msg"]
        one = client.get(f"/v1/trajectories/{t.episode_id}", params={"label": "good"})
        assert one.status_code == 422 and one.json()["detail"][0]["loc"] == ["query", "label"]

        page = client.get("/episodes", params={"label": "bad"}).text
        rows = page.split("<tbody>")[1].split("</tbody>")[0]
        assert re.findall(r'href="/episodes/([^"]+)"', rows) == [u.episode_id]
        select = page.split('<select name="label">')[1].split("</select>")[0]
        assert re.findall(r'<option value="([^"]*)"', select) == ["", "bad", "good", "reward-hack"]
        assert re.findall(r'<option value="([^"]*)" selected', select) == ["bad"]
        assert "label=bad" in page.split('class="exports"')[1].split("</p>")[0]

        hostile = client.get("/episodes", params={"label": '<img src=x onerror="alert(1)">'},
                             headers={"accept": "text/html"})  # fmt: skip
        assert hostile.status_code == 422
        assert "<img" not in hostile.text and "&lt;img src=x onerror=" in hostile.text


def test_the_service_can_show_only_the_annotators_it_names(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path
) -> None:
    root, t, _ = annotated
    assert _annotate(root, wallets, t.episode_id, "--label", "interesting",
                     who="annotator-b").exit_code == 0  # fmt: skip
    config = ApiConfig(root=str(root), burst=10_000, rate_per_s=1000)
    for names, labels in (
        ((), ["good", "interesting", "reward-hack"]),
        ((_hotkey(wallets, "annotator-b"),), ["interesting"]),
    ):
        app = create_app(config, annotations=annotation_book(root, names))
        with TestClient(app) as client:
            body = client.get(f"/v1/episodes/{t.episode_id}/annotations").json()
        assert sorted(a["label"] for a in body["annotations"]) == labels


def test_a_tampered_or_foreign_line_is_named_and_never_shown(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path
) -> None:
    root, t, ids = annotated
    a_key, b_key = _hotkey(wallets, "annotator-a"), _hotkey(wallets, "annotator-b")
    a_file = root / ANNOTATIONS_DIR / f"{a_key}.jsonl"
    good = json.loads(a_file.read_bytes().splitlines()[0])
    edited = {**good, "label": "bad"}  # the label changed after signing
    b_signer = HotkeySigner.from_wallet(write_local_wallet(wallets, "annotator-b"))
    forged = Annotation.model_validate({**good, "label": "judge-wrong", "signature": ""})
    forged = forged.model_copy(update={"signature": b_signer.sign(forged.signing_bytes())})
    with a_file.open("ab") as f:
        f.write(json.dumps(edited).encode() + b"\n")  # line 3
        f.write(forged.line())  # line 4: a's name, b's key
        f.write(b'{"not": json\n')  # line 5
        f.write(b"x" * 9000 + b"\n")  # line 6
    b_file = root / ANNOTATIONS_DIR / f"{b_key}.jsonl"
    b_file.write_bytes(Annotation.model_validate_json(a_file.read_bytes().splitlines()[1]).line())

    code, listed, err = _listing(root)
    assert code == 1
    where = f"{ANNOTATIONS_DIR}/{a_key}.jsonl"
    assert f"{where}:3: signature does not verify by {a_key}" in err
    assert f"{where}:4: signature does not verify by {a_key}" in err
    assert f"{where}:5: not JSON" in err
    assert f"{where}:6: over 8192 bytes" in err
    assert f"{ANNOTATIONS_DIR}/{b_key}.jsonl:1: signed as {a_key}, in the file of {b_key}" in err
    assert sorted(r["id"] for r in listed["annotations"]) == sorted(ids.values())

    with _client(root) as client:
        labels = [
            a["label"]
            for a in client.get(f"/v1/episodes/{t.episode_id}/annotations").json()["annotations"]
        ]
        assert labels == ["good", "reward-hack"]  # fmt: skip
        page = client.get(f"/episodes/{t.episode_id}").text
        assert 'class="label">bad<' not in page and "judge-wrong" not in page


def test_an_annotation_of_another_record_is_not_shown(root: Path, wallets: Path) -> None:
    t = _multi_turn(root)
    signer = HotkeySigner.from_wallet(write_local_wallet(wallets, "annotator-a"))
    other = Annotation(episode_id=t.episode_id, label="good", annotator=signer.hotkey,
                       created_at=datetime.now(UTC), record_sha256="0" * 64)  # fmt: skip
    other = other.model_copy(update={"signature": signer.sign(other.signing_bytes())})
    folder = root / ANNOTATIONS_DIR
    folder.mkdir()
    (folder / f"{signer.hotkey}.jsonl").write_bytes(other.line())
    code, listed, err = _listing(root)
    assert code == 1 and listed["annotations"][0]["state"] == "unbound"
    assert f"annotation {other.id} of {t.episode_id} was made on another record" in err
    with _client(root) as client:
        assert client.get(f"/v1/episodes/{t.episode_id}/annotations").json()["annotations"] == []


def test_a_retraction_is_a_new_line_and_hides_the_annotation(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path
) -> None:
    root, t, ids = annotated
    a_file = root / ANNOTATIONS_DIR / f"{_hotkey(wallets, 'annotator-a')}.jsonl"
    before = a_file.read_bytes()
    refused = _annotate(root, wallets, t.episode_id, "--retract", ids["good"], who="annotator-b")
    assert refused.exit_code == 2 and "no live annotation" in refused.output
    done = _annotate(root, wallets, t.episode_id, "--retract", ids["good"])
    assert done.exit_code == 0, done.output
    assert a_file.read_bytes().startswith(before)  # appended, nothing rewritten
    _, listed, _ = _listing(root)
    states = {r["id"]: r["state"] for r in listed["annotations"]}
    assert states[ids["good"]] == "retracted" and states[ids["reward-hack"]] == "shown"
    assert sorted(states.values()) == ["retracted", "retraction", "shown"]
    with _client(root) as client:
        shown = client.get(f"/v1/episodes/{t.episode_id}/annotations").json()["annotations"]
        assert [a["id"] for a in shown] == [ids["reward-hack"]]


def test_hostile_text_is_refused_or_escaped(root: Path, wallets: Path) -> None:
    t = _multi_turn(root)
    note = HOSTILE[:MAX_NOTE_CHARS]
    assert _annotate(root, wallets, t.episode_id, "--label", "good", "--note", note).exit_code == 0
    for label in ("<script>alert(1)</script>", "good\nbad", "Good", "x" * 33):
        result = _annotate(root, wallets, t.episode_id, "--label", label)
        assert result.exit_code == 2, label
        assert result.stderr.startswith("error: label: "), result.stderr
        assert "not a short slug" in result.stderr or "at most 32 characters" in result.stderr
    bell = _annotate(root, wallets, t.episode_id, "--label", "good", "--note", "ring\x07\u202e")
    assert bell.exit_code == 2 and "control character U+0007" in bell.output

    # a line written around the CLI with markup for a label is not an annotation
    signer = HotkeySigner.from_wallet(write_local_wallet(wallets, "annotator-b"))
    raw = Annotation.model_construct(
        annotation_version=1, episode_id=t.episode_id, turn=None, label="<b id=injected>x</b>",
        note="", annotator=signer.hotkey, created_at=datetime.now(UTC),
        record_sha256=record_digest(t), retracts=None, signature="",
    )  # fmt: skip
    raw = raw.model_copy(update={"signature": signer.sign(raw.signing_bytes())})
    (root / ANNOTATIONS_DIR / f"{signer.hotkey}.jsonl").write_bytes(raw.line())
    read = read_annotations(root, HotkeyVerifier())
    assert [p.reason.split(" (")[0] for p in read.problems] == ["not an annotation"]

    with _client(root) as client:
        page = client.get(f"/episodes/{t.episode_id}")
        assert "<script>window.__pwned" not in page.text and "id=injected" not in page.text
        assert "&lt;script&gt;window.__pwned" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_an_oversized_note_is_refused_with_its_reason(root: Path, wallets: Path) -> None:
    t = _multi_turn(root)
    result = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "traces", "annotate", "--root", str(root),
         "--episode", t.episode_id, "--label", "good", "--note", "x" * (MAX_NOTE_CHARS + 1),
         "--wallet.name", "annotator-a", "--wallet.path", str(wallets)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: note: String should have at most {MAX_NOTE_CHARS} characters\n"
    assert not (root / ANNOTATIONS_DIR).exists()
    beyond = _annotate(root, wallets, t.episode_id, "--turn", str(t.turns + 1), "--label", "good")
    assert beyond.exit_code == 2 and f"has turns 1 to {t.turns}" in beyond.output
    unknown = _annotate(root, wallets, "nope", "--label", "good")
    assert unknown.exit_code == 2 and "no such episode" in unknown.output


def test_the_export_carries_the_verified_annotations_of_the_exported_episodes(
    annotated: tuple[Path, Trajectory, dict[str, str]], wallets: Path, tmp_path: Path
) -> None:
    root, t, ids = annotated
    other = next(x for x in _records(root).values() if x.intent != t.intent)
    assert _annotate(root, wallets, other.episode_id, "--label", "interesting").exit_code == 0
    with (root / ANNOTATIONS_DIR / f"{_hotkey(wallets, 'annotator-a')}.jsonl").open("ab") as f:
        f.write(b'{"broken"\n')

    out = tmp_path / "ds"
    done = _cli("export", str(root), "--format", "datasets", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "annotation left out" in done.stderr and ":4: not JSON" in done.stderr
    exported = [Annotation.model_validate_json(x)
                for x in (out / "annotations.jsonl").read_bytes().splitlines()]  # fmt: skip
    assert sorted(a.label for a in exported) == ["good", "interesting", "reward-hack"]
    verifier = HotkeyVerifier()
    assert all(verifier.verify(a.signing_bytes(), a.signature, a.annotator) for a in exported)
    assert (
        "`annotations.jsonl`: 3 annotations of the exported episodes"
        in (out / "README.md").read_text()
    )  # the dataset card names the file

    picked = tmp_path / "picked.jsonl"
    done = _cli("export", str(root), "--format", "jsonl", "--out", str(picked),
                "--intent", t.intent)  # fmt: skip
    assert done.exit_code == 0, done.output
    beside = [Annotation.model_validate_json(x) for x in
              (tmp_path / "picked.annotations.jsonl").read_bytes().splitlines()]  # fmt: skip
    assert sorted(a.id for a in beside) == sorted(ids.values())  # only the exported episodes'


def test_the_embargo_hides_annotations_of_the_live_bucket(
    arena: Path, wallets: Path, tmp_path: Path
) -> None:
    root, live = embargoed(arena, tmp_path / "embargoed")
    records = _records(root)
    hidden = sorted(live)[0]
    public = sorted(set(records) - live)[0]
    for episode in (hidden, public):
        assert _annotate(root, wallets, episode, "--label", "needs-review").exit_code == 0
    with _client(root) as client:
        assert client.get(f"/v1/episodes/{hidden}/annotations").status_code == 404
        assert client.get(f"/v1/episodes/{public}/annotations").json()["annotations"]
        items = client.get("/v1/trajectories", params={"limit": 500}).json()["items"]
        assert hidden not in {i["episode_id"] for i in items}
        labelled = client.get("/v1/trajectories", params={"label": "needs-review"}).json()
        assert [i["episode_id"] for i in labelled["items"]] == [public]
        assert "needs-review" in client.get("/episodes", params={"limit": 500}).text
        assert client.get(f"/episodes/{hidden}").status_code == 404
    out = tmp_path / "out.jsonl"
    assert _cli("export", str(root), "--format", "jsonl", "--out", str(out)).exit_code == 0
    exported = (tmp_path / "out.annotations.jsonl").read_bytes().splitlines()
    assert [Annotation.model_validate_json(x).episode_id for x in exported] == [public]


def test_the_archive_readers_and_pull_leave_the_annotations_alone(
    annotated: tuple[Path, Trajectory, dict[str, str]], tmp_path: Path
) -> None:
    root, t, _ = annotated
    listing = list_archive(root, check_bytes=True)
    assert listing.dropped == [] and len(listing.shards) > 0
    assert len(list(read_store(root))) == 24
    pulled = tmp_path / "pulled"
    done = _cli("pull", "--from", str(root), "--validator", t.validator_hotkey,
                "--out", str(pulled))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "rejected" not in done.output
    assert not (pulled / ANNOTATIONS_DIR).exists()  # annotations are not the validator's
    assert len(list(read_store(pulled))) == 24
    with _client(root) as client:
        assert client.get(f"/{ANNOTATIONS_DIR}/").status_code == 404  # not a published file


def test_an_append_after_a_torn_line_keeps_every_earlier_byte(root: Path) -> None:
    t = _multi_turn(root)
    key = KeyedHash("5Annotator")
    path = append_annotation(root, annotate(t, key, label="good"))
    with path.open("ab") as f:
        f.write(b'{"annotation_version":1,"epis')  # a write a crash cut short
    before = path.read_bytes()
    append_annotation(root, annotate(t, key, label="bad", turn=1))
    assert path.read_bytes().startswith(before)
    read = read_annotations(root, key)
    assert [a.label for a in read.annotations] == ["good", "bad"]
    assert [(p.line, p.reason) for p in read.problems] == [(2, "not JSON")]


def _signer(wallets: Path, who: str = "annotator-a") -> HotkeySigner:
    return HotkeySigner.from_wallet(write_local_wallet(wallets, who))


def _shown(client: TestClient, episode: str) -> dict:
    answer = client.get(f"/v1/episodes/{episode}/annotations")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_replayed_annotation_shows_once(root: Path, wallets: Path) -> None:
    """The same signed content is one annotation: its line appended again, or the content
    signed again (another signature), shows once; changed content is another one."""
    t = _multi_turn(root)
    signer = _signer(wallets)
    note = "<script>alert('replayed')</script> & more"
    a = annotate(t, signer, label="good", note=note)
    path = append_annotation(root, a)
    resigned = a.model_copy(update={"signature": signer.sign(a.signing_bytes())})
    assert resigned.signature != a.signature and resigned.id == a.id  # sr25519 is randomized
    with path.open("ab") as f:
        f.write(a.line() * 500 + resigned.line() * 3)
    other = annotate(t, signer, label="good", note=note + "!", now=a.created_at)
    append_annotation(root, other)
    assert other.id != a.id

    with _client(root) as client:
        body = _shown(client, t.episode_id)
        assert [x["id"] for x in body["annotations"]] == sorted([a.id, other.id])
        assert body["withheld"] == {}
        page = client.get(f"/episodes/{t.episode_id}").text
        assert page.count(f'id="annotation-{a.id}"') == 1
        assert "<script>alert('replayed')" not in page  # a person's text stays inert
        assert page.count("&lt;script&gt;alert(&#39;replayed&#39;)&lt;/script&gt; &amp; more") == 2
        items = client.get("/v1/trajectories", params={"limit": 500}).json()["items"]
        assert {i["episode_id"]: i["annotations"] for i in items}[t.episode_id] == 2

    listed = _cli("annotations", "--root", str(root), "--json")
    assert listed.exit_code == 0, listed.output  # a repeat is no failure: it is shown once
    assert sorted(r["id"] for r in json.loads(listed.stdout)["annotations"]) == sorted(
        [a.id, other.id]
    )
    where = f"{ANNOTATIONS_DIR}/{signer.hotkey}.jsonl"
    assert json.loads(listed.stdout)["repeats"] == {where: 503}
    assert f"{where}: 503 lines repeat an annotation already read (listed once)" in listed.stderr
    assert [x.id for x in read_annotations(root, HotkeyVerifier()).live()] == [a.id, other.id]


def test_each_annotator_shows_at_most_the_cap_on_an_episode(root: Path, wallets: Path) -> None:
    """Past the cap an annotator's later annotations (by signed time, not file order) are
    withheld, and the API, the page and the listing say how many."""
    t = _multi_turn(root)
    a_signer, b_signer = _signer(wallets), _signer(wallets, "annotator-b")
    start = datetime(2025, 1, 1, tzinfo=UTC)
    made = [annotate(t, a_signer, label=f"look-{n}", now=start.replace(minute=n))
            for n in range(23)]  # fmt: skip
    for a in reversed(made):  # the file holds the latest first
        append_annotation(root, a)
    b = annotate(t, b_signer, label="interesting", now=start.replace(hour=5))
    append_annotation(root, b)
    earliest = [a.id for a in made[:20]]

    with _client(root) as client:
        body = _shown(client, t.episode_id)
        assert [x["id"] for x in body["annotations"]] == [*earliest, b.id]
        assert body["withheld"] == {a_signer.hotkey: 3} and body["max_per_annotator"] == 20
        page = client.get(f"/episodes/{t.episode_id}").text
        aside = page.split('id="annotations"')[1].split("<h2>")[0]
        assert f'3 more by <span class="mono">{a_signer.hotkey}</span> withheld' in aside
        assert "at most 20 of one annotator" in aside and aside.count('class="muted withheld"') == 1
        assert "look-22" not in page and "look-19" in page
        items = client.get("/v1/trajectories", params={"limit": 500}).json()["items"]
        assert {i["episode_id"]: i["annotations"] for i in items}[t.episode_id] == 21

    config = ApiConfig(root=str(root), burst=10_000, rate_per_s=1000)
    small = annotation_book(root, (), 2)  # what `traces serve --max-per-annotator 2` builds
    assert "--max-per-annotator" in _cli("serve", "--help").stdout
    with TestClient(create_app(config, annotations=small)) as client:
        body = _shown(client, t.episode_id)
    assert [x["id"] for x in body["annotations"]] == [*earliest[:2], b.id]
    assert body["withheld"] == {a_signer.hotkey: 21}

    code, listed, err = _listing(root)
    assert code == 0, err
    states = {r["id"]: r["state"] for r in listed["annotations"]}
    assert {i for i, s in states.items() if s == "withheld"} == {a.id for a in made[20:]}
    _, listed, _ = _listing(root, "--max-per-annotator", "1")
    shown = {r["id"] for r in listed["annotations"] if r["state"] == "shown"}
    assert shown == {made[0].id, b.id}
    help_text = _cli("annotations", "--help").stdout
    assert "--max-per-annotator" in help_text and "withheld" in help_text


def test_the_service_reads_each_annotation_line_once(
    annotated: tuple[Path, Trajectory, dict[str, str]],
    wallets: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """However many pages are asked, a file is read and its lines verified once; an append
    is read alone; an oversized line is skipped unparsed, counted and logged; a rewritten
    file is read again from its start."""
    root, t, ids = annotated
    path = root / ANNOTATIONS_DIR / f"{_hotkey(wallets, 'annotator-a')}.jsonl"
    first = path.read_bytes().splitlines(keepends=True)[0]
    with path.open("ab") as f:
        f.write(first * 2000 + b'{"label": "' + b"x" * 20_000 + b'"}\n')
    book = AnnotationBook(root, HotkeyVerifier())
    config = ApiConfig(root=str(root), burst=10_000, rate_per_s=1000)
    with caplog.at_level("WARNING"), TestClient(create_app(config, annotations=book)) as client:
        for _ in range(5):
            assert len(_shown(client, t.episode_id)["annotations"]) == 2
            assert client.get(f"/episodes/{t.episode_id}").status_code == 200
            assert client.get("/episodes", params={"limit": 500}).status_code == 200
        stats = book.stats
        assert (stats.files_read, stats.resumed, stats.rebuilds) == (1, 0, 1)
        assert (stats.signatures_checked, stats.repeats, stats.oversized) == (2, 2000, 1)
        assert stats.bytes_read == path.stat().st_size and stats.lines_read == 2003
        assert [r.getMessage() for r in caplog.records if "over 8192 bytes" in r.getMessage()] == [
            f"{ANNOTATIONS_DIR}/{path.name}: 1 lines over 8192 bytes skipped unread "
            "(the latest at line 2003)"
        ]

        size = path.stat().st_size
        assert _annotate(root, wallets, t.episode_id, "--label", "bad").exit_code == 0
        with path.open("ab") as f:
            f.write(first[:40])  # a line still being written is left for the next read
        assert len(_shown(client, t.episode_id)["annotations"]) == 3
        stats = book.stats
        assert (stats.files_read, stats.resumed, stats.signatures_checked) == (1, 1, 3)
        assert stats.bytes_read == path.stat().st_size - 40 and size < stats.bytes_read

        path.write_bytes(first)  # rewritten: read again from its start
        body = _shown(client, t.episode_id)
        assert [a["id"] for a in body["annotations"]] == [ids["good"]]
        assert book.stats.files_read == 2
