"""`shopbench verify`: replay an archive against a catalog and re-grade every episode, and
`shopbench bench verify`.

The catalog is either a folder (``--catalog``) or built here from the validator's revealed
seed (``--seed --products``); the tasks come from task files (``--tasks``) or are
regenerated from the seed exactly as the validator's task bank does
(:mod:`shopbench.tasks.bank`).
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from shopbench.bench.verify import VerifyBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import json_option, quiet_option
from shopbench.commands.flags import Flags
from shopbench.records.task import INTENTS, Intent
from shopbench.verify.config import MAX_BANK_PER_INTENT, VerifyConfig
from shopbench.verify.errors import VerifyError

if TYPE_CHECKING:
    from shopbench.records.trajectory import Trajectory
    from shopbench.tasks.model import Task

_CONFIG = Flags(VerifyConfig)


class _Banks:
    """Tasks regenerated from the seed: the validator's own task bank, one per epoch."""

    def __init__(self, directory: Path, catalog: Path, generation: int, seed: int,
                 intents: list[Intent], per_intent: int) -> None:  # fmt: skip
        from shopbench.tasks.bank import TaskBank

        self.bank = TaskBank(directory, catalog, generation, seed, intents, per_intent)
        self._by_epoch: dict[int, dict[str, Task]] = {}

    def task(self, record: Trajectory) -> Task | None:
        """The task of `record`'s id in the bank of its epoch (None without an epoch)."""
        epoch = record.epoch
        if epoch is None:
            return None
        if epoch not in self._by_epoch:
            self._by_epoch[epoch] = {t.id: t for t in self.bank.bank(epoch)}
        return self._by_epoch[epoch].get(record.task_id)


def _intents(text: str) -> list[Intent]:
    """The intents named in `text` (comma-separated), in order; VerifyError for another word."""
    named = [i.strip() for i in text.split(",") if i.strip()]
    known = {str(i): i for i in INTENTS}
    bad = [i for i in named if i not in known] or ([] if named else ["(none)"])
    if bad:
        raise VerifyError(f"--intents: {bad[0]!r} is not an intent (allowed: {', '.join(known)})")
    return [known[i] for i in named]


def _catalog(catalog: Path | None, seed: int | None, products: int | None, chunk_size: int,
             workers: int, work: Path, quiet: bool) -> Path:  # fmt: skip
    """The catalog folder to replay against: the one given (checked against `seed`), else
    one built from `seed` under `work`."""
    from shopbench.catalog.errors import CatalogError
    from shopbench.catalog.layout import read_manifest, seed_hash

    if catalog is not None:
        if seed is not None:
            try:
                manifest = read_manifest(catalog)
            except CatalogError as e:
                raise VerifyError(f"--catalog: {e}") from None
            if manifest.seed_hash != seed_hash(seed):
                raise VerifyError(f"--catalog {catalog} was not built from --seed {seed}")
        return catalog
    if seed is None or products is None:
        raise VerifyError("name a catalog: --catalog DIR, or --seed N --products N to build one")
    from shopbench.catalog.store import build_catalog
    from shopbench.commands.progress import progress_bar

    out = work / "catalog"
    if quiet:
        build_catalog(out, products, seed, chunk_size=chunk_size, workers=workers)
    else:
        with progress_bar() as bar:
            task = bar.add_task("building the catalog from the seed", total=products)
            build_catalog(out, products, seed, chunk_size=chunk_size, workers=workers,
                          progress=lambda n: bar.advance(task, n))  # fmt: skip
    return out


def _table(report: Any) -> str:
    lines = [
        f"archive {report.archive}: {report.episodes} episodes checked, {report.verified} "
        f"verified, {report.mismatched} with mismatches ({report.rounds_checked} rounds, "
        f"signatures {'checked' if report.signatures_checked else 'not checked'}, "
        f"{report.seconds:g} s)",
        f"catalog {report.catalog} (seed sha256 {report.catalog_seed_hash})",
        f"keys: {report.keys_derived} of {report.episodes} episodes replayed under their own "
        "key, derived from the seed; the rest took their tokens from the record",
    ]
    lines += [f"left out {shard}" for shard in report.left_out]
    if report.mismatches:
        width = max(len(m.field) for m in report.mismatches)
        lines.append(f"{'episode':<17} {'field':<{width}}  expected -> got")
        lines += [f"{m.episode_id:<17} {m.field:<{width}}  {m.expected} -> {m.got}"
                  for m in report.mismatches]  # fmt: skip
    return "\n".join(lines)


