"""`shopbench traces report`: one miner's offline report, over an archive the arena wrote,
through the CLI; its numbers against a direct computation, its refusals, hostile miner text
kept inert, and the file in real headless Chromium from a ``file://`` path (no request, no
CSP violation). With ``SHOPBENCH_SCREENSHOTS=DIR`` the browser test saves
``miner-report.png`` (docs/browser.md) into DIR.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.api_archives import HOSTILE, PAYLOADS, embargoed, hostile, run_arena
from support.headless import AVAILABLE, MISSING, attack_effects, chromium, screenshot
from typer.testing import CliRunner

import shopbench
from shopbench.archive.store import read_store
from shopbench.cli import app, main
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.traces.report import ReportConfig, cut, miner_report

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("report-arena")
    run_arena(catalog_dir, out)
    return out / "archive", json.loads((out / "arena.json").read_text())


@pytest.fixture(scope="module")
def records(arena: tuple[Path, dict]) -> list[Trajectory]:
    return list(read_store(arena[0]))


def _report(root: Path, uid: int, out: Path, *extra: str) -> str:
    result = CliRunner().invoke(app, ["traces", "report", "--miner", str(uid), "--root",
                                      str(root), "--out", str(out), *extra])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def _main(*args: str) -> tuple[int, str, str]:
    """``shopbench ARGS`` through the CLI's entry point (its error boundary included)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


class _Page(HTMLParser):
    """Every tag with its attributes, and the text of each table row under an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text_by_id: dict[str, str] = {}
        self.rows: dict[str, list[list[str]]] = {}
        self._open: list[str] = []  # ids of the elements open
        self._stack: list[str | None] = []
        self._table: list[str | None] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("meta", "br", "hr", "input", "link", "img", "circle", "line", "polyline"):
            return
        self._stack.append(a.get("id"))
        if a.get("id"):
            self._open.append(a["id"])  # type: ignore[arg-type]
            self.text_by_id[a["id"]] = ""  # type: ignore[index]
        if tag == "table":
            self._table.append(a.get("id"))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table and self._table[-1]:
            self.rows.setdefault(self._table[-1], []).append(self._row)
            self._row = None
        elif tag == "table" and self._table:
            self._table.pop()
        if self._stack:
            closed = self._stack.pop()
            if closed and self._open and self._open[-1] == closed:
                self._open.pop()

    def handle_data(self, data: str) -> None:
        for i in self._open:
            self.text_by_id[i] += data
        if self._cell is not None:
            self._cell.append(data)

    def body(self, table: str) -> dict[str, str]:
        """A two-column table's rows (its header row left out) as a mapping."""
        return {r[0]: r[1] for r in self.rows.get(table, [])[1:]}


def _pre_texts(html: str) -> list[tuple[str, str]]:
    """The class and text of each ``<pre>`` (reasoning, content, calls ``name(arguments)``),
    as a reader sees it."""
    found: list[tuple[str, str]] = []

    class Pre(HTMLParser):
        inside: list[str] | None = None
        kind = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "pre":
                self.inside = []
                self.kind = dict(attrs).get("class") or ""

        def handle_endtag(self, tag: str) -> None:
            if tag == "pre" and self.inside is not None:
                found.append((self.kind, "".join(self.inside)))
                self.inside = None

        def handle_data(self, data: str) -> None:
            if self.inside is not None:
                self.inside.append(data)

    Pre(convert_charrefs=True).feed(html)
    return found


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def test_each_miners_report_counts_its_episodes_failures_and_gates(
    arena: tuple[Path, dict], records: list[Trajectory], tmp_path: Path
) -> None:
    root, truth = arena
    uids = sorted({t.miner_uid for t in records if t.miner_uid is not None})
    assert len(uids) == 3
    ema = {r["uid"]: r["ema"] for r in truth["miners"]}
    for uid in uids:
        mine = sorted((t for t in records if t.miner_uid == uid),
                      key=lambda t: (t.block or 0, t.episode_id))  # the report's order
        page = _parse(_report(root, uid, tmp_path / f"miner-{uid}.html"))
        wins = sum(t.success for t in mine)
        assert page.text_by_id["episode-count"].strip() == str(len(mine)) == "8"
        assert page.text_by_id["asr"].strip() == f"{wins / len(mine):.3f}"
        assert page.text_by_id["ema"].split()[0] == f"{ema[uid]:.4f}"
        shown = [r[0] for r in page.rows["episode-table"][1:]]
        assert sorted(shown) == sorted(t.episode_id for t in mine)

        failed = [t.diagnosis for t in mine if t.diagnosis.failed]
        kinds = {k: int(v) for k, v in page.body("failure-kinds").items()}
        assert kinds == dict(Counter(d.kind for d in failed))
        labels = {k: int(v) for k, v in page.body("failure-labels").items()}
        assert labels == dict(Counter(d.label for d in failed))

        gates = {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in page.rows["gate-counts"][1:]}
        judged = [t.judge for t in mine if t.judge is not None]
        gate_failed = Counter(g for v in judged for g, ok in v.gates.items() if not ok)
        assert {g: n[1] for g, n in gates.items() if n[1]} == dict(gate_failed)
        assert {g: n[2] for g, n in gates.items() if n[2]} == dict(
            Counter(v.stopped_at for v in judged if v.stopped_at)
        )
        assert all(n[0] == len(judged) for n in gates.values())
        for gate in gate_failed:  # each failed gate names an episode that failed it, with why
            example = page.text_by_id[f"examples-{gate}"]
            failing = [t for t in mine if t.judge and t.judge.gates.get(gate) is False]
            assert any(t.episode_id in example for t in failing)
            first = failing[0].judge.criterion(gate)  # type: ignore[union-attr]
            if first is not None:
                assert cut(first.evidence, 600)[:40] in example
    # the policies differ: careful succeeds more often than random
    asr = {r["uid"]: r["asr"] for r in truth["miners"]}
    assert len(set(asr.values())) > 1


