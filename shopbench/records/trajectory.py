"""The trajectory record: one archived episode, as every later stage reads it.

Everything downstream consumes :class:`Trajectory` records: the validator scores them, the
judges read them, the archive stores and signs them, curation filters them, distillation
trains on them and evaluation counts them. This module holds the record alone, with the
canonical bytes its signature covers; the loop that produces it is
:mod:`shopbench.trajectory.loop`.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from shopbench.chat import MAX_REQUEST_BYTES, ChatMessage
from shopbench.records.diagnosis import Diagnosis, diagnose
from shopbench.records.outcome import Outcome
from shopbench.records.task import Intent, Split, TaskCard
from shopbench.records.verdict import Verdict

SCHEMA_VERSION = 1
"""Version of the :class:`Trajectory` layout; readers refuse records of another version."""

MAX_DETAIL_CHARS = 500
"""A failure's description, e.g. an exception message, is cut to this many characters."""

MAX_AGENT_NAME_CHARS = 128
"""Characters of a model name or revision an agent card gives (the wire's limit too)."""

MAX_FIELD_BYTES = MAX_REQUEST_BYTES
"""Bytes of any one text a record holds (a message, a tool call's arguments, a JSON column).
Every message went to the miner inside one request of at most ``MAX_REQUEST_BYTES``, and the
rest (tool schemas, outcome, verdict, timings) is far smaller; readers of an archive refuse a
row holding more before they build it (:func:`~shopbench.archive.layout.table_rows`)."""

MAX_RECORD_BYTES = 4 * MAX_REQUEST_BYTES
"""Bytes of all the texts of one record together: the conversation (below one request, and
the last turn's reply and observations), the tool log and the open shapes, with room."""


def printable_name(value: str) -> str:
    """`value` when every character of it is printable; ValueError naming the first that
    is not."""
    # str.isprintable is False for control characters, line breaks, and the format
    # characters (bidi overrides, zero-width) that make one name look like another.
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise ValueError(
            f"holds the unprintable character U+{ord(bad):04X}: a model name or revision is "
            "one line of printable text"
        )
    return value


AgentName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_AGENT_NAME_CHARS),
    AfterValidator(printable_name),
]
"""A model name or revision as an agent card gives it: 1 to :data:`MAX_AGENT_NAME_CHARS`
printable characters (a miner writes it; every reader shows it)."""

LATE_FIELDS = ("agent_model", "agent_revision")
"""Fields added after records were first signed: left out of the signing payload while None,
so a record signed before they existed verifies unchanged."""


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
    """Too many turns in a row without a tool call that ran (RunLimits.max_idle_turns)."""
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


ToolErrorCode = Literal[
    "unknown_tool", "bad_argument", "invalid_id", "limit", "not_allowed", "episode_over"
]
"""The codes a tool-log entry's ``error`` takes (the environment's tool errors,
:mod:`shopbench.env.errors`)."""


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
    epoch: int | None = Field(
        default=None, ge=0, description="the rotation epoch the episode was played in"
    )
    bucket: int | None = Field(
        default=None, ge=0,
        description="the rotation bucket of the task's product group (None: not a live task)",
    )
    # the task, as the agent could know it
    intent: Intent
    query: str
    split: Split
    # the agent and the conversation
    agent: str = Field(description="the policy's name")
    agent_model: AgentName | None = Field(
        default=None,
        description="the model the miner's agent card named when the validator asked for it "
        "in the episode's round (GET /card); None: no card was read, or not a miner",
    )  # fmt: skip
    agent_revision: AgentName | None = Field(
        default=None,
        description="the model revision that card named; None: none given",
    )  # fmt: skip
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
    judge: Verdict | None = None
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
    def diagnosis(self) -> Diagnosis:
        """Why the episode ended as it did (:func:`~shopbench.records.diagnosis.diagnose`
        over the signed outcome, termination, recommendation and verdict)."""
        return diagnose(
            self.outcome, self.termination.value, recommended=self.recommended, judge=self.judge
        )

    @property
    def tool_calls(self) -> int:
        """Tool calls the environment ran (errors included)."""
        return len(self.tool_log)

    def signing_payload(self) -> bytes:
        """The canonical bytes a signer signs: the record without its signature (and without
        the :data:`LATE_FIELDS` that are None) as JSON with sorted keys, no spaces, UTF-8.
        Equal records give equal bytes."""
        data = signed_fields(self.model_dump(mode="json", exclude={"signature"}))
        text = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")

    def quick_signing_payload(self) -> bytes | None:
        """The same bytes as :meth:`signing_payload` for nearly every record, written by
        orjson at a fraction of the cost; the two can differ only in how a number is
        written (``1e-05`` against ``0.00001``), and None when orjson cannot write the record
        at all. A check that fails over these bytes must try :meth:`signing_payload`."""
        return quick_canonical(self.model_dump(mode="json", exclude={"signature"}))


def signed_fields(data: dict[str, Any]) -> dict[str, Any]:
    """A record's plain dict as its signature covers it: without ``signature``, and without
    each of the :data:`LATE_FIELDS` that is None (a record written before it existed)."""
    return {
        k: v for k, v in data.items()
        if k != "signature" and not (v is None and k in LATE_FIELDS)
    }  # fmt: skip


def quick_canonical(data: dict[str, Any]) -> bytes | None:
    """`data` as sorted-key compact JSON written by orjson, as its signature covers it
    (:func:`signed_fields`; what :meth:`Trajectory.quick_signing_payload` writes), None when
    orjson cannot write it."""
    try:
        return orjson.dumps(signed_fields(data), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return None
