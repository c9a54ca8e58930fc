"""`shopbench tasks ...`: task files (import; build, validate and stats join this group)."""

from __future__ import annotations

from pathlib import Path

import typer

tasks_app = typer.Typer(help="Task files: import, build, validate, stats.", no_args_is_help=True)

_MAX_SHOWN = 20  # rejected lines printed; the rest are counted


@tasks_app.command("import")
def import_tasks(
    file: Path = typer.Argument(..., help="task file: ShoppingBench JSONL or ours"),
    out: Path = typer.Option(..., "--out", help="where to write the tasks"),
    intent: str | None = typer.Option(
        None,
        "--intent",
        help="product, shop, voucher, knowledge (or web); inferred per record when omitted",
    ),
    to: str = typer.Option(
        "shopbench", "--to", help="output format: shopbench (ours) or shoppingbench"
    ),
    strict: bool = typer.Option(False, "--strict", help="stop at the first malformed line"),
) -> None:
    """Read a task file, report lines read and rejected, and write the tasks that loaded."""
    from shopbench.errors import TaskError
    from shopbench.tasks.io import TASK_FORMATS, read_tasks, write_tasks
    from shopbench.tasks.shoppingbench_format import intent_name

    if to not in TASK_FORMATS:
        raise TaskError(f"--to {to!r} is not a task format (allowed: {', '.join(TASK_FORMATS)})")
    if intent is not None:
        intent_name(intent)  # reject a bad --intent before reading anything
    load = read_tasks(file, intent=intent, strict=strict)
    written = write_tasks(out, load.tasks, to)  # type: ignore[arg-type]
    for line in load.rejected[:_MAX_SHOWN]:
        typer.echo(f"rejected {line}", err=True)
    if len(load.rejected) > _MAX_SHOWN:
        typer.echo(f"... and {len(load.rejected) - _MAX_SHOWN} more rejected lines", err=True)
    per_intent = ", ".join(f"{k} {v}" for k, v in load.counts().items()) or "none"
    typer.echo(
        f"{file}: {load.lines_read} lines read, {len(load.rejected)} rejected; "
        f"wrote {written} tasks ({per_intent}) to {out} as {to}"
    )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the `tasks` group to the root app."""
    app.add_typer(tasks_app, name="tasks")
