"""Two episodes of one task compared: the divergence rule on records the arena played, and
``/v1/diff`` and ``/diff`` over HTTP (a real server on a loopback port) on a pair with a
known first divergence; the refusals; hostile text; and the list's diagnosis filters,
counted against DuckDB reading the shards directly."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest
from support.api_archives import (
    DIVERGES_AT,
    PAYLOADS,
    VALIDATOR,
    diverging,
    embargoed,
    hostile,
    retokened,
    run_arena,
    store,
)

from shopbench.archive.errors import NotComparable
from shopbench.archive.manifest import SHARD_GLOB
from shopbench.archive.store import read_store
from shopbench.records.trajectory import Trajectory
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
from shopbench.traces.diff import (
    diff,
    first_divergence,
    normalise_arguments,
    summarise,
    turn_calls,
)


@pytest.fixture(scope="module")
def arena_root(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("diff-arena")
    run_arena(catalog_dir, out)
    return out / "archive"


@pytest.fixture(scope="module")
def records(arena_root: Path) -> list[Trajectory]:
    return sorted(read_store(arena_root), key=lambda t: t.episode_id)


@pytest.fixture(scope="module")
def pair(arena_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    return diverging(arena_root, tmp_path_factory.mktemp("diff-pair") / "archive")


@pytest.fixture(scope="module")
def api(pair: tuple[Path, str, str]) -> Iterator[httpx.Client]:
    config = ApiConfig(root=str(pair[0]), burst=10_000, rate_per_s=1000)
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _careful(records: list[Trajectory]) -> Trajectory:
    return next(t for t in records if t.success and t.turns >= 3)


# -- the rule ----------------------------------------------------------------------------


def test_arguments_compare_with_keys_sorted_and_tokens_resolved() -> None:
    tokens = {"1234567890": "9000000001", "2234567890": "9000000002", "123456789": "7000001"}
    assert normalise_arguments('{"q": " red ", "page": 1.0}', {}) == normalise_arguments(
        {"page": 1, "q": "red"}, {}
    )
    assert normalise_arguments('{"product_ids": "1234567890, 2234567890"}', tokens) == (
        '{"product_ids":"product:9000000001,product:9000000002"}'
    )
    assert normalise_arguments('{"shop_id": "123456789"}', tokens) == '{"shop_id":"shop:7000001"}'
    assert normalise_arguments('{"product_ids": 1234567890}', tokens) == (
        '{"product_ids":"product:9000000001"}'
    )
    # a token the episode never showed stays as written; order is part of the call
    assert normalise_arguments('{"product_ids": "5555555555"}', tokens) == (
        '{"product_ids":"5555555555"}'
    )
    assert normalise_arguments('{"product_ids": "2234567890,1234567890"}', tokens) != (
        normalise_arguments('{"product_ids": "1234567890,2234567890"}', tokens)
    )
    assert normalise_arguments("not json ", tokens) == '"not json"'


def test_the_same_calls_under_other_tokens_do_not_diverge(records: list[Trajectory]) -> None:
    base = _careful(records)
    copy = retokened(base, "copy0000000000001", salt=5)
    raw = [c.function.arguments for m in copy.messages for c in m.tool_calls or []]
    assert raw != [c.function.arguments for m in base.messages for c in m.tool_calls or []]
    assert turn_calls(copy) == turn_calls(base)
    assert first_divergence(base, copy) is None
    d = diff(base, copy)
    assert d.first_divergence is None and all(p.same for p in d.turns)


def test_the_first_turn_whose_calls_differ_is_the_divergence(
    pair: tuple[Path, str, str],
) -> None:
    root, a_id, b_id = pair
    got = {t.episode_id: t for t in read_store(root)}
    a, b = got[a_id], got[b_id]
    found = first_divergence(a, b)
    assert found is not None and found.turn == DIVERGES_AT
    assert found.reason == (
        "view_product_information called with other arguments (call 1 of the turn)"
    )
    assert first_divergence(b, a) == found  # symmetric in the turn


def test_an_episode_that_ends_first_diverges_at_its_missing_turn(
    records: list[Trajectory],
) -> None:
    base = _careful(records)
    keep = [i for i, m in enumerate(base.messages) if m.role == "assistant"][2]
    short = base.model_copy(update={"messages": base.messages[:keep], "episode_id": "short01"})
    found = first_divergence(base, short)
    assert found is not None and found.turn == 3
    assert found.reason == "episode b ended; episode a played turn 3"
    assert diff(base, short).turns[2].b is None


def test_other_tools_diverge_naming_both(records: list[Trajectory]) -> None:
    by_task: dict[str, list[Trajectory]] = {}
    for t in records:
        by_task.setdefault(t.task_id, []).append(t)
    a, b = next(
        (x, y) for ts in by_task.values() for x in ts for y in ts
        if turn_calls(x)[0] and turn_calls(y)[0]
        and turn_calls(x)[0][0][0] != turn_calls(y)[0][0][0]
    )  # fmt: skip
    found = first_divergence(a, b)
    assert found is not None and found.turn == 1
    assert found.reason.startswith(f"a calls {turn_calls(a)[0][0][0]}")


def test_two_tasks_or_one_episode_twice_are_not_compared(records: list[Trajectory]) -> None:
    a = records[0]
    other = next(t for t in records if t.task_id != a.task_id)
    with pytest.raises(NotComparable, match="a diff compares two episodes of one task"):
        diff(a, other)
    with pytest.raises(NotComparable, match="given twice"):
        diff(a, a)


def test_an_observation_is_summarised_in_one_line() -> None:
    listing = json.dumps([{"title": "Blue kettle"}, {"title": "Red kettle"}])
    assert summarise(listing) == "2 results, first: Blue kettle"
    assert summarise("Error: bad\n  id") == "Error: bad id"
    assert len(summarise("x" * 1000)) == 160


# -- the API and the page ----------------------------------------------------------------


def test_the_diff_json_marks_the_known_divergence(
    api: httpx.Client, pair: tuple[Path, str, str]
) -> None:
    _, a_id, b_id = pair
    r = api.get("/v1/diff", params={"a": a_id, "b": b_id})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["first_divergence"]["turn"] == DIVERGES_AT
    assert [p["same"] for p in body["turns"]][:DIVERGES_AT] == [True] * (DIVERGES_AT - 1) + [False]
    turn1 = body["turns"][0]
    # the raw tokens differ on the turn the rule counts as the same
    assert [c["observation"] for c in turn1["a"]["calls"]] == [
        c["observation"] for c in turn1["b"]["calls"]
    ]
    changed = body["turns"][DIVERGES_AT - 1]
    assert changed["a"]["calls"][0]["normalised"] != changed["b"]["calls"][0]["normalised"]
    assert all(c["observation"] for p in body["turns"] for s in "ab" for c in p[s]["calls"])
    for side, eid in (("a", a_id), ("b", b_id)):
        assert body[side]["episode_id"] == eid
        assert body[side]["diagnosis_label"] == "success" and body[side]["success"] is True
        assert body[side]["score"] is not None


def test_the_diff_page_marks_the_divergence_row(
    api: httpx.Client, pair: tuple[Path, str, str]
) -> None:
    _, a_id, b_id = pair
    page = api.get("/diff", params={"a": a_id, "b": b_id})
    assert page.status_code == 200
    assert page.text.count('id="divergence"') == 1
    assert f'data-turn="{DIVERGES_AT}"' in page.text.split('id="divergence"')[1][:40]
    assert f"First divergence at <a href=\"#divergence\">turn {DIVERGES_AT}</a>" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    task = api.get(f"/tasks/{next(iter(read_store(pair[0]))).task_id}")
    assert 'action="/diff"' in task.text and f'value="{b_id}"' in task.text
    episode = api.get(f"/episodes/{a_id}")
    assert 'id="compare"' in episode.text and f'<option value="{b_id}">' in episode.text
    assert 'id="diagnosis"' in episode.text


@pytest.mark.parametrize(
    ("query", "status", "param"),
    [
        ({"a": "pair00000000000a"}, 422, "b"),
        ({"a": "pair00000000000a", "b": "bad id<script>"}, 422, "b"),
        ({"a": "pair00000000000a", "b": "pair00000000000a"}, 422, "b"),
        ({"a": "pair00000000000a", "b": "0123456789abcdef"}, 404, None),
        ({"a": "0123456789abcdef", "b": "pair00000000000b"}, 404, None),
        ({"a": "pair00000000000a", "b": "pair00000000000b", "intent": "shop"}, 422, "intent"),
    ],
)
def test_bad_diff_requests_are_refused(
    api: httpx.Client, query: dict[str, str], status: int, param: str | None
) -> None:
    for path in ("/v1/diff", "/diff"):
        r = api.get(path, params=query, headers={"accept": "application/json"})
        assert r.status_code == status, (path, r.text)
        if param is not None:
            assert r.json()["detail"][0]["loc"] == ["query", param]
    html = api.get("/diff", params=query, headers={"accept": "text/html"})
    assert html.status_code == status and "<h1>" in html.text


def test_episodes_of_two_tasks_are_refused(arena_root: Path, records: list[Trajectory]) -> None:
    a = records[0]
    other = next(t for t in records if t.task_id != a.task_id)
    with serving(create_app(ApiConfig(root=str(arena_root)))) as url, httpx.Client(
        base_url=url
    ) as c:
        r = c.get("/v1/diff", params={"a": a.episode_id, "b": other.episode_id})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["query", "b"]
        assert a.task_id in r.json()["detail"][0]["msg"]


def test_an_embargoed_episode_is_not_diffed(arena_root: Path, tmp_path: Path) -> None:
    root, live = embargoed(arena_root, tmp_path / "validator")
    ts = list(read_store(root))
    hidden = next(t for t in ts if t.episode_id in live)
    mate = next(t for t in ts if t.task_id == hidden.task_id and t.episode_id != hidden.episode_id)
    public = next(t for t in ts if t.episode_id not in live)
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        # of another task, yet a 404, not the 422 that would say the episode exists
        for a, b in ((hidden, mate), (public, hidden), (hidden, public)):
            for path in ("/v1/diff", "/diff"):
                r = c.get(path, params={"a": a.episode_id, "b": b.episode_id})
                assert r.status_code == 404, (path, r.text)
            assert r.json() == {"detail": f"no episode {hidden.episode_id}"}
        assert f'value="{hidden.episode_id}"' not in c.get(f"/episodes/{public.episode_id}").text


def test_hostile_text_in_a_diff_is_escaped(arena_root: Path, tmp_path: Path) -> None:
    root, episode = hostile(arena_root, tmp_path / "hostile")
    bad = next(t for t in read_store(root) if t.episode_id == episode)
    mate = next(
        t for t in read_store(arena_root) if t.task_id == bad.task_id and t.episode_id != episode
    )
    store([mate], root, lifted=True)
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        page = c.get("/diff", params={"a": episode, "b": mate.episode_id})
        assert page.status_code == 200
        for payload in PAYLOADS:
            assert payload not in page.text
        assert "&lt;script&gt;window.__pwned" in page.text
        assert page.text.count("<script") == 1  # the service's own
        body = c.get("/v1/diff", params={"a": episode, "b": mate.episode_id}).json()
        assert body["a"]["agent"] == bad.agent  # JSON carries the text as it is


# -- the list's diagnosis filters --------------------------------------------------------


def _duckdb_count(root: Path, where: str, params: list[object]) -> int:
    files = f"{root}/{SHARD_GLOB}"
    sql = f"SELECT count(*) FROM read_parquet(?, union_by_name=true) WHERE {where}"
    return int(duckdb.execute(sql, [files, *params]).fetchone()[0])  # type: ignore[index]


def _listed(c: httpx.Client, params: dict[str, str]) -> list[dict[str, object]]:
    items, cursor = [], None
    while True:
        more = {"cursor": cursor} if cursor else {}
        page = c.get("/v1/trajectories", params={**params, **more})
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return items


@pytest.mark.parametrize(
    ("params", "where", "values"),
    [
        ({"failure": "wrong_product"}, "failure = ?", ["wrong_product"]),
        ({"failure": "success,incomplete"}, "failure IN (?, ?)", ["success", "incomplete"]),
        ({"failure_constraint": "title"}, "failure_constraint = ?", ["title"]),
        ({"failure": "no_recommendation", "failure_constraint": "terminated"},
         "failure = ? AND failure_constraint = ?", ["no_recommendation", "terminated"]),
        ({"tool_error": "invalid_id"},
         "len(list_filter(tool_log, lambda e: e.error = ?)) > 0", ["invalid_id"]),
        ({"termination": "terminated"}, "termination = ?", ["terminated"]),
        ({"termination": "turn_limit"}, "termination = ?", ["turn_limit"]),
    ],
)  # fmt: skip
def test_the_diagnosis_filters_count_what_duckdb_counts(
    arena_root: Path, records: list[Trajectory], params: dict[str, str], where: str,
    values: list[object],
) -> None:  # fmt: skip
    expected = _duckdb_count(arena_root, where, values)
    by_record = sum(
        1 for t in records
        if ("failure" not in params or t.diagnosis.kind in params["failure"].split(","))
        and ("failure_constraint" not in params
             or t.diagnosis.constraint == params["failure_constraint"])
        and ("tool_error" not in params
             or any(e.error == params["tool_error"] for e in t.tool_log))
        and ("termination" not in params or t.termination.value == params["termination"])
    )  # fmt: skip
    assert expected == by_record
    config = ApiConfig(root=str(arena_root), burst=10_000, rate_per_s=1000)
    with serving(create_app(config)) as url, httpx.Client(base_url=url) as c:
        listed = _listed(c, {**params, "limit": "7"})
        assert len(listed) == expected
        if "failure" in params:
            assert {r["failure"] for r in listed} <= set(params["failure"].split(","))
        page = c.get("/episodes", params={**params, "limit": "500"})
        assert page.status_code == 200
        assert page.text.count('<td class="diagnosis">') == expected
        for name, value in params.items():
            assert f'<option value="{value}" selected>' in page.text or "," in value, name


def test_the_list_form_offers_the_closed_sets(arena_root: Path, records: list[Trajectory]) -> None:
    from shopbench.records.diagnosis import DIAGNOSIS_KINDS
    from shopbench.tasks.intent_registry import intent_names

    with serving(create_app(ApiConfig(root=str(arena_root)))) as url, httpx.Client(
        base_url=url
    ) as c:
        page = c.get("/episodes").text
        for intent in intent_names():
            assert f'<option value="{intent}" >' in page
        for kind in DIAGNOSIS_KINDS:
            assert f'<option value="{kind}" >' in page
        for code in ("invalid_id", "bad_argument", "unknown_tool"):
            assert f'<option value="{code}" >' in page
        constraints = {t.diagnosis.constraint for t in records} - {None}
        for name in constraints:
            assert f'<option value="{name}" >' in page
        bad = c.get("/v1/trajectories", params={"failure": "bogus"})
        assert bad.status_code == 422 and "wrong_product" in bad.json()["detail"][0]["allowed"]
        spec = c.get("/openapi.json").json()
        names = {p["name"] for p in spec["paths"]["/v1/trajectories"]["get"]["parameters"]}
        assert {"failure", "failure_constraint", "tool_error", "termination"} <= names
        assert "/v1/diff" in spec["paths"]


def _sealed_before_the_diagnosis(records: list[Trajectory], root: Path) -> Path:
    """`records` stored, then each shard rewritten without the derived diagnosis columns and
    its manifest signed again: an archive sealed before those columns existed."""
    import io

    import pyarrow.parquet as pq
    from support.keyed_hash import KeyedHash

    from shopbench.archive.manifest import ShardManifest, sign_manifest

    store(records, root, lifted=True)
    for path in (root / "_manifests").rglob("*.json"):
        manifest = ShardManifest.model_validate_json(path.read_text())
        shard = root / manifest.path
        table = pq.read_table(shard).drop_columns(["failure", "failure_constraint", "tool_errors"])
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue()
        shard.write_bytes(data)
        fields = manifest.model_dump(exclude={"signer", "signature"})
        fields.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        path.write_bytes(sign_manifest(fields, KeyedHash(VALIDATOR)).to_bytes())
    return root


def test_an_archive_sealed_before_the_diagnosis_columns_still_lists(
    records: list[Trajectory], tmp_path: Path
) -> None:
    root = _sealed_before_the_diagnosis(records[:6], tmp_path / "old")
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        items = c.get("/v1/trajectories").json()["items"]
        assert len(items) == 6 and all(r["failure"] is None for r in items)
        page = c.get("/episodes")
        assert page.status_code == 200 and page.text.count('<td class="diagnosis">') == 6
        refused = c.get("/v1/trajectories", params={"failure": "success"})
        assert refused.status_code == 422  # a filter the shards cannot answer says so
        shown = c.get(f"/episodes/{records[0].episode_id}")
        assert records[0].diagnosis.label in shown.text  # the page computes it from the record
