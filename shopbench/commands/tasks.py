"""CLI commands (filled in by their owners)."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add this group's commands to the root app and the bench group."""
