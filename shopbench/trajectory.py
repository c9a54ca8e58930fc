"""The episode record and :func:`run_episode`, the one loop that plays an episode.

Everything downstream consumes :class:`Trajectory` records: the validator scores them, the
judge reads them, the archive stores them, curation filters them, distillation trains on
them and evaluation counts them. :func:`run_episode` produces them the same way for a local
policy and for a remote miner: the policy sees only the message list and the tool schemas,
the environment runs every tool call, and whatever the policy does wrong — raise, time out,
reply garbage, send no tool call, an unknown tool, broken JSON, an oversized message — is
recorded in the trajectory instead of escaping the loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shopbench.agents.messages import (
    MAX_ARGUMENTS_BYTES,
    MAX_TOOL_NAME,
    ChatMessage,
    FunctionCall,
    ToolCall,
)
from shopbench.grading.outcome import Outcome, grade
from shopbench.tasks.model import Intent, Split, TaskCard

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.env.env import ShoppingEnv
    from shopbench.env.episode import Episode
    from shopbench.grading.title import TitleMatcher
    from shopbench.signing import Signer, Verifier
    from shopbench.tasks.model import Task

SCHEMA_VERSION = 1
"""Version of the :class:`Trajectory` layout; readers refuse records of another version."""

MAX_DETAIL_CHARS = 500  # a failure's description, e.g. an exception message, is cut to this
MAX_STORED_CALLS = 16  # tool calls of one reply kept in the record; more are dropped


class TerminationReason(StrEnum):
    """Why an episode ended."""

    terminated = "terminated"
    """The agent called terminate."""
    turn_limit = "turn_limit"
    """The turn budget ran out."""
    policy_error = "policy_error"
    """The policy raised (an endpoint that refused, a transport error, a bug)."""
    policy_timeout = "policy_timeout"
    """The policy did not answer a turn within the turn timeout."""
    invalid_reply = "invalid_reply"
    """The policy returned something that is not an assistant message."""
    no_progress = "no_progress"
    """Too many turns in a row without a tool call that ran (see RunLimits.max_idle_turns)."""
    deadline = "deadline"
    """The episode's total time budget ran out."""


FailureKind = Literal[
    "policy_error",
    "policy_timeout",
    "invalid_reply",
    "deadline",
    "empty_reply",
    "no_tool_call",
    "oversized",
    "too_many_calls",
]


class RunLimits(BaseModel):
    """How long a policy may take and how many failures the loop tolerates.

    The environment's own limits (turns, calls per turn, sizes) live in
    :class:`shopbench.env.limits.EpisodeLimits`; these are the loop's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_timeout_s: float = Field(
        default=60.0, gt=0, description="seconds the policy may take to answer one turn"
    )
    episode_timeout_s: float | None = Field(
        default=None, gt=0, description="seconds for the whole episode; None: no bound"
    )
    max_policy_failures: int = Field(
        default=1,
        ge=1,
        description="turns on which the policy may raise, time out or reply garbage before "
        "the episode ends; 1 ends it at the first such turn",
    )
    max_idle_turns: int | None = Field(
        default=None,
        ge=1,
        description="consecutive turns without a tool call that ran before the episode ends "
        "as no_progress; None: such turns go on until the turn limit",
    )


class TurnFailure(BaseModel):
    """Something the policy did wrong on one turn, and what the loop did about it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int
    kind: FailureKind
    detail: str


class ToolLogEntry(BaseModel):
    """One tool call as the environment ran it (the full result is in the tool message)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int
    name: str
    arguments: dict[str, Any] | str
    result_digest: str = Field(description="sha256 of the observation text")
    error: str | None = Field(default=None, description="the error code; None on success")
    latency_ms: float


class TurnTiming(BaseModel):
    """Where one turn's time went."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int
    policy_ms: float = Field(description="waiting for the policy's reply")
    env_ms: float = Field(description="running the reply's tool calls")


