"""Dataset cards through the CLI: every export, the curated set and the SFT folder carry a
Hugging Face card whose metadata ``datasets`` and ``huggingface_hub`` read, and whose
provenance, schema and contamination statement match what was written."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
import warnings
from datetime import UTC
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from support.api_archives import PAYLOADS, hostile, run_arena
from typer.testing import CliRunner

from shopbench.archive.layout import SCHEMA
from shopbench.archive.manifest import SHARD_GLOB
from shopbench.archive.store import read_store
from shopbench.cli import app
from shopbench.curation.curated import CURATED_SCHEMA
from shopbench.distill.dataset import SFT_SCHEMA
from shopbench.records.trajectory import Trajectory
from shopbench.traces.cards import features_of, fenced, literal

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The arena's archive root and its arena.json."""
    out = tmp_path_factory.mktemp("cards-arena")
    run_arena(catalog_dir, out)
    return out / "archive", out / "arena.json"


@pytest.fixture(scope="module")
def records(arena: tuple[Path, Path]) -> list[Trajectory]:
    return list(read_store(arena[0]))


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _front(card: Path) -> tuple[dict[str, Any], str]:
    text = card.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def _license() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return str(project["license"]["text"]).lower()


def _load(folder: Path, cache: Path) -> datasets.DatasetDict:
    return datasets.load_dataset(str(folder), cache_dir=str(cache))


def _hub_card(card: Path) -> Any:
    from huggingface_hub import DatasetCard

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return DatasetCard.load(card)


def _shard_table(root: Path) -> pa.Table:
    files = sorted(root.glob(SHARD_GLOB))
    return pa.concat_tables([pq.read_table(f, columns=["block", "epoch", "started_at"])
                             for f in files])  # fmt: skip


def _iso(value: Any) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_features_are_what_datasets_writes_for_each_schema() -> None:
    for schema in (SCHEMA, CURATED_SCHEMA, SFT_SCHEMA):
        expected = datasets.Features.from_arrow_schema(schema)._to_yaml_list()
        assert features_of(schema) == expected


def test_literal_shows_identifiers_only_and_fences_outrun_backticks() -> None:
    assert literal("5F3tue_x.y-z") == "`5F3tue_x.y-z`"
    for payload in PAYLOADS:
        assert literal(payload) == f"(not shown: {len(payload)} characters)"
    block = fenced('{"a": "```` x"}')
    assert block.startswith("`````\n") and block.endswith("\n`````")


def test_a_datasets_export_card_states_range_validators_and_loads(
    arena: tuple[Path, Path], records: list[Trajectory], tmp_path: Path
) -> None:
    root = arena[0]
    validator = records[0].validator_hotkey
    assert validator and all(t.validator_hotkey == validator for t in records)
    out = tmp_path / "ds"
    said = _cli("traces", "export", str(root), "--format", "datasets", "--out", str(out),
                "--signed-by", validator)  # fmt: skip
    assert f"dataset card {out / 'README.md'}" in said
    meta, body = _front(out / "README.md")

    files = sorted(p.relative_to(out).as_posix() for p in out.glob("data/*.parquet"))
    assert meta["license"] == _license() == "apache-2.0"
    assert meta["size_categories"] == ["n<1K"]
    assert meta["configs"] == [{"config_name": "default",
                                "data_files": [{"split": "train", "path": files}]}]  # fmt: skip
    written = pq.read_schema(out / files[0])
    assert meta["dataset_info"]["features"] == (
        datasets.Features.from_arrow_schema(written)._to_yaml_list()
    )
    assert meta["dataset_info"]["splits"][0]["num_examples"] == len(records) == 24

    shards = _shard_table(root)
    blocks, epochs = pc.min_max(shards["block"]), pc.min_max(shards["epoch"])
    started = pc.min_max(shards["started_at"])
    assert f"| episodes | {len(records)} |" in body
    assert f"| blocks | {blocks['min'].as_py()} – {blocks['max'].as_py()} |" in body
    assert f"| epochs | {epochs['min'].as_py()} – {epochs['max'].as_py()} |" in body
    assert (f"| started_at (UTC) | {_iso(started['min'].as_py())} – "
            f"{_iso(started['max'].as_py())} |") in body  # fmt: skip
    n_shards = len(list(root.glob(SHARD_GLOB)))
    assert f"| `{validator}` | {len(records)} | {n_shards} | {n_shards} of {n_shards} |" in body
    for shard in root.glob(SHARD_GLOB):
        digest = hashlib.sha256(shard.read_bytes()).hexdigest()
        assert f"| `{digest}` | signature of `{validator}`, sha256 |" in body
    assert "embargo | lifted" in body
    assert "**Not checked.**" in body.split("## Contamination", 1)[1]
    assert "| `messages` | list<struct<role, content," in body

    # the card's configs decide: a stray copy beside the listed file is not read
    shutil.copy(out / files[0], out / "data" / "stray.parquet")
    ds = _load(out, tmp_path / "cache")
    assert ds["train"].num_rows == len(records)
    assert sorted(ds["train"]["episode_id"]) == sorted(t.episode_id for t in records)
    hub = _hub_card(out / "README.md")
    assert hub.data.license == "apache-2.0"
    assert hub.data.pretty_name == "shopbench trajectories (parquet export)"
    assert "shopbench" in hub.data.tags

    # and its split sizes are checked: a card that lies about them fails to load
    lying = tmp_path / "lying"
    shutil.copytree(out, lying)
    (lying / "data" / "stray.parquet").unlink()
    text = (lying / "README.md").read_text()
    (lying / "README.md").write_text(text.replace("num_examples: 24", "num_examples: 25"))
    with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
        _load(lying, tmp_path / "cache2")


