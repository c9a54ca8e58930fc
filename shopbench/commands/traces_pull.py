"""`shopbench traces pull` and `shopbench traces publish`: the archive's object-storage ends.

The ``traces`` group (:mod:`shopbench.commands.traces`) registers these with
:func:`register`. Credentials for ``s3://`` come from the usual AWS variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``) or ``--storage-option key=…``.
"""

from __future__ import annotations

import asyncio
import re
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from shopbench.archive.remote import ArchiveSource
from shopbench.commands.blocks import (
    ENDPOINT_HELP,
    STORAGE_OPTION_HELP,
    archive_source_block,
    json_option,
    takes,
)

if TYPE_CHECKING:
    from shopbench.archive.pull.report import PullReport

_AGE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_HEAD_AGE_HELP = (
    "refuse a validator head signed longer ago than this, e.g. 90m, 6h, 2d or seconds "
    "(nothing is pulled); by default any age is accepted and printed"
)


def parse_age(text: str | None) -> float | None:
    """``--max-head-age``'s value in seconds: a positive number with an optional unit
    (``s``, ``m``, ``h``, ``d``; none is seconds); BadParameter names the flag otherwise."""
    if text is None:
        return None
    found = _AGE.fullmatch(text.strip().lower())
    seconds = float(found[1]) * _UNIT_S[found[2]] if found else 0.0
    if seconds <= 0:
        raise typer.BadParameter(
            f"{text!r}: expected a positive duration such as 90m, 6h, 2d or 3600 (seconds)",
            param_hint="--max-head-age",
        )
    return seconds


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
    as_json: bool = json_option("the report"),
    max_head_age: str | None = typer.Option(None, "--max-head-age", help=MAX_HEAD_AGE_HELP),
    source: ArchiveSource | None = None,
) -> None:
    """Fetch one validator's shards, verifying each manifest's signature, each shard's sha256
    and the validator's signed head; resume partial downloads, skip what is held, deliver every
    intact shard, and exit 1 naming what was refused, withheld or failed. The head's age is
    printed; with --max-head-age an older head is refused before anything is written. A
    symbolic link where the pull would write in --out, or in a source folder, is refused."""
    from shopbench.archive.pull.run import pull
    from shopbench.archive.pull.source import PullFilters
    from shopbench.commands.progress import progress_bar
    from template.signing import HotkeyVerifier

    try:
        dates = tuple(date.fromisoformat(d) for d in on_date)
    except ValueError as e:
        raise typer.BadParameter(f"{e}; expected YYYY-MM-DD", param_hint="--date") from None
    assert source is not None and source.validator is not None  # the block requires both
    validator, target = source.validator, source.target()
    max_age_s = parse_age(max_head_age)
    filters = PullFilters(since_block=since, intents=tuple(intent), dates=dates)
    with progress_bar() as bar:
        task = bar.add_task("pull", total=None)

        def advance(path: str, total: int) -> None:
            bar.update(task, total=total, advance=1, description=path.rsplit("/", 1)[-1])

        report = pull(
            target, out, validator=validator, verifier=HotkeyVerifier(), filters=filters,
            on_shard=advance, max_head_age_s=max_age_s,
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
    """How old the signed head checked against is (``head 4 signed 3 h 12 min ago
    (2026-…Z)``), then each thing a pull refused, found withheld or failed to fetch, one line
    each on stderr; and a warning when the source publishes no signed head to check
    withholding against."""
    if report.head is not None:
        typer.echo(report.head.age_line(), err=True)
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
    as_json: bool = json_option("the report"),
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