class Timings(BaseModel):
    """The episode's wall-clock record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    started_at: float = Field(description="unix time the episode started")
    total_ms: float
    policy_ms: float
    env_ms: float
    grade_ms: float
    turns: list[TurnTiming] = Field(default_factory=list)


class JudgeVerdict(BaseModel):
    """The process judge's verdict on a trajectory; filled after the episode by a judge.

    Judges may add fields of their own (kept and round-tripped as they are).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    score: float
    gates: dict[str, bool] = Field(default_factory=dict, description="gate name → passed")
    rationale: str = ""
    judge_id: str = Field(default="", description="judge model, revision and rubric version")


class Signature(BaseModel):
    """A signature over :meth:`Trajectory.signing_payload`, and who made it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    signer: str = Field(description="the signer's hotkey (ss58 address)")
    signature: str = Field(pattern=r"^(0x)?[0-9a-fA-F]+$", description="hex signature")


class Trajectory(BaseModel):
    """One archived episode: who played what, everything said, what happened, how it graded.

    ``Trajectory.model_validate_json(t.model_dump_json()) == t`` for every record.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    # ids
    episode_id: str
    task_id: str
    cluster: str | None = None
    validator_hotkey: str | None = None
    miner_uid: int | None = None
    miner_hotkey: str | None = None
    block: int | None = None
    # the task, as the agent could know it
    intent: Intent
    query: str
    split: Split
    # the agent and the conversation
    agent: str = Field(description="the policy's name")
    system_prompt_version: str
    tools: list[dict[str, Any]] = Field(description="the OpenAI function schemas offered")
    messages: list[ChatMessage]
    tool_log: list[ToolLogEntry]
    failures: list[TurnFailure] = Field(default_factory=list)
    # what came of it
    recommended: list[str] = Field(description="the recommended tokens, in order")
    recommended_ids: list[str | None] = Field(description="their catalog ids")
    token_map: dict[str, str] = Field(
        description="token → catalog id for every product and shop token shown (re-grading)"
    )
    status: str | None = Field(default=None, description="the status declared with terminate")
    termination: TerminationReason
    termination_detail: str | None = None
    turns: int = Field(ge=0, description="assistant turns played")
    outcome: Outcome
    judge: JudgeVerdict | None = None
    score: float | None = Field(default=None, description="the final episode score")
    timings: Timings
    signature: Signature | None = None

    @model_validator(mode="after")
    def _version_known(self) -> Trajectory:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"trajectory schema version {self.schema_version}, this shopbench reads "
                f"{SCHEMA_VERSION}"
            )
        return self

    def card(self) -> TaskCard:
        """The task's wire half, as the agent received it."""
        return TaskCard(
            id=self.task_id, intent=self.intent, query=self.query, split=self.split,
            cluster=self.cluster,
        )

    @property
    def success(self) -> bool:
        """Whether the outcome grader counted the episode a success."""
        return self.outcome.success

    @property
    def tool_calls(self) -> int:
        """Tool calls the environment ran (errors included)."""
        return len(self.tool_log)

    def signing_payload(self) -> bytes:
        """The canonical bytes a signer signs: the record without its signature as JSON with
        sorted keys, no spaces, UTF-8. Equal records give equal bytes."""
        data = self.model_dump(mode="json", exclude={"signature"})
        text = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")

    def sign(self, signer: Signer) -> Trajectory:
        """A copy signed by `signer` over :meth:`signing_payload`."""
        signature = Signature(signer=signer.hotkey, signature=signer.sign(self.signing_payload()))
        return self.model_copy(update={"signature": signature})

    def verify(self, verifier: Verifier) -> bool:
        """True when the record carries a signature that `verifier` accepts for its payload."""
        if self.signature is None:
            return False
        return verifier.verify(
            self.signing_payload(), self.signature.signature, self.signature.signer
        )


# -- the loop ------------------------------------------------------------------------------


