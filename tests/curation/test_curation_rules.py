"""The curation rules as a registry: a rule added at run time (defined here, in the test)
gets its config table, its ledger column, its place in the pipeline, its report row and its
place in ``shopbench curate --rules`` without any other module changing; every default is
declared once (the shipped TOML holds departures only); the docs list the registry's rules;
the report's reasons keep the parameters that dropped them."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pydantic import Field

from shopbench.agents.registry import make_policy
from shopbench.archive.layout import to_table
from shopbench.archive.shards import write_shard
from shopbench.archive.signing import sign_trajectory
from shopbench.cli import main
from shopbench.curation.config import CurateConfig, defaults_toml, load_config
from shopbench.curation.curated import read_curated
from shopbench.curation.errors import CurationError
from shopbench.curation.ledger import ledger_schema
from shopbench.curation.pipeline import Curator
from shopbench.curation.registry import (
    LIVE,
    Episode,
    LedgerOps,
    Rule,
    RuleParams,
    RuleRegistry,
    fold,
)
from shopbench.curation.rules import RULES
from shopbench.curation.rules.outcome import OUTCOME
from shopbench.env.env import ShoppingEnv
from shopbench.errors import RegistryError
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from template.signing import HotkeySigner, LocalWallet

ROOT = Path(__file__).resolve().parents[2]
SIGNER = HotkeySigner.from_wallet(LocalWallet.derive("curation-rules-test"))


# -- two tiny rules, defined here and nowhere else ---------------------------------------------


class TurnsParams(RuleParams):
    """Episodes longer than a number of assistant turns."""

    max_turns: int = Field(default=30, ge=1, description="assistant turns an episode may take")


def too_long(ep: Episode, p: TurnsParams) -> str | None:
    return f"{ep.t.turns} turns > {p.max_turns}" if ep.t.turns > p.max_turns else None


TURNS = Rule(name="turns", params=TurnsParams, decide=too_long)


class FirstPerTaskParams(RuleParams):
    """Only the first live episode of each task (in archive order)."""


def later_ones(ledger: LedgerOps, p: FirstPerTaskParams) -> None:
    ledger.execute(
        f"""CREATE OR REPLACE TEMP TABLE t AS
            SELECT seq, 'task ' || task_id || ' has an earlier episode' AS why FROM (
                SELECT seq, task_id, row_number() OVER (PARTITION BY task_id ORDER BY seq) AS k
                FROM ep WHERE {LIVE}) WHERE k > 1"""
    )
    ledger.drop_from("first_per_task", "t")


FIRST_PER_TASK = Rule(name="first_per_task", params=FirstPerTaskParams, drop=later_ones)


@pytest.fixture
def registered() -> Iterator[None]:
    """The two rules in the release's registry for one test: `turns` after `judge`,
    `first_per_task` last."""
    RULES.register(TURNS, after="judge")
    RULES.register(FIRST_PER_TASK)
    try:
        yield
    finally:
        RULES.unregister("turns")
        RULES.unregister("first_per_task")


@pytest.fixture(scope="module")
def episodes(env: ShoppingEnv, catalog: Any, catalog_dir: Path) -> list[Trajectory]:
    """Careful and trial-and-error episodes on the same tasks, judged and signed (two
    miners, so every task has two episodes)."""
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=3, seed=5)
    tasks: list[Task] = build_tasks(cfg).tasks[:8]
    judge = RubricJudge()
    out: list[Trajectory] = []
    for uid, policy in ((0, "careful"), (1, "trial_and_error")):
        agent = make_policy(policy, catalog=catalog, seed=uid)

        async def go(agent: Any = agent, uid: int = uid) -> list[Trajectory]:
            return list(await asyncio.gather(*(
                run_episode(env, t, agent, key=bytes([uid + 1, i + 1]) * 16, miner_uid=uid,
                            miner_hotkey=f"5Rules{uid:02d}" + "x" * 42, block=10 + i)
                for i, t in enumerate(tasks)
            )))  # fmt: skip

        for t in asyncio.run(go()):
            t = t.model_copy(update={"validator_hotkey": SIGNER.hotkey})
            out.append(sign_trajectory(with_judgement(t, judge.judge(t)), SIGNER))
    return out


def _cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_a_rule_added_at_run_time_has_its_table_column_place_report_row_and_listing(
    registered: None, episodes: list[Trajectory], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Its place in the order.
    names = RULES.names()
    assert names[names.index("judge") + 1] == "turns" and names[-1] == "first_per_task"
    # Its config table, with its defaults and its bounds; an unknown parameter names its own.
    assert CurateConfig().params("turns") == TurnsParams()
    bar = sorted(t.turns for t in episodes)[len(episodes) // 2]
    config = tmp_path / "c.toml"
    config.write_text(f"[turns]\nmax_turns = {bar}\n")
    assert load_config(config).turns.max_turns == bar
    with pytest.raises(CurationError, match=r"turns: unknown parameter 'max_turn' \(parameters: "
                       r"enabled, max_turns\)"):  # fmt: skip
        load_config(_write(tmp_path / "bad.toml", "[turns]\nmax_turn = 3\n"))
    with pytest.raises(CurationError, match="turns.max_turns: Input should be greater than"):
        load_config(_write(tmp_path / "zero.toml", "[turns]\nmax_turns = 0\n"))
    # Its ledger column, filled in the first pass; the SQL rule needs none.
    schema = ledger_schema(RULES.values())
    assert "r_turns" in schema.names and not any("first_per_task" in n for n in schema.names)
    assert schema.names.index("r_judge") < schema.names.index("r_turns")
    rows = Curator(load_config(config), None, None).rows(0, to_table(episodes))
    valid = {r["episode_id"] for r in rows if r.get("r_validity") is None}
    long = {t.episode_id for t in episodes if t.turns > bar and t.episode_id in valid}
    assert long and {r["episode_id"] for r in rows if r.get("r_turns")} == long
    assert all(r["r_turns"] == f"{t.turns} turns > {bar}" for r, t in zip(rows, episodes,
               strict=True) if t.turns > bar)  # fmt: skip
    # Its row in the report, in its place; its reasons keep its bar; its drops are real.
    archive = tmp_path / "archive"
    for intent in sorted({str(t.intent) for t in episodes}):
        write_shard([t for t in episodes if str(t.intent) == intent], str(archive), signer=SIGNER)
    truth = tmp_path / "arena.json"
    truth.write_text(json.dumps({"miners": [
        {"uid": u, "hotkey": f"5Rules{u:02d}" + "x" * 42, "policy": p}
        for u, p in ((0, "careful"), (1, "trial_and_error"))
    ]}))  # fmt: skip
    out = tmp_path / "curated"
    assert _cli("curate", "--archive", str(archive), "--config", str(config), "--truth",
                str(truth), "--out", str(out)) == 0  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    assert list(report["rules"]) == list(names)
    turns = report["rules"]["turns"]
    assert 0 < turns["dropped"] <= len(long)
    assert turns["reasons"] == {f"N turns > {bar}": turns["dropped"]}
    assert turns["alone"]["dropped"] == len(long)  # decided per episode: reported alone
    first = report["rules"]["first_per_task"]
    assert first["dropped"] > 0 and first["alone"] is None
    assert report["config"]["turns"] == {"enabled": True, "max_turns": bar}
    kept = list(read_curated(out))
    assert kept and all(e.trajectory.turns <= bar for e in kept)
    assert len({e.trajectory.task_id for e in kept}) == len(kept)
    markdown = (out / "report.md").read_text()
    order = [line.split("|")[1].strip() for line in markdown.splitlines()
             if re.match(r"^\| [a-z_]+ \| (yes|no) \|", line)]  # fmt: skip
    assert order == list(names)
    assert f"- **turns** ({turns['dropped']}): N turns > {bar}" in markdown
    # Its table in the listing of every rule, between its neighbours.
    capsys.readouterr()
    assert _cli("curate", "--rules") == 0
    listing = capsys.readouterr().out
    assert listing.index("[judge]") < listing.index("[turns]") < listing.index("[structure]")
    assert "max_turns = 30" in listing and "[first_per_task]" in listing


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_registry_refuses_clashes_and_the_ledger_its_own_columns() -> None:
    rules = RuleRegistry([OUTCOME], reserved=("recovery",))
    with pytest.raises(RegistryError, match="rule 'outcome' is already registered"):
        rules.register(OUTCOME)
    with pytest.raises(RegistryError, match="rule name 'recovery' is reserved"):
        rules.register(Rule(name="recovery", params=TurnsParams, decide=too_long))
    with pytest.raises(ValueError, match="ledger column 'r_outcome' is rule outcome's"):
        rules.register(Rule(name="other", params=TurnsParams, decide=too_long,
                            reason_column="r_outcome"))  # fmt: skip
    with pytest.raises(RegistryError, match="unknown rule 'judge'; allowed: outcome"):
        rules.register(TURNS, after="judge")
    with pytest.raises(ValueError, match="decides nothing"):
        Rule(name="idle", params=TurnsParams)
    with pytest.raises(ValueError, match="lower-case"):
        Rule(name="Bad-Name", params=TurnsParams, decide=too_long)
    shadow = Rule(name="shadow", params=TurnsParams, decide=too_long,
                  columns={"score": pa.float64()})  # fmt: skip
    with pytest.raises(CurationError, match="rule shadow: ledger column 'score' is reserved"):
        ledger_schema([shadow])
    rules.register(TURNS, before="outcome")
    assert rules.names() == ("turns", "outcome")


def test_every_default_is_declared_once_and_the_shipped_config_holds_departures_only() -> None:
    shipped = tomllib.loads(
        resources.files("shopbench.curation").joinpath("data", "curate.toml").read_text()
    )
    defaults = CurateConfig().model_dump(mode="json")
    for table, values in shipped.items():
        for key, value in values.items():
            assert value != defaults[table][key], f"curate.toml [{table}] {key}: the default"
    assert load_config(None).model_dump(mode="json") == defaults | {
        t: defaults[t] | v for t, v in shipped.items()
    }
    # The listing is a complete config: every rule and parameter, at its default.
    listing = defaults_toml()
    parsed = tomllib.loads(listing)
    assert list(parsed) == [*RULES.names(), "recovery"]
    assert parsed == defaults
    assert CurateConfig.model_validate(parsed) == CurateConfig()


def test_the_docs_list_every_rule_in_order_with_its_parameters() -> None:
    text = (ROOT / "docs" / "curation.md").read_text()
    table = text.split("## The rules", 1)[1].split("\n\n**", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"^\| `[a-z_]+` \|", line)]
    assert [row.split("`")[1] for row in rows] == list(RULES.names())
    for rule, row in zip(RULES.values(), rows, strict=True):
        params = rule.params.model_fields
        missing = [name for name in params if name != "enabled" and f"`{name}`" not in row]
        assert not missing, f"docs/curation.md: the {rule.name} row lacks {missing}"
        assert f"`{rule.column}`" in row if rule.column else "SQL" in row, rule.name


def test_reasons_fold_what_is_the_episodes_own_and_keep_the_parameters() -> None:
    assert fold("process score 0.42 < 0.5") == "process score N < 0.5"
    assert fold("failed with rule score 0.33 < 0.75") == "failed with rule score N < 0.75"
    assert fold(
        "narrator score 0.85 >= 0.6: ungrounded 0.40, skeleton 0.45 (100% of the miner's 10 "
        "episodes share it)"
    ) == ("narrator score N >= 0.6: ungrounded N, skeleton N (N% of the miner's N episodes "
          "share it)")  # fmt: skip
    assert fold("same decisions as 0123456789abcdef0123, kept") == "same decisions as …, kept"
    claims = RULES["claims"].keep_in_reasons
    assert fold("3 of 4 (75%; at 95% confidence at least 30% > 5%)", claims) == (
        "N of N (N%; at 95% confidence at least N% > 5%)"
    )
    assert fold("miner cap: 5Abc already has 3", RULES["caps"].keep_in_reasons) == (
        "miner cap: NAbc already has 3"
    )


def test_a_report_written_before_retained_was_counted_still_reads() -> None:
    from shopbench.curation.report.model import PolicyCounts, headline

    old = {"honest": True, "episodes": 20, "kept": 4, "recovery": 0,
           "dropped_by_rule": {"clones": 6, "duplicates": 10}}  # fmt: skip
    counts = PolicyCounts.model_validate(old)
    assert counts.retained == 14  # the duplicates: the only rule keeping decisions then
    assert headline({"careful_terse": counts}).retention == 0.7
