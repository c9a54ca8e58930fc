"""Curation through `shopbench curate`: a real archive of reference-policy episodes, judged
by the rubric and signed by a real hotkey, curated with the release's config, measured
against the miners' true policies; bad configs, bad records, contamination, clones and an
empty result."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from shopbench.agents.registry import make_policy
from shopbench.archive.layout import to_table
from shopbench.archive.shards import write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.cli import main
from shopbench.curation.config import CurateConfig, load_config
from shopbench.curation.curated import read_curated
from shopbench.curation.errors import CurationError
from shopbench.curation.features import episode_facts
from shopbench.curation.pipeline import Curator
from shopbench.curation.rules import loop_reason
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.io import read_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, LocalWallet

POLICIES = (
    "careful", "trial_and_error", "greedy", "narrator", "narrator_quoting", "guesser", "offline",
)  # fmt: skip
SIGNER = HotkeySigner.from_wallet(LocalWallet.derive("curation-test"))


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=4, seed=3)
    return build_tasks(cfg).tasks[:10]


def _miner(uid: int) -> str:
    return f"5Miner{uid:02d}" + "x" * 40


def _finish(t: Trajectory, judge: RubricJudge) -> Trajectory:
    judged = with_judgement(t.model_copy(update={"validator_hotkey": SIGNER.hotkey}),
                            judge.judge(t))  # fmt: skip
    return sign_trajectory(judged, SIGNER)


def _play(env: ShoppingEnv, catalog: Any, tasks: list[Task], policy: str, uid: int,
          seed: int) -> list[Trajectory]:  # fmt: skip
    agent = make_policy(policy, catalog=catalog, seed=seed)
    judge = RubricJudge()

    async def go() -> list[Trajectory]:
        return list(await asyncio.gather(*(
            run_episode(env, t, agent, key=bytes([uid + 1, i + 1]) * 16, miner_uid=uid,
                        miner_hotkey=_miner(uid), block=100 + i)
            for i, t in enumerate(tasks)
        )))  # fmt: skip

    return [_finish(t, judge) for t in asyncio.run(go())]


@pytest.fixture(scope="module")
def played(env: ShoppingEnv, catalog: Any, tasks: list[Task]) -> dict[int, list[Trajectory]]:
    """Each reference policy played by one miner (uid = its index), and a second
    careful_terse miner that is a clone of the first (same seed: identical replies)."""
    out = {uid: _play(env, catalog, tasks, p, uid, seed=uid) for uid, p in enumerate(POLICIES)}
    for uid in (10, 11):
        out[uid] = _play(env, catalog, tasks, "careful_terse", uid, seed=3)
    return out


def _truth(path: Path, extra: dict[int, str] | None = None) -> Path:
    policies = {uid: p for uid, p in enumerate(POLICIES)} | {
        10: "careful_terse",
        11: "careful_terse",
    } | (extra or {})
    miners = [{"uid": u, "hotkey": _miner(u), "policy": p} for u, p in policies.items()]
    path.write_text(json.dumps({"miners": miners, "burned": 0.0}))
    return path


def _archive(root: Path, episodes: list[Trajectory]) -> Path:
    by_intent: dict[str, list[Trajectory]] = {}
    for t in episodes:
        by_intent.setdefault(str(t.intent), []).append(t)
    for group in by_intent.values():
        write_shard(group, str(root), signer=SIGNER)
    return root


def _curate(*args: str) -> int:
    try:
        main(["curate", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_curate_measures_every_rule_against_the_true_policies(
    played: dict[int, list[Trajectory]], tmp_path: Path, shoppingbench_data: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    everything = [t for ts in played.values() for t in ts]
    root = _archive(tmp_path / "archive", everything)
    out = tmp_path / "curated"
    test_set = shoppingbench_data / "product_test.jsonl"
    code = _curate("--archive", str(root), "--truth", str(_truth(tmp_path / "arena.json")),
                   "--out", str(out), "--test-set", str(test_set))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    for key in (
        "kept",
        "dropped_by_rule",
        "recovery_share",
        "contaminated",
        "dishonest_removal_precision",
        "dishonest_removal_recall",
        "honest_retention",
    ):
        assert key in report  # fmt: skip
    assert report["episodes_in"] == len(everything)
    assert report["kept"] + sum(report["dropped_by_rule"].values()) == len(everything)
    # Every dishonest trace goes; the honest traces dropped are the clone's (a clone of an
    # honest miner is still an honest policy's trace, so it counts against precision) and
    # careful_terse's, whose calls and picks are careful's: duplicates, counted as kept.
    assert report["dishonest_removal_recall"] == 1.0
    rules = report["rules"]
    honest_dropped = {r: e["truth"]["honest"] for r, e in rules.items() if e["truth"]["honest"]}
    # trial_and_error's episodes whose first try opened what careful opened and changed no
    # pick are careful's decisions plus a search: duplicates too (its misses are its own).
    trial = report["duplicates_per_miner"].get(_miner(1), {"dropped": 0, "of": {}})
    assert trial["dropped"] <= len(played[1]) // 3 and set(trial["of"]) <= {_miner(0)}
    assert honest_dropped == {
        "clones": len(played[11]), "duplicates": len(played[10]) + trial["dropped"],
    }  # fmt: skip
    assert report["duplicates_per_miner"][_miner(10)]["of"] == {_miner(0): len(played[10])}
    assert report["honest_retention"] == round(1 - len(played[11]) / (4 * len(played[0])), 4)
    dishonest = 4 * len(played[3])
    assert report["dishonest_removal_precision"] == round(dishonest / (dishonest + 10), 4)
    assert rules["narrator"]["alone"]["precision"] == 1.0
    policies = report["policies"]
    assert policies["guesser"]["dropped_by_rule"] == {"validity": len(played[5])}
    assert policies["narrator"]["kept"] == policies["narrator_quoting"]["kept"] == 0
    assert policies["offline"]["kept"] == 0
    assert policies["offline"]["dropped_by_rule"].get("narrator", 0) >= len(played[6]) // 2
    assert policies["careful_terse"]["dropped_by_rule"] == {
        "clones": len(played[11]), "duplicates": len(played[10]),
    }
    assert not set(policies["careful"]["dropped_by_rule"]) & {"claims", "duplicates"}
    assert "claims" not in policies["trial_and_error"]["dropped_by_rule"]
    assert policies["trial_and_error"]["recovery"] >= 1
    assert report["contaminated"][str(test_set)]["contaminated"] == 0
    assert report["contaminated"][str(test_set)]["test_queries"] == 250
    kept = list(read_curated(out))
    assert len(kept) == report["kept"]
    assert {t.trajectory.miner_uid for t in kept} <= {0, 1}
    recovered = [e for e in kept if "recovery" in e.tags]
    assert recovered and all(e.weight == 1.5 for e in recovered)
    for e in recovered:
        kinds = [t for t in e.tags if t.split(":")[-1] in ("search_retry", "rejected_candidate",
                                                            "tool_error")]  # fmt: skip
        turns = [t for t in e.tags if t.startswith("recovery:turns=")]
        assert kinds and len(turns) == 1
    assert _curate("--archive", str(root), "--out", str(out)) == 2
    assert "already holds a curated set" in capsys.readouterr().err
    markdown = (out / "report.md").read_text()
    assert "dishonest removal precision" in markdown and "| narrator | yes |" in markdown


def test_the_headline_is_computed_from_the_per_policy_table(
    played: dict[int, list[Trajectory]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything = [t for ts in played.values() for t in ts]
    root = _archive(tmp_path / "archive", everything)
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--truth", str(_truth(tmp_path / "arena.json")),
                   "--out", str(out)) == 0  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    policies = report["policies"]
    honest = [p for p in policies.values() if p["honest"] is True]
    dishonest = [p for p in policies.values() if p["honest"] is False]
    h_in, h_kept = sum(p["episodes"] for p in honest), sum(p["kept"] for p in honest)
    h_retained = sum(p["retained"] for p in honest)
    d_in = sum(p["episodes"] for p in dishonest)
    d_removed = d_in - sum(p["retained"] for p in dishonest)
    # Retained = kept, or dropped as a duplicate of a kept episode: what the headline counts.
    for p in policies.values():
        assert p["retained"] == p["kept"] + p["dropped_by_rule"].get("duplicates", 0)
    # honest retention = the honest policies' retained episodes / their episodes; recall =
    # the dishonest policies' removed / theirs; precision = dishonest of all removed.
    assert report["honest_retention"] == round(h_retained / h_in, 4)
    assert report["dishonest_removal_recall"] == round(d_removed / d_in, 4)
    assert report["dishonest_removal_precision"] == round(
        d_removed / (d_removed + h_in - h_retained), 4
    )
    # The duplicates make the plain kept share differ here: the table shows both.
    assert h_kept < h_retained
    markdown = (out / "report.md").read_text()
    assert (
        f"honest retention {report['honest_retention']:.3f} = {h_retained} of the honest "
        f"policies' {h_in} episodes retained ({h_kept} kept, {h_retained - h_kept} dropped as "
        "duplicates of a kept episode)"
    ) in markdown
    total = next(line for line in markdown.splitlines()
                 if line.startswith("| **all honest policies** |"))  # fmt: skip
    assert total.startswith(
        f"| **all honest policies** | True | {h_in} | {h_kept} | {h_retained} |"
    )
    assert f"{d_removed} of the dishonest policies' {d_in} episodes removed" in markdown
    assert f"({h_retained} of {h_in} honest episodes kept or duplicates" in capsys.readouterr().out


def test_the_commonest_reasons_keep_the_thresholds_that_dropped_them(
    played: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    root = _archive(tmp_path / "archive", [*played[0], *played[3], *played[5]])
    cfg = _write(tmp_path / "c.toml", "[judge]\nprocess_score_min = 0.95\n")
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) in (0, 2)
    rules = json.loads((out / "report.json").read_text())["rules"]
    assert set(rules["judge"]["reasons"]) == {"process score N < 0.95"}
    assert all(r.startswith("narrator score N >= 0.6: ") for r in rules["narrator"]["reasons"])
    assert set(rules["validity"]["reasons"]) == {"N accepted recommendations, not 1"}
    markdown = (out / "report.md").read_text()
    assert f"- **judge** ({rules['judge']['dropped']}): process score N < 0.95" in markdown


def test_a_test_query_in_the_archive_is_counted_and_dropped(
    played: dict[int, list[Trajectory]], tmp_path: Path, shoppingbench_data: Path
) -> None:
    test_set = shoppingbench_data / "voucher_test.jsonl"
    leaked = read_tasks(test_set).tasks[7].query
    careful = played[0]
    copy = sign_trajectory(careful[0].model_copy(update={"query": leaked}), SIGNER)
    root = _archive(tmp_path / "archive", [copy, *careful[1:]])
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--out", str(out), "--test-set", str(test_set)) == 0
    report = json.loads((out / "report.json").read_text())
    counts = report["contaminated"][str(test_set)]
    assert counts["contaminated"] == 1 and counts["kept_contaminated"] == 0
    assert counts["clean"] == len(careful) - 1
    assert report["dropped_by_rule"]["contamination"] == 1
    assert "query overlaps test set" in next(iter(report["rules"]["contamination"]["reasons"]))


def test_unknown_rules_and_parameters_fail_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_rule = tmp_path / "a.toml"
    bad_rule.write_text("[narator]\nthreshold = 0.4\n")
    out = tmp_path / "out"
    assert _curate("--archive", str(tmp_path / "none"), "--config", str(bad_rule),
                   "--out", str(out)) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "unknown rule 'narator'" in err and "validity, contamination, narrator, claims" in err
    bad_param = tmp_path / "b.toml"
    bad_param.write_text("[dedup]\njacard = 0.4\n")
    assert _curate("--archive", str(tmp_path / "none"), "--config", str(bad_param),
                   "--out", str(out)) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "dedup: unknown parameter 'jacard'" in err and "threshold, shingle" in err
    assert not out.exists()
    with pytest.raises(CurationError, match="greater than 0"):
        load_config(_write(tmp_path / "c.toml", "[dedup]\nthreshold = 0\n"))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_bad_records_are_rejected_with_their_reason(
    played: dict[int, list[Trajectory]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = played[0][:3]
    forged = good[1].model_copy(update={"query": good[1].query + " (edited)"})
    hostile = sign_trajectory(good[2].model_copy(update={"recommended": ["<img src=x>"]}), SIGNER)
    root = _archive(tmp_path / "archive", [good[0], forged, good[2], hostile])
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--out", str(out)) == 0
    assert "no contamination test set given" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["rules"]["validity"]["reasons"] == {
        "signature does not verify": 1,
        "recommended ?img?src?x?, which no observation showed": 1,
    }
    # A row with a field missing is a rejected record, not a crash.
    from template.signing import HotkeyVerifier

    table = to_table(good)
    column = table.column("termination").to_pylist()
    column[1] = None
    table = table.set_column(table.schema.get_field_index("termination"), "termination",
                             pa.array(column, pa.string()))  # fmt: skip
    rows = Curator(CurateConfig(), HotkeyVerifier(), None).rows(0, table)
    assert rows[1]["r_validity"].startswith("invalid (termination")
    assert rows[0].get("r_validity") is None and rows[2].get("r_validity") is None


def test_nothing_kept_is_an_error_and_writes_no_data(
    played: dict[int, list[Trajectory]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _archive(tmp_path / "archive", played[3])  # the narrator alone
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--out", str(out)) == 2
    assert "nothing kept of" in capsys.readouterr().err
    assert (out / "report.json").exists() and not (out / "data").exists()
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_recovery_turns_can_be_masked(played: dict[int, list[Trajectory]], tmp_path: Path) -> None:
    root = _archive(tmp_path / "archive", played[1])  # trial_and_error
    cfg = _write(tmp_path / "c.toml", "[recovery]\nweight = 2.0\nmask_errors = true\n")
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 0
    masked = [e for e in read_curated(out) if e.turn_mask is not None]
    assert masked
    for e in masked:
        assert e.weight == 2.0 and not all(e.turn_mask) and e.turn_mask[-1]
        turns = next(t for t in e.tags if t.startswith("recovery:turns="))
        wrong = {int(i) for i in turns.removeprefix("recovery:turns=").split(",")}
        assert wrong == {i for i, keep in enumerate(e.turn_mask) if not keep}


def test_refused_calls_can_be_masked_in_every_kept_episode(
    played: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    root = _archive(tmp_path / "archive", played[1])  # trial_and_error
    cfg = _write(tmp_path / "c.toml", "[recovery]\nmask_refused = true\n")
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 0
    kept = list(read_curated(out))
    refused = 0
    for e in kept:
        facts = episode_facts(e.trajectory)
        wrong = {c.turn for c in facts.calls if c.error is not None}
        refused += len(wrong)
        if not wrong:
            assert e.turn_mask is None
            continue
        assert e.turn_mask is not None and e.turn_mask[-1]
        assert wrong == {i for i, keep in enumerate(e.turn_mask) if not keep}
    assert refused  # the policy's mistakes are there to mask


def test_repeated_calls_and_loops_are_named(played: dict[int, list[Trajectory]]) -> None:
    from shopbench.curation.config import StructureParams

    facts = episode_facts(played[0][0])
    assert loop_reason(facts, StructureParams()) is None
    unjudged = episode_facts(played[3][0].model_copy(update={"judge": None}))
    assert unjudged.signals == episode_facts(played[3][0]).signals  # the rubric's, recomputed
    facts.call_keys = ["a", "b", "a", "b", "a", "b"]
    assert loop_reason(facts, StructureParams(max_identical_calls=5)) == (
        "a block of 2 call(s) repeated 3 times"
    )
    facts.call_keys = ["find_product:{}"] * 4
    assert loop_reason(facts, StructureParams()) == "the same call 4 times (find_product)"


def test_minhash_estimates_the_jaccard_similarity_of_word_ngrams() -> None:
    from shopbench.curation.similarity import bands_for, minhash_words

    words = [f"w{i}" for i in range(400)]
    changed = words[:300] + [f"x{i}" for i in range(100)]
    grams = {tuple(words[i : i + 3]) for i in range(398)}
    other = {tuple(changed[i : i + 3]) for i in range(398)}
    true = len(grams & other) / len(grams | other)
    a, b = minhash_words(words, 3, 256), minhash_words(changed, 3, 256)
    estimate = sum(x == y for x, y in zip(a, b, strict=True)) / 256
    assert abs(estimate - true) < 0.08
    assert minhash_words(words, 3, 64) == minhash_words(list(words), 3, 64)
    assert bands_for(64, 0.9) == (4, 16)


def test_an_archive_url_is_pulled_and_verified_first(
    played: dict[int, list[Trajectory]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _archive(tmp_path / "archive", played[0])
    out = tmp_path / "curated"
    url = f"file://{root}"
    assert _curate("--archive", url, "--out", str(out)) == 2
    assert "needs --validator" in capsys.readouterr().err
    assert _curate("--archive", url, "--validator", SIGNER.hotkey, "--out", str(out)) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["episodes_in"] == len(played[0]) and report["kept"] > 0
    assert report["archive"] == url


def test_shortest_success_then_near_duplicates_then_caps(
    played: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    careful = played[0]
    again = [
        sign_trajectory(t.model_copy(update={"episode_id": t.episode_id + "-2"}), SIGNER)
        for t in careful
    ]
    root = _archive(tmp_path / "archive", [*careful, *again, *played[1]])
    out = tmp_path / "plain"
    assert _curate("--archive", str(root), "--out", str(out)) == 0
    plain = json.loads((out / "report.json").read_text())
    kept_careful = plain["kept_per_miner"][_miner(0)]
    trial = plain["duplicates_per_miner"].get(_miner(1), {"dropped": 0})["dropped"]
    assert trial <= len(played[1]) // 3  # a first try that changed nothing: careful's decisions
    assert plain["dropped_by_rule"]["duplicates"] == kept_careful + trial  # the same decisions
    assert plain["duplicates_per_miner"][_miner(0)]["of"] == {_miner(0): kept_careful}
    cfg = _write(tmp_path / "d.toml", "[duplicates]\nenabled = false\n")
    out = tmp_path / "text"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 0
    text = json.loads((out / "report.json").read_text())
    assert text["dropped_by_rule"]["dedup"] == kept_careful  # each copy collapses
    cfg = _write(
        tmp_path / "c.toml",
        "[structure]\nshortest_success = true\n[caps]\nmax_per_miner = 3\n",
    )
    out = tmp_path / "capped"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 0
    report = json.loads((out / "report.json").read_text())
    reasons = report["rules"]["structure"]["reasons"]
    assert any(r.startswith("a shorter success of this task by this miner") for r in reasons)
    assert report["dropped_by_rule"]["dedup"] == 0
    assert set(report["kept_per_miner"].values()) == {3}
    assert all(r.startswith("miner cap") for r in report["rules"]["caps"]["reasons"])


def test_bench_curate_prints_one_json_object(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "catalog").symlink_to(catalog_dir)  # the bench's catalog, already built
    main(["bench", "curate", "--sizes", "300", "--base-episodes", "4", "--work", str(work)])
    report = json.loads(capsys.readouterr().out)
    assert [r["episodes"] for r in report["runs"]] == [300]
    assert all(r["episodes_per_s"] > 0 and r["peak_rss_mib"] > 0 for r in report["runs"])
    assert report["verify"] is True


def test_in_shard_mode_a_verified_manifest_vouches_for_its_rows(
    played: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    from shopbench.archive.manifest import MANIFESTS_DIR

    good = played[0][:4]
    forged = good[1].model_copy(update={"query": good[1].query + " (edited)"})
    root = _archive(tmp_path / "archive", [good[0], forged, *good[2:]])
    other = HotkeySigner.from_wallet(LocalWallet.derive("another-validator"))
    write_shard(played[1][:2], str(root), signer=other)  # sealed by a key not its records'
    cfg = _write(tmp_path / "c.toml", '[validity]\nsignatures = "shard"\n')
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 0
    reasons = json.loads((out / "report.json").read_text())["rules"]["validity"]["reasons"]
    # The forged row is what its validator sealed and signed the shard of: trusted here.
    assert list(reasons.values()) == [2]
    assert next(iter(reasons)).startswith("in a shard sealed by ")
    manifests = sorted((root / MANIFESTS_DIR).rglob("*.json"))
    for path in manifests:  # every manifest's signature broken: no shard is read
        data = json.loads(path.read_text())
        path.write_text(json.dumps(data | {"created_at": data["created_at"] + 1}))
    out = tmp_path / "again"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) == 2
    report = json.loads((out / "report.json").read_text())
    assert report["dropped_by_rule"]["validity"] == report["episodes_in"] == 6
    assert all("manifest signature does not verify" in r
               for r in report["rules"]["validity"]["reasons"])  # fmt: skip


# -- sybils and liars: decisions, not wording --------------------------------------------------

ADVERSARIES = {20: "careful", 21: "careful", 22: "paraphraser", 23: "liar"}
SEEDS = {20: 20, 21: 21, 22: 22, 23: 21}  # the liar's seed 21: three lucky successes here


@pytest.fixture(scope="module")
def adversaries(
    env: ShoppingEnv, catalog: Any, tasks: list[Task]
) -> dict[int, list[Trajectory]]:
    """On the same tasks: an honest careful miner, a second careful miner (another seed, so
    other words), a paraphrasing sybil of careful, and a liar."""
    return {uid: _play(env, catalog, tasks, p, uid, seed=SEEDS[uid])
            for uid, p in ADVERSARIES.items()}  # fmt: skip


def _curated(tmp_path: Path, episodes: list[Trajectory]) -> dict[str, Any]:
    root = _archive(tmp_path / "archive", episodes)
    out = tmp_path / "curated"
    truth = _truth(tmp_path / "arena.json", ADVERSARIES)
    assert _curate("--archive", str(root), "--truth", str(truth), "--out", str(out)) in (0, 2)
    return json.loads((out / "report.json").read_text()) | {"_out": str(out)}


def test_a_paraphrasing_sybil_and_a_second_copy_lose_their_duplicates_to_the_original(
    adversaries: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    original, second, sybil = adversaries[20], adversaries[21], adversaries[22]
    report = _curated(tmp_path, [*sybil, *second, *original])  # the original's rows come last
    kept = {e.trajectory.episode_id for e in read_curated(Path(report["_out"]))}
    by_policy = report["policies"]
    # The original keeps every episode no other rule drops; the copies lose every one of
    # theirs that the original kept, to the duplicates rule, whatever their words.
    assert kept <= {t.episode_id for t in original} and len(kept) >= 0.9 * len(original)
    lost = len(original) - len(kept)  # to the outcome rule, as the copies' twins are
    assert by_policy["paraphraser"]["kept"] == 0
    assert by_policy["paraphraser"]["dropped_by_rule"] == (
        {"duplicates": len(kept)} | ({"outcome": lost} if lost else {})
    )
    counts = report["duplicates_per_miner"]
    assert set(counts) == {_miner(21), _miner(22)}
    ours = {t.episode_id: t.task_id for t in original}
    for uid in (21, 22):
        entry = counts[_miner(uid)]
        assert entry["dropped"] == len(kept) and entry["of"] == {_miner(20): len(kept)}
        theirs = {t.episode_id: t.task_id for t in adversaries[uid]}
        assert len(entry["examples"]) == min(8, len(kept))
        assert all(k in kept and ours[k] == theirs[d] for d, k in entry["examples"].items())
    reasons = report["rules"]["duplicates"]["reasons"]
    assert sum(reasons.values()) == 2 * len(kept)
    assert reasons == {"same decisions as …, kept, on this task": 2 * len(kept)}
    markdown = (Path(report["_out"]) / "report.md").read_text()
    assert f"| {_miner(22)} | {len(kept)} | {_miner(20)}: {len(kept)} |" in markdown
    # The duplicates count as kept: the second careful miner's loss is no honest loss.
    assert report["honest_retention"] == round(1 - lost / len(original), 4)


def test_the_liar_loses_every_success_to_the_claims_rule_and_careful_loses_none(
    adversaries: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    liar, careful = adversaries[23], adversaries[20]
    lucky = [t for t in liar if t.success]
    assert lucky and all(t.judge is not None and t.judge.score >= 0.5 for t in lucky)
    report = _curated(tmp_path, [*liar, *careful])
    by_policy = report["policies"]
    assert by_policy["liar"]["kept"] == 0
    assert by_policy["liar"]["dropped_by_rule"] == {"claims": len(liar)}
    assert not set(by_policy["careful"]["dropped_by_rule"]) & {"claims", "duplicates"}
    claims = report["rules"]["claims"]
    assert claims["alone"]["dishonest"] == len(liar) and claims["alone"]["honest"] == 0
    reasons = list(claims["reasons"])
    assert all(r.startswith("the grader refutes the claims of N of the miner's N claiming")
               for r in reasons)  # fmt: skip
    kept = {e.trajectory.miner_uid for e in read_curated(Path(report["_out"]))}
    assert kept == {20}
    # Off, it flags the same miner and drops nothing: the lucky successes pass every gate.
    cfg = _write(tmp_path / "off.toml", "[claims]\nenabled = false\n")
    out = tmp_path / "off"
    assert _curate("--archive", str(tmp_path / "archive"), "--config", str(cfg),
                   "--out", str(out)) == 0  # fmt: skip
    off = json.loads((out / "report.json").read_text())
    assert off["dropped_by_rule"]["claims"] == 0
    # (but for a success whose decisions careful's contain: a duplicate of careful's episode)
    same = off["duplicates_per_miner"].get(_miner(23), {"dropped": 0})["dropped"]
    assert same < len(lucky) and off["kept_per_miner"].get(_miner(23), 0) >= len(lucky) - same


def test_a_liar_split_over_hotkeys_below_any_minimum_is_still_dropped(
    adversaries: dict[int, list[Trajectory]], tmp_path: Path
) -> None:
    # The liar's episodes spread over five hotkeys, two claiming episodes each.
    liar = [
        sign_trajectory(t.model_copy(update={"miner_uid": 30 + i // 2,
                                             "miner_hotkey": _miner(30 + i // 2)}), SIGNER)
        for i, t in enumerate(adversaries[23])
    ]  # fmt: skip
    careful = adversaries[20]
    root = _archive(tmp_path / "archive", [*liar, *careful])
    truth = _truth(tmp_path / "arena.json", {20: "careful"} | {30 + k: "liar" for k in range(5)})
    out = tmp_path / "curated"
    assert _curate("--archive", str(root), "--truth", str(truth), "--out", str(out)) in (0, 2)
    report = json.loads((out / "report.json").read_text())
    kept = {e.trajectory.miner_uid for e in read_curated(out)}
    assert 20 in kept and report["policies"]["careful"]["kept"] == len(careful)
    # A hotkey goes on a single refuted claim among two (no minimum of episodes); one whose
    # every claim held (two lucky successes) cannot be told from an honest miner's.
    survivors = kept - {20}
    dropped = dict(report["policies"]["liar"]["dropped_by_rule"])
    same = dropped.pop("duplicates", 0)  # a survivor's success with careful's decisions
    assert same <= len(survivors) <= 1
    assert dropped == {"claims": len(liar) - 2 * len(survivors)}
    assert all(t.success for t in liar if t.miner_uid in survivors)
    # The fixed minimum of the previous release judged none of them.
    cfg = _write(tmp_path / "fixed.toml", "[claims]\nmin_episodes = 8\n")
    out = tmp_path / "fixed"
    assert _curate("--archive", str(root), "--config", str(cfg), "--out", str(out)) in (0, 2)
    fixed = json.loads((out / "report.json").read_text())
    assert fixed["dropped_by_rule"]["claims"] == 0