class _LooseFunction(BaseModel):
    """A function call as a policy may send it: arguments as JSON text or as an object."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    arguments: str | dict[str, Any] | None = None


class _LooseToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    function: _LooseFunction


class _LooseReply(BaseModel):
    """An assistant reply read without size limits, so oversize is reported, not rejected."""

    model_config = ConfigDict(extra="ignore")

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_LooseToolCall] | None = None


def _read_reply(raw: object) -> _LooseReply:
    """The policy's return value as a reply; ValueError saying why when it is not one."""
    if isinstance(raw, BaseModel):
        raw = {
            name: getattr(raw, name, None)
            for name in ("content", "reasoning_content", "tool_calls")
        }
        if isinstance(raw["tool_calls"], list):
            raw["tool_calls"] = [
                c.model_dump() if isinstance(c, BaseModel) else c for c in raw["tool_calls"]
            ]
    if not isinstance(raw, dict):
        raise ValueError(f"the policy returned {type(raw).__name__}, not an assistant message")
    try:
        return _LooseReply.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "message"
        raise ValueError(
            f"the reply is not an assistant message ({where}: {first['msg']})"
        ) from None


def _cut(text: str | None, cap: int) -> str | None:
    """`text` cut to at most `cap` UTF-8 bytes (never splitting a character)."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    return data[:cap].decode("utf-8", errors="ignore")


def _short(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."


def _arguments_text(arguments: str | dict[str, Any] | None) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


@dataclass(slots=True)
class _Turn:
    """One reply made ready to record and run."""

    message: ChatMessage
    calls: list[tuple[str, str, str]]  # (tool call id, name, arguments text as sent)
    notices: list[tuple[FailureKind, str]]  # problems the agent is told about


def _prepare(reply: _LooseReply, turn: int, episode: Episode, used_ids: set[str]) -> _Turn:
    """Bound the reply to the record's limits and give every tool call a unique id."""
    limits = episode.limits
    notices: list[tuple[FailureKind, str]] = []
    violation = limits.message_violation(reply.reasoning_content, reply.content)
    if violation is not None:
        notices.append(("oversized", f"{violation}; the message was cut and its calls not run"))
    loose_calls = list(reply.tool_calls or [])
    if len(loose_calls) > MAX_STORED_CALLS:
        notices.append(
            (
                "too_many_calls",
                f"{len(loose_calls)} tool calls in one message; only the first "
                f"{MAX_STORED_CALLS} were kept (at most {limits.max_calls_per_turn} run)",
            )
        )
        loose_calls = loose_calls[:MAX_STORED_CALLS]
    calls: list[tuple[str, str, str]] = []
    stored: list[ToolCall] = []
    for i, c in enumerate(loose_calls, start=1):
        call_id = (c.id or "")[:128]
        if not call_id or call_id in used_ids:
            call_id = f"call_{turn}_{i}"
        used_ids.add(call_id)
        args = _arguments_text(c.function.arguments)
        calls.append((call_id, c.function.name, args))
        stored.append(
            ToolCall(
                id=call_id,
                function=FunctionCall(
                    name=c.function.name[:MAX_TOOL_NAME], arguments=args[:MAX_ARGUMENTS_BYTES]
                ),
            )
        )
    message = ChatMessage(
        role="assistant",
        content=_cut(reply.content, limits.max_content_bytes),
        reasoning_content=_cut(reply.reasoning_content, limits.max_reasoning_bytes),
        tool_calls=stored or None,
    )
    if not calls and violation is None:
        said = (reply.content or "").strip() or (reply.reasoning_content or "").strip()
        kind: FailureKind = "no_tool_call" if said else "empty_reply"
        notices.append((kind, "the message made no tool call"))
    return _Turn(message=message, calls=calls, notices=notices)