def test_the_report_model_is_the_direct_computation(
    arena: tuple[Path, dict], records: list[Trajectory]
) -> None:
    _, truth = arena
    for row in truth["miners"]:
        uid = row["uid"]
        mine = [t for t in records if t.miner_uid == uid]
        r = miner_report(uid, records)
        assert r is not None
        assert r.episodes == len(mine) and r.successes == sum(t.success for t in mine)
        # the model each record names: the reference policy's card, revision the release's
        assert r.models == [f"{row['model']} ({shopbench.__version__})"]
        assert {line.model for line in r.lines} == set(r.models)
        assert r.asr == pytest.approx(row["asr"], abs=1e-6)
        assert r.ema == pytest.approx(row["ema"], abs=1e-6)
        assert r.ema_alpha == ConsensusConfig().ema_alpha and len(r.rounds) == 2
        assert r.mean_score == pytest.approx(sum(t.score or 0 for t in mine) / len(mine), abs=1e-6)
        for i in r.by_intent:
            of = [t for t in mine if t.intent == i.intent]
            assert (i.episodes, i.successes) == (len(of), sum(t.success for t in of))
            assert i.asr == pytest.approx(sum(t.success for t in of) / len(of), abs=1e-6)
        assert sum(i.episodes for i in r.by_intent) == len(mine)
        assert sum(r.failures.values()) == len(mine) - r.successes
        assert r.failed_gates == dict(
            Counter(g for t in mine if t.judge for g, ok in t.judge.gates.items() if not ok)
        )
        assert all(len(g.examples) <= 3 for g in r.gates)
    assert miner_report(999, records) is None
    few = miner_report(truth["miners"][0]["uid"], records, ReportConfig(examples_per_gate=1))
    assert few is not None and all(len(g.examples) <= 1 for g in few.gates)


