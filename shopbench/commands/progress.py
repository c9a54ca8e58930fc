"""The progress bar every long-running command shows, and the bench result printer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.progress import Progress, ProgressColumn


def progress_bar(*extra: ProgressColumn) -> Progress:
    """A rich bar: description, bar, done/total, any extra columns, elapsed, remaining."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *extra,
        TimeElapsedColumn(), TimeRemainingColumn(),
    )


def echo_result(result: BaseModel, as_json: bool) -> None:
    """Print a benchmark result: one JSON object, or aligned `key: value` lines."""
    if as_json:
        typer.echo(result.model_dump_json())
        return
    for k, v in result.model_dump().items():
        typer.echo(f"{k:>16}: {v}")
