"""A validator that runs for weeks: restarts asked for between rounds, and what it exports to
alert on, over the same in-memory subnet and real miners as ``test_validator.py``."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from test_validator import VALIDATOR, Subnet, honest, make_validator  # noqa: F401

from template.base.metrics import MinerGauges, ValidatorMetrics
from template.base.restart import RestartRequest, request_restart
from template.base.state import STATE_FILE, load_state
from template.base.validator import CODE_LOADED_AT, Validator
from template.signing import LocalWallet

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"


def subnet_of(servers: dict[str, Any]) -> tuple[Subnet, dict[str, int]]:
    subnet = Subnet()
    uids = {p: subnet.add_miner(LocalWallet.derive(f"test-miner-{p}"), s.url)
            for p, s in servers.items()}  # fmt: skip
    return subnet, uids


def run(validator: Validator, rounds: int) -> RestartRequest | None:
    async def go() -> RestartRequest | None:
        try:
            return await validator.run(rounds=rounds)
        finally:
            await validator.close()

    return asyncio.run(go())


def test_a_restart_request_is_honoured_only_between_rounds(
    honest: dict[str, Any], catalog_dir: Path, tmp_path: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    subnet, _ = subnet_of(honest)
    v = make_validator(subnet, tmp_path / "v", catalog_dir)
    path = v.config.restart_path
    assert path == tmp_path / "v" / "restart-request.json"  # the default: in FULL_PATH
    played: list[int] = []
    rounds: list[Any] = []

    def episode(uid: int, trajectory: Any) -> None:
        played.append(uid)
        if len(played) == 1:  # the first episode of the first round has just been played
            request_restart(path, RestartRequest(
                reason="update 1111111 -> 2222222", by="updater",
                from_commit="1111111", to_commit="2222222",
            ))  # fmt: skip

    v.on_episode = episode
    v.on_round = rounds.append
    caplog.set_level(logging.INFO, logger="template.validator")

    request = run(v, rounds=3)

    # The request arrived in the middle of round 0: that round was played to the end (every
    # miner, every task, archived), and no round after it began.
    assert request is not None and request.to_commit == "2222222" and request.by == "updater"
    assert [r.index for r in rounds] == [0]
    assert len(played) == 3 * 4 and rounds[0].archived == 12
    state = load_state(tmp_path / "v" / STATE_FILE, VALIDATOR.hotkey_ss58, 3)
    assert state is not None and state.round == 1
    assert not path.exists()
    said = [r.getMessage() for r in caplog.records if "restart requested" in r.getMessage()]
    assert said == [
        "restart requested by updater (update 1111111 -> 2222222): stopping between rounds; "
        "the state after round 0 is saved; exiting for the process manager to start the new "
        "code"
    ]


def test_a_request_older_than_the_running_code_is_dropped_and_a_touched_file_is_honoured(
    honest: dict[str, Any], catalog_dir: Path, tmp_path: Path,  # noqa: F811
) -> None:  # fmt: skip
    subnet, _ = subnet_of(honest)
    v = make_validator(subnet, tmp_path / "v", catalog_dir, restart_file=str(tmp_path / "r"))
    assert v.config.restart_path == tmp_path / "r"
    # Written before this process loaded its code: the restart it asked for has happened.
    request_restart(tmp_path / "r", RestartRequest(reason="old", at=CODE_LOADED_AT - 60))
    assert run(v, rounds=1) is None
    assert v.state.round == 1 and not (tmp_path / "r").exists()

    # An operator's `touch` (no content) is a request, dated by the file: taken before the
    # first round of this start, none played.
    (tmp_path / "r").touch()
    os.utime(tmp_path / "r", (time.time(), time.time()))
    again = make_validator(subnet, tmp_path / "v", catalog_dir, restart_file=str(tmp_path / "r"))
    request = run(again, rounds=2)
    assert request is not None and request.by == "hand"
    assert again.state.round == 1 and not (tmp_path / "r").exists()


def _samples(rendered: str) -> dict[str, list[Any]]:
    """Every sample name the registry exports (a declared labelled family without series
    yet counts under each of its sample names), with its samples."""
    out: dict[str, list[Any]] = {}
    suffixes = {"counter": ("_total", "_created"), "gauge": ("",),
                "histogram": ("_bucket", "_sum", "_count", "_created")}  # fmt: skip
    for family in text_string_to_metric_families(rendered):
        for suffix in suffixes.get(family.type, ("",)):
            out.setdefault(family.name + suffix, [])
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_the_alert_rules_name_only_what_the_validator_exports_and_the_gauges_track_the_chain(
    honest: dict[str, Any], catalog_dir: Path, tmp_path: Path,  # noqa: F811
) -> None:  # fmt: skip
    subnet, uids = subnet_of(honest)
    v = make_validator(subnet, tmp_path / "v", catalog_dir, weights_interval_blocks=100)
    heads: list[int] = []

    def saved(result: Any) -> None:
        heads.append(v.block or 0)
        subnet.substrate.advance(25)  # the next round reads a head 25 blocks on

    v.on_round = saved
    run(v, rounds=2)
    exported = _samples(v.metrics.render().decode())

    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    named = {name for r in rules for name in re.findall(r"\bshopbench_\w+", r["expr"])}
    assert len(rules) >= 5 and len(named) >= 6
    assert sorted(named - exported.keys()) == []
    for must in ("blocks_since_weights", "rounds_total", "upload_failures_total",
                 "judge_fallbacks_total", "llm_judged_total", "archived_total"):  # fmt: skip
        assert f"shopbench_validator_{must}" in named

    def value(name: str, **labels: str) -> float:
        found = [s.value for s in exported[name] if s.labels == labels]
        assert len(found) == 1, (name, labels, exported[name])
        return float(found[0])

    # Weights were set in round 0 (never before) and not again 25 blocks later (the interval
    # is 100): the gauge counts from the block they were set at to the last round's head.
    assert v.state.last_weight_block is not None
    assert value("shopbench_validator_block") == heads[1]
    assert value("shopbench_validator_blocks_since_weights") == heads[1] - v.state.last_weight_block
    assert heads[1] - v.state.last_weight_block >= 25
    # One series per miner of the subnet for score, EMA and weight; the ones the state holds.
    book = v.state.scores.miners
    for uid in uids.values():
        assert value("shopbench_validator_miner_ema", uid=str(uid)) == book[uid].ema
        assert value("shopbench_validator_miner_score", uid=str(uid)) == book[uid].last
        assert value("shopbench_validator_miner_weight", uid=str(uid)) == pytest.approx(
            v.state.last_weights.get(uid, 0.0)  # a uid the curve gave nothing weighs 0
        )
    assert {s.labels["uid"] for s in exported["shopbench_validator_miner_ema"]} == {
        str(u) for u in uids.values()
    }
    # Every kind of LLM-judge failure is a series from the start (the rubric judged alone
    # here: no LLM verdict, no fallback).
    fallbacks = exported["shopbench_validator_judge_fallbacks_total"]
    kinds = {s.labels["kind"]: s.value for s in fallbacks}
    assert {"down", "timeout", "rate_limited", "bad_reply"} <= kinds.keys()
    assert set(kinds.values()) == {0.0}
    assert value("shopbench_validator_archived_total") == 24


def test_a_uid_that_leaves_loses_its_series() -> None:
    metrics = ValidatorMetrics()
    metrics.set_miners({2: MinerGauges(0.5, 0.25, 0.6), 3: MinerGauges(0.1, 0.05, 0.4)})
    metrics.set_miners({2: MinerGauges(0.7, 0.3, None)})  # uid 3 left; no weights for 2 now
    exported = _samples(metrics.render().decode())
    series = {
        (name, s.labels["uid"], s.value)
        for name in ("shopbench_validator_miner_score", "shopbench_validator_miner_ema",
                     "shopbench_validator_miner_weight")  # fmt: skip
        for s in exported[name]
    }
    assert series == {
        ("shopbench_validator_miner_score", "2", 0.7),
        ("shopbench_validator_miner_ema", "2", 0.3),
    }