def test_hostile_miner_text_is_only_escaped_and_the_file_loads_nothing(
    arena: tuple[Path, dict], tmp_path: Path
) -> None:
    root, episode = hostile(arena[0], tmp_path / "hostile")
    t = next(x for x in read_store(root) if x.episode_id == episode)
    assert t.miner_uid is not None
    html = _report(root, t.miner_uid, tmp_path / "hostile.html", "--max-text-chars", "200")
    page = _parse(html)
    assert page.text_by_id["episode-count"].strip() == "1"
    assert "<script" not in html.lower() and "<iframe" not in html.lower()
    assert "&lt;script&gt;window.__pwned" in html  # the miner's text, shown as text
    # the model its card named, in the header and on the episode, as text too
    assert page.text_by_id["models"].strip() == f"{PAYLOADS[1]} ({PAYLOADS[6]})"
    assert html.count("&lt;img src=&#34;http://evil.example/x.png&#34;") >= 2
    for tag, attrs in page.tags:
        assert tag not in ("script", "img", "iframe", "link", "object", "embed", "base", "form")
        assert "style" not in attrs and "src" not in attrs, tag
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#ep-"), href
        assert not any("javascript:" in (v or "") for v in attrs.values())
    ids = [a["id"] for _, a in page.tags if a.get("id")]
    assert "injected" not in ids
    metas = [a for tag, a in page.tags if tag == "meta" and a.get("http-equiv")]
    assert [m["http-equiv"] for m in metas] == ["Content-Security-Policy"]
    csp = metas[0]["content"] or ""
    assert csp.startswith("default-src 'none'; style-src 'sha256-") and "unsafe" not in csp
    # every miner-written field is cut: the reasoning reaches the page cut to 200 characters
    shown = [p.split("(", 1)[1][:-1] if kind == "call" else p for kind, p in _pre_texts(html)]
    assert len(shown) > 2 and all(len(x) <= 200 for x in shown)
    assert HOSTILE[:199] + "…" in shown  # the reasoning, cut


def test_the_arena_report_references_no_url(arena: tuple[Path, dict], tmp_path: Path) -> None:
    root, truth = arena
    html = _report(root, truth["miners"][0]["uid"], tmp_path / "r.html")
    for needle in ("http://", "https://", "//", "src=", "url(", "@import"):
        assert needle not in html, needle
    assert '<meta http-equiv="Content-Security-Policy" content="default-src' in html
    assert html.index("Content-Security-Policy") < html.index("<style>")


def test_the_embargo_and_signed_by_decide_what_is_read(
    arena: tuple[Path, dict], tmp_path: Path
) -> None:
    root, live = embargoed(arena[0], tmp_path / "embargoed")
    everything = list(read_store(root))
    uid = everything[0].miner_uid
    assert uid is not None
    public = [t for t in everything if t.miner_uid == uid and t.episode_id not in live]
    page = _parse(_report(root, uid, tmp_path / "e.html"))
    assert page.text_by_id["episode-count"].strip() == str(len(public)) == "4"
    assert not any(e in page.text_by_id["episodes"] for e in live)
    code, _, err = _main("traces", "report", "--miner", "99", "--root", str(root),
                         "--out", str(tmp_path / "none.html"))  # fmt: skip
    assert (code, err) == (2, f"error: miner 99: no episodes in {root} (episodes of the live "
                              "rotation bucket withheld)\n")  # fmt: skip

    hotkey = arena[1]["validator"]["hotkey"]
    signed = _parse(_report(arena[0], uid, tmp_path / "s.html", "--signed-by", hotkey))
    assert signed.text_by_id["episode-count"].strip() == "8"
    code, _, err = _main("traces", "report", "--miner", str(uid), "--root", str(arena[0]),
                         "--out", str(tmp_path / "x.html"), "--signed-by", "5Someone")  # fmt: skip
    assert code == 2 and f"error: miner {uid}: no episodes in shards 5Someone signed" in err
    assert not (tmp_path / "x.html").exists()


def test_refusals_are_one_line_and_write_nothing(
    arena: tuple[Path, dict], tmp_path: Path
) -> None:
    root, truth = arena
    out = tmp_path / "r.html"
    code, stdout, err = _main("traces", "report", "--miner", "99", "--root", str(root),
                              "--out", str(out))  # fmt: skip
    assert code == 2 and err.splitlines()[-1] == f"error: miner 99: no episodes in {root}"
    assert err.splitlines()[0].startswith("ARCHIVE EMBARGO LIFTED")  # the arena's demo archive
    assert not out.exists()

    out.write_text("keep me")
    uid = str(truth["miners"][0]["uid"])
    code, stdout, err = _main("traces", "report", "--miner", uid, "--root", str(root),
                              "--out", str(out))  # fmt: skip
    assert code == 2 and "--out" in err and "--force" in err
    assert out.read_text() == "keep me"
    code, stdout, err = _main("traces", "report", "--miner", uid, "--root", str(root),
                              "--out", str(out), "--force")  # fmt: skip
    assert code == 0 and out.read_text().startswith("<!doctype html>")
    assert f"wrote the report of miner {uid} to {out}: 8 episodes" in stdout
    code, _, err = _main("traces", "report", "--miner", uid, "--root", str(root), "--out",
                         str(tmp_path / "y.html"), "--max-text-chars", "5")  # fmt: skip
    assert code == 2 and "--max-text-chars" in err and not (tmp_path / "y.html").exists()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not AVAILABLE:
        pytest.skip(MISSING)
    with chromium() as driver:
        yield driver