def verify_command(
    archive: Path = typer.Option(..., "--archive", help="archive folder (a store's or a pull's)"),
    catalog: Path | None = typer.Option(
        None, "--catalog", help="catalog folder to replay against (else --seed and --products)"
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="the validator's revealed catalog seed: builds the catalog "
        "(with --products) and regenerates the task banks; with --catalog, checks it",
    ),
    products: int | None = typer.Option(
        None, "--products", min=1, help="products of the catalog built from --seed"
    ),
    chunk_size: int = typer.Option(
        50_000, "--chunk-size", min=1, help="products per part of that build (part of the catalog)"
    ),
    workers: int = typer.Option(2, "--workers", min=1, help="generator processes"),
    tasks: list[Path] = typer.Option(
        [], "--tasks", help="task file (repeatable; default: the banks regenerated from --seed)"
    ),
    generation: int = typer.Option(
        0, "--generation", min=0, help="the catalog generation the seed is (bank seeds)"
    ),
    bank_per_intent: int | None = typer.Option(
        None,
        "--bank-per-intent",
        min=1,
        max=MAX_BANK_PER_INTENT,
        help="tasks per intent in each epoch's bank (default: the validator's default)",
    ),
    intents: str = typer.Option(
        ",".join(INTENTS), "--intents", help="the validator's intents, in its order"
    ),
    signed_by: str | None = typer.Option(
        None,
        "--signed-by",
        help="read only this validator's signed shards and require its signature on every record",
    ),
    work: Path | None = typer.Option(
        None, "--work", help="where the catalog and banks are built (default: a temp dir)"
    ),
    rounds: bool = _CONFIG.option("rounds", "--rounds/--no-rounds"),
    derived_keys: bool = _CONFIG.option("derived_keys", "--derived-keys/--any-keys"),
    as_json: bool = json_option("the report"),
    quiet: bool = quiet_option(),
) -> None:
    """Replay every archived episode's tool calls against the catalog and re-grade it; exit
    1 when any episode does not reproduce exactly (or a shard was left out)."""
    from shopbench.env.env import ShoppingEnv
    from shopbench.tasks.io import read_tasks
    from shopbench.verify.replay import RevealedSeed
    from shopbench.verify.run import TaskIndex, TaskSource, read_archive, verify_records

    wanted = _intents(intents)  # checked before anything is read or built
    if catalog is None and products is not None:
        from shopbench.catalog.errors import CatalogError
        from shopbench.catalog.store import check_build

        try:
            check_build(products, chunk_size, workers)
        except CatalogError as e:
            raise VerifyError(str(e)) from None
    if derived_keys and seed is None:
        raise VerifyError("--derived-keys needs the revealed seed: --seed N")
    revealed = RevealedSeed(seed=seed, generation=generation) if seed is not None else None
    trust = None
    if signed_by:
        from shopbench.archive.reader import Trust
        from template.signing import HotkeyVerifier

        trust = Trust(validator=signed_by, verifier=HotkeyVerifier())
    with ExitStack() as stack:
        if work is None:
            scratch = tempfile.TemporaryDirectory(prefix="shopbench-verify-")
            work = Path(stack.enter_context(scratch))
        records, left_out = read_archive(archive, trust)
        folder = _catalog(catalog, seed, products, chunk_size, workers, work, quiet)
        source: TaskSource
        if tasks:
            source = TaskIndex(t for f in tasks for t in read_tasks(f, strict=True).tasks)
        elif seed is not None:
            source = _Banks(work / "banks", folder, generation, seed,
                            wanted,
                            bank_per_intent or _default_bank_per_intent())  # fmt: skip
        else:
            raise VerifyError("name the tasks: --tasks FILE, or --seed N to regenerate the banks")
        env = ShoppingEnv.open(folder)
        check = _CONFIG.build(rounds=rounds, derived_keys=derived_keys)

        if quiet or as_json:
            report = verify_records(records, env, source, archive=str(archive),
                                    left_out=left_out, trust=trust, config=check,
                                    revealed=revealed)  # fmt: skip
        else:
            from shopbench.commands.progress import progress_bar

            with progress_bar() as bar:
                task = bar.add_task("replaying and re-grading", total=len(records))
                report = verify_records(
                    records, env, source, archive=str(archive), left_out=left_out,
                    trust=trust, config=check, progress=lambda n: bar.advance(task, n),
                    revealed=revealed,
                )  # fmt: skip
    typer.echo(report.model_dump_json() if as_json else _table(report))
    if not report.ok:
        raise typer.Exit(1)


def _default_bank_per_intent() -> int:
    """The validator's default bank size per intent (its config declares it)."""
    from template.base.config import ValidatorNeuronConfig

    default = ValidatorNeuronConfig.model_fields["bank_per_intent"].default
    assert isinstance(default, int)
    return default


def _run_bench(config: VerifyBenchConfig) -> dict[str, Any]:
    """Episodes verified per second: real episodes archived, then replayed and re-graded."""
    from shopbench.bench.verify import run

    return run(config.catalog, tasks=config.tasks, episodes=config.episodes,
               seconds=config.seconds, seed=config.seed)  # fmt: skip


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `verify` to the root app and `verify` to the bench group."""
    app.command("verify")(verify_command)
    bench_app.command("verify")(bench_command(VerifyBenchConfig, _run_bench))
