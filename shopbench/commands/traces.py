"""`shopbench traces ...` (query, export, report, and pull/publish from traces_pull) and
`shopbench bench archive`.

Filters are read as text and validated by :class:`~shopbench.archive.filters.TraceFilter`,
so a malformed one is one line naming the filter and what it accepts (exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from shopbench.archive.filters import TraceFilter, is_list_filter
from shopbench.bench.archive import ArchiveBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import Block, model_options, takes
from shopbench.commands.flags import Spell
from shopbench.errors import first_error, first_problem
from shopbench.traces.formats import ALIASES, FORMATS

traces_app = typer.Typer(
    help="The trajectory archive: query, export, pull, publish, serve (the API and browser).",
    no_args_is_help=True,
)

QUERY_FORMATS = ("table", "jsonl", "parquet")
_FORMAT_HELP = "; ".join(
    f"{f.name} ({'a folder' if f.folder else 'a file'}): {f.shape[0].lower()}"
    f"{f.shape.split(':')[0][1:]}" for f in FORMATS.values()
) + f" (older names: {', '.join(f'{a} = {n}' for a, n in ALIASES.items())})"


def _filter_block() -> Block:
    """Every trace filter as an option of its own, derived from
    :class:`~shopbench.archive.filters.TraceFilter` (help from each field's description), and
    built into that filter (``filters``); a malformed value is one line naming it."""
    def note(name: str) -> str:
        return " (comma-separated)" if is_list_filter(name) else ""

    def build(**values: str | None) -> TraceFilter:
        return TraceFilter.parse(values)

    return Block("filters", model_options(TraceFilter, suffix=note), build)


FILTERS = _filter_block()
"""The trace filters' options, shared by ``traces query`` and ``traces export``."""


_SIGNED_BY_HELP = (
    "read only the shards this validator hotkey signed, each verified (signature, sha256); "
    "what is left out is named on stderr"
)


def _signed_by() -> Any:
    """``--signed-by HOTKEY``."""
    return typer.Option(None, "--signed-by", help=_SIGNED_BY_HELP)


def _read(  # type: ignore[no-untyped-def]
    directory: Path, f: TraceFilter, signed_by: str | None = None
):
    """The episodes under `directory` matching the filter `values`, the store's embargo
    (``_embargo.json``) applied: the live bucket is left out unless the store lifted it.
    With `signed_by`, only that validator's verified shards (the archive's one verified
    reader), each shard left out named on stderr."""
    return _read_source(directory, f, signed_by)[0]


def _read_source(  # type: ignore[no-untyped-def]
    directory: Path, f: TraceFilter, signed_by: str | None = None
):
    """:func:`_read`, and how it read (the shards listed, the trust, the embargo) for the
    export's card."""
    from shopbench.archive.query import query, sealed_shards
    from shopbench.archive.reader import Trust, list_archive
    from shopbench.archive.store import LIFTED_WARNING, load_embargo
    from shopbench.traces.export_card import ExportSource

    embargo = load_embargo(directory).view()
    if embargo.lifted:
        typer.echo(LIFTED_WARNING.format(root=directory), err=True)
    if signed_by is not None:
        from template.signing import HotkeyVerifier

        listing = list_archive(directory, trust=Trust(validator=signed_by,
                                                      verifier=HotkeyVerifier()))  # fmt: skip
        for dropped in listing.dropped:
            typer.echo(f"left out {dropped.path}: {dropped.reason}", err=True)
        shards = listing.shards
    else:
        shards = sealed_shards(directory)
    source = ExportSource(
        archive=str(directory), shards=shards, validator=signed_by,
        filters=f.model_dump(mode="json", exclude_none=True), embargo_lifted=embargo.lifted,
    )  # fmt: skip
    return query(directory, f, embargo=embargo, shards=shards), source


@traces_app.command("query")
@takes(FILTERS)
def query_command(
    directory: Path = typer.Argument(..., help="archive root (the store's directory)"),
    fmt: str = typer.Option("table", "--format", help=f"one of {', '.join(QUERY_FORMATS)}"),
    out: Path | None = typer.Option(None, "--out", help="write here instead of stdout"),
    signed_by: str | None = _signed_by(),
    filters: TraceFilter | None = None,
) -> None:
    """Print (or write) the archived episodes matching the filters."""
    if fmt not in QUERY_FORMATS:
        raise typer.BadParameter(
            f"{fmt!r} is not a format (allowed: {', '.join(QUERY_FORMATS)})", param_hint="--format"
        )
    table = _read(directory, filters or TraceFilter(), signed_by)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        if out is None:
            raise typer.BadParameter("--format parquet needs --out FILE", param_hint="--out")
        pq.write_table(table, out, compression="zstd")
        typer.echo(f"wrote {table.num_rows} episodes to {out}", err=True)
    elif fmt == "jsonl":
        from shopbench.archive.layout import from_table

        stream = out.open("w", encoding="utf-8") if out else sys.stdout
        try:
            for t in from_table(table):
                stream.write(t.model_dump_json() + "\n")
        finally:
            if out:
                stream.close()
    else:
        _print_table(table, out)


def _print_table(table, out: Path | None) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    from shopbench.archive.query import SUMMARY_COLUMNS

    columns = [c for c in SUMMARY_COLUMNS if c in table.column_names]
    view = Table(*columns, title=f"{table.num_rows} episodes")
    for row in table.select(columns).to_pylist():
        # Miner-written text never reaches this listing: only ids, numbers and enums.
        view.add_row(*("" if row[c] is None else str(row[c]) for c in columns))
    if out is not None:
        with out.open("w", encoding="utf-8") as f:
            Console(file=f, width=200).print(view)
    else:
        Console(width=200).print(view)


@traces_app.command("export")
@takes(FILTERS)
def export_command(
    directory: Path = typer.Argument(..., help="archive root (the store's directory)"),
    fmt: str = typer.Option(..., "--format", help=_FORMAT_HELP),
    out: Path = typer.Option(..., "--out", help="a new folder (parquet, atif) or a file"),
    signed_by: str | None = _signed_by(),
    filters: TraceFilter | None = None,
) -> None:
    """Export the matching episodes in one of the export formats, with its dataset card."""
    from shopbench.archive.errors import SinkError
    from shopbench.traces.formats import export, export_format

    try:
        spec = export_format(fmt)
    except SinkError as e:
        raise typer.BadParameter(str(e), param_hint="--format") from None
    from shopbench.traces.export_card import write_export_card

    table, source = _read_source(directory, filters or TraceFilter(), signed_by)
    written = export(table, spec.name, out)
    typer.echo(f"exported {table.num_rows} episodes to {written}")
    annotations = _export_annotations(directory, table, written)
    card = write_export_card(written, spec.name, table, source, annotations)
    typer.echo(f"dataset card {card}")


def _export_annotations(  # type: ignore[no-untyped-def]
    directory: Path, table, written: Path
) -> tuple[Path, int] | None:
    """The verified annotations of the exported episodes, beside the export (the file and
    how many, None when there are none); each line that does not verify is named on stderr
    and left out."""
    from shopbench.archive.annotations.read import read_annotations
    from shopbench.traces.export import annotations_path, export_annotations
    from template.signing import HotkeyVerifier

    read = read_annotations(directory, HotkeyVerifier())
    for problem in read.problems:
        typer.echo(f"annotation left out {problem}", err=True)
    path = annotations_path(written)
    n = export_annotations(table, read, path)
    if not n:
        return None
    typer.echo(f"exported {n} annotations to {path}")
    return path, n


def _report_config_block() -> Block:
    """The miner report's settings as options, derived from
    :class:`~shopbench.traces.report.ReportConfig` and built into it (``config``); a
    malformed value is a usage error naming its flag."""
    from pydantic import ValidationError

    from shopbench.traces.report import ReportConfig

    def build(**values: str | None) -> ReportConfig:
        given = {k: v for k, v in values.items() if v is not None}
        try:
            return ReportConfig.model_validate(given)
        except ValidationError as e:
            name = first_error(e).field
            raise typer.BadParameter(
                f"{given.get(name)!r}: {first_problem(e, located=False)}",
                param_hint=f"--{name.replace('_', '-')}",
            ) from None

    return Block("config", model_options(ReportConfig), build)


@traces_app.command("report")
@takes(_report_config_block())
def report_command(
    miner: int = typer.Option(..., "--miner", min=0, help="the miner's uid"),
    root: Path = typer.Option(..., "--root", help="archive root (the store's directory)"),
    out: Path = typer.Option(..., "--out", help="the HTML file to write"),
    signed_by: str | None = _signed_by(),
    force: bool = typer.Option(False, "--force", help="overwrite --out if it exists"),
    config: Any = None,  # the block's ReportConfig (imported lazily, as the command runs)
) -> None:
    """Write one miner's report (episodes, scores, failures by kind, the judge gates it
    failed) as one HTML file that loads nothing from anywhere."""
    if out.is_dir() or (out.exists() and not force):
        why = "is a folder" if out.is_dir() else "exists (pass --force to overwrite it)"
        raise typer.BadParameter(f"{out} {why}", param_hint="--out")
    from shopbench.archive.errors import ArchiveError, NotFound

    try:
        from shopbench.traces.api.report_page import write_report
    except ImportError as e:
        raise ArchiveError(
            f"traces report needs the api extra: pip install -e '.[api]' ({e})"
        ) from None
    from shopbench.archive.layout import from_table
    from shopbench.traces.report import miner_report

    table, source = _read_source(root, TraceFilter.parse({"miner_uid": [miner]}), signed_by)
    report = miner_report(
        miner, from_table(table), config, archive=str(root), signed_by=signed_by,
        embargo_lifted=source.embargo_lifted,
    )  # fmt: skip
    if report is None:
        where = f"shards {signed_by} signed under {root}" if signed_by else str(root)
        held = "" if source.embargo_lifted else " (episodes of the live rotation bucket withheld)"
        raise NotFound(f"miner {miner}: no episodes in {where}{held}")
    write_report(report, out)
    typer.echo(f"wrote the report of miner {miner} to {out}: {report.episodes} episodes, "
               f"ASR {report.asr:.3f}, mean score {report.mean_score:.3f}")  # fmt: skip


def _run_archive_bench(config: ArchiveBenchConfig) -> BaseModel:
    """Ingest rate (group commit vs per-episode fsync), filtered query time vs a JSONL scan,
    bytes per episode vs JSONL, and peak memory while ingesting."""
    from shopbench.bench.archive import run_archive_bench

    return run_archive_bench(config)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the ``traces`` group — everything done with an archive of traces: query, export,
    pull, publish, serve — and ``bench archive`` and ``bench api``."""
    from shopbench.commands import archive, traces_annotate, traces_pull

    traces_pull.register(traces_app)
    traces_annotate.register(traces_app)
    archive.register(traces_app, app, bench_app)
    app.add_typer(traces_app, name="traces")
    comma = Spell(comma=True)
    bench_app.command("archive")(bench_command(
        ArchiveBenchConfig, _run_archive_bench, spell={"figures": comma, "rss_sizes": comma}
    ))  # fmt: skip
