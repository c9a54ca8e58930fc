"""The SFT dataset's card: ``<out>/README.md`` beside ``train.parquet``,
``validation.parquet`` and ``build.json``.

Its splits and features come from the two files written; its provenance from the curated
set they were built from: the range of exactly the curated episodes that gave rows (read
from the curated files by episode id), and the curated set's own report for what curation
kept and what it checked against which test files (name, sha256). The shards and how each
was verified are in the curated set's card.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from shopbench.curation.card import contamination_section
from shopbench.curation.curated import curated_files
from shopbench.curation.report.model import REPORT_JSON, CurationReport
from shopbench.traces.cards import (
    DatasetCard,
    Split,
    fenced,
    license_section,
    literal,
    schema_table,
    shopbench_version,
    table_notes,
    write_card,
)
from shopbench.traces.provenance import provenance_section, range_of_files

SFT_NOTES = {
    "messages": "the conversation in TRL's conversational format",
    "tools": "the tool schemas (JSON text), as the chat template takes them",
    "train_turns": "one entry per assistant message; False = no loss on that turn",
    "weight": "the curated weight (carried by repeating train rows)",
}
"""Schema-table notes for the SFT columns."""

INTENDED_USE = (
    "Supervised fine-tuning of a shopping agent (`shopbench distill train --data DIR`, or "
    "TRL's `SFTTrainer` on `messages`/`tools` with `train_turns` as the assistant mask). "
    "Train rows repeat episodes whose curated weight is above 1; validation rows are never "
    "repeated and come from clusters held out of train. The rows are in the observation "
    "view named in `build.json`: a model trained on them must be served in the same view. "
    "Limits: those of the curated set it was built from (its card), and the replies are "
    "miners' agents' text: render them escaped."
)


def _curated_report(curated: Path) -> CurationReport | None:
    path = Path(curated) / REPORT_JSON
    try:
        return CurationReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None


def sft_card(out: Path, curated: Path, build: dict[str, object]) -> DatasetCard:
    """The card of the SFT dataset in `out`, built from the curated set at `curated` with the
    build report `build` (``build.json``'s content)."""
    out = Path(out)
    names = ("train", "validation")
    splits = [Split.of_parquet(s, out, [out / f"{s}.parquet"]) for s in names]
    splits = [s for s in splits if s.rows or s.name == "train"]
    schema = pq.read_schema(out / "train.parquet")
    ids: set[str] = set()
    for s in names:
        ids.update(pc.unique(pq.read_table(out / f"{s}.parquet", columns=["episode_id"])
                             .column("episode_id")).to_pylist())  # fmt: skip
    r = range_of_files(curated_files(curated), episode_ids=ids)
    report = _curated_report(curated)
    rows = [("curated set", literal(Path(curated).name))]
    if report is not None:
        rows += [("curated: episodes in", f"{report.episodes_in:,}"),
                 ("curated: kept", f"{report.kept:,}")]  # fmt: skip
    rows += [("episodes with rows here", f"{len(ids):,}")]
    contamination = (
        contamination_section(report) if report is not None else
        "**Not known**: the curated set has no readable `report.json`."
    )  # fmt: skip
    config = json.dumps(build.get("config", {}), indent=2, sort_keys=True, ensure_ascii=True)
    counts = table_notes([(f"{s.name} rows", f"{s.rows:,}") for s in splits] + [
        ("repeats (train rows beyond one per episode)", f"{build.get('repeats', 0):,}"),
        ("observation view", literal(build.get("view", ""))),
    ])  # fmt: skip
    card = DatasetCard(
        pretty_name="shopbench SFT rows",
        summary=(
            f"{sum(s.rows for s in splits):,} supervised fine-tuning rows built by "
            f"`shopbench distill build` ({shopbench_version()}) from {len(ids):,} curated "
            "episodes of the shopbench trajectory archive, in TRL's conversational format "
            "(`messages`, `tools`) with a per-turn training mask."
        ),
        task_categories=["text-generation"],
        splits=splits,
        arrow_schema=schema,
    )
    sections = [
        ("Files and loading", "```python\nimport datasets\nds = datasets.load_dataset("
         f"\"{out.name}\")  # train and validation\n```\n\n`build.json` holds the build's "
         "config, counts, every left-out row by reason and the clusters of each split."),
        ("Schema", schema_table(schema, SFT_NOTES)),
        ("Build", counts + "\n\nThe build config:\n\n" + fenced(config, "json")),
        ("Provenance", "The range of the curated episodes these rows come from; the shards "
         "and how each was verified are in the curated set's card:\n\n"
         + provenance_section(r, None, rows, unrecorded="in the curated set's card")),
        ("Contamination", "As checked by curation, on the whole curated set:\n\n"
         + contamination),
        ("License", license_section(card.license)),
        ("Intended use and limits", INTENDED_USE),
    ]  # fmt: skip
    return card.model_copy(update={"sections": sections})


def write_sft_card(out: Path, curated: Path, build: dict[str, object]) -> Path:
    """Write ``out/README.md`` for the SFT dataset (:func:`sft_card`); its path."""
    return write_card(Path(out), sft_card(Path(out), Path(curated), build))
