"""What the arena shows while it runs: stages, a progress bar per round, the leaderboard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table


class ArenaObserver(Protocol):
    """Receives the arena's progress (the terminal view, or nothing in tests)."""

    def stage(self, text: str) -> None: ...
    def catalog_start(self, total: int) -> None: ...
    def catalog_advance(self, n: int) -> None: ...
    def round_start(self, index: int, rounds: int, episodes: int) -> None: ...
    def episode_done(self, uid: int, success: bool | None) -> None: ...
    def round_end(self, summary: str) -> None: ...
    def leaderboard(self, rows: Sequence[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...


class QuietView:
    """Shows nothing."""

    def stage(self, text: str) -> None:
        return None

    def catalog_start(self, total: int) -> None:
        return None

    def catalog_advance(self, n: int) -> None:
        return None

    def round_start(self, index: int, rounds: int, episodes: int) -> None:
        return None

    def episode_done(self, uid: int, success: bool | None) -> None:
        return None

    def round_end(self, summary: str) -> None:
        return None

    def leaderboard(self, rows: Sequence[dict[str, Any]]) -> None:
        return None

    def close(self) -> None:
        return None


class RichView:
    """Live progress and the final leaderboard on a terminal (plain lines when piped)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=False)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._wins = 0

    def _bar(self, label: str, total: int) -> None:
        self._finish_bar()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=self.console,
        )  # fmt: skip
        self._progress.start()
        self._task = self._progress.add_task(label, total=total, note="")

    def _finish_bar(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None

    def stage(self, text: str) -> None:
        self._finish_bar()
        self.console.print(f"[bold]•[/bold] {text}")

    def catalog_start(self, total: int) -> None:
        self._bar("catalog  ", total)

    def catalog_advance(self, n: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def round_start(self, index: int, rounds: int, episodes: int) -> None:
        self._wins = 0
        self._bar(f"round {index + 1}/{rounds}", episodes)

    def episode_done(self, uid: int, success: bool | None) -> None:
        if self._progress is None or self._task is None:
            return
        self._wins += bool(success)
        self._progress.update(self._task, advance=1, note=f"{self._wins} solved")

    def round_end(self, summary: str) -> None:
        self._finish_bar()
        self.console.print(f"  {summary}")

    def leaderboard(self, rows: Sequence[dict[str, Any]]) -> None:
        self._finish_bar()
        table = Table(title="leaderboard", title_justify="left")
        for name, justify in (
            ("uid", "right"), ("policy", "left"), ("episodes", "right"), ("ASR", "right"),
            ("process", "right"), ("EMA", "right"), ("weight", "right"), ("copy of", "right"),
        ):  # fmt: skip
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for r in rows:
            copy_of = r.get("copy_of")
            table.add_row(
                # a miner's card names an external policy: its text, never markup
                str(r["uid"]), escape(r["policy"]), str(r["episodes"]), f"{r['asr']:.2f}",
                f"{r['process_score']:.2f}", f"{r['ema']:.3f}", f"{r['weight']:.3f}",
                "" if copy_of is None else f"uid {copy_of}",
            )  # fmt: skip
        self.console.print(table)

    def close(self) -> None:
        self._finish_bar()
