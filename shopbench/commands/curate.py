"""`shopbench curate` (an archive into training data, with a report), `shopbench bench
curate` and `shopbench bench contamination`."""

from __future__ import annotations

from pathlib import Path

import typer

from shopbench.archive.remote import ArchiveSource
from shopbench.bench.contamination import ContaminationBenchConfig
from shopbench.bench.curate import CurateBenchConfig
from shopbench.commands.blocks import archive_source_block, takes
from shopbench.commands.flags import Flags
from shopbench.curation.engine_config import EngineConfig

_BENCH = Flags(CurateBenchConfig)
_ENGINE = Flags(EngineConfig)
_CONTAMINATION = Flags(ContaminationBenchConfig)


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
    as_json: bool = typer.Option(False, "--json", help="print report.json instead of a summary"),
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


def _numbers(text: str, flag: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: expected numbers", param_hint=flag) from None


def bench_curate_command(
    sizes: str = typer.Option(
        "4000,16000", "--sizes", help="archive sizes curated (comma-separated episodes)"
    ),
    base_episodes: int = _BENCH.option("base_episodes", "--base-episodes"),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="check every signature"),
    signatures: str = _BENCH.option("signatures", "--signatures"),
    work: Path | None = typer.Option(None, "--work", help="scratch folder (default: temp)"),
    engine: list[str] = typer.Option(
        ["local"], "--engine", help="local or ray; repeat to compare them on each archive"
    ),
    workers: str = typer.Option(
        "1", "--workers", help="Ray workers of each Ray run (comma-separated: one run each)"
    ),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Curation throughput (episodes/s) and peak memory, per engine (local; Ray with N
    workers), at several archive sizes."""
    from shopbench.bench.curate import run_curate_bench
    from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet

    counts, ns = _numbers(sizes, "--sizes"), _numbers(workers, "--workers")
    cfg = _BENCH.build(
        sizes=counts, base_episodes=base_episodes, verify=verify, signatures=signatures,
        work=str(work) if work else None, engines=engine, workers=ns,
    )  # fmt: skip
    wallet = LocalWallet.derive("curate-bench")
    report = run_curate_bench(
        cfg, signer=HotkeySigner.from_wallet(wallet), verifier=HotkeyVerifier()
    )
    typer.echo(report.model_dump_json(indent=None if as_json else 2))


def bench_contamination_command(
    test_set: list[Path] = typer.Option(
        ..., "--test-set",
        help="task file of test queries (repeatable; in a checkout: "
        "tests/data/shoppingbench/product_test.jsonl and voucher_test.jsonl)",
    ),  # fmt: skip
    tasks: Path | None = _CONTAMINATION.option("tasks", "--tasks"),
    products: int = _CONTAMINATION.option("products", "--products"),
    per_intent: int = _CONTAMINATION.option("per_intent", "--per-intent"),
    seed: int = _CONTAMINATION.option("seed", "--seed"),
    threshold: float | None = _CONTAMINATION.option("threshold", "--threshold"),
    cover_threshold: float | None = _CONTAMINATION.option("cover_threshold", "--cover-threshold"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Contamination's catch rate on lightly edited test queries, per kind of edit, and its
    false-positive rate on arena queries."""
    from shopbench.bench.contamination import run_contamination_bench

    cfg = _CONTAMINATION.build(
        test_sets=test_set, tasks=tasks, products=products, per_intent=per_intent, seed=seed,
        threshold=threshold, cover_threshold=cover_threshold,
    )  # fmt: skip
    report = run_contamination_bench(cfg)
    typer.echo(report.model_dump_json(indent=None if as_json else 2))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add ``curate``, ``bench curate`` and ``bench contamination``."""
    app.command("curate")(curate_command)
    bench_app.command("curate")(bench_curate_command)
    bench_app.command("contamination")(bench_contamination_command)
