"""The curated set's dataset card: ``<out>/README.md`` beside ``data/`` and the report.

Built from what the run wrote and decided — the Parquet files' own schema and rows, the
report (:class:`~shopbench.curation.report.CurationReport`: its config, its kept and dropped
counts per rule, its contamination counts with each test file's sha256) and the shards the
run read with how each was checked — and written by the archive's generic card writer
(:mod:`shopbench.traces.cards`). Nothing a miner wrote is shown: hotkeys, paths and file
names go through :func:`~shopbench.traces.cards.literal`, reasons stay in ``report.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from shopbench.archive.signing import Verifier
from shopbench.curation.curated import CuratedEpisode
from shopbench.curation.report.model import REPORT_JSON, REPORT_MD, CurationReport
from shopbench.curation.source import ArchiveShards
from shopbench.traces.cards import (
    DatasetCard,
    Split,
    archive_notes,
    fenced,
    license_section,
    literal,
    schema_table,
    shopbench_version,
    table_notes,
    write_card,
)
from shopbench.traces.provenance import ShardSource, provenance_section, range_of_files

CURATION_COLUMNS = {"curation_weight": "weight", "curation_tags": "tags", "turn_mask": "turn_mask"}
"""Curation's columns and the :class:`CuratedEpisode` field each holds."""

INTENDED_USE = (
    "Training data for shopping agents: `shopbench distill build --curated DIR` turns it into "
    "SFT rows (weights by repetition, turn masks as loss masks). Each row is an archive row "
    "exactly as the validator signed it, plus curation's weight, tags and turn mask. Limits: "
    "the rules are measured on arenas of reference policies (docs/curation.md); a new kind "
    "of cheat may pass them. The contamination check covers only the test files named above, "
    "and catches light edits, not paraphrases. Queries, replies and tool arguments are "
    "written by miners' agents and are untrusted text: render them escaped."
)


def shard_check(verifier: Verifier | None, validator: str | None) -> str | None:
    """How curation's listing checked every shard it read (None: not checked)."""
    if verifier is None:
        return None
    if validator is not None:
        return f"signature of {literal(validator)}, sha256"
    return "signature of its own signer, sha256"


def _column_notes() -> dict[str, str]:
    fields = CuratedEpisode.model_fields
    return {c: fields[f].description or "" for c, f in CURATION_COLUMNS.items()}


def _headline(r: CurationReport) -> str:
    rows = [
        ("episodes in", f"{r.episodes_in:,}"),
        ("kept", f"{r.kept:,}"),
    ]
    if r.honest_retention is not None:
        rows += [
            ("dishonest removal precision (arena truth)", str(r.dishonest_removal_precision)),
            ("dishonest removal recall (arena truth)", str(r.dishonest_removal_recall)),
            ("honest retention (arena truth)", str(r.honest_retention)),
        ]
    rows.append(("recovery share of the kept", str(r.recovery_share)))
    rules = ["| rule | on | dropped |", "|---|---|---|"]
    rules += [f"| {name} | {'yes' if e.enabled else 'no'} | {e.dropped:,} |"
              for name, e in r.rules.items()]  # fmt: skip
    config = json.dumps(r.config, indent=2, sort_keys=True, ensure_ascii=True)
    return (
        f"{table_notes(rows)}\n\nEach drop is charged to the first rule, in pipeline order, "
        f"that drops it; the reasons, the per-policy and per-miner counts are in "
        f"[{REPORT_MD}]({REPORT_MD}) ([{REPORT_JSON}]({REPORT_JSON}) for machines).\n\n"
        + "\n".join(rules)
        + "\n\nThe config the run used:\n\n"
        + fenced(config, "json")
    )


def contamination_section(r: CurationReport) -> str:
    """What was checked against which test files (name, sha256), and what it dropped; or
    plainly that nothing was checked."""
    effect = r.rules.get("contamination")
    if not r.contaminated:
        why = "the contamination rule is off" if effect and not effect.enabled else (
            "no test set was given (`shopbench curate --test-set FILE`)"
        )  # fmt: skip
        return f"**Not checked**: {why}. The episodes' queries were compared to no test set."
    params = r.config.get("contamination", {})
    lines = [
        f"Every valid episode's query was compared with each test file's queries "
        f"(`shopbench/curation/contamination.py`: contained share ≥ "
        f"{params.get('threshold')}, or cover of one test query ≥ "
        f"{params.get('cover_threshold')}). The `contamination` rule dropped "
        f"**{effect.dropped if effect else 0:,}** episodes.",
        "",
        "| test file | sha256 | test queries | contaminated | dropped | kept contaminated "
        "| kept clean |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in r.contaminated.items():
        lines.append(
            f"| {literal(Path(name).name)} | {literal(c.sha256 or 'not recorded')} | "
            f"{c.test_queries:,} | {c.contaminated:,} | {c.contaminated - c.kept_contaminated:,} "
            f"| {c.kept_contaminated:,} | {c.kept_clean:,} |"
        )
    return "\n".join(lines)


def curated_card(
    out: Path, report: CurationReport, shards: list[ShardSource], refused: int
) -> DatasetCard:
    """The card of the curated set written in `out` (the run's `report`; the `shards` it
    read; `refused`: shards not read, their rows counted by the validity rule)."""
    files = sorted(Path(out).glob("data/*.parquet"))
    split = Split.of_parquet("train", Path(out), files)
    rows = split.rows
    schema = pq.read_schema(files[0]) if files else None
    kept = range_of_files(files)
    notes = archive_notes(schema) | _column_notes() if schema is not None else {}
    where = literal(Path(report.archive).name or report.archive)
    extra = [("archive", where), ("episodes read", f"{report.episodes_in:,}"),
             ("shards read", f"{len(shards):,}"), ("shards refused", f"{refused:,}")]  # fmt: skip
    card = DatasetCard(
        pretty_name="shopbench curated trajectories",
        summary=(
            f"{rows:,} agent episodes kept by `shopbench curate` ({shopbench_version()}) of "
            f"{report.episodes_in:,} archived: every drop named with its rule, recovery "
            "episodes tagged and weighted, the queries checked against test sets. One row "
            "per episode: the archive's signed row plus curation's weight, tags and turn mask."
        ),
        task_categories=["text-generation"],
        splits=[split] if files else [],
        arrow_schema=schema,
    )
    sections = [
        ("Files and loading", "```python\nimport datasets\nds = datasets.load_dataset("
         f"\"{Path(out).name}\", split=\"train\")\n```\n\n`shopbench.curation.curated."
         "read_curated(path)` yields the episodes with their weights, tags and masks."),
        ("Schema", schema_table(schema, notes) if schema is not None else "No files."),
        ("Curation", _headline(report)),
        ("Provenance", "The kept episodes' range, and the shards the run read:\n\n"
         + provenance_section(kept, shards, extra)),
        ("Contamination", contamination_section(report)),
        ("License", license_section(card.license)),
        ("Intended use and limits", INTENDED_USE),
    ]  # fmt: skip
    return card.model_copy(update={"sections": sections})


def write_curated_card(
    out: Path, report: CurationReport, listed: ArchiveShards, verified: str | None
) -> Path | None:
    """Write ``out/README.md`` for the curated set (None when nothing was kept: no set)."""
    if report.kept == 0:
        return None
    sources = [ShardSource(path=s.rel, rows=s.rows, signer=s.signer, sha256=s.sha256,
                           verified=verified) for s in listed.shards]  # fmt: skip
    return write_card(Path(out), curated_card(Path(out), report, sources, len(listed.refused)))