def _nudge(kind: FailureKind, text: str, episode: Episode) -> str:
    """What the agent is told after a turn that ran no tool."""
    tools = ", ".join(episode.tool_names)
    if kind == "oversized":
        return f"Error: your message was not accepted: {text}. Keep messages within the limit."
    if kind == "empty_reply":
        return f"Error: your message was empty. Continue by calling one of the tools: {tools}."
    return (
        "Error: your message called no tool, so nothing happened. Continue by calling one of "
        f"the tools: {tools}; call terminate when you are done."
    )


async def _ask(
    policy: Policy,
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    limits: RunLimits,
    elapsed: float,
) -> tuple[_LooseReply | None, tuple[FailureKind, str] | None, float]:
    """One turn asked of the policy: (the reply, or the failure), and the ms it took."""
    timeout = limits.turn_timeout_s
    deadline_bound = False
    if limits.episode_timeout_s is not None:
        left = limits.episode_timeout_s - elapsed
        if left < timeout:
            timeout, deadline_bound = max(left, 0.0), True
    budget = f"the episode's {limits.episode_timeout_s or 0:g} s budget"
    if timeout <= 0:
        return None, ("deadline", f"{budget} is spent"), 0.0
    t0 = time.perf_counter()
    try:
        raw = await asyncio.wait_for(policy.act(list(messages), tools), timeout)
    except TimeoutError as e:
        ms = (time.perf_counter() - t0) * 1000.0
        if str(e):  # the policy's own timeout (e.g. its endpoint's), with its message
            return None, ("policy_timeout", _short(f"{type(e).__name__}: {e}")), ms
        if deadline_bound:
            return None, ("deadline", f"{budget} ran out"), ms
        return None, ("policy_timeout", f"no reply within {timeout:g} s"), ms
    except asyncio.CancelledError:
        raise
    except Exception as e:  # any failure of the policy is data, never a crash
        ms = (time.perf_counter() - t0) * 1000.0
        return None, ("policy_error", _short(f"{type(e).__name__}: {e}")), ms
    ms = (time.perf_counter() - t0) * 1000.0
    try:
        return _read_reply(raw), None, ms
    except ValueError as e:
        return None, ("invalid_reply", _short(str(e))), ms


def _execute(prepared: _Turn, episode: Episode, messages: list[ChatMessage]) -> int:
    """Run the reply's calls through the episode, answering each with a tool message; an
    oversized reply's calls are answered without running. Returns how many ran."""
    refusal = next((t for k, t in prepared.notices if k == "oversized"), None)
    ran = 0
    for call_id, name, args in prepared.calls:
        if refusal is not None:
            content = f"Error: this call was not run: {refusal}"
        else:
            content = episode.call(name, args).content
            ran += 1
        messages.append(
            ChatMessage(
                role="tool", tool_call_id=call_id, name=name[:MAX_TOOL_NAME], content=content
            )
        )
    return ran


