"""The export formats are one registry: every format ``traces export`` writes, the API serves,
the cards describe and the browser links, each read by the readers its users bring
(``datasets.load_dataset``, ``apply_chat_template``, Inspect's log reader, ATIF readers)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from support.api_archives import run_arena
from typer.testing import CliRunner

from shopbench.archive.store import read_store
from shopbench.cli import app
from shopbench.distill.small_tokenizer import shipped_small_tokenizer
from shopbench.records.trajectory import Trajectory
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
from shopbench.traces.formats import ALIASES, FORMATS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("formats-arena")
    run_arena(catalog_dir, out)
    return out / "archive"


@pytest.fixture(scope="module")
def records(arena: Path) -> dict[str, Trajectory]:
    return {t.episode_id: t for t in read_store(arena)}


@pytest.fixture(scope="module")
def exported(arena: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every registered format exported by the CLI, each in a folder of its own (a file
    export's card renamed ``README.md`` beside it, as its card says to)."""
    base = tmp_path_factory.mktemp("formats")
    out: dict[str, Path] = {}
    for name, spec in FORMATS.items():
        target = base / name / ("export" if spec.folder else f"episodes{spec.suffix}")
        result = CliRunner().invoke(
            app, ["traces", "export", str(arena), "--format", name, "--out", str(target)]
        )
        assert result.exit_code == 0, (name, result.output)
        assert f"exported 24 episodes to {target}" in result.output
        card = target / "README.md" if spec.folder else target.with_name(target.name + ".card.md")
        text = card.read_text(encoding="utf-8")
        assert spec.shape in text, name  # the card's first paragraph is the registry's
        if not spec.folder:
            card.rename(target.parent / "README.md")
        out[name] = target
    return out


