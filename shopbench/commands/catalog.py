"""`shopbench catalog build | import | info`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from shopbench.bench.catalog import CatalogBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import json_option, quiet_option
from shopbench.commands.progress import progress_bar

catalog_app = typer.Typer(help="Build, import and inspect product catalogs.", no_args_is_help=True)


@catalog_app.command("build")
def build(
    out: Annotated[Path, typer.Option("--out", help="catalog directory to write")],
    products: Annotated[int, typer.Option("--products", help="number of products")] = 50_000,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="catalog seed; omit for a secret random seed (only its hash "
                     "is recorded)"),
    ] = None,
    chunk_size: Annotated[int, typer.Option(help="products per Parquet part")] = 50_000,
    workers: Annotated[int, typer.Option(help="generator processes")] = 2,
    quiet: bool = quiet_option(),
) -> None:
    """Generate a synthetic marketplace from a seed and index it (reuses an identical build)."""
    from shopbench.catalog.store import build_catalog

    if quiet:
        cat = build_catalog(out, products, seed, chunk_size=chunk_size, workers=workers)
    else:
        with progress_bar() as bar:
            task = bar.add_task("building", total=products)
            cat = build_catalog(
                out, products, seed, chunk_size=chunk_size, workers=workers,
                progress=lambda n: bar.advance(task, n),
            )
    m = cat.manifest
    typer.echo(
        f"catalog {out}: {m.n_products} products, {m.n_shops} shops, {m.n_categories} leaf "
        f"categories, {m.n_knowledge_pages} knowledge pages, seed sha256 {m.seed_hash}"
    )


@catalog_app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="ShoppingBench documents.jsonl or .jsonl.gz")],
    out: Annotated[Path, typer.Option("--out", help="catalog directory to write")],
    strict: Annotated[bool, typer.Option("--strict", help="a malformed line is fatal")] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Import ShoppingBench's product file (streaming) into a catalog directory."""
    from shopbench.catalog.importer import import_catalog

    if quiet:
        _, report = import_catalog(file, out, strict=strict)
    else:
        with progress_bar() as bar:
            task = bar.add_task("importing", total=None)
            _, report = import_catalog(
                file, out, strict=strict, progress=lambda n: bar.advance(task, n)
            )
    for err in report.errors:
        typer.echo(f"skipped {err}", err=True)
    typer.echo(
        f"imported {report.imported} products from {report.lines_read} lines "
        f"({report.rejected} rejected) into {out}"
    )


@catalog_app.command("info")
def info(
    directory: Annotated[Path, typer.Argument(help="catalog directory")],
    as_json: bool = json_option("the facts"),
) -> None:
    """Counts, categories, shops, seed hash and size of a catalog."""
    from shopbench.catalog.store import Catalog, describe

    facts = describe(Catalog.open(directory))
    if as_json:
        typer.echo(json.dumps(facts, indent=2))
        return
    tops = facts.pop("top_categories")
    for k, v in facts.items():
        typer.echo(f"{k:>18}: {v}")
    typer.echo(f"{'top categories':>18}: {len(tops)}")
    for name, n in tops.items():
        typer.echo(f"{'':>20}{n:>9}  {name}")


def _run_bench(config: CatalogBenchConfig) -> dict[str, Any]:
    """Time a full build (generate + Parquet + index) and the reopen."""
    from shopbench.bench.catalog import run

    return run(config.products, config.seed, config.out, config.workers, config.keep)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `shopbench catalog ...` and `shopbench bench catalog`."""
    app.add_typer(catalog_app, name="catalog")
    bench_app.command("catalog")(bench_command(CatalogBenchConfig, _run_bench))
