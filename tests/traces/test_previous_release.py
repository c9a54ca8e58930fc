"""An archive the previous release wrote (``tests/data/archive_v1``: verdicts whose parts are
named only in prose) still reads, serves, exports and shows in the browser under this one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from shopbench.archive.store import read_store
from shopbench.cli import app
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
from shopbench.traces.formats import FORMATS

V1 = Path(__file__).resolve().parents[1] / "data" / "archive_v1"
V1_VALIDATOR = "5DwG4js1NM4Q3gTEPQGN9Txyc9wD2zzTXQTS2FEQdVohNCpP"


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    return Path(shutil.copytree(V1 / "archive", tmp_path / "archive"))


def test_the_previous_release_s_archive_serves_every_route_and_page(archive: Path) -> None:
    records = {t.episode_id: t for t in read_store(archive)}
    assert len(records) == 3 and all(t.judge is not None for t in records.values())
    # A loaded machine may take seconds over an export's first request (its writer imported).
    api = create_app(ApiConfig(root=str(archive)))
    with serving(api) as url, httpx.Client(base_url=url, timeout=60) as c:
        page = c.get("/v1/trajectories").json()
        assert {r["episode_id"] for r in page["items"]} == set(records)
        for episode_id, t in records.items():
            one = c.get(f"/v1/trajectories/{episode_id}")
            assert one.status_code == 200 and one.json()["judge"]["score"] == t.judge.score
            shown = c.get(f"/episodes/{episode_id}")
            assert shown.status_code == 200 and t.judge.judge_id in shown.text
        for name in FORMATS:
            assert c.get("/v1/trajectories", params={"format": name}).status_code == 200, name
        assert c.get("/").status_code == 200
        assert c.get("/v1/leaderboard").status_code == 200


def test_the_previous_release_s_archive_exports_signed_by_its_validator(
    archive: Path, tmp_path: Path
) -> None:
    out = tmp_path / "records.jsonl"
    result = CliRunner().invoke(app, ["traces", "export", str(archive), "--format", "jsonl",
                                      "--out", str(out), "--signed-by", V1_VALIDATOR])  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 and all("parts" not in r["judge"] for r in lines)
