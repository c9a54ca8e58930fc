"""A curation run: archive in, curated set and report out, in two streaming passes.

Pass one reads every sealed shard in small batches, rebuilds each record, and appends one
ledger row per episode: its ids and true policy when known, then what each rule of the
registry reads off it, in pipeline order (a per-episode rule's reason, the columns a rule's
SQL reads: the narrator's signals, the call skeleton, the reply fingerprint, the MinHash
signature), then its weight and recovery tags. A record that does not rebuild (missing
fields, an unknown schema) is a ledger row rejected with the reason. The rules then run over
the ledger (:meth:`~shopbench.curation.ledger.Ledger.run`). Pass
two reads the shards again in the same order and copies the kept rows, untouched, into the
curated set with their weights, tags and masks. Nothing but one batch and the ledger's
bounded cache is in memory at any time.

Both passes are per-shard stages (:mod:`shopbench.curation.stages`) that an engine runs
(:mod:`shopbench.curation.engine`): here, shard after shard, or on a Ray cluster's workers.
The ledger, the rules' decisions, the report and the writer are this module's whatever the
engine, so the curated set is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shopbench.archive.remote import ArchiveSource
from shopbench.archive.signing import Verifier
from shopbench.curation.card import shard_check, write_curated_card
from shopbench.curation.config import CurateConfig
from shopbench.curation.curated import CuratedWriter, check_unwritten
from shopbench.curation.curator import Curator
from shopbench.curation.engine import Engine, LocalEngine
from shopbench.curation.errors import CurationError, EmptyResult
from shopbench.curation.heap import settled_heap
from shopbench.curation.ledger import Ledger
from shopbench.curation.report.build import build_report
from shopbench.curation.report.model import CurationReport
from shopbench.curation.report.render import write_report
from shopbench.curation.source import ArchiveShards, list_shards, local_archive
from shopbench.curation.stages import kept_by_shard, plan_shards
from shopbench.curation.truth import Truth

WORK_DIR = "_work"
PULLED_DIR = "_archive"


def curate(
    archive: ArchiveSource | str | Path,
    out: Path,
    cfg: CurateConfig,
    *,
    verifier: Verifier | None,
    truth: Truth | None = None,
    memory_limit: str = "512MB",
    progress: Callable[[int], None] | None = None,
    engine: Engine | None = None,
) -> CurationReport:
    """Curate `archive` (an :class:`ArchiveSource`: a folder or URL and the validator its
    shards must carry; a bare folder or URL names no validator) into `out` (``data/``,
    ``report.json``, ``report.md``); the report. EmptyResult (after writing the report)
    when nothing is kept; CurationError for a config, archive, truth or test set that
    cannot be used. `engine` runs the two passes (:mod:`shopbench.curation.engine`; by
    default here, in this process): the result is the same whatever the engine."""
    source = archive if isinstance(archive, ArchiveSource) else ArchiveSource(
        location=str(archive)
    )  # fmt: skip
    validator = source.validator
    out = Path(out)
    check_unwritten(out)
    curator = Curator(cfg, verifier, truth)  # test sets load before any work
    root, missing = local_archive(source, out / PULLED_DIR, verifier=verifier)
    checking = verifier if cfg.validity.verify_signatures or validator else None
    listed = list_shards(root, checking, validator)
    listed.refused.update(missing)
    ledger = Ledger(out / WORK_DIR, [r for r, _ in curator.plan], memory_limit=memory_limit)
    try:
        with settled_heap():
            report = _run(
                curator, listed, ledger, cfg, out, source.location, truth, progress,
                engine or LocalEngine(),
            )  # fmt: skip
    finally:
        ledger.close()
    write_curated_card(out, report, listed, shard_check(checking, validator))
    return report


def _run(
    curator: Curator, listed: ArchiveShards, ledger: Ledger, cfg: CurateConfig, out: Path,
    archive: str, truth: Truth | None, progress: Callable[[int], None] | None, engine: Engine,
) -> CurationReport:  # fmt: skip
    """Both passes and the report of :func:`curate`."""
    plan = plan_shards(listed.shards)
    for table in engine.ledger_tables(curator, plan):
        ledger.append_table(table)
        if progress is not None:
            progress(table.num_rows)
    ledger.run(curator.plan)
    report = build_report(
        ledger, cfg, listed.refused, truth=truth, archive=archive,
        test_set_sizes={ts.name: ts.size for ts in curator.test_sets},
        test_set_digests={ts.name: ts.sha256 for ts in curator.test_sets},
    )  # fmt: skip
    if report.kept == 0:
        write_report(report, out)
        raise EmptyResult(
            f"nothing kept of {report.episodes_in} episodes (see {out / 'report.md'} "
            "for what each rule dropped)"
        )
    writer = CuratedWriter(out)
    try:
        for table in engine.kept_tables(kept_by_shard(ledger.iter_kept(), plan)):
            writer.write_table(table)
    finally:
        files = writer.close()
    if writer.rows != report.kept:
        raise CurationError(
            f"the archive changed while curating ({writer.rows} rows written, "
            f"{report.kept} decided)"
        )
    report = report.model_copy(update={"files": [str(f) for f in files]})
    write_report(report, out)
    return report
