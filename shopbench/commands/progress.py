"""The progress bar every long-running command shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