def test_an_unverified_filtered_export_says_so(
    arena: tuple[Path, Path], records: list[Trajectory], tmp_path: Path
) -> None:
    out = tmp_path / "product"
    _cli("traces", "export", str(arena[0]), "--format", "datasets", "--out", str(out),
         "--intent", "product")  # fmt: skip
    _, body = _front(out / "README.md")
    product = [t for t in records if str(t.intent) == "product"]
    assert f"| episodes | {len(product)} |" in body and "| intents | `product` 6 |" in body
    assert f"| `{records[0].validator_hotkey}` | {len(product)} | 1 | 0 of 1 |" in body
    assert "not verified: shards listed by their manifests" in body
    assert '"intent": [\n    "product"\n  ]' in body


def test_single_file_exports_have_a_card_beside_them(
    arena: tuple[Path, Path], records: list[Trajectory], tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    _cli("traces", "export", str(arena[0]), "--format", "jsonl", "--out",
         str(folder / "t.jsonl"))  # fmt: skip
    _cli("traces", "export", str(arena[0]), "--format", "shoppingbench", "--out",
         str(folder / "s.jsonl"))  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == [
        "s.jsonl", "s.jsonl.card.md", "t.jsonl", "t.jsonl.card.md",
    ]  # fmt: skip
    meta, body = _front(folder / "t.jsonl.card.md")
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": ["t.jsonl"]}]
    assert "| `episode_id` | string |" in body and f"| episodes | {len(records)} |" in body

    # the file and its card as README.md make a dataset folder as they stand
    hub = tmp_path / "hub"
    hub.mkdir()
    shutil.copy(folder / "t.jsonl", hub / "t.jsonl")
    shutil.copy(folder / "t.jsonl.card.md", hub / "README.md")
    ds = _load(hub, tmp_path / "cache")
    assert sorted(ds["train"]["episode_id"]) == sorted(t.episode_id for t in records)
    assert _hub_card(hub / "README.md").data.license == "apache-2.0"

    meta, body = _front(folder / "s.jsonl.card.md")
    assert "configs" not in meta  # one JSON array per line: not a table
    assert "| `[].completion.message.tool_call[].parameters` | object |" in body
    assert "parameters." not in body  # the agent's own keys are not listed


def test_no_miner_written_text_reaches_a_card(
    arena: tuple[Path, Path], records: list[Trajectory], tmp_path: Path
) -> None:
    root, _ = hostile(arena[0], tmp_path / "hostile")
    for fmt, out in (("datasets", tmp_path / "d"), ("shoppingbench", tmp_path / "s.jsonl"),
                     ("jsonl", tmp_path / "j.jsonl")):  # fmt: skip
        _cli("traces", "export", str(root), "--format", fmt, "--out", str(out))
    _cli("traces", "export", str(arena[0]), "--format", "datasets", "--out", str(tmp_path / "a"))
    cards = [tmp_path / "d" / "README.md", tmp_path / "s.jsonl.card.md",
             tmp_path / "j.jsonl.card.md", tmp_path / "a" / "README.md"]  # fmt: skip
    for card in cards:
        text = card.read_text()
        for payload in PAYLOADS:
            assert payload not in text
            assert payload[:20] not in text
        for t in records:
            assert t.query not in text


@pytest.fixture(scope="module")
def curated(
    arena: tuple[Path, Path], records: list[Trajectory], shoppingbench_data: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, str, Path]:  # fmt: skip
    """The arena curated against ShoppingBench's product test file and a test file holding
    one of the arena's own product queries: (out, the leaked file, its query, the real one)."""
    work = tmp_path_factory.mktemp("cards-curated")
    leaked_query = next(t.query for t in records if str(t.intent) == "product")
    leaked = work / "leaked_test.jsonl"
    leaked.write_text(json.dumps({"query": leaked_query, "reward": {
        "product_id": "1", "title": ["a product"]}}) + "\n")  # fmt: skip
    product = shoppingbench_data / "product_test.jsonl"
    out = work / "curated"
    _cli("curate", "--archive", str(arena[0]), "--truth", str(arena[1]), "--out", str(out),
         "--test-set", str(product), "--test-set", str(leaked))  # fmt: skip
    return out, leaked, leaked_query, product


def test_the_curated_card_names_the_test_files_and_what_they_dropped(
    curated: tuple[Path, Path, str, Path], tmp_path: Path
) -> None:
    out, leaked, leaked_query, product = curated
    report = json.loads((out / "report.json").read_text())
    meta, body = _front(out / "README.md")
    files = sorted(p.relative_to(out).as_posix() for p in out.glob("data/*.parquet"))
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": files}]
    assert meta["dataset_info"]["splits"][0]["num_examples"] == report["kept"]

    section = body.split("## Contamination", 1)[1].split("\n## ", 1)[0]
    bad = report["contaminated"][str(leaked)]
    assert bad["contaminated"] >= 1 and bad["kept_contaminated"] == 0
    digest = hashlib.sha256(leaked.read_bytes()).hexdigest()
    assert (f"| `leaked_test.jsonl` | `{digest}` | 1 | {bad['contaminated']} | "
            f"{bad['contaminated']} | 0 | {bad['kept_clean']} |") in section  # fmt: skip
    clean = report["contaminated"][str(product)]
    real = hashlib.sha256(product.read_bytes()).hexdigest()
    assert f"| `product_test.jsonl` | `{real}` | 250 | 0 | 0 | 0 |" in section
    dropped = report["dropped_by_rule"]["contamination"]
    assert dropped == bad["contaminated"] + clean["contaminated"]
    assert f"The `contamination` rule dropped **{dropped}** episodes." in section

    curation = body.split("## Curation", 1)[1].split("\n## ", 1)[0]
    assert f"| episodes in | {report['episodes_in']} |" in curation
    assert f"| kept | {report['kept']} |" in curation
    for rule, n in report["dropped_by_rule"].items():
        assert f"| {rule} | yes | {n} |" in curation
    assert "[report.md](report.md)" in curation
    assert "| `curation_weight` | float64 | training weight (1 = as usual) |" in body

    ds = _load(out, tmp_path / "cache")
    assert ds["train"].num_rows == report["kept"]
    assert leaked_query not in ds["train"]["query"]
    assert leaked_query not in (out / "README.md").read_text()
    assert f"| `{ds['train'][0]['validator_hotkey']}` | {report['kept']} | 4 | 4 of 4 |" in body
    hub = _hub_card(out / "README.md")
    assert hub.data.license == "apache-2.0" and hub.data.size_categories == ["n<1K"]


def test_a_curation_without_test_sets_says_not_checked(
    arena: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "curated"
    _cli("curate", "--archive", str(arena[0]), "--out", str(out))
    _, body = _front(out / "README.md")
    section = body.split("## Contamination", 1)[1]
    assert section.lstrip().startswith("**Not checked**: no test set was given")


def test_the_sft_card_carries_the_curated_provenance_and_loads(
    curated: tuple[Path, Path, str, Path], tmp_path: Path
) -> None:
    out, leaked, _, _ = curated
    sft = tmp_path / "sft"
    _cli("distill", "build", "--curated", str(out), "--out", str(sft))
    meta, body = _front(sft / "README.md")
    rows = {s: pq.ParquetFile(sft / f"{s}.parquet").metadata.num_rows
            for s in ("train", "validation")}  # fmt: skip
    splits = {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]}
    assert splits == {s: n for s, n in rows.items() if n or s == "train"}
    assert meta["dataset_info"]["features"] == (
        datasets.Features.from_arrow_schema(SFT_SCHEMA)._to_yaml_list()
    )
    ids = set(pq.read_table(sft / "train.parquet")["episode_id"].to_pylist()) | set(
        pq.read_table(sft / "validation.parquet")["episode_id"].to_pylist()
    )
    assert f"| episodes | {len(ids)} |" in body
    digest = hashlib.sha256(leaked.read_bytes()).hexdigest()
    assert f"`{digest}`" in body.split("## Contamination", 1)[1]
    build = json.loads((sft / "build.json").read_text())
    assert f"| observation view | `{build['view']}` |" in body

    ds = _load(sft, tmp_path / "cache")
    assert {s: ds[s].num_rows for s in ds} == splits
    assert _hub_card(sft / "README.md").data.task_categories == ["text-generation"]
