"""A miner's tool arguments are data wherever they are read back.

An arena with an honest miner (``careful``) and a ``vandal`` (careful's episode after one
turn of arguments built to break readers: JSON nested 1,400 levels deep, text that is not
JSON, ``NaN``, ``1e400``, a 4,000-digit integer) is archived by the real validator. Then
every reader of those arguments is driven as its user drives it: the tool log holds the
text exactly as sent; ``verify`` replays the archive with no mismatch; every page and route
of the trace service answers below 500 and shows the arguments as inert text with a note;
every ``traces export`` format writes every episode (ATIF documents validate with the
``atif`` package); curation and the SFT rows read the vandal's episodes like any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import atif
import httpx
import pytest
from typer.testing import CliRunner

from shopbench.agents.reference.vandal import HOSTILE_ARGUMENTS
from shopbench.archive.store import read_store
from shopbench.chat import parse_arguments, read_arguments
from shopbench.cli import app
from shopbench.errors import UnreadableArguments
from shopbench.records.trajectory import Trajectory
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

SEED, PRODUCTS, CHUNK, BANK_PER_INTENT = 7, 2000, 500, 2


class Arena:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.archive = out / "archive"
        self.records = {t.episode_id: t for t in read_store(self.archive)}
        report = json.loads((out / "arena.json").read_text())
        self.validator = report["validator"]["hotkey"]
        policy = {m["uid"]: m["policy"] for m in report["miners"]}
        self.vandal = sorted(e for e, t in self.records.items() if policy[t.miner_uid] == "vandal")
        self.honest = sorted(e for e, t in self.records.items() if policy[t.miner_uid] == "careful")


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Arena:
    out = tmp_path_factory.mktemp("hostile-arguments")
    result = CliRunner().invoke(
        app,
        ["arena", "--catalog", str(catalog_dir), "--seed", str(SEED), "--miners", "2",
         "--policies", "careful,vandal", "--rounds", "2", "--tasks", "4",
         "--out", str(out), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return Arena(out)


@pytest.fixture(scope="module")
def api(arena: Arena) -> Iterator[httpx.Client]:
    config = ApiConfig(root=str(arena.archive), burst=100_000, rate_per_s=10_000)
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client


@pytest.mark.parametrize(("tool", "text"), HOSTILE_ARGUMENTS)
def test_the_one_reader_refuses_each_attack_with_a_reason(tool: str, text: str) -> None:
    with pytest.raises(UnreadableArguments) as caught:
        parse_arguments(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
    assert read_arguments(text) == (None, str(caught.value))


def test_the_tool_log_holds_the_arguments_exactly_as_sent(arena: Arena) -> None:
    assert len(arena.vandal) == 8 and len(arena.honest) == 8
    for episode_id in arena.vandal:
        t = arena.records[episode_id]
        first = [e for e in t.tool_log if e.turn == 1]
        assert [(e.name, e.arguments) for e in first] == list(HOSTILE_ARGUMENTS)
        assert all(e.error == "bad_argument" for e in first)
        sent = [(c.function.name, c.function.arguments) for c in t.messages[2].tool_calls or []]
        assert sent == list(HOSTILE_ARGUMENTS)
        # The record survives its own JSON: NaN stays text, never becomes null.
        again = Trajectory.model_validate_json(t.model_dump_json())
        assert again.tool_log == t.tool_log


def test_verify_of_the_validators_archive_finds_no_mismatch(arena: Arena, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["verify", "--archive", str(arena.archive), "--seed", str(SEED),
         "--products", str(PRODUCTS), "--chunk-size", str(CHUNK), "--workers", "1",
         "--bank-per-intent", str(BANK_PER_INTENT), "--signed-by", arena.validator,
         "--work", str(tmp_path / "work"), "--json", "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output[-3000:]
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["mismatches"] == [] and report["verified"] == len(arena.records) == 16


def _routes(arena: Arena) -> list[str]:
    vandal, honest = arena.vandal[0], arena.honest[0]
    task = arena.records[vandal].task_id
    mate = next(e for e in arena.honest if arena.records[e].task_id == task)
    out = ["/", "/episodes", "/v1/stats", "/v1/leaderboard", "/v1/manifests",
           f"/diff?a={vandal}&b={mate}", f"/diff?a={mate}&b={vandal}",
           f"/v1/diff?a={vandal}&b={mate}", f"/v1/diff?a={mate}&b={vandal}",
           f"/v1/episodes/{vandal}/annotations", f"/episodes/{honest}"]  # fmt: skip
    for fmt in ("json", "jsonl", "parquet", "trl", "eval", "atif"):
        out.append(f"/v1/trajectories?format={fmt}")
    for episode_id in arena.vandal:
        task_id = arena.records[episode_id].task_id
        out += [f"/episodes/{episode_id}", f"/tasks/{task_id}", f"/v1/tasks/{task_id}"]
        out += [f"/v1/trajectories/{episode_id}?format={f}"
                for f in ("json", "jsonl", "trl", "eval", "atif")]  # fmt: skip
    return out


def test_every_page_and_route_answers_and_shows_the_text_inert(
    api: httpx.Client, arena: Arena
) -> None:
    failed = {r: api.get(r).status_code for r in _routes(arena)}
    assert {r: s for r, s in failed.items() if s != 200} == {}
    page = api.get(f"/episodes/{arena.vandal[0]}").text
    assert page.count("shown as sent, not read") == len(HOSTILE_ARGUMENTS)
    assert "nested more than 16 levels deep" in page and "NaN is not a finite number" in page
    assert "{q: shoes, page: one" in page  # the text as the miner sent it, escaped
    bulk = api.get("/v1/trajectories?format=atif").text.splitlines()
    assert len(bulk) == len(arena.records)  # the stream is never cut
    for line in bulk:
        atif.Trajectory.model_validate_json(line)


@pytest.mark.parametrize("fmt", ["jsonl", "datasets", "shoppingbench", "atif"])
def test_every_export_writes_every_episode(arena: Arena, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / ("export" if fmt in ("datasets", "atif") else "export.jsonl")
    result = CliRunner().invoke(
        app, ["traces", "export", str(arena.archive), "--format", fmt, "--out", str(out)]
    )
    assert result.exit_code == 0 and result.exception is None, result.output[-2000:]
    if fmt == "atif":
        docs = sorted(out.glob("*/agent/trajectory.json"))  # one trial folder an episode
        assert len(docs) == len(arena.records)
        for doc in docs:
            parsed = atif.Trajectory.model_validate_json(doc.read_text())
            if parsed.trajectory_id in arena.vandal:
                calls = [c for s in parsed.steps for c in s.tool_calls or []]
                kept = [c.extra for c in calls if c.extra]
                assert len(kept) == len(HOSTILE_ARGUMENTS)
    elif fmt in ("jsonl", "shoppingbench"):
        assert len(out.read_text().splitlines()) == len(arena.records)


def test_curation_and_sft_rows_read_the_vandals_episodes(arena: Arena, tmp_path: Path) -> None:
    curated = tmp_path / "curated"
    result = CliRunner().invoke(
        app, ["curate", "--archive", str(arena.archive), "--out", str(curated)]
    )
    assert result.exit_code == 0 and result.exception is None, result.output[-2000:]
    ledger = json.loads((curated / "report.json").read_text())
    assert ledger["episodes_in"] == len(arena.records)
    rows = tmp_path / "sft"
    result = CliRunner().invoke(
        app, ["distill", "build", "--curated", str(curated), "--out", str(rows)]
    )
    assert result.exception is None, result.output[-2000:]
