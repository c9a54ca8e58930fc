"""The ATIF export: an arena's whole archive through ``shopbench traces export --format atif``
and the API's ``format=atif``, every document read back with the ``atif`` package's own
models and held against the signed record it came from."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import atif
import httpx
import pytest
from support.api_archives import (
    HOSTILE,
    PAYLOADS,
    VALIDATOR,
    embargoed,
    hostile,
    run_arena,
    store,
)
from support.keyed_hash import KeyedHash
from typer.testing import CliRunner

import shopbench
from shopbench.archive.errors import SinkError
from shopbench.archive.signing import sign_trajectory, verify_trajectory
from shopbench.archive.store import read_store
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.cli import app, main
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.binding import result_digest
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.traces.api.app import create_app
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.server import serving
from shopbench.traces.atif import (
    REWARD_FILE,
    TRAJECTORY_FILE,
    atif_document,
    atif_file_name,
    atif_trial_name,
    write_atif,
)
from shopbench.trajectory.loop import RunLimits, run_episode
from template.signing import HotkeyVerifier


@pytest.fixture(scope="module")
def arena(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("atif-arena")
    run_arena(catalog_dir, out)
    return out / "archive"


@pytest.fixture(scope="module")
def records(arena: Path) -> dict[str, Trajectory]:
    return {t.episode_id: t for t in read_store(arena)}


def export(root: Path, out: Path, *extra: str) -> Any:
    """``shopbench traces export ROOT --format atif --out OUT``; the CLI's result."""
    return CliRunner().invoke(
        app, ["traces", "export", str(root), "--format", "atif", "--out", str(out), *extra]
    )


def read_documents(out: Path) -> dict[str, atif.Trajectory]:
    """Every document of an ATIF export (``<trial>/agent/trajectory.json``, beside its
    ``verifier/reward.json``), validated by the atif package, by trajectory id."""
    docs = {}
    for path in sorted(out.glob(f"*/{TRAJECTORY_FILE}")):
        doc = atif.Trajectory.model_validate(json.loads(path.read_text(encoding="utf-8")))
        trial = path.parent.parent
        assert doc.trajectory_id is not None and trial.name == atif_trial_name(doc.trajectory_id)
        assert doc.final_metrics is not None and doc.final_metrics.extra is not None
        reward = json.loads((trial / REWARD_FILE).read_text())
        assert reward == {"reward": doc.final_metrics.extra["reward"]}
        docs[doc.trajectory_id] = doc
    return docs


@pytest.fixture(scope="module")
def exported(arena: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, atif.Trajectory]:
    out = tmp_path_factory.mktemp("atif-export") / "atif"
    result = export(arena, out)
    assert result.exit_code == 0, result.output
    assert f"exported 24 episodes to {out}" in result.output
    card = (out / "README.md").read_text()  # the dataset card names what a file is
    assert "One trial folder per episode in Harbor's layout" in card and "| episodes | 24 |" in card
    return read_documents(out)


def ours(extra: dict[str, Any] | None) -> dict[str, Any]:
    assert extra is not None and set(extra) == {"shopbench"}, extra
    value: dict[str, Any] = extra["shopbench"]
    return value


def test_the_whole_archive_exports_one_valid_atif_file_per_episode(
    exported: dict[str, atif.Trajectory], records: dict[str, Trajectory]
) -> None:
    assert len(records) == 24 and set(exported) == set(records)
    for episode_id, doc in exported.items():
        t = records[episode_id]
        assert doc.schema_version == "ATIF-v1.7" and doc.session_id == episode_id
        assert doc.agent.name == t.agent and doc.agent.version == shopbench.__version__
        assert doc.agent.tool_definitions == t.tools
        # the model the miner's agent card named, where ATIF readers look for the model
        assert t.agent_model is not None and t.agent_model.startswith("reference/")
        assert doc.agent.model_name == t.agent_model and t.agent_revision is not None
        assert ours(doc.agent.extra) == {
            "system_prompt_version": t.system_prompt_version, "model_revision": t.agent_revision,
            "model_declared_by": "the miner's agent card (self-declared, not checked)",
        }  # fmt: skip
        assert doc.final_metrics is not None and doc.final_metrics.total_steps == len(doc.steps)
        assert ours({"shopbench": doc.final_metrics.extra["shopbench"]})["tool_calls"] == len(
            t.tool_log
        )
        # the reward where ATIF readers look for one: the outcome, as ShoppingBench scores it
        assert doc.final_metrics.extra["reward"] == (1.0 if t.outcome.success else 0.0)
        assert doc.final_metrics.extra["success"] is t.outcome.success
        said = [m for m in t.messages if m.role != "tool"]
        sources = {"system": "system", "user": "user", "assistant": "agent"}
        assert [s.source for s in doc.steps] == [sources[m.role] for m in said]
        assert [s.message for s in doc.steps] == [m.content or "" for m in said]
        assert [s.reasoning_content for s in doc.steps] == [m.reasoning_content for m in said]


