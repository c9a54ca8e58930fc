"""The episode loop and its record: every way a policy can fail, exact round trips."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any

import pytest

from shopbench.agents.reference import CarefulPolicy
from shopbench.archive.signing import sign_trajectory, verify_trajectory
from shopbench.chat import AssistantMessage, ChatMessage, EpisodeLimits, FunctionCall, ToolCall
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import Slot
from shopbench.records.trajectory import Signature, TerminationReason, Trajectory
from shopbench.records.verdict import Verdict
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import RunLimits, run_episode

KEY = b"t" * 32



@pytest.fixture(scope="module")
def task(catalog: Any) -> Task:
    """A product task whose query names a real product of the catalog."""
    p = next(iter(catalog.iter_products(batch_size=50)))[0]
    return Task(
        id="t-first",
        intent="product",
        query=f"I'm looking for {p.title}.",
        reward=[Slot(product_id=p.product_id, title=[p.title])],
    )


def call(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> ToolCall:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=args))


def reply(*calls: ToolCall, content: str | None = None, reasoning: str | None = None) -> Any:
    return AssistantMessage(
        content=content, reasoning_content=reasoning, tool_calls=list(calls) or None
    )


class Stub:
    """A policy that plays a fixed list of replies (an exception is raised, a coroutine
    function awaited); the last one repeats. It records what it was given."""

    name = "stub"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[list[ChatMessage], list[dict[str, Any]]]] = []

    async def act(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Any:
        self.seen.append((messages, tools))
        r = self.replies[min(len(self.seen), len(self.replies)) - 1]
        if isinstance(r, BaseException):
            raise r
        if callable(r):
            return await r()
        return r


TERMINATE = reply(call("terminate", {"status": "failure"}))


def play(env: ShoppingEnv, task: Task, policy: Any, limits: RunLimits | None = None) -> Trajectory:
    return asyncio.run(run_episode(env, task, policy, limits, key=KEY))


# -- the record -----------------------------------------------------------------------------


def test_a_careful_episode_round_trips_exactly_and_signs_canonically(
    env: ShoppingEnv, task: Task
) -> None:
    t = play(env, task, CarefulPolicy(seed=1))
    assert t.termination is TerminationReason.terminated and t.status == "success"
    assert t.success and t.recommended and t.turns >= 3
    assert t.recommended_ids == [t.token_map[tok] for tok in t.recommended]
    assert [m.role for m in t.messages[:2]] == ["system", "user"]
    assert t.messages[1].content == task.query
    assert t.tool_calls == len(t.tool_log) > 0
    assert t.timings.total_ms >= t.timings.policy_ms + t.timings.env_ms
    assert len(t.timings.turns) == t.turns

    back = Trajectory.model_validate_json(t.model_dump_json())
    assert back == t
    payload = t.signing_payload()
    assert payload == back.signing_payload()
    assert list(json.loads(payload)) == sorted(json.loads(payload))
    signed = t.model_copy(update={"signature": Signature(signer="5Abc", signature="0xab12")})
    assert signed.signing_payload() == payload  # the signature is not part of what is signed
    judged = t.model_copy(update={"judge": Verdict(score=0.7, gates={"cites": True})})
    assert judged.signing_payload() != payload
    assert Trajectory.model_validate_json(judged.model_dump_json()) == judged


class KeyedHash:
    """A stand-in for a hotkey: HMAC-SHA256 under a secret, as Signer and Verifier."""

    hotkey = "5Fake"

    def sign(self, payload: bytes) -> str:
        return hmac.new(b"secret", payload, hashlib.sha256).hexdigest()

    def verify(self, payload: bytes, signature: str, hotkey: str) -> bool:
        return hotkey == self.hotkey and hmac.compare_digest(self.sign(payload), signature)


def test_a_signed_record_verifies_until_anything_in_it_changes(
    env: ShoppingEnv, task: Task
) -> None:
    key = KeyedHash()
    t = play(env, task, Stub(TERMINATE))
    assert not verify_trajectory(t, key)  # unsigned
    signed = sign_trajectory(t, key)
    assert signed.signature is not None and signed.signature.signer == "5Fake"
    assert verify_trajectory(signed, key)
    assert verify_trajectory(Trajectory.model_validate_json(signed.model_dump_json()), key)
    assert not verify_trajectory(signed.model_copy(update={"score": 1.0}), key)
    forged = signed.model_copy(update={"miner_uid": 3})
    assert not verify_trajectory(forged, key)


def test_a_record_of_another_schema_version_is_refused(env: ShoppingEnv, task: Task) -> None:
    data = json.loads(play(env, task, Stub(TERMINATE)).model_dump_json())
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        Trajectory.model_validate(data)


def test_the_same_key_and_seed_give_the_same_episode_even_concurrently(
    env: ShoppingEnv, task: Task
) -> None:
    async def twice() -> list[Trajectory]:
        p = CarefulPolicy(seed=3)
        return list(await asyncio.gather(*(run_episode(env, task, p, key=KEY) for _ in "ab")))

    def calls(t: Trajectory) -> list[tuple[Any, ...]]:
        return [(e.name, e.arguments, e.result_digest, e.error) for e in t.tool_log]

    a, b = asyncio.run(twice())
    assert a.messages == b.messages and calls(a) == calls(b)
    assert a.episode_id == b.episode_id and a.outcome == b.outcome
    other = asyncio.run(run_episode(env, task, CarefulPolicy(seed=3), key=b"o" * 32))
    assert other.recommended != a.recommended  # another key, other tokens
    assert other.recommended_ids == a.recommended_ids


def test_the_policy_sees_messages_and_schemas_never_the_task(
    env: ShoppingEnv, task: Task
) -> None:
    stub = Stub(reply(call("find_product", {"q": "shorts", "page": 1})), TERMINATE)
    t = play(env, task, stub)
    assert len(stub.seen) == 2
    for messages, tools in stub.seen:
        assert all(type(m) is ChatMessage for m in messages)
        assert {t["function"]["name"] for t in tools} == set(env.tool_specs("product"))
        text = json.dumps([m.model_dump() for m in messages])
        assert task.reward[0].product_id not in text  # catalog ids never leave the env
        assert task.id not in text
    assert [m.role for m in stub.seen[1][0]] == ["system", "user", "assistant", "tool"]
    assert t.termination is TerminationReason.terminated


# -- failures of the policy -----------------------------------------------------------------


def test_a_policy_that_raises_ends_the_episode_with_the_reason(
    env: ShoppingEnv, task: Task
) -> None:
    t = play(env, task, Stub(ConnectionRefusedError("endpoint refused the connection")))
    assert t.termination is TerminationReason.policy_error
    assert "ConnectionRefusedError: endpoint refused" in (t.termination_detail or "")
    assert [f.kind for f in t.failures] == ["policy_error"]
    assert not t.success and t.outcome.reason == "no product recommended"


def test_a_slow_policy_times_out_and_the_limits_decide_how_often(
    env: ShoppingEnv, task: Task
) -> None:
    async def slow() -> Any:
        await asyncio.sleep(5)

    t = play(env, task, Stub(slow), RunLimits(turn_timeout_s=0.05))
    assert t.termination is TerminationReason.policy_timeout and t.turns == 1
    assert "no reply within 0.05 s" in (t.termination_detail or "")

    # Tolerating three failures: two slow turns are recorded, then the agent terminates.
    stub = Stub(slow, slow, TERMINATE)
    t = play(env, task, stub, RunLimits(turn_timeout_s=0.05, max_policy_failures=3))
    assert t.termination is TerminationReason.terminated and t.turns == 3
    assert [f.kind for f in t.failures] == ["policy_timeout", "policy_timeout"]


def test_the_episode_deadline_bounds_the_whole_episode(env: ShoppingEnv, task: Task) -> None:
    async def hang() -> Any:
        await asyncio.sleep(10)

    # Two quick turns, then a reply that would take 10 s: the turn timeout would wait for it,
    # the episode's 0.5 s budget does not (a margin no loaded machine eats: the quick turns
    # take milliseconds, the hang 20 times the budget).
    search = reply(call("find_product", {"q": "bag", "page": 1}))
    limits = RunLimits(turn_timeout_s=30, episode_timeout_s=0.5, max_policy_failures=5)
    t = play(env, task, Stub(search, search, hang), limits)
    assert t.termination is TerminationReason.deadline
    assert t.turns == 3 and [(f.turn, f.kind) for f in t.failures] == [(3, "deadline")]
    assert "the episode's 0.5 s budget ran out" in (t.termination_detail or "")


@pytest.mark.parametrize(
    "garbage, says",
    [
        (42, "returned int"),
        ({"tool_calls": "find everything"}, "tool_calls"),
        ({"content": ["not", "text"]}, "content"),
    ],
)
def test_garbage_from_the_policy_is_an_invalid_reply(
    env: ShoppingEnv, task: Task, garbage: Any, says: str
) -> None:
    t = play(env, task, Stub(garbage))
    assert t.termination is TerminationReason.invalid_reply
    assert says in (t.termination_detail or "")


def test_a_reply_without_a_tool_call_is_told_so_until_the_turn_limit(
    catalog: Any, task: Task
) -> None:
    env3 = ShoppingEnv(catalog, EpisodeLimits(max_turns=3))
    t = play(env3, task, Stub(reply(content="I think a nice bag would do."), reply()))
    assert t.termination is TerminationReason.turn_limit and t.turns == 3
    assert [f.kind for f in t.failures] == ["no_tool_call", "empty_reply", "empty_reply"]
    nudges = [m.content for m in t.messages if m.role == "user"][1:]
    assert len(nudges) == 3 and all(n and n.startswith("Error:") for n in nudges)
    assert "called no tool" in nudges[0] and "was empty" in nudges[1]


def test_idle_turns_end_the_episode_when_the_limits_say_so(env: ShoppingEnv, task: Task) -> None:
    t = play(env, task, Stub(reply(content="hmm")), RunLimits(max_idle_turns=2))
    assert t.termination is TerminationReason.no_progress and t.turns == 2


def test_bad_calls_are_observations_and_the_episode_goes_on(
    env: ShoppingEnv, task: Task
) -> None:
    first = reply(
        call("find_product", '{"q": "bag", "page": '),  # broken JSON
        call("buy_now", {"id": 1}),  # no such tool
        call("view_product_information", {"product_ids": "1234567890"}),  # never shown
        call("find_product", ["not", "an", "object"]),  # type: ignore[arg-type]
    )
    t = play(env, task, Stub(first, TERMINATE))
    tool_msgs = [m for m in t.messages if m.role == "tool"]
    assert [m.content[:6] for m in tool_msgs[:4]] == ["Error:"] * 4
    assert [e.error for e in t.tool_log[:4]] == [
        "bad_argument", "unknown_tool", "invalid_id", "bad_argument",
    ]
    assert t.termination is TerminationReason.terminated and t.turns == 2
    assert t.failures == []


def test_an_oversized_message_is_cut_and_its_calls_not_run(
    env: ShoppingEnv, task: Task
) -> None:
    big = AssistantMessage.model_construct(
        content="x" * 20_000,
        reasoning_content="thinking",
        tool_calls=[call("find_product", {"q": "bag", "page": 1})],
    )
    t = play(env, task, Stub(big, TERMINATE))
    assert [f.kind for f in t.failures] == ["oversized"]
    assert "content is 20000 bytes" in t.failures[0].detail
    stored = t.messages[2]
    assert stored.role == "assistant" and len((stored.content or "").encode()) == 16_384
    assert t.messages[3].role == "tool" and "not run" in (t.messages[3].content or "")
    assert [e.name for e in t.tool_log] == ["terminate"]
    assert Trajectory.model_validate_json(t.model_dump_json()) == t


def test_too_many_calls_in_one_turn_are_refused_by_the_limits(
    env: ShoppingEnv, task: Task
) -> None:
    many = {"tool_calls": [
        {"id": "same", "function": {"name": "find_product", "arguments": {"q": "bag", "page": 1}}}
        for _ in range(20)
    ]}
    t = play(env, task, Stub(many, TERMINATE))
    assert [f.kind for f in t.failures] == ["too_many_calls"]
    calls = t.messages[2].tool_calls or []
    assert len(calls) == 16 and len({c.id for c in calls}) == 16  # ids made unique
    errors = [e.error for e in t.tool_log if e.turn == 1]
    assert errors[:5] == [None] * 5 and set(errors[5:]) == {"limit"}
    # Arguments sent as an object are stored as the JSON text a model would send.
    assert json.loads(calls[0].function.arguments) == {"q": "bag", "page": 1}


def test_a_record_whose_numbers_orjson_writes_otherwise_still_verifies(
    env: ShoppingEnv, task: Task
) -> None:
    from shopbench.archive.layout import record_of, table_rows, to_table, validate_record
    from shopbench.archive.signing import verify_record

    key = KeyedHash()
    plain = sign_trajectory(play(env, task, Stub(TERMINATE)), key)
    odd = sign_trajectory(plain.model_copy(update={"score": 1e-05}), key)
    assert odd.quick_signing_payload() != odd.signing_payload()  # '0.00001' against '1e-05'
    assert plain.quick_signing_payload() == plain.signing_payload()
    for t in (plain, odd):
        record = record_of(table_rows(to_table([t]))[0])
        assert verify_trajectory(t, key) and verify_record(record, validate_record(record), key)
        tampered = record | {"miner_uid": 3}
        assert not verify_record(tampered, validate_record(tampered), key)
