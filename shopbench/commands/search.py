"""`shopbench search` (find_product from the command line), `shopbench bench search` and
`shopbench bench relevance`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from shopbench.bench.relevance import RelevanceBenchConfig
from shopbench.bench.search import SearchBenchConfig
from shopbench.commands.flags import Flags

_BENCH = Flags(SearchBenchConfig)
_RELEVANCE = Flags(RelevanceBenchConfig)


def search_command(
    directory: Annotated[Path, typer.Argument(help="catalog directory")],
    query: Annotated[str, typer.Argument(help="words to search; empty for the top sellers")],
    price: Annotated[
        str | None, typer.Option("--price", help='price range "lo-hi", "lo-" or "-hi"')
    ] = None,
    service: Annotated[
        list[str] | None,
        typer.Option(
            "--service",
            help="required service (repeatable): official, freeShipping, COD, flashsale",
        ),
    ] = None,
    shop: Annotated[str | None, typer.Option("--shop", help="only this shop id")] = None,
    sort: Annotated[
        str, typer.Option("--sort", help="default, priceasc, pricedesc or order (most sold)")
    ] = "default",
    page: Annotated[int, typer.Option("--page", help="page 1-5 of the top 50, 10 each")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="print the hits as JSON")] = False,
) -> None:
    """Search a catalog as an agent's find_product does, showing catalog ids."""
    from shopbench.catalog.layout import INDEX_DIR, read_manifest
    from shopbench.catalog.search.filters import PAGE_SIZE
    from shopbench.catalog.search.index import SearchIndex

    read_manifest(directory)
    index = SearchIndex.open(directory / INDEX_DIR)
    hits = index.find(query, page, shop_id=shop, price=price, service=service or (), sort=sort)
    if as_json:
        typer.echo(json.dumps([h.model_dump() for h in hits], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    first = (page - 1) * PAGE_SIZE + 1
    table = Table(title=f"{query!r}: page {page}, {len(hits)} hits", title_justify="left")
    for name, justify in (("#", "right"), ("product_id", "left"), ("shop_id", "left"),
                          ("title", "left"), ("price", "right"), ("sold", "right"),
                          ("service", "left"), ("score", "right")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for i, h in enumerate(hits, start=first):
        table.add_row(str(i), h.product_id, h.shop_id, h.title, f"{h.price:,.2f}",
                      str(h.sold_count), ",".join(h.service), f"{h.score:.2f}")
    Console().print(table)


def bench_search_command(
    catalog: Path = _BENCH.option("catalog", "--catalog"),
    queries: int = _BENCH.option("queries", "--queries"),
    threads: int = _BENCH.option("threads", "--threads"),
    seed: int = _BENCH.option("seed", "--seed"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Search latency (p50/p99, filtered), throughput on 1 and N threads, open time."""
    from shopbench.bench.search import run
    from shopbench.commands.progress import echo_result

    config = _BENCH.build(catalog=catalog, queries=queries, threads=threads, seed=seed)
    echo_result(run(config), as_json)


def bench_relevance_command(
    catalog: Path = _RELEVANCE.option("catalog", "--catalog"),
    queries: int = _RELEVANCE.option("queries", "--queries"),
    seed: int = _RELEVANCE.option("seed", "--seed"),
    k: int = _RELEVANCE.option("k", "--k"),
    lucene_python: Path = _RELEVANCE.option("lucene_python", "--lucene-python"),
    work: Path | None = _RELEVANCE.option("work", "--work"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Page 1 of find_product against ShoppingBench's Lucene stack on the same queries:
    overlap, all-words share, ties at the 10th hit, latency of both."""
    from shopbench.bench.relevance import run
    from shopbench.commands.progress import echo_result

    config = _RELEVANCE.build(catalog=catalog, queries=queries, seed=seed, k=k,
                              lucene_python=lucene_python, work=work)
    echo_result(run(config, say=lambda line: typer.echo(line, err=True)), as_json)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `search` to the root app, `search` and `relevance` to the bench group."""
    app.command("search")(search_command)
    bench_app.command("search")(bench_search_command)
    bench_app.command("relevance")(bench_relevance_command)
