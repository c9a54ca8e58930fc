"""The trace API over HTTP: a real server (uvicorn on a loopback port) over an archive the
arena wrote, driven with an HTTP client; bad input, the embargo, the rate limit, exports
read back with their own readers, and ``traces pull`` against the service."""

from __future__ import annotations

import html
import io
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from support.api_archives import HOSTILE, PAYLOADS, VALIDATOR, embargoed, hostile, run_arena, store
from support.keyed_hash import KeyedHash
from typer.testing import CliRunner

from shopbench.archive.errors import UnknownValidator
from shopbench.archive.manifest import ShardManifest, verify_manifest
from shopbench.archive.store import read_store
from shopbench.cli import app as cli_app
from shopbench.records.trajectory import Trajectory
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
from shopbench.traces.streams import chat_row
from template.signing import HotkeyVerifier


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    out = tmp_path_factory.mktemp("api-arena")
    output = run_arena(catalog_dir, out)
    return out / "archive", output, json.loads((out / "arena.json").read_text())


@pytest.fixture(scope="module")
def records(arena: tuple[Path, str, dict]) -> dict[str, Trajectory]:
    return {t.episode_id: t for t in read_store(arena[0])}


@pytest.fixture(scope="module")
def api(arena: tuple[Path, str, dict]) -> Iterator[httpx.Client]:
    config = ApiConfig(root=str(arena[0]), burst=10_000, rate_per_s=1000)
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _all_pages(api: httpx.Client, params: dict[str, str]) -> list[dict]:
    items, cursor = [], None
    while True:
        page = api.get(
            "/v1/trajectories", params={**params, **({"cursor": cursor} if cursor else {})}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


def test_the_arena_ends_by_printing_the_command_that_browses_its_archive(
    arena: tuple[Path, str, dict],
) -> None:
    root, output, _ = arena
    assert f"shopbench traces serve --root {root}" in output


def test_pages_follow_the_cursor_through_every_episode_once(
    api: httpx.Client, records: dict[str, Trajectory]
) -> None:
    items = _all_pages(api, {"limit": "5"})
    ids = [r["episode_id"] for r in items]
    assert len(ids) == len(set(ids)) == len(records) == 24
    assert set(ids) == set(records)
    assert ids == [
        t.episode_id for t in sorted(records.values(), key=lambda t: (t.block, t.episode_id))
    ]
    first = api.get("/v1/trajectories", params={"limit": "5"})
    assert first.headers["x-archive-embargo"] == "lifted" and first.json()["embargo_lifted"]


def _slowest(t: Trajectory) -> float:
    return max((x.policy_ms for x in t.timings.turns), default=0.0)


def _median_slowest(records: dict[str, Trajectory]) -> str:
    return str(sorted(_slowest(t) for t in records.values())[len(records) // 2])


def _says(t: Trajectory, word: str) -> bool:
    texts = [t.query] + [m.reasoning_content or "" for m in t.messages]
    return any(word in x.lower() for x in texts)


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        (lambda rs: {"intent": "shop", "success": "true"},
         lambda t, p: t.intent == "shop" and t.success),
        (lambda rs: {"miner_uid": "2,3"}, lambda t, p: t.miner_uid in (2, 3)),
        (lambda rs: {"score_min": "0.5"}, lambda t, p: t.score is not None and t.score >= 0.5),
        (lambda rs: {"text": "voucher"}, lambda t, p: _says(t, "voucher")),
        (lambda rs: {"slow_turn_ms": _median_slowest(rs)},
         lambda t, p: _slowest(t) >= float(p["slow_turn_ms"])),
        (lambda rs: {"gate_failed": "searched_first"},
         lambda t, p: t.judge is not None and t.judge.gates.get("searched_first") is False),
    ],
)  # fmt: skip
def test_filters_select_what_a_scan_of_the_records_selects(
    api: httpx.Client, records: dict[str, Trajectory], params, keep
) -> None:
    query = params(records)
    got = {r["episode_id"] for r in _all_pages(api, query)}
    expected = {e for e, t in records.items() if keep(t, query)}
    assert got == expected
    assert 0 < len(expected) < len(records)


def test_one_trajectory_and_one_task_come_back_as_archived(
    api: httpx.Client, records: dict[str, Trajectory]
) -> None:
    t = next(iter(records.values()))
    got = api.get(f"/v1/trajectories/{t.episode_id}")
    assert got.status_code == 200
    assert Trajectory.model_validate(got.json()) == t
    task = api.get(f"/v1/tasks/{t.task_id}").json()
    episodes = [Trajectory.model_validate(e) for e in task["episodes"]]
    assert {e.episode_id for e in episodes} == {
        e for e, r in records.items() if r.task_id == t.task_id
    }
    assert len({e.miner_uid for e in episodes}) == 3  # every miner played the task


def test_the_leaderboard_rebuilds_the_arena_validators_ema(
    api: httpx.Client, arena: tuple[Path, str, dict]
) -> None:
    board = api.get("/v1/leaderboard").json()
    arena_rows = {r["uid"]: r for r in arena[2]["miners"]}
    assert [m["uid"] for m in board["miners"]] == [r["uid"] for r in arena[2]["miners"]]
    for m in board["miners"]:
        assert m["episodes"] == arena_rows[m["uid"]]["episodes"]
        assert m["asr"] == pytest.approx(arena_rows[m["uid"]]["asr"], abs=1e-6)
        assert m["ema"] == pytest.approx(arena_rows[m["uid"]]["ema"], abs=1e-6)
        assert len(m["history"]) == 2


def test_stats_count_the_archive(api: httpx.Client, records: dict[str, Trajectory]) -> None:
    s = api.get("/v1/stats").json()
    ts = list(records.values())
    assert s["episodes"] == len(ts)
    assert s["by_intent"] == dict(Counter(t.intent for t in ts))
    assert s["by_termination"] == dict(Counter(t.termination.value for t in ts))
    failed = Counter(g for t in ts if t.judge for g, ok in t.judge.gates.items() if not ok)
    assert {g: c["failed"] for g, c in s["by_gate"].items() if c["failed"]} == dict(failed)


def test_manifests_verify_against_the_validators_hotkey(
    api: httpx.Client, arena: tuple[Path, str, dict]
) -> None:
    hotkey = arena[2]["validator"]["hotkey"]
    manifests = [
        ShardManifest.model_validate(m) for m in api.get("/v1/manifests").json()["manifests"]
    ]
    assert manifests and sum(m.rows for m in manifests) == 24
    assert all(verify_manifest(m, HotkeyVerifier(), hotkey) for m in manifests)


def test_bulk_formats_read_back_with_their_own_readers(
    api: httpx.Client, records: dict[str, Trajectory], tmp_path: Path
) -> None:
    jsonl = api.get("/v1/trajectories", params={"format": "jsonl", "intent": "shop"})
    assert jsonl.headers["content-type"].startswith("application/x-ndjson")
    back = [Trajectory.model_validate_json(line) for line in jsonl.text.splitlines()]
    assert sorted(back, key=lambda t: t.episode_id) == sorted(
        (t for t in records.values() if t.intent == "shop"), key=lambda t: t.episode_id
    )
    table = pq.read_table(io.BytesIO(api.get("/v1/trajectories?format=parquet").content))
    assert sorted(table.column("episode_id").to_pylist()) == sorted(records)
    rows = [json.loads(x) for x in api.get("/v1/trajectories?format=trl&limit=3").text.splitlines()]
    assert len(rows) == 3 and all(set(r) == {"messages", "tools"} for r in rows)
    assert all(isinstance(c["function"]["arguments"], str)
               for r in rows for m in r["messages"] for c in m.get("tool_calls") or [])  # fmt: skip
    every = api.get("/v1/trajectories?format=trl").text.splitlines()
    canon = sorted(json.dumps(json.loads(x), sort_keys=True) for x in every)
    assert canon == sorted(json.dumps(chat_row(t), sort_keys=True) for t in records.values())
    single = api.get(f"/v1/trajectories/{next(iter(records))}?format=trl").text
    assert json.loads(single) == chat_row(records[next(iter(records))])


def test_an_eval_export_opens_with_inspects_own_reader(
    api: httpx.Client, records: dict[str, Trajectory], tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    t = next(t for t in records.values() if t.success)
    one = api.get(f"/v1/trajectories/{t.episode_id}", params={"format": "eval"})
    assert one.status_code == 200
    (tmp_path / "one.eval").write_bytes(one.content)
    log = read_eval_log(str(tmp_path / "one.eval"))
    assert log.status == "success" and len(log.samples) == 1
    sample = log.samples[0]
    assert sample.id == t.episode_id and sample.input == t.query
    assert len(sample.messages) == len(t.messages)
    assert sample.scores["outcome"].value == 1.0
    assert sample.scores["judge"].value == t.judge.score
    calls = [
        c.function for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []
    ]
    assert calls == [c.function.name for m in t.messages for c in m.tool_calls or []]
    many = api.get("/v1/trajectories", params={"format": "eval", "intent": "voucher"})
    assert many.headers["x-archive-truncated"] == "false"
    cut = api.get("/v1/trajectories", params={"format": "eval", "limit": "2"})
    assert cut.headers["x-archive-truncated"] == "true"
    (tmp_path / "many.eval").write_bytes(many.content)
    ids = {s.id for s in read_eval_log(str(tmp_path / "many.eval")).samples}
    assert ids == {e for e, r in records.items() if r.intent == "voucher"}


@pytest.mark.parametrize(
    ("url", "status", "param", "allowed"),
    [
        ("/v1/trajectories?intent=bogus", 422, "intent", ["product", "shop", "voucher",
                                                          "knowledge", "clarify"]),
        ("/v1/trajectories?success=maybe", 422, "success", ["true", "false"]),
        ("/v1/trajectories?colour=red", 422, "colour", None),
        ("/v1/trajectories?format=xml", 422, "format",
         ["json", "jsonl", "parquet", "chat", "shoppingbench", "atif", "eval"]),
        ("/v1/trajectories?limit=0", 422, "limit", None),
        ("/v1/trajectories?limit=501", 422, "limit", None),
        ("/v1/trajectories?cursor=not-a-cursor", 422, "cursor", None),
        ("/v1/trajectories?score_min=0.9&score_max=0.1", 422, None, None),
        ("/v1/trajectories?text=" + "x" * 201, 422, "text", None),
        ("/v1/trajectories?gate_failed=Not%20A%20Gate", 422, "gate_failed", None),
        ("/v1/trajectories/bad%20id%3Cscript%3E", 422, "episode_id", None),
        ("/v1/trajectories/0123456789abcdef", 404, None, None),
        ("/v1/trajectories/0123456789abcdef?intent=shop", 422, "intent", ["format"]),
        ("/v1/tasks/no-such-task", 404, None, None),
        ("/v1/trajectories?text=" + "x" * 3000, 414, None, None),
        ("/v1/trajectories?score_min=nan", 422, "score_min", None),
        ("/v1/trajectories?score_max=Infinity", 422, "score_max", None),
        ("/v1/trajectories?rule_score_min=-inf", 422, "rule_score_min", None),
        ("/v1/trajectories?judge_score_max=NaN", 422, "judge_score_max", None),
        ("/v1/trajectories?score_min=1.5", 422, "score_min", None),
        ("/v1/trajectories?slow_turn_ms=inf", 422, "slow_turn_ms", None),
        ("/v1/trajectories?since=1e18", 422, "since", None),
        ("/v1/trajectories?since=inf", 422, "since", None),
        ("/v1/trajectories?until=9999-12-31T23:00:00-05:00", 422, "until", None),
        ("/v1/trajectories?block_min=9223372036854775808", 422, "block_min", None),
        ("/v1/trajectories?miner_uid=18446744073709551616", 422, "miner_uid", None),
        ("/v1/trajectories?limit=9223372036854775808", 422, "limit", None),
        ("/v1/trajectories?format=jsonl&limit=9223372036854775808", 422, "limit", None),
        ("/v1/trajectories?format=parquet&limit=9223372036854775808", 422, "limit", None),
        ("/v1/trajectories?format=trl&limit=2147483648", 422, "limit", None),
        ("/v1/stats?since=1e18", 422, "since", None),
        ("/v1/leaderboard?until=9999-12-31T23:00:00-05:00", 422, "until", None),
        ("/episodes?score_min=nan", 422, "score_min", None),
        # a cursor at block 2**63, past any block the archive holds
        ("/v1/trajectories?cursor=WzkyMjMzNzIwMzY4NTQ3NzU4MDgsImEiXQ", 422, "cursor", None),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_parameter(
    api: httpx.Client, url: str, status: int, param: str | None, allowed: list[str] | None
) -> None:
    r = api.get(url)
    assert r.status_code == status, r.text
    if status == 422:
        detail = r.json()["detail"][0]
        if param is not None:
            assert detail["loc"][-1] == param and param in detail["msg"]
        if allowed is not None:
            assert detail["allowed"] == allowed
    if param == "colour":
        assert "intent" in r.json()["detail"][0]["allowed"]


def test_the_embargo_holds_on_every_route(arena: tuple[Path, str, dict], tmp_path: Path) -> None:
    root, live = embargoed(arena[0], tmp_path / "validator")
    public = {t.episode_id for t in read_store(root)} - live
    assert live and public
    hidden = sorted(live)[0]
    task_of_hidden = next(t.task_id for t in read_store(root) if t.episode_id == hidden)
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        listed = {r["episode_id"] for r in c.get("/v1/trajectories?limit=500").json()["items"]}
        assert listed == public
        assert c.get(f"/v1/trajectories/{hidden}").status_code == 404
        assert c.get(f"/v1/trajectories/{hidden}").json() == {"detail": f"no episode {hidden}"}
        assert c.get(f"/v1/tasks/{task_of_hidden}").status_code == 404  # round two only
        assert sum(m["episodes"] for m in c.get("/v1/leaderboard").json()["miners"]) == len(public)
        assert c.get("/v1/stats").json()["episodes"] == len(public)
        streamed = [
            json.loads(x)["episode_id"]
            for x in c.get("/v1/trajectories?format=jsonl").text.splitlines()
        ]
        assert set(streamed) == public
        manifests = c.get("/v1/manifests").json()["manifests"]
        assert manifests and all(m["epoch_max"] == 3 for m in manifests)
        shard = next(r for r in read_store(root) if r.episode_id == hidden)
        assert shard.episode_id not in {
            r["episode_id"] for r in c.get(f"/v1/tasks/{shard.task_id}").json().get("episodes", [])
        }
        page = c.get(f"/episodes/{hidden}", headers={"accept": "text/html"})
        assert page.status_code == 404 and "Embargo in force" in page.text
        assert c.get("/").headers["x-archive-embargo"] == "in-force"


def test_a_client_past_its_rate_is_told_when_to_come_back(arena: tuple[Path, str, dict]) -> None:
    config = ApiConfig(root=str(arena[0]), burst=3, rate_per_s=0.2)
    with serving(create_app(config)) as url, httpx.Client(base_url=url) as c:
        codes = [c.get("/v1/stats").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        refused = c.get("/v1/stats")
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1


def test_a_hostile_filter_never_answers_for_the_unfiltered_view(
    arena: tuple[Path, str, dict], records: dict[str, Trajectory]
) -> None:
    # A fresh server's memo is the one eviction leaves: no entry for the unfiltered view, so
    # a filter that keyed like no filter at all (NaN did) would fill it with its own answer.
    config = ApiConfig(root=str(arena[0]), burst=10_000, rate_per_s=1000)
    with serving(create_app(config)) as url, httpx.Client(base_url=url) as c:
        for name in ("score_min", "rule_score_max", "judge_score_min", "slow_turn_ms"):
            for spelling in ("nan", "NaN", "inf", "-Infinity"):
                for route in ("/v1/stats", "/v1/leaderboard"):
                    r = c.get(route, params={name: spelling})
                    assert r.status_code == 422, (route, name, spelling, r.text)
                    assert r.json()["detail"][0]["loc"] == ["query", name]
        assert c.get("/v1/stats").json()["episodes"] == len(records)
        board = c.get("/v1/leaderboard").json()
        assert sum(m["episodes"] for m in board["miners"]) == len(records)
        home = c.get("/")
        assert home.status_code == 200 and f"{len(records)} episodes." in home.text


ROTATED = tuple(f"203.0.113.{i}" for i in range(1, 6))
"""Five forwarded addresses, one client rotating them (or five clients behind a proxy)."""


def _codes(url: str, forwarded: tuple[str, ...], peer: str = "127.0.0.1") -> list[int]:
    """The statuses of one request per X-Forwarded-For value, sent from address `peer`."""
    transport = httpx.HTTPTransport(local_address=peer)
    with httpx.Client(base_url=url, transport=transport) as c:
        return [c.get("/v1/manifests", headers={"x-forwarded-for": f}).status_code
                for f in forwarded]  # fmt: skip


def test_rotating_x_forwarded_for_does_not_dodge_the_rate_limit(
    arena: tuple[Path, str, dict],
) -> None:
    config = ApiConfig(root=str(arena[0]), burst=3, rate_per_s=0.01)
    assert config.trusted_proxies == ()
    with serving(create_app(config), trusted_proxies=config.trusted_proxies) as url:
        assert _codes(url, ROTATED) == [200, 200, 200, 429, 429]


def test_x_forwarded_for_is_read_only_from_a_configured_proxy(
    arena: tuple[Path, str, dict],
) -> None:
    config = ApiConfig(root=str(arena[0]), burst=3, rate_per_s=0.01,
                       trusted_proxies=("127.0.0.1",))  # fmt: skip
    with serving(create_app(config), trusted_proxies=config.trusted_proxies) as url:
        assert _codes(url, ROTATED) == [200] * 5  # each forwarded client: a bucket of its own
        assert _codes(url, ("198.51.100.7",) * 4) == [200, 200, 200, 429]
        # any other peer's header is ignored: it is counted by its own address
        assert _codes(url, ROTATED, peer="127.0.0.2") == [200, 200, 200, 429, 429]


def test_archive_serve_reads_x_forwarded_for_only_from_its_trusted_proxy(
    arena: tuple[Path, str, dict], tmp_path: Path
) -> None:
    refused = CliRunner().invoke(
        cli_app, ["traces", "serve", "--root", str(arena[0]), "--trusted-proxy", "*"]
    )
    assert refused.exit_code == 2 and "--trusted-proxy" in refused.output
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = subprocess.Popen(
        [sys.executable, "-m", "shopbench.cli", "traces", "serve", "--root", str(arena[0]),
         "--port", str(port), "--burst", "3", "--rate", "0.01", "--trusted-proxy", "127.0.0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        # 127.0.0.1 is not the proxy named: its header is ignored (uvicorn alone trusts it)
        assert _codes(url, ROTATED) == [200, 200, 200, 429, 429]
        assert _codes(url, ROTATED, peer="127.0.0.2") == [200] * 5
    finally:
        server.terminate()
        server.wait(10)


def _tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of `page` with its attributes, as a browser's parser reads them."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Parser().feed(page)
    return found


def test_pages_escape_miner_text_under_a_strict_policy(
    arena: tuple[Path, str, dict], tmp_path: Path
) -> None:
    root, episode = hostile(arena[0], tmp_path / "hostile")
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        for path in (f"/episodes/{episode}", "/episodes", "/", "/episodes?text=script"):
            page = c.get(path)
            assert page.status_code == 200, path
            csp = page.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert page.headers["x-content-type-options"] == "nosniff"
            for payload in PAYLOADS:
                assert payload not in page.text
            tags = _tags(page.text)
            assert not [t for t in tags if t[0] in ("img", "iframe", "b")], path
            assert [t for t in tags if t[0] == "script"] == [
                ("script", {"src": "/static/app.js", "defer": None})
            ]
            assert not [(t, a) for t, attrs in tags for a in attrs if a.startswith("on")]
            hrefs = [attrs.get("href") or "" for t, attrs in tags if t in ("a", "link")]
            assert not [h for h in hrefs if h.startswith(("javascript:", "http:", "https:"))]
        view = c.get(f"/episodes/{episode}").text
        assert "&lt;script&gt;window.__pwned" in view and "Embargo lifted" in view
        model = view.split('id="agent-model">', 1)[1].split("</span>", 1)[0]
        assert html.unescape(model) == f"{PAYLOADS[1]} ({PAYLOADS[6]})"  # the card's, as text
        assert '>self-declared model</span> <span class="mono" id="agent-model">' in view
        listed = c.get("/episodes").text  # the list names the model too, as text
        shown, after = listed.split('<span class="model">', 1)[1].split("</span>", 1)
        assert html.unescape(shown) == PAYLOADS[1]
        assert after.lstrip().startswith('<span class="declared"') and "(self-declared)" in after
        items = c.get("/v1/trajectories").json()["items"]
        row = next(r for r in items if r["episode_id"] == episode)
        assert row["agent_model"] == PAYLOADS[1]
        assert (
            Trajectory.model_validate(c.get(f"/v1/trajectories/{episode}").json()).agent
            == HOSTILE[:200]
        )


def test_traces_pull_reads_the_service_as_it_reads_a_bucket(
    api: httpx.Client, arena: tuple[Path, str, dict], records: dict[str, Trajectory], tmp_path: Path
) -> None:
    hotkey = arena[2]["validator"]["hotkey"]
    out = tmp_path / "pulled"
    result = CliRunner().invoke(
        cli_app, ["traces", "pull", "--from", str(api.base_url), "--validator", hotkey,
                  "--out", str(out), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = _json_line(result.output)
    assert report["rows"] == 24 and not report["quarantined"]
    assert {t.episode_id for t in read_store(out)} == set(records)
    forged = CliRunner().invoke(
        cli_app, ["traces", "pull", "--from", str(api.base_url), "--validator", VALIDATOR,
                  "--out", str(tmp_path / "none"), "--json"],
    )  # fmt: skip
    # a validator the service holds nothing of: refused, naming the one it holds
    assert isinstance(forged.exception, UnknownValidator)
    assert f"it holds: {hotkey}" in str(forged.exception)


def _json_line(output: str) -> dict[str, object]:
    """The report a ``--json`` command printed (warnings on stderr may follow it)."""
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def test_the_embargoed_shards_are_not_served_to_pull(
    arena: tuple[Path, str, dict], tmp_path: Path
) -> None:
    root, live = embargoed(arena[0], tmp_path / "validator")
    with serving(create_app(ApiConfig(root=str(root)))) as url:
        out = tmp_path / "pulled"
        from shopbench.archive.pull.run import pull
        from shopbench.archive.remote import RemoteTarget

        report = pull(
            RemoteTarget(url=url), out, validator=VALIDATOR, verifier=KeyedHash(VALIDATOR)
        )
        assert report.fetched and not report.quarantined
        pulled = {t.episode_id for t in read_store(out)}
        assert pulled and not pulled & live


def test_the_openapi_document_lists_the_routes_and_filters(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()
    assert {
        "/v1/manifests",
        "/v1/trajectories",
        "/v1/trajectories/{episode_id}",
        "/v1/tasks/{task_id}",
        "/v1/leaderboard",
        "/v1/stats",
    } <= set(spec["paths"])
    names = {p["name"] for p in spec["paths"]["/v1/trajectories"]["get"]["parameters"]}
    assert {"intent", "success", "text", "slow_turn_ms", "gate_failed", "cursor", "format"} <= names
    assert api.get("/docs").status_code == 200


def test_archive_serve_pulls_a_url_verified_and_serves_it(
    api: httpx.Client, arena: tuple[Path, str, dict], tmp_path: Path
) -> None:
    hotkey = arena[2]["validator"]["hotkey"]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    cache = tmp_path / "cache"
    server = subprocess.Popen(
        [sys.executable, "-m", "shopbench.cli", "traces", "serve", "--root", str(api.base_url),
         "--validator", hotkey, "--cache", str(cache), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                stats = httpx.get(f"http://127.0.0.1:{port}/v1/stats", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert stats.status_code == 200 and stats.json()["episodes"] == 24
        assert {t.episode_id for t in read_store(cache)} == {
            r["episode_id"] for r in _all_pages(api, {"limit": "500"})
        }
    finally:
        server.terminate()
        server.wait(10)
    refused = CliRunner().invoke(cli_app, ["traces", "serve", "--root", str(api.base_url)])
    assert refused.exit_code != 0 and "--validator" in refused.output


def test_shards_sealed_while_serving_are_served(
    arena: tuple[Path, str, dict], records: dict[str, Trajectory], tmp_path: Path
) -> None:
    ordered = sorted(records.values(), key=lambda t: t.episode_id)
    root = store(ordered[:10], tmp_path / "growing", lifted=True)
    config = ApiConfig(root=str(root), refresh_s=0)
    with serving(create_app(config)) as url, httpx.Client(base_url=url) as c:
        assert c.get("/v1/stats").json()["episodes"] == 10
        assert c.get(f"/v1/trajectories/{ordered[20].episode_id}").status_code == 404
        store(ordered[10:], root, lifted=True)
        assert c.get("/v1/stats").json()["episodes"] == 24
        assert c.get(f"/v1/trajectories/{ordered[20].episode_id}").status_code == 200


def test_the_older_archive_serve_name_still_serves() -> None:
    done = CliRunner().invoke(cli_app, ["archive", "serve", "--help"])
    assert done.exit_code == 0 and "--root" in done.output