def test_the_cli_and_the_api_offer_every_registered_format_and_its_older_name(
    arena: Path, exported: dict[str, Path], records: dict[str, Trajectory]
) -> None:
    assert set(exported) == set(FORMATS)
    assert ALIASES == {"datasets": "parquet", "trl": "chat"}
    with serving(create_app(ApiConfig(root=str(arena)))) as url, httpx.Client(base_url=url) as c:
        spec = c.get("/openapi.json").json()
        listed = next(p for p in spec["paths"]["/v1/trajectories"]["get"]["parameters"]
                      if p["name"] == "format")  # fmt: skip
        assert listed["schema"]["enum"] == ["json", *FORMATS]
        one = next(iter(records))
        page = c.get(f"/episodes/{one}").text
        for name, fmt in FORMATS.items():
            every = c.get("/v1/trajectories", params={"format": name})
            assert every.status_code == 200, (name, every.text[:300])
            assert every.headers["content-type"].startswith(fmt.media_type)
            assert f'filename="episodes{fmt.suffix}"' in every.headers["content-disposition"]
            if fmt.render is not None and fmt.label:
                assert f"/v1/trajectories/{one}?format={name}" in page
                assert c.get(f"/v1/trajectories/{one}", params={"format": name}).status_code == 200
            if not fmt.folder and name != "eval":  # the same rows from the CLI and the API
                def rows(b: bytes) -> list[str]:
                    return sorted(json.dumps(json.loads(x), sort_keys=True)
                                  for x in b.splitlines())  # fmt: skip

                assert rows(every.content) == rows(exported[name].read_bytes()), name
        for old, new in ALIASES.items():
            a = c.get("/v1/trajectories", params={"format": old})
            b = c.get("/v1/trajectories", params={"format": new})
            assert a.status_code == 200 and a.content == b.content
        bad = c.get("/v1/trajectories", params={"format": "csv"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["allowed"] == ["json", *FORMATS]
    old = CliRunner().invoke(app, ["traces", "export", str(arena), "--format", "xml",
                                   "--out", str(arena.parent / "x")])  # fmt: skip
    assert old.exit_code == 2 and "unknown export format 'xml'" in old.output


def test_every_table_export_loads_with_datasets_as_its_card_says(
    exported: dict[str, Path], records: dict[str, Trajectory]
) -> None:
    import datasets

    for name, fmt in FORMATS.items():
        folder = exported[name] if fmt.folder else exported[name].parent
        if not fmt.table:
            continue
        ds = datasets.load_dataset(str(folder), split="train")
        assert ds.num_rows == 24, name
    atif = datasets.load_dataset(str(exported["atif"]), split="train")
    for row in atif:
        t = records[row["episode_id"]]
        doc = row["trajectory"]  # decoded: tool arguments of every shape in one column
        assert doc["trajectory_id"] == t.episode_id
        assert doc["final_metrics"]["extra"]["reward"] == row["reward"] == float(t.outcome.success)
        assert doc["final_metrics"]["extra"]["success"] is t.outcome.success
    chat = datasets.load_dataset(str(exported["chat"].parent), split="train")
    assert isinstance(chat[0]["tools"], list) and chat[0]["tools"][0]["type"] == "function"


def test_chat_rows_render_with_apply_chat_template(exported: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(shipped_small_tokenizer()))
    rows = [json.loads(x) for x in exported["chat"].read_text().splitlines()]
    for row in rows[:5]:
        text = tok.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert row["tools"][0]["function"]["name"] in text
        assert row["messages"][1]["content"][:40] in text


def test_the_inspect_log_carries_its_scores_where_its_readers_look(
    exported: dict[str, Path], records: dict[str, Trajectory]
) -> None:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(exported["eval"]))
    assert log.results is not None
    scores = {s.name: s for s in log.results.scores}
    assert set(scores) >= {"outcome", "rule", "judge"}
    rate = sum(t.outcome.success for t in records.values()) / len(records)
    assert scores["outcome"].metrics["accuracy"].value == pytest.approx(rate)
    assert scores["outcome"].scored_samples == 24
    with zipfile.ZipFile(io.BytesIO(exported["eval"].read_bytes())) as z:
        assert any(n.startswith("samples/") for n in z.namelist())
    # The model each miner's agent card named: the log's (several here), each sample's own.
    models = sorted({t.agent_model for t in records.values() if t.agent_model is not None})
    assert len(models) == 3 and log.eval.model == "shopbench/miners"
    assert log.eval.metadata is not None and log.eval.metadata["models"] == models
    assert log.samples is not None and len(log.samples) == 24
    for sample in log.samples:
        t = records[str(sample.id)]
        assert sample.output.model == t.agent_model
        assert sample.metadata["agent"] == t.agent and sample.metadata["agent_model"] == (
            t.agent_model
        )
        assert sample.metadata["agent_revision"] == t.agent_revision


def test_sft_rows_tools_decode_for_apply_chat_template_and_stay_text_for_arrow(
    tmp_path: Path, exported: dict[str, Path], arena: Path
) -> None:
    import datasets
    from transformers import AutoTokenizer

    from shopbench.distill.dataset import SFT_SCHEMA

    assert str(SFT_SCHEMA.field("tools").type) == "extension<arrow.json>"
    curated = tmp_path / "curated"
    result = CliRunner().invoke(app, ["curate", "--archive", str(arena), "--out", str(curated)])
    assert result.exit_code == 0, result.output
    sft = tmp_path / "sft"
    result = CliRunner().invoke(
        app, ["distill", "build", "--curated", str(curated), "--out", str(sft)]
    )
    assert result.exit_code == 0, result.output
    text = pq.read_table(sft / "train.parquet").column("tools").to_pylist()
    assert all(isinstance(x, str) for x in text)  # pyarrow readers get the JSON text
    ds = datasets.load_dataset(str(sft), split="train")
    row = ds[0]
    assert isinstance(row["tools"], list) and row["tools"] == json.loads(text[0])
    tok = AutoTokenizer.from_pretrained(str(shipped_small_tokenizer()))
    rendered = tok.apply_chat_template(row["messages"], tools=row["tools"] or None,
                                       tokenize=False)  # fmt: skip
    assert any(m["role"] == "assistant" for m in row["messages"])
    assert row["tools"] and row["tools"][0]["function"]["name"] in rendered
