"""`shopbench tasks ...`: task files (import; build, validate and stats join this group)."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import BaseModel

from shopbench.bench.tasks import TaskBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import catalog_option, json_option
from shopbench.commands.flags import Flags, Spell
from shopbench.tasks.generate import BuildConfig
from shopbench.tasks.intent_registry import intent_names

_BUILD = Flags(BuildConfig)
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
    from shopbench.tasks.errors import TaskError
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


def _intent_list(text: str) -> list[str]:
    return _intent_names([p.strip() for p in text.split(",")])


def _intent_names(given: list[str]) -> list[str]:
    """The intents named (ShoppingBench's names too), each once; TaskError when none."""
    from shopbench.tasks.errors import TaskError
    from shopbench.tasks.shoppingbench_format import intent_name

    names = [x for x in given if x]
    if not names:
        raise TaskError(f"--intents is empty (allowed: {', '.join(intent_names())})")
    return list(dict.fromkeys(intent_name(x) for x in names))


@tasks_app.command("build")
def build_command(
    catalog: Path = catalog_option(),
    out: Path = typer.Option(..., "--out", help="task file to write (JSONL)"),
    n: int = _BUILD.option("n", "--n", bounds=False),
    intents: str = typer.Option(
        ",".join(intent_names()), "--intents", help="comma-separated intents"
    ),
    split: str = _BUILD.option("split", "--split", bounds=False),
    epoch: int | None = _BUILD.option("epoch", "--epoch", bounds=False),
    buckets: int = _BUILD.option("n_buckets", "--buckets", bounds=False),
    seed: int | None = typer.Option(
        None, "--seed", help="sampling seed; omitted: a fresh secret one (not recorded)"
    ),
    exclude: list[Path] | None = typer.Option(
        None, "--exclude", help="task file whose targets' groups are forced held out (repeatable)"
    ),
    workers: int = _BUILD.option("workers", "--workers", bounds=False),
    max_attempts: int = _BUILD.option("max_attempts", "--max-attempts", bounds=False),
    window: int = _BUILD.option("satisfy_window", "--window", bounds=False),
    paraphrase_url: str | None = typer.Option(
        None, "--paraphrase-url", help="OpenAI-compatible API root that rewrites the queries"
    ),
    paraphrase_model: str | None = typer.Option(
        None, "--paraphrase-model", help="model name for --paraphrase-url"
    ),
) -> None:
    """Generate validated tasks; exit status 1 when an intent gave fewer than --n.

    The API key of --paraphrase-url, if it needs one, is read from SHOPBENCH_PARAPHRASE_KEY.
    """
    import secrets

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from shopbench.catalog.store import Catalog
    from shopbench.tasks.errors import TaskError
    from shopbench.tasks.generate import build_tasks
    from shopbench.tasks.io import read_tasks, write_tasks
    from shopbench.tasks.split import target_groups

    if (paraphrase_url is None) != (paraphrase_model is None):
        raise TaskError("--paraphrase-url and --paraphrase-model go together")
    names = _intent_list(intents)
    checked = _BUILD.build_or(
        TaskError, catalog=catalog, intents=names, n=n, split=split, epoch=epoch,
        n_buckets=buckets, seed=0, workers=workers, max_attempts=max_attempts,
        satisfy_window=window,
    )  # fmt: skip
    cat = Catalog.open(catalog)
    forced: set[str] = set()
    for path in exclude or []:
        load = read_tasks(path)
        groups, unplaced = target_groups(load.tasks, cat)
        forced |= groups
        note = f", {unplaced} targets not in the catalog" if unplaced else ""
        typer.echo(f"{path}: {len(groups)} groups forced held out{note}", err=True)
    cfg = checked.model_copy(update={
        "seed": seed if seed is not None else secrets.randbits(63),
        "forced_heldout": frozenset(forced),
    })  # fmt: skip
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), transient=True,
    ) as bar:
        ids = {i: bar.add_task(i, total=n) for i in names}
        result = build_tasks(cfg, progress=lambda intent, k: bar.advance(ids[intent], k))
    tasks = result.tasks
    if paraphrase_url is not None and paraphrase_model is not None:
        from shopbench.openai_compat.keys import api_key_from_env
        from shopbench.tasks.paraphrase import API_KEY_VARIABLES, ParaphraseConfig, paraphrase

        key = api_key_from_env(API_KEY_VARIABLES)
        config = ParaphraseConfig(base_url=paraphrase_url, model=paraphrase_model, api_key=key)
        tasks, preport = paraphrase(config, tasks)
        kept = ", ".join(f"{why}: {n}" for why, n in preport.kept.items()) or "none"
        typer.echo(f"paraphrased {preport.rewritten}/{len(tasks)} queries (kept: {kept})")
    write_tasks(out, tasks)
    short = False
    for r in result.reports:
        line = f"{r.intent}: {r.produced}/{r.requested} tasks ({r.attempts} drafts)"
        if r.produced < r.requested:
            short = True
            why = r.unsupported or (
                "most drafts failed: " + next(iter(r.rejections), "unknown reason")
            )
            line += f"; not supported by this catalog: {why}"
        typer.echo(line)
    typer.echo(f"wrote {len(tasks)} tasks to {out}")
    if short:
        raise typer.Exit(1)


