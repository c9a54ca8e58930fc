"""`shopbench curate` (an archive into training data, with a report), `shopbench bench
curate` and `shopbench bench contamination`."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import BaseModel

from shopbench.archive.remote import ArchiveSource
from shopbench.bench.contamination import ContaminationBenchConfig
from shopbench.bench.curate import CurateBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import archive_source_block, json_option, takes
from shopbench.commands.flags import Flags, Spell
from shopbench.curation.engine_config import EngineConfig

_ENGINE = Flags(EngineConfig)


def _list_rules(value: bool) -> None:
    """``--rules``: every rule of the registry with its defaults, as a TOML config."""
    if not value:
        return
    from shopbench.curation.config import defaults_toml

    typer.echo(defaults_toml(), nl=False)
    raise typer.Exit()


@takes(archive_source_block(
    "--archive", "archive root (the store's directory), or a URL to pull from "
    "(s3://bucket/prefix, file:///path, http(s)://HOST; needs --validator)",
    validator_help="the publishing validator's hotkey: a URL is pulled and verified against "
    "it, a folder is read with only that validator's verified shards",
))  # fmt: skip
def curate_command(
    out: Path = typer.Option(..., "--out", help="folder for data/, report.json, report.md"),
    config: Path | None = typer.Option(
        None, "--config", help="curation config (TOML; default: the release's curate.toml)"
    ),
    truth: Path | None = typer.Option(
        None,
        "--truth",
        help="an arena's arena.json: measure each rule against the miners' true policies",
    ),  # fmt: skip
    test_set: list[Path] = typer.Option(
        [],
        "--test-set",
        help="task file whose queries must not be trained on (ShoppingBench's "
        "test files or ours; repeatable, added to the config's)",
    ),  # fmt: skip
    as_json: bool = json_option("report.json instead of a summary"),
    engine: str = _ENGINE.option("kind", "--engine"),
    address: str | None = _ENGINE.option("address", "--address"),
    workers: int | None = _ENGINE.option("workers", "--workers"),
    rules: bool = typer.Option(
        False, "--rules", is_eager=True, expose_value=False, callback=_list_rules,
        help="print every rule in pipeline order with its parameters' defaults (a complete "
        "config, as TOML) and exit",
    ),  # fmt: skip
    source: ArchiveSource | None = None,
) -> None:
    """Filter an archive into a curated training set: every drop named with its rule and
    reason, recovery episodes tagged and weighted, contamination counted; exit 2 when
    nothing is kept."""
    from shopbench.curation.config import load_config
    from shopbench.curation.engine import open_engine
    from shopbench.curation.pipeline import curate
    from shopbench.curation.report.model import headline
    from shopbench.curation.truth import load_truth
    from template.signing import HotkeyVerifier

    where = _ENGINE.build(kind=engine, address=address, workers=workers)
    cfg = load_config(config).with_test_sets([str(p) for p in test_set])
    known = load_truth(truth) if truth is not None else None
    assert source is not None  # the block builds it
    runner = open_engine(where)  # a cluster that cannot run the job fails here, before any work
    try:
        report = curate(source, out, cfg, verifier=HotkeyVerifier(), truth=known, engine=runner)
    finally:
        figures = runner.figures()
        runner.close()
    if as_json:
        typer.echo(report.model_dump_json())
        return
    dropped = ", ".join(f"{k} {v}" for k, v in report.dropped_by_rule.items() if v)
    typer.echo(f"kept {report.kept} of {report.episodes_in} episodes ({dropped or 'none dropped'})")
    if report.honest_retention is not None:
        top = headline(report.policies)
        typer.echo(
            f"dishonest removal precision {report.dishonest_removal_precision}, recall "
            f"{report.dishonest_removal_recall}; honest retention {report.honest_retention} "
            f"({top.honest_retained} of {top.honest} honest episodes kept or duplicates of "
            "kept ones)"
        )
    if not report.contaminated:
        typer.echo(
            "warning: no contamination test set given (--test-set FILE): the set was not "
            "checked against any test queries", err=True,
        )  # fmt: skip
    for name, c in report.contaminated.items():
        typer.echo(f"contamination vs {name}: {c.contaminated} contaminated, {c.clean} clean")
    typer.echo(f"recovery share {report.recovery_share}; wrote {out / 'report.md'}")
    if figures:
        nodes = {f.worker.split(":")[0] for f in figures}
        peak = max(f.peak_rss_mib for f in figures)
        typer.echo(
            f"{where.kind}: {len(figures)} worker processes on {len(nodes)} nodes took "
            f"{sum(f.shards for f in figures)} shard passes (peak memory per worker "
            f"{peak} MiB at most)"
        )


def _run_curate_bench(config: CurateBenchConfig) -> BaseModel:
    """Curation throughput (episodes/s) and peak memory, per engine (local; Ray with N
    workers), at several archive sizes."""
    from shopbench.bench.curate import run_curate_bench
    from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet

    wallet = LocalWallet.derive("curate-bench")
    return run_curate_bench(
        config, signer=HotkeySigner.from_wallet(wallet), verifier=HotkeyVerifier()
    )


def _run_contamination_bench(config: ContaminationBenchConfig) -> BaseModel:
    """Contamination's catch rate on lightly edited test queries, per kind of edit, and its
    false-positive rate on arena queries."""
    from shopbench.bench.contamination import run_contamination_bench

    return run_contamination_bench(config)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add ``curate``, ``bench curate`` and ``bench contamination``."""
    app.command("curate")(curate_command)
    comma = Spell(comma=True)
    bench_app.command("curate")(bench_command(
        CurateBenchConfig, _run_curate_bench, spell={"sizes": comma, "workers": comma}
    ))  # fmt: skip
    bench_app.command("contamination")(
        bench_command(ContaminationBenchConfig, _run_contamination_bench)
    )
