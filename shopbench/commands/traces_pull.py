"""`shopbench traces pull` and `shopbench traces publish`: the archive's object-storage ends.

The ``traces`` group (:mod:`shopbench.commands.traces`) registers these with
:func:`register`. Credentials for ``s3://`` come from the usual AWS variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``) or ``--storage-option key=…``.
"""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from shopbench.archive.remote import ArchiveSource
from shopbench.commands.blocks import (
    ENDPOINT_HELP,
    STORAGE_OPTION_HELP,
    archive_source_block,
    takes,
)

if TYPE_CHECKING:
    from shopbench.archive.pull import PullReport


@takes(archive_source_block(
    "--from", "s3://bucket/prefix, file:///path, DIR, or http(s)://HOST (a server)",
    validator_required=True,
))  # fmt: skip
def pull_command(
    out: Path = typer.Option(..., "--out", help="local folder to pull into"),
    since: int | None = typer.Option(
        None, "--since", min=0, help="only shards holding an episode at or after this block"
    ),
    intent: list[str] = typer.Option([], "--intent", help="only this intent (repeatable)"),
    on_date: list[str] = typer.Option(
        [], "--date", help="only this UTC date, YYYY-MM-DD (repeatable)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
    source: ArchiveSource | None = None,
) -> None:
    """Fetch one validator's shards, verifying each manifest's signature, each shard's sha256
    and the validator's signed head; resume partial downloads, skip what is held, deliver every
    intact shard, and exit 1 naming what was refused, withheld or failed."""
    from shopbench.archive.pull import PullFilters, pull
    from shopbench.commands.progress import progress_bar
    from template.signing import HotkeyVerifier

    try:
        dates = tuple(date.fromisoformat(d) for d in on_date)
    except ValueError as e:
        raise typer.BadParameter(f"{e}; expected YYYY-MM-DD", param_hint="--date") from None
    assert source is not None and source.validator is not None  # the block requires both
    validator, target = source.validator, source.target()
    filters = PullFilters(since_block=since, intents=tuple(intent), dates=dates)
    with progress_bar() as bar:
        task = bar.add_task("pull", total=None)

        def advance(path: str, total: int) -> None:
            bar.update(task, total=total, advance=1, description=path.rsplit("/", 1)[-1])

        report = pull(
            target, out, validator=validator, verifier=HotkeyVerifier(), filters=filters,
            on_shard=advance,
        )  # fmt: skip
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        typer.echo(
            f"fetched {len(report.fetched)} shards ({len(report.resumed)} resumed), held "
            f"{len(report.held)}, filtered out {report.filtered}, quarantined "
            f"{len(report.quarantined)}, withheld {len(report.withheld)}, failed "
            f"{len(report.failed)}; {report.rows} episodes in {out}"
        )
    say_pull_problems(report, validator)
    if not report.complete:
        raise typer.Exit(1)


def say_pull_problems(report: PullReport, validator: str) -> None:
    """Each thing a pull refused, found withheld or failed to fetch, one line on stderr;
    and a warning when the source publishes no signed head to check withholding against."""
    for line in report.problems():
        typer.echo(line, err=True)
    if report.head is None and report.head_problem is None:
        typer.echo(
            f"warning: the source publishes no signed head for {validator}: shards it withholds "
            "cannot be detected",
            err=True,
        )


def publish_command(
    root: Path = typer.Argument(..., help="the local archive root"),
    to: str = typer.Option(..., "--to", help="s3://bucket/prefix, file:///path or DIR"),
    endpoint_url: str | None = typer.Option(None, "--endpoint-url", help=ENDPOINT_HELP),
    storage_option: list[str] = typer.Option([], "--storage-option", help=STORAGE_OPTION_HELP),
    as_json: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
) -> None:
    """Upload the archive's sealed public shards the destination lacks, each shard before its
    manifest; what fails stays pending for the next run (exit 1)."""
    from shopbench.archive.remote import RemoteTarget, ShardUploader, parse_storage_options
    from shopbench.archive.store import load_embargo

    options = parse_storage_options(storage_option, endpoint_url)
    embargo = load_embargo(root)
    uploader = ShardUploader(root, RemoteTarget(url=to, storage_options=options),
                             is_public=embargo.is_public)  # fmt: skip
    report = asyncio.run(uploader.sync())
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        typer.echo(
            f"uploaded {len(report.uploaded)} shards, held {report.held}, embargoed "
            f"{len(report.embargoed)}, failed {len(report.failed)}"
        )
    for path, error in report.failed.items():
        typer.echo(f"failed {path}: {error}", err=True)
    if report.failed:
        raise typer.Exit(1)


def register(traces_app: typer.Typer) -> None:
    """Add ``pull`` and ``publish`` to the ``traces`` group."""
    traces_app.command("pull")(pull_command)
    traces_app.command("publish")(publish_command)
