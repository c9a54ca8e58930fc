"""The trace browser in real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium): the leaderboard, a filtered list, an episode with
its turns and checklist, and an episode whose every miner-written field is an attack that
must not run.

With ``SHOPBENCH_SCREENSHOTS=DIR`` set, the test saves the screenshots docs/browser.md shows
(leaderboard.png, episodes.png, episode.png, task.png, annotations.png and
episode-annotations.png of an annotated episode, diff.png of two episodes compared and
episodes-diagnosis.png of the list filtered by diagnosis) into DIR.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from support.api_archives import DIVERGES_AT, HOSTILE, diverging, hostile, run_arena, store
from support.headless import AVAILABLE, MISSING, attack_effects, chromium, screenshot

from shopbench.archive.store import read_store
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not AVAILABLE, reason=MISSING)]


@pytest.fixture(scope="module")
def arena_root(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-arena")
    run_arena(catalog_dir, out)
    return out / "archive"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as driver:
        yield driver


def _shot(driver, name: str) -> None:  # type: ignore[no-untyped-def]
    screenshot(driver, name)


def _requests(driver) -> list[str]:  # type: ignore[no-untyped-def]
    """Every URL the browser asked for since the last call (Chrome's network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_the_browser_shows_the_leaderboard_a_filtered_list_and_an_episode(
    browser, arena_root: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    records = {t.episode_id: t for t in read_store(arena_root)}
    with serving(create_app(ApiConfig(root=str(arena_root)))) as url:
        browser.get(url + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
        assert len(rows) == 3
        assert len(browser.find_elements(By.CSS_SELECTOR, "#ema-chart polyline")) == 3
        assert "Embargo lifted" in browser.find_element(By.ID, "embargo").text
        _shot(browser, "leaderboard.png")

        browser.find_element(By.LINK_TEXT, "Episodes").click()
        WebDriverWait(browser, 15).until(lambda d: d.current_url.endswith("/episodes"))
        Select(browser.find_element(By.NAME, "intent")).select_by_value("shop")
        browser.find_element(By.ID, "apply").click()
        WebDriverWait(browser, 15).until(lambda d: "intent=shop" in d.current_url)
        listed = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
        shop = [t for t in records.values() if t.intent == "shop"]
        assert len(listed) == len(shop)
        assert all(r.find_elements(By.TAG_NAME, "td")[2].text == "shop" for r in listed)
        _shot(browser, "episodes.png")

        won = next(r for r in listed if r.find_elements(By.TAG_NAME, "td")[6].text == "yes")
        first = won.find_element(By.CSS_SELECTOR, "td a")
        episode_id = first.text
        first.click()
        WebDriverWait(browser, 15).until(lambda d: d.current_url.endswith(episode_id))
        t = records[episode_id]
        turns = browser.find_elements(By.CSS_SELECTOR, "#turns .turn")
        assert len(turns) == t.turns
        calls = browser.find_elements(By.CSS_SELECTOR, "#turns .call")
        assert len(calls) == sum(len(m.tool_calls or []) for m in t.messages)
        checks = browser.find_elements(By.CSS_SELECTOR, "#checklist .checks li")
        constraints = sum(len(s.constraints) for s in t.outcome.slots)
        assert len(checks) == constraints > 0
        assert all("✓" in c.text for c in checks)  # a success: every constraint hit
        gates = browser.find_elements(By.CSS_SELECTOR, "#judge .checks li")
        assert t.judge is not None
        criteria = t.judge.criteria or t.judge.gates
        assert len(gates) == len(criteria)
        shown = browser.find_element(By.ID, "judge").text
        assert all(g in shown for g in t.judge.gates)  # each gate with its evidence
        assert browser.find_element(By.ID, "query").text == t.query.strip()
        _shot(browser, "episode.png")

        browser.find_element(By.PARTIAL_LINK_TEXT, "all miners on").click()
        WebDriverWait(browser, 15).until(lambda d: "/tasks/" in d.current_url)
        columns = browser.find_elements(By.CSS_SELECTOR, "#task-episodes .episode-col")
        assert len(columns) == sum(1 for x in records.values() if x.task_id == t.task_id) == 3
        _shot(browser, "task.png")


def test_hostile_miner_text_runs_nothing_in_the_browser(
    browser, arena_root: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    root, episode = hostile(arena_root, tmp_path / "hostile")
    with serving(create_app(ApiConfig(root=str(root)))) as url:
        origin = urlparse(url).netloc
        _requests(browser)  # drop what earlier pages asked for
        for path in (f"/episodes/{episode}", "/episodes?text=script", "/", "/tasks/"):
            if path == "/tasks/":
                path += next(t.task_id for t in read_store(root))
            browser.get(url + path)
            button = browser.find_elements(By.CSS_SELECTOR, "button.toggle-all")
            if button:
                button[0].click()  # open every collapsed block too
            injected = attack_effects(
                browser, "img, iframe, #injected, svg [onload]",
                "Array.from(document.scripts).map(s => s.src)",
            )  # fmt: skip
            assert injected[0] == 0, path
            assert injected[1] == [url + "/static/app.js"], path
            foreign = [u for u in _requests(browser) if urlparse(u).netloc not in (origin, "")]
            assert foreign == [], path
            if path.startswith("/episodes/"):
                shown = browser.find_element(By.ID, "turns").text
                assert "<script>window.__pwned" in shown  # shown as text, never run


def test_annotations_show_in_the_list_and_on_the_episode(
    browser, arena_root: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from shopbench.archive.annotations.append import append_annotation
    from shopbench.archive.annotations.model import annotate
    from shopbench.traces.annotations import AnnotationBook
    from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet

    root = Path(shutil.copytree(arena_root, tmp_path / "archive"))
    t = min((x for x in read_store(root) if x.turns >= 2), key=lambda x: x.episode_id)
    signer = HotkeySigner.from_wallet(LocalWallet.derive("browser-annotator"))
    for label, turn, note in (
        ("reward-hack", 2, "recommended before any search <b>bold?</b>"),
        ("needs-review", None, ""),
    ):
        append_annotation(root, annotate(t, signer, label=label, turn=turn, note=note))
    app = create_app(ApiConfig(root=str(root)), annotations=AnnotationBook(root, HotkeyVerifier()))
    with serving(app) as url:
        browser.get(url + f"/episodes?intent={t.intent}")
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
                   if r.find_element(By.CSS_SELECTOR, "td a").text == t.episode_id)  # fmt: skip
        labels = row.find_elements(By.CSS_SELECTOR, "td.labels .label")
        assert [x.text for x in labels] == ["needs-review", "reward-hack"]
        others = browser.find_elements(By.CSS_SELECTOR, "#episodes td.labels .label")
        assert len(others) == 2  # no other episode is labelled
        _shot(browser, "annotations.png")

        row.find_element(By.CSS_SELECTOR, "td a").click()
        WebDriverWait(browser, 15).until(lambda d: d.current_url.endswith(t.episode_id))
        whole = browser.find_element(By.ID, "annotations")
        assert [x.text for x in whole.find_elements(By.CSS_SELECTOR, ".label")] == ["needs-review"]
        assert signer.hotkey in whole.text
        turn = browser.find_element(By.ID, "turn-2")
        assert turn.find_element(By.CSS_SELECTOR, ".annotation .label").text == "reward-hack"
        note = turn.find_element(By.CSS_SELECTOR, ".annotation .note")
        assert note.text == "recommended before any search <b>bold?</b>"  # text, not markup
        assert not turn.find_elements(By.CSS_SELECTOR, ".annotation b")
        _shot(browser, "episode-annotations.png")


def _fits(driver) -> bool:  # type: ignore[no-untyped-def]
    """Whether the page is no wider than the window (nothing to scroll sideways)."""
    return bool(driver.execute_script(
        "const d = document.documentElement;"
        "return d.scrollWidth <= d.clientWidth && d.clientWidth <= window.innerWidth"
    ))  # fmt: skip


def test_the_list_filters_by_label_and_fits_a_1366_px_screen(
    browser, arena_root: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from shopbench.archive.annotations.append import append_annotation
    from shopbench.archive.annotations.model import MAX_NOTE_CHARS, annotate
    from shopbench.traces.annotations import AnnotationBook
    from template.signing import HotkeySigner, HotkeyVerifier, LocalWallet

    root, episode = hostile(arena_root, tmp_path / "labelled")
    store(list(read_store(arena_root)), root, lifted=True)  # the arena's rows beside it
    records = {t.episode_id: t for t in read_store(root)}
    signer = HotkeySigner.from_wallet(LocalWallet.derive("browser-annotator"))
    calm = min(x for x in records if x != episode)
    for target, label in ((episode, "reward-hack"), (calm, "needs-review")):
        note = HOSTILE[:MAX_NOTE_CHARS] if target == episode else ""
        append_annotation(root, annotate(records[target], signer, label=label, note=note))
    app = create_app(ApiConfig(root=str(root)), annotations=AnnotationBook(root, HotkeyVerifier()))
    browser.set_window_size(1366, 768)
    try:
        with serving(app) as url:
            browser.get(url + "/episodes?limit=500")
            assert browser.execute_script("return window.innerWidth") == 1366
            rows = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
            assert len(rows) == len(records)  # every row, the hostile agent name's too
            assert _fits(browser)

            label = Select(browser.find_element(By.NAME, "label"))
            assert [o.get_attribute("value") for o in label.options] == [
                "", "needs-review", "reward-hack",
            ]  # fmt: skip
            label.select_by_value("reward-hack")
            browser.find_element(By.ID, "apply").click()
            WebDriverWait(browser, 15).until(lambda d: "label=reward-hack" in d.current_url)
            listed = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
            assert [r.find_element(By.CSS_SELECTOR, "td a").text for r in listed] == [episode]
            chips = listed[0].find_elements(By.CSS_SELECTOR, "td.labels .label")
            assert [c.text for c in chips] == ["reward-hack"]
            kept = Select(browser.find_element(By.NAME, "label")).first_selected_option
            assert kept.get_attribute("value") == "reward-hack"  # the form keeps its choice
            injected = attack_effects(browser, "img, iframe, #injected, svg [onload]")
            assert injected[0] == 0
            assert _fits(browser)

            for path in ("/", f"/episodes/{episode}", f"/tasks/{records[episode].task_id}"):
                browser.get(url + path)
                assert attack_effects(browser, "img, iframe, #injected, svg [onload]")[0] == 0

            browser.get(url + "/episodes?label=%3Cscript%3Ewindow.__pwned%3D1%3C/script%3E")
            assert "an annotation label is a short slug" in browser.find_element(
                By.CSS_SELECTOR, "p.error"
            ).text  # fmt: skip
            assert "<script>window.__pwned=1</script>" in browser.find_element(By.TAG_NAME,
                                                                               "main").text
            assert attack_effects(browser, "img, iframe, #injected, svg [onload]")[0] == 0
    finally:
        browser.set_window_size(1400, 1000)


def test_the_task_page_opens_a_diff_that_marks_the_first_divergence(
    browser, arena_root: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from shopbench.traces.diff import first_divergence

    root, a_id, b_id = diverging(arena_root, tmp_path / "pair")
    got = {t.episode_id: t for t in read_store(root)}
    expected = first_divergence(got[a_id], got[b_id])
    assert expected is not None and expected.turn == DIVERGES_AT
    with serving(create_app(ApiConfig(root=str(root)))) as url:
        browser.get(url + f"/tasks/{got[a_id].task_id}")
        form = browser.find_element(By.ID, "compare")
        Select(form.find_element(By.NAME, "a")).select_by_value(a_id)
        Select(form.find_element(By.NAME, "b")).select_by_value(b_id)
        browser.find_element(By.ID, "compare-go").click()
        WebDriverWait(browser, 15).until(lambda d: "/diff?" in d.current_url)
        marked = browser.find_element(By.ID, "divergence")
        assert marked.get_attribute("data-turn") == str(DIVERGES_AT)
        assert marked.find_element(By.CSS_SELECTOR, ".marker").text == "first divergence"
        rows = browser.find_elements(By.CSS_SELECTOR, "#diff tbody tr")
        assert len(rows) == got[a_id].turns
        same = [r.get_attribute("data-turn") for r in rows if "same" in r.get_attribute("class")]
        assert "1" in same and str(DIVERGES_AT) not in same
        summary = browser.find_element(By.ID, "divergence-summary").text
        assert summary.startswith(f"First divergence at turn {DIVERGES_AT}: ")
        assert expected.reason in summary
        sides = [browser.find_element(By.ID, f"side-{s}").text for s in "ab"]
        assert all("diagnosis success" in s for s in sides)
        _shot(browser, "diff.png")

        browser.find_element(By.LINK_TEXT, b_id).click()  # the b side's episode
        WebDriverWait(browser, 15).until(lambda d: d.current_url.endswith(f"/episodes/{b_id}"))
        assert browser.find_element(By.ID, "diagnosis").text == "success"
        Select(browser.find_element(By.CSS_SELECTOR, "#compare select")).select_by_value(a_id)
        browser.find_element(By.ID, "compare-go").click()
        WebDriverWait(browser, 15).until(lambda d: f"a={b_id}" in d.current_url)
        assert browser.find_element(By.ID, "divergence").get_attribute("data-turn") == str(
            DIVERGES_AT
        )


def test_the_list_filters_by_diagnosis_and_tool_error(
    browser, arena_root: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    records = list(read_store(arena_root))
    with serving(create_app(ApiConfig(root=str(arena_root)))) as url:
        browser.get(url + "/episodes")
        Select(browser.find_element(By.NAME, "failure")).select_by_value("wrong_product")
        browser.find_element(By.ID, "apply").click()
        WebDriverWait(browser, 15).until(lambda d: "failure=wrong_product" in d.current_url)
        cells = browser.find_elements(By.CSS_SELECTOR, "#episodes td.diagnosis")
        wrong = [t for t in records if t.diagnosis.kind == "wrong_product"]
        assert len(cells) == len(wrong) > 0
        assert {c.text for c in cells} == {t.diagnosis.label for t in wrong}
        selected = Select(browser.find_element(By.NAME, "failure")).first_selected_option
        assert selected.get_attribute("value") == "wrong_product"  # the form keeps its choice
        _shot(browser, "episodes-diagnosis.png")

        Select(browser.find_element(By.NAME, "failure")).select_by_value("")
        Select(browser.find_element(By.NAME, "tool_error")).select_by_value("invalid_id")
        Select(browser.find_element(By.NAME, "termination")).select_by_value("terminated")
        browser.find_element(By.ID, "apply").click()
        WebDriverWait(browser, 15).until(lambda d: "tool_error=invalid_id" in d.current_url)
        rows = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
        erred = [t for t in records if any(e.error == "invalid_id" for e in t.tool_log)]
        assert len(rows) == len(erred) > 0
        counts = sorted(int(r.find_elements(By.TAG_NAME, "td")[13].text) for r in rows)
        assert counts == sorted(
            sum(e.error is not None for e in t.tool_log) for t in erred
        )


def test_hostile_miner_text_runs_nothing_in_a_diff(
    browser, arena_root: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    root, episode = hostile(arena_root, tmp_path / "hostile")
    task = next(t.task_id for t in read_store(root))
    mate = next(t for t in read_store(arena_root) if t.task_id == task)
    store([mate], root, lifted=True)
    with serving(create_app(ApiConfig(root=str(root)))) as url:
        origin = urlparse(url).netloc
        _requests(browser)
        browser.get(url + f"/diff?a={episode}&b={mate.episode_id}")
        injected = attack_effects(
            browser, "img, iframe, #injected, svg [onload]",
            "Array.from(document.scripts).map(s => s.src)",
        )  # fmt: skip
        assert injected == [0, [url + "/static/app.js"]]
        assert [u for u in _requests(browser) if urlparse(u).netloc not in (origin, "")] == []
        assert "<script>window.__pwned" in browser.find_element(By.ID, "side-a").text
