"""`shopbench search` (find_product from the command line), `shopbench bench search` and
`shopbench bench relevance`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from shopbench.bench.relevance import RelevanceBenchConfig
from shopbench.bench.search import SearchBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import json_option


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
    as_json: bool = json_option("the hits"),
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


def _run_search(config: SearchBenchConfig) -> BaseModel:
    """Search latency (p50/p99, filtered), throughput on 1 and N threads, open time."""
    from shopbench.bench.search import run

    return run(config)


def _run_relevance(config: RelevanceBenchConfig) -> BaseModel:
    """Page 1 of find_product against ShoppingBench's Lucene stack on the same queries:
    overlap, all-words share, ties at the 10th hit, latency of both."""
    from shopbench.bench.relevance import run

    return run(config, say=lambda line: typer.echo(line, err=True))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `search` to the root app, `search` and `relevance` to the bench group."""
    app.command("search")(search_command)
    bench_app.command("search")(bench_command(SearchBenchConfig, _run_search))
    bench_app.command("relevance")(bench_command(RelevanceBenchConfig, _run_relevance))
