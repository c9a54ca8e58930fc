"""`shopbench bench curate` compares the engines side by side on one archive: the local
engine and Ray with each number of workers, each curating the same episodes to the same
kept count, with the driver's and each Ray worker's peak memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopbench.cli import main


@pytest.mark.slow
def test_bench_curate_runs_each_engine_on_the_same_archive(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[scale]'")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # each Ray run starts its own instance
    work = tmp_path / "work"
    work.mkdir()
    (work / "catalog").symlink_to(catalog_dir)  # the bench's catalog, already built
    main(["bench", "curate", "--sizes", "400", "--base-episodes", "4", "--work", str(work),
          "--engine", "local", "--engine", "ray", "--workers", "1,2"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    runs = report["runs"]
    assert [(r["engine"], r["workers"]) for r in runs] == [("local", 1), ("ray", 1), ("ray", 2)]
    assert len({(r["episodes"], r["kept"], r["archive_bytes"]) for r in runs}) == 1
    assert runs[0]["episodes"] == 400 and runs[0]["archive_bytes"] > 0
    assert runs[0]["worker_peak_rss_mib"] == []  # the local engine is its one process
    for run in runs[1:]:
        assert len(run["worker_peak_rss_mib"]) >= run["workers"]
        assert all(m > 0 for m in run["worker_peak_rss_mib"])
        assert run["episodes_per_s"] > 0 and run["peak_rss_mib"] > 0


def test_bench_curate_refuses_an_unknown_engine_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "curate", "--sizes", "300", "--engine", "spark", "--work", str(tmp_path)])
    assert exit_.value.code == 2
    assert "'local' or 'ray'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