def test_each_turns_tool_calls_and_observations_line_up_with_the_record(
    exported: dict[str, atif.Trajectory], records: dict[str, Trajectory]
) -> None:
    checked = 0
    for episode_id, doc in exported.items():
        t = records[episode_id]
        turns = [m for m in t.messages if m.role == "assistant"]
        agent_steps = [s for s in doc.steps if s.source == "agent"]
        assert len(agent_steps) == len(turns)
        logged = []
        for step, m in zip(agent_steps, turns, strict=True):
            calls = m.tool_calls or []
            assert [(c.tool_call_id, c.function_name) for c in step.tool_calls or []] == [
                (c.id, c.function.name) for c in calls
            ]
            assert [c.arguments for c in step.tool_calls or []] == [
                json.loads(c.function.arguments) for c in calls
            ]
            answers = [x for x in t.messages if x.role == "tool" and x.tool_call_id in
                       {c.id for c in calls}]  # fmt: skip
            results = step.observation.results if step.observation else []
            assert [(r.source_call_id, r.content) for r in results] == [
                (x.tool_call_id, x.content) for x in answers
            ]
            info = ours(step.extra)
            for r in results:
                got = ours(r.extra)
                assert got["logged"] and got["result_digest"] == result_digest(r.content)
                logged.append((info["turn"], got["result_digest"], got["error"], got["latency_ms"]))
            checked += len(results)
        # the results, in order, are the validator's own log: turn, digest, error, latency
        assert logged == [(e.turn, e.result_digest, e.error, e.latency_ms) for e in t.tool_log]
        timing = {x.turn: x for x in t.timings.turns}
        for step in agent_steps:
            info = ours(step.extra)
            assert info["policy_ms"] == timing[info["turn"]].policy_ms
    assert checked == sum(len(t.tool_log) for t in records.values()) > 24


def test_the_signature_digest_ties_each_document_to_its_signed_record(
    exported: dict[str, atif.Trajectory], records: dict[str, Trajectory]
) -> None:
    for episode_id, doc in exported.items():
        t = records[episode_id]
        root = ours(doc.extra)
        assert t.signature is not None
        assert root["signature"] == {
            "signer": t.signature.signer, "signature": t.signature.signature,
            "payload_sha256": hashlib.sha256(t.signing_payload()).hexdigest(),
        }  # fmt: skip
        assert root["episode_id"] == episode_id and root["record_schema_version"] == 1
        assert root["task"] == {"id": t.task_id, "intent": t.intent, "query": t.query,
                                "split": t.split, "cluster": t.cluster}  # fmt: skip
        assert root["miner"] == {"uid": t.miner_uid, "hotkey": t.miner_hotkey}
        assert (root["validator_hotkey"], root["block"], root["epoch"]) == (
            t.validator_hotkey, t.block, t.epoch,
        )  # fmt: skip
        assert root["outcome"] == {"success": t.success, "rule_scores": t.outcome.rule_scores,
                                   "mean_rule": t.outcome.mean_rule, "reason": t.outcome.reason}
        assert t.judge is not None and root["judge"] == {
            "score": t.judge.score, "gates": t.judge.gates, "stopped_at": t.judge.stopped_at,
            "judge_id": t.judge.judge_id,
        }  # fmt: skip
        assert root["score"] == t.score and root["termination"] == t.termination.value
        assert root["diagnosis"] == t.diagnosis.model_dump(mode="json")
        # the document names the bytes and the signature; the validator's key checks both
        signed = root["signature"]
        payload = t.signing_payload()
        assert hashlib.sha256(payload).hexdigest() == signed["payload_sha256"]
        assert HotkeyVerifier().verify(payload, signed["signature"], signed["signer"])
        assert not HotkeyVerifier().verify(payload + b" ", signed["signature"], signed["signer"])
    assert {ours(d.extra)["outcome"]["success"] for d in exported.values()} == {True, False}