@tasks_app.command("validate")
def validate_command(
    file: Path = typer.Argument(..., help="task file (ours or ShoppingBench's)"),
    catalog: Path = catalog_option(),
    exclude: list[Path] | None = typer.Option(
        None, "--exclude", help="task file whose targets' groups were forced held out"
    ),
    as_json: bool = json_option("the report"),
) -> None:
    """Re-check every task against the catalog, without any model; exit status 1 on a fault.

    Checked: targets pass their grader, satisfying sets, findability, the split, clusters.
    """
    from shopbench.catalog.store import Catalog
    from shopbench.tasks.io import read_tasks
    from shopbench.tasks.split import SplitRule, target_groups
    from shopbench.tasks.validate import validate_file

    cat = Catalog.open(catalog)
    rule = SplitRule()
    for path in exclude or []:
        rule = rule.with_forced(target_groups(read_tasks(path).tasks, cat)[0])
    report = validate_file(file, cat.index, rule)
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        for p in report.problems:
            typer.echo(p, err=True)
        if report.n_problems > len(report.problems):
            typer.echo(f"... and {report.n_problems - len(report.problems)} more", err=True)
        for c in report.split_clusters:
            typer.echo(f"cluster {c} appears in more than one split", err=True)
        verdict = "all valid" if report.ok else "INVALID"
        typer.echo(f"{file}: {report.valid}/{report.tasks} tasks valid; {verdict}")
    if not report.ok:
        raise typer.Exit(1)


@tasks_app.command("stats")
def stats_command(
    file: Path = typer.Argument(..., help="task file (ours or ShoppingBench's)"),
    as_json: bool = json_option("the statistics"),
) -> None:
    """Per intent: count, constraints per slot, slot counts, voucher mix, query length."""
    from shopbench.tasks.io import read_tasks
    from shopbench.tasks.stats import task_stats

    stats = task_stats(read_tasks(file).tasks)
    if as_json:
        typer.echo(stats.model_dump_json())
        return
    typer.echo(f"{file}: {stats.total} tasks")
    for intent, s in stats.intents.items():
        typer.echo(f"{intent}:")
        for k, v in s.model_dump().items():
            if v is not None:
                typer.echo(f"  {k:>26}: {v}")


def _run_bench(config: TaskBenchConfig) -> BaseModel:
    """Validated tasks per second on a catalog (the target: 10,000 from 1M in 2 minutes)."""
    from shopbench.bench.tasks import run

    return run(config)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the `tasks` group to the root app."""
    app.add_typer(tasks_app, name="tasks")
    intents = Spell(comma=True, parse=_intent_names, default=",".join(intent_names()))
    bench_app.command("tasks")(
        bench_command(TaskBenchConfig, _run_bench, spell={"intents": intents})
    )
