"""One decision stream, one share: copies of a miner's decisions earn nothing on the weights.

The book's rules on small hand-made histories (the share, the minimum of shared tasks, the
tie-break by registration block then uid, a uid that changes hands), then a real arena: an
honest ``careful`` miner, three copies of it (word for word, reworded, one extra view of
its pick) and the honest ``careful_terse`` (careful's calls, its own words) are one group
whose share only ``careful`` keeps, while ``trial_and_error`` and ``greedy`` — other
policies — keep theirs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shopbench.cli import app
from shopbench.scoring.copies import CopyBook, CopyRules, TaskDecisions

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

RULES = CopyRules(min_shared=4, min_same_share=0.75, window_rounds=2)


def _d(core: str, *searches: str, empty: bool = False) -> TaskDecisions:
    return TaskDecisions(core=core, parts=sorted(searches), empty=empty)


def _book(**miners: dict[str, TaskDecisions]) -> CopyBook:
    book = CopyBook()
    for name, tasks in miners.items():
        uid = int(name[1:])
        book.record(uid, f"hk{uid}", 0, tasks, RULES.window_rounds)
    return book


ORIGINAL = {f"t{i}": _d(f"c{i}", f"s{i}") for i in range(6)}


def test_a_copy_is_grouped_with_the_first_registered_and_an_extra_search_does_not_hide_it() -> None:
    padded = {k: _d(v.core, *v.parts, "extra") for k, v in ORIGINAL.items()}
    other = {k: _d(f"other{k}", "s") for k in ORIGINAL}
    book = _book(u1=ORIGINAL, u2=padded, u3=other)
    groups = book.groups(RULES, {1: 10, 2: 11, 3: 12})
    assert set(groups) == {2} and groups[2].of_uid == 1
    assert (groups[2].shared, groups[2].same) == (6, 6)
    # Registered earlier, the copier would be the one who keeps the share.
    assert set(book.groups(RULES, {1: 20, 2: 11, 3: 12})) == {1}
    # The same block: the lower uid keeps it.
    assert set(book.groups(RULES, {1: 5, 2: 5})) == {2}
    assert book.groups(RULES.model_copy(update={"enabled": False}), {}) == {}


def test_too_few_shared_tasks_or_too_small_a_share_groups_nobody() -> None:
    few = {k: ORIGINAL[k] for k in ("t0", "t1", "t2")}
    assert _book(u1=ORIGINAL, u2=few).groups(RULES, {}) == {}
    half = {k: (v if k < "t3" else _d("else")) for k, v in ORIGINAL.items()}
    assert _book(u1=ORIGINAL, u2=half).groups(RULES, {}) == {}
    # Tasks on which both did nothing are no evidence.
    idle = {f"t{i}": _d("idle", empty=True) for i in range(6)}
    assert _book(u1=idle, u2=dict(idle)).groups(RULES, {}) == {}


def test_the_window_forgets_old_rounds_and_a_new_hotkey_starts_clean() -> None:
    book = CopyBook()
    book.record(1, "hk1", 0, ORIGINAL, RULES.window_rounds)
    book.record(2, "hk2", 0, ORIGINAL, RULES.window_rounds)
    assert set(book.groups(RULES, {})) == {2}
    book.observe({1: "hk1", 2: "someone-else"})
    assert 2 not in book.miners and book.groups(RULES, {}) == {}
    for r in (1, 2, 3):
        book.record(1, "hk1", r, {f"r{r}": _d("x")}, RULES.window_rounds)
    assert sorted(book.miners[1].rounds) == [2, 3]


@pytest.fixture(scope="module")
def copies_arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("copies-arena")
    result = CliRunner().invoke(
        app,
        ["arena", "--catalog", str(catalog_dir), "--seed", "7", "--miners", "7",
         "--policies", "careful,copycat,paraphraser,padder,careful_terse,trial_and_error,greedy",
         "--rounds", "2", "--tasks", "8", "--out", str(out), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads((out / "arena.json").read_text()) | {"out": str(out)}


def test_the_copies_together_earn_less_than_the_miner_they_copy(copies_arena: dict) -> None:
    rows = {m["policy"]: m for m in copies_arena["miners"]}
    careful = rows["careful"]
    copies = [rows[p] for p in ("copycat", "paraphraser", "padder")]
    assert all(c["copy_of"] == careful["uid"] for c in copies)
    assert sum(c["weight"] for c in copies) < careful["weight"]
    assert careful["copy_of"] is None and careful["weight"] > 0
    # careful_terse makes careful's calls in its own words: the same decisions, one group.
    assert rows["careful_terse"]["copy_of"] == careful["uid"]
    # Other policies are other decision streams.
    assert rows["trial_and_error"]["copy_of"] is None and rows["trial_and_error"]["weight"] > 0
    assert rows["greedy"]["copy_of"] is None


def test_curation_keeps_none_of_the_copies_episodes(copies_arena: dict, tmp_path: Path) -> None:
    out = Path(copies_arena["out"])
    result = CliRunner().invoke(
        app, ["curate", "--archive", str(out / "archive"), "--truth", str(out / "arena.json"),
              "--out", str(tmp_path / "curated")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output[-2000:]
    report = json.loads((tmp_path / "curated" / "report.json").read_text())
    kept = report["kept_per_miner"]
    hotkey = {m["policy"]: m["hotkey"] for m in copies_arena["miners"]}
    for copy in ("copycat", "paraphraser", "padder", "careful_terse"):
        assert kept.get(hotkey[copy], 0) == 0, copy
    assert kept[hotkey["careful"]] >= 15
    # The padder's extra view is no new decision: the duplicates rule names careful's episode.
    assert report["duplicates_per_miner"][hotkey["padder"]]["dropped"] >= 15
    assert kept.get(hotkey["trial_and_error"], 0) >= 12  # its recoveries are its own