async def run_episode(
    env: ShoppingEnv,
    task: Task,
    policy: Policy,
    limits: RunLimits | None = None,
    *,
    key: bytes | None = None,
    validator_hotkey: str | None = None,
    miner_uid: int | None = None,
    miner_hotkey: str | None = None,
    block: int | None = None,
    matcher: TitleMatcher | None = None,
) -> Trajectory:
    """Play `task` with `policy` in a new episode of `env` and return its graded record.

    Per turn the policy gets the messages so far (system prompt, the user query, earlier
    turns and tool results) and the tool schemas — never the task — and must not mutate
    them. Each tool call of its reply runs through the episode and is answered by a tool
    message. The loop ends when the agent terminates, the turn limit is reached, or the
    policy fails as often as `limits` allow (raises, times out, replies garbage); turns
    without a tool call get an error message and go on. Never raises for anything the
    policy does; the recommended products are graded with `matcher` (the lexical default).
    `key` fixes the episode's tokens (None draws a fresh one).
    """
    limits = limits or RunLimits()
    started_at = time.time()
    t_start = time.perf_counter()
    episode = env.new_episode(task, key=key)
    tools = episode.tools  # the record's copy; the policy gets a fresh one each turn
    messages: list[ChatMessage] = [
        ChatMessage(role="system", content=episode.system_prompt),
        ChatMessage(role="user", content=task.query),
    ]
    failures: list[TurnFailure] = []
    timings: list[TurnTiming] = []
    used_ids: set[str] = set()
    policy_failures = idle = 0
    reason: TerminationReason | None = None
    detail: str | None = None

    while reason is None:
        if not episode.begin_turn():
            ended = episode.end_reason
            reason = (
                TerminationReason.terminated if ended == "terminated"
                else TerminationReason.turn_limit
            )
            break
        turn = episode.turn
        elapsed = time.perf_counter() - t_start
        reply, fault, policy_ms = await _ask(policy, messages, episode.tools, limits, elapsed)
        if fault is not None or reply is None:
            kind, text = fault or ("invalid_reply", "no reply")
            failures.append(TurnFailure(turn=turn, kind=kind, detail=text))
            timings.append(TurnTiming(turn=turn, policy_ms=policy_ms, env_ms=0.0))
            policy_failures += 1
            if kind == "deadline" or policy_failures >= limits.max_policy_failures:
                reason, detail = TerminationReason(kind), text
                episode.end("aborted")
            continue

        prepared = _prepare(reply, turn, episode, used_ids)
        messages.append(prepared.message)
        for kind, text in prepared.notices:
            failures.append(TurnFailure(turn=turn, kind=kind, detail=_short(text)))
        t1 = time.perf_counter()
        ran = _execute(prepared, episode, messages)
        env_ms = (time.perf_counter() - t1) * 1000.0
        timings.append(TurnTiming(turn=turn, policy_ms=policy_ms, env_ms=env_ms))
        if not prepared.calls:
            kind, text = prepared.notices[0] if prepared.notices else ("no_tool_call", "")
            messages.append(ChatMessage(role="user", content=_nudge(kind, text, episode)))
        idle = 0 if ran else idle + 1
        if limits.max_idle_turns is not None and idle >= limits.max_idle_turns:
            reason = TerminationReason.no_progress
            detail = f"{idle} turns in a row without a tool call that ran"
            episode.end("aborted")
        elif episode.done:
            reason = TerminationReason.terminated

    t_grade = time.perf_counter()
    tokens = episode.recommended
    ids = [episode.resolve(t) for t in tokens]
    products = env.catalog.get([i for i in ids if i is not None]) if ids else []
    by_id = {p.product_id: p for p in products if p is not None}
    outcome = grade(task, [by_id.get(i) if i else None for i in ids], matcher)
    grade_ms = (time.perf_counter() - t_grade) * 1000.0

    return Trajectory(
        episode_id=episode.id,
        task_id=task.id,
        cluster=task.cluster,
        validator_hotkey=validator_hotkey,
        miner_uid=miner_uid,
        miner_hotkey=miner_hotkey,
        block=block,
        intent=task.intent,
        query=task.query,
        split=task.split,
        agent=str(getattr(policy, "name", type(policy).__name__)),
        system_prompt_version=episode.system_prompt_version,
        tools=tools,
        messages=messages,
        tool_log=_tool_log(episode),
        failures=failures,
        recommended=tokens,
        recommended_ids=ids,
        token_map=episode.token_map(),
        status=episode.status,
        termination=reason,
        termination_detail=detail,
        turns=episode.turn,
        outcome=outcome,
        timings=Timings(
            started_at=started_at,
            total_ms=(time.perf_counter() - t_start) * 1000.0,
            policy_ms=sum(t.policy_ms for t in timings),
            env_ms=sum(t.env_ms for t in timings),
            grade_ms=grade_ms,
            turns=timings,
        ),
    )


def _tool_log(episode: Episode) -> list[ToolLogEntry]:
    return [
        ToolLogEntry(
            turn=r.turn,
            name=r.name,
            arguments=r.arguments,
            result_digest=r.digest,
            error=r.error,
            latency_ms=r.latency_ms,
        )
        for r in episode.log
    ]