def _network(driver) -> tuple[dict[str, str], dict[str, str]]:  # type: ignore[no-untyped-def]
    """What the browser asked for since the last call (Chrome's network log): request id →
    URL, and request id → why it was blocked, for the requests the browser blocked."""
    asked, blocked = {}, {}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            asked[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFailed" and params.get("blockedReason"):
            blocked[params["requestId"]] = params["blockedReason"]
    return asked, blocked


def _requests(driver) -> list[str]:  # type: ignore[no-untyped-def]
    return list(_network(driver)[0].values())


def test_the_report_renders_from_a_file_in_chromium_with_no_csp_violation(
    browser, arena: tuple[Path, dict], records: list[Trajectory], tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    root, truth = arena
    # the miner whose judge gates failed most often shows the most of the report
    failed = Counter(t.miner_uid for t in records if t.judge for ok in t.judge.gates.values()
                     if not ok)  # fmt: skip
    uid = max(truth["miners"], key=lambda m: (failed[m["uid"]], m["uid"]))["uid"]
    best = next(m for m in truth["miners"] if m["uid"] == uid)
    out = tmp_path / "report.html"
    _report(root, uid, out)
    browser.get_log("browser")
    _requests(browser)
    browser.get(out.as_uri())
    assert browser.find_element(By.ID, "episode-count").text == "8"
    assert browser.find_element(By.ID, "asr").text == f"{best['asr']:.3f}"
    assert browser.find_elements(By.CSS_SELECTOR, "#ema-chart polyline")
    # the inline stylesheet applied (its hash is in the policy), nothing was refused
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("background-color") == "rgba(36, 52, 71, 1)"
    logged = [e["message"] for e in browser.get_log("browser")]
    assert not [m for m in logged if "Content Security Policy" in m or "Refused" in m], logged
    assert set(_requests(browser)) <= {out.as_uri()}
    details = browser.find_elements(By.CSS_SELECTOR, "details.episode")
    assert len(details) == 8 and not details[0].get_attribute("open")
    miss = next(d for d in details if d.find_elements(By.CSS_SELECTOR, "summary .miss"))
    miss.find_element(By.TAG_NAME, "summary").click()
    assert miss.get_attribute("open")
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot(browser, "miner-report.png")

    hostile_root, episode = hostile(root, tmp_path / "hostile")
    t = next(x for x in read_store(hostile_root) if x.episode_id == episode)
    bad = tmp_path / "hostile.html"
    _report(hostile_root, t.miner_uid or 0, bad)
    browser.get(bad.as_uri())
    for d in browser.find_elements(By.CSS_SELECTOR, "details.episode summary"):
        d.click()  # open every episode: its turns hold the attack
    injected = attack_effects(
        browser, "img, iframe, link, script, #injected, svg [onload]",
        "document.styleSheets.length",
    )  # fmt: skip
    assert injected == [0, 1]
    assert "<script>window.__pwned" in browser.find_element(By.ID, "episodes").text
    assert set(_requests(browser)) <= {bad.as_uri()}
    logged = [e["message"] for e in browser.get_log("browser")]
    assert not [m for m in logged if "Content Security Policy" in m], logged

    # markup that escaping had missed would be refused by the policy, and the log says so
    missed = tmp_path / "missed.html"
    missed.write_text(out.read_text().replace("<main>", (
        '<main><p id="red" style="color: red">x</p><style>#red { color: red }</style>'
        '<img src="https://example.invalid/x.png">'
    ), 1))  # fmt: skip
    browser.get(missed.as_uri())
    assert browser.find_element(By.ID, "red").value_of_css_property("color") != "rgba(255, 0, 0, 1)"
    refused = [e["message"] for e in browser.get_log("browser")
               if "Content Security Policy" in e["message"]]  # fmt: skip
    assert len(refused) >= 3, refused  # the attribute, the style element, the image
    asked, blocked = _network(browser)
    assert {u for i, u in asked.items() if i not in blocked} <= {missed.as_uri()}
    assert "https://example.invalid/x.png" in {asked[i] for i, why in blocked.items()
                                               if why == "csp"}  # fmt: skip