class Scripted:
    """A policy that plays a fixed list of replies (an exception is raised); the last one
    repeats."""

    name = "scripted"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.turn = 0

    async def act(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Any:
        self.turn += 1
        r = self.replies[min(self.turn, len(self.replies)) - 1]
        if isinstance(r, BaseException):
            raise r
        return r


def _strict(name: str) -> Any:
    raise AssertionError(f"{name} in a document")


def _call(name: str, arguments: str, call_id: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def test_a_failed_turn_a_nudge_and_unparseable_arguments_keep_their_places(
    catalog: Any, tmp_path: Path
) -> None:
    p = next(iter(catalog.iter_products(batch_size=50)))[0]
    task = Task(id="t-atif", intent="product", query=f"I'm looking for {p.title}.",
                reward=[Slot(product_id=p.product_id, title=[p.title])])  # fmt: skip
    policy = Scripted(
        ConnectionResetError("the miner hung up"),
        AssistantMessage(content="searching", tool_calls=[
            _call("find_product", '{"q": "bag", "page": ', "c-bad"),
            _call("find_product", "[1, 2]", "c-list"),
            _call("find_product", json.dumps({"q": "bag", "page": 1}), "c-good"),
            _call("find_product", '{"q": NaN, "page": Infinity}', "c-nan"),
        ]),
        AssistantMessage(content="thinking out loud", reasoning_content="no call this time"),
        AssistantMessage(tool_calls=[_call("terminate", '{"status": "failure"}', "c-end")]),
    )  # fmt: skip
    played = asyncio.run(run_episode(ShoppingEnv(catalog), task, policy,
                                     RunLimits(max_policy_failures=3), key=b"a" * 32))  # fmt: skip
    signer = KeyedHash(VALIDATOR)
    signed = sign_trajectory(played.model_copy(update={"validator_hotkey": VALIDATOR}), signer)
    root = store([signed], tmp_path / "archive", lifted=True)
    [t] = read_store(root)
    assert verify_trajectory(t, signer) and t.turns == 4
    assert [(f.turn, f.kind) for f in t.failures] == [(1, "policy_error"), (3, "no_tool_call")]

    result = export(root, tmp_path / "atif")
    assert result.exit_code == 0, result.output
    [doc] = read_documents(tmp_path / "atif").values()
    [written] = (tmp_path / "atif").glob(f"*/{TRAJECTORY_FILE}")
    json.loads(written.read_text(), parse_constant=_strict)  # strict JSON, no NaN
    # system, user, turn 2 (three calls), turn 3 (no call), its nudge, turn 4 (terminate)
    assert [s.source for s in doc.steps] == ["system", "user", "agent", "agent", "user", "agent"]
    assert [ours(s.extra)["turn"] for s in doc.steps if s.source == "agent"] == [2, 3, 4]
    searched = doc.steps[2]
    assert searched.tool_calls is not None
    bad, listed, good, nan = searched.tool_calls
    assert bad.arguments == {} and ours(bad.extra)["arguments_text"] == '{"q": "bag", "page": '
    assert ours(bad.extra)["arguments_error"].startswith("arguments are not valid JSON")
    assert listed.arguments == {} and ours(listed.extra) == {
        "arguments_text": "[1, 2]",
        "arguments_error": "arguments must be a JSON object of named arguments",
    }  # fmt: skip
    assert good.arguments == {"q": "bag", "page": 1} and good.extra is None
    assert nan.arguments == {}
    assert ours(nan.extra)["arguments_text"] == '{"q": NaN, "page": Infinity}'
    assert ours(nan.extra)["arguments_error"].endswith("(NaN is not a finite number)")
    assert searched.observation is not None
    results = searched.observation.results
    assert [r.source_call_id for r in results] == ["c-bad", "c-list", "c-good", "c-nan"]
    errors = [ours(r.extra)["error"] for r in results]
    assert errors == [e.error for e in t.tool_log[:4]] and errors[0] is not None
    assert errors[2] is None
    assert doc.steps[3].tool_calls is None and doc.steps[3].observation is None
    assert ours(doc.steps[3].extra)["failures"] == [
        {"turn": 3, "kind": "no_tool_call", "detail": "the message made no tool call"}
    ]
    nudge = [m.content for m in t.messages if m.role == "user"][1]
    assert doc.steps[4].message == nudge and "called no tool" in doc.steps[4].message
    extra = ours(doc.extra)
    assert [(f["turn"], f["kind"]) for f in extra["failures"]] == [(1, "policy_error"),
                                                                 (3, "no_tool_call")]
    assert "ConnectionResetError: the miner hung up" in extra["failures"][0]["detail"]
    assert extra["signature"]["signer"] == VALIDATOR
    assert extra["signature"]["payload_sha256"] == hashlib.sha256(
        t.signing_payload()).hexdigest()  # fmt: skip
    stamps = [s.timestamp for s in doc.steps]
    assert all(stamps) and stamps == sorted(stamps)  # type: ignore[type-var]


def test_hostile_miner_text_survives_as_data(arena: Path, tmp_path: Path) -> None:
    root, episode_id = hostile(arena, tmp_path / "hostile")
    result = export(root, tmp_path / "atif")
    assert result.exit_code == 0, result.output
    written = (tmp_path / "atif").glob(f"*/{TRAJECTORY_FILE}")
    assert [p.parent.parent.name for p in written] == [episode_id]
    doc = read_documents(tmp_path / "atif")[episode_id]
    assert doc.agent.name == HOSTILE[:200] and ours(doc.extra)["status"] == HOSTILE[:100]
    assert doc.agent.model_name == PAYLOADS[1]  # the card's model, as data
    assert ours(doc.agent.extra)["model_revision"] == PAYLOADS[6]
    agent = [s for s in doc.steps if s.source == "agent"]
    assert agent and all(s.message == HOSTILE and s.reasoning_content == HOSTILE for s in agent)
    calls = [c for s in agent for c in s.tool_calls or []]
    assert calls and all(c.arguments == {"q": HOSTILE, "note": HOSTILE} for c in calls)
    [t] = read_store(root)
    digest = hashlib.sha256(t.signing_payload()).hexdigest()
    assert ours(doc.extra)["signature"]["payload_sha256"] == digest


def test_the_cli_export_applies_the_filters_and_the_embargo(
    arena: Path, records: dict[str, Trajectory], tmp_path: Path
) -> None:
    result = export(arena, tmp_path / "voucher", "--intent", "voucher", "--success", "false")
    assert result.exit_code == 0, result.output
    picked = {e for e, t in records.items() if t.intent == "voucher" and not t.success}
    assert picked and set(read_documents(tmp_path / "voucher")) == picked
    root, live = embargoed(arena, tmp_path / "validator")
    result = export(root, tmp_path / "public")
    assert result.exit_code == 0, result.output
    assert live and set(read_documents(tmp_path / "public")) == set(records) - live


def test_an_export_refuses_a_folder_that_holds_anything(
    arena: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "atif"
    out.mkdir()
    (out / "notes.json").write_text("{}")
    with pytest.raises(SystemExit) as stopped:
        main(["traces", "export", str(arena), "--format", "atif", "--out", str(out)])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert f"error: {out}: the ATIF export writes a new or empty folder" in said
    assert [p.name for p in out.iterdir()] == ["notes.json"]


def test_an_id_that_is_no_file_name_is_written_under_its_digest(
    records: dict[str, Trajectory], tmp_path: Path
) -> None:
    t = next(iter(records.values()))
    odd = t.model_copy(update={"episode_id": "../../escape/../x"})
    digest = hashlib.sha256(b"../../escape/../x").hexdigest()[:16]
    assert atif_file_name("../../escape/../x") == f"episode-{digest}.json"
    [path] = write_atif([odd], tmp_path / "out")
    assert path == tmp_path / "out" / f"episode-{digest}" / TRAJECTORY_FILE
    assert json.loads(path.read_text())["trajectory_id"] == "../../escape/../x"
    twice = [t, t.model_copy()]
    with pytest.raises(SinkError, match="would both be"):
        write_atif(twice, tmp_path / "again")


def test_the_api_streams_atif_documents_under_the_filters_and_the_embargo(
    arena: Path, records: dict[str, Trajectory], tmp_path: Path
) -> None:
    with serving(create_app(ApiConfig(root=str(arena)))) as url, httpx.Client(base_url=url) as c:
        shop = c.get("/v1/trajectories", params={"format": "atif", "intent": "shop"})
        assert shop.status_code == 200
        assert shop.headers["content-type"].startswith("application/x-ndjson")
        assert 'filename="episodes.atif.jsonl"' in shop.headers["content-disposition"]
        docs = [atif.Trajectory.model_validate_json(x) for x in shop.text.splitlines()]
        assert sorted(d.trajectory_id or "" for d in docs) == sorted(
            e for e, t in records.items() if t.intent == "shop"
        )
        for d in docs:
            assert d.model_dump(mode="json", exclude_none=True) == atif_document(
                records[d.trajectory_id or ""]
            )
        every = c.get("/v1/trajectories", params={"format": "atif"}).text.splitlines()
        assert len(every) == len(records) == 24
        one = next(iter(records))
        single = c.get(f"/v1/trajectories/{one}", params={"format": "atif"})
        assert single.headers["content-type"].startswith("application/json")
        assert f'filename="{one}.json"' in single.headers["content-disposition"]
        assert atif.Trajectory.model_validate_json(single.content).trajectory_id == one
        assert single.json() == atif_document(records[one])
    root, live = embargoed(arena, tmp_path / "validator")
    with serving(create_app(ApiConfig(root=str(root)))) as url, httpx.Client(base_url=url) as c:
        streamed = c.get("/v1/trajectories", params={"format": "atif"}).text.splitlines()
        ids = {json.loads(x)["trajectory_id"] for x in streamed}
        assert live and ids == set(records) - live
        hidden = sorted(live)[0]
        assert c.get(f"/v1/trajectories/{hidden}", params={"format": "atif"}).status_code == 404
