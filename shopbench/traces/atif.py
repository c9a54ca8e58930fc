"""Episodes as ATIF v1.7 documents (the Agent Trajectory Interchange Format, Harbor RFC 0001).

Harbor's agents write ATIF; Docent's SDK and Inspect Scout read it. :func:`to_atif` turns
one signed :class:`~shopbench.records.trajectory.Trajectory` into one ATIF trajectory, built
with the ``atif`` package's own models (``extra="forbid"`` throughout), so what it returns
has passed their checks: sequential step ids, agent-only fields only on agent steps, every
observation's ``source_call_id`` among its step's tool calls.

The steps are the conversation, message for message: the system prompt a ``system`` step,
the query and every later user message (the loop's nudges after a turn without a tool call)
``user`` steps, each assistant turn an ``agent`` step whose ``observation.results`` are the
tool messages that answered it. On a clarify task the shopper's answers to ``ask_shopper``
(the tool messages the validator's log binds to an answered ``ask_shopper`` call) are
``user`` steps after the agent step that asked, ``extra.shopbench.tool_call_id`` naming the
call. A turn on which the policy gave no message at all (it
raised, timed out, replied garbage, ran out of time) has no step: the agent said nothing
and saw nothing; it is in ``extra.shopbench.failures``. Timestamps come from the turn
timings (the moment each reply arrived), so they leave out the loop's own overhead.

Everything ATIF has no field for is under one key, ``"shopbench"``, in each ``extra``; the
root's carries the grade, the ids and the record's signature with the sha256 of its
signing payload, which ties the document to the signed record. The mapping is tabled in
docs/archive.md ("ATIF export").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

import shopbench
from shopbench.archive.errors import SinkError
from shopbench.archive.layout import from_table
from shopbench.chat import ChatMessage, ToolCall, read_arguments
from shopbench.packs.pack import pack_of
from shopbench.records.binding import bind_tool_messages
from shopbench.records.trajectory import Timings, ToolLogEntry, Trajectory, TurnFailure

if TYPE_CHECKING:
    import atif

ATIF_VERSION = "ATIF-v1.7"
"""The ``schema_version`` every document carries."""
EXTRA_KEY = "shopbench"
"""The one key of every ``extra`` this module writes."""
INSTALL_HINT = "pip install 'shopbench[api]' (or atif==1.7.0)"

NO_MESSAGE_KINDS = frozenset({"policy_error", "policy_timeout", "invalid_reply", "deadline"})
"""The turn failures the loop records for a turn that produced no assistant message
(:mod:`shopbench.trajectory.loop`): such a turn has no step of its own."""

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")

NOTES = (
    "Converted from a signed shopbench trajectory record. extra.shopbench.signature."
    "payload_sha256 is the sha256 of the record's signing payload (the bytes its signature "
    "covers). Turns on which the policy gave no message have no step; they are listed in "
    "extra.shopbench.failures. Timestamps are derived from the turn timings."
)


def load_atif() -> Any:
    """The ``atif`` package; SinkError saying how to install it when it is missing."""
    try:
        import atif
    except ImportError:
        raise SinkError(f"the ATIF export needs the atif package: {INSTALL_HINT}") from None
    return atif


def payload_sha256(t: Trajectory) -> str:
    """sha256 (hex) of `t`'s signing payload, the bytes its signature covers."""
    return hashlib.sha256(t.signing_payload()).hexdigest()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")


class _Clock:
    """When each turn's reply arrived and when the turn ended, from the turn timings."""

    def __init__(self, timings: Timings) -> None:
        self.start = timings.started_at
        self.reply: dict[int, float] = {}
        self.end: dict[int, float] = {}
        elapsed = 0.0
        for x in timings.turns:
            self.reply[x.turn] = self.start + (elapsed + x.policy_ms) / 1000
            elapsed += x.policy_ms + x.env_ms
            self.end[x.turn] = self.start + elapsed / 1000

    def at(self, turn: int | None, *, reply: bool) -> str | None:
        if turn is None:
            return _iso(self.start)
        ts = (self.reply if reply else self.end).get(turn)
        return None if ts is None else _iso(ts)


def _message_turns(t: Trajectory) -> list[int]:
    """The turn number of each assistant message, in order: every turn played but those on
    which the policy gave no message."""
    silent = {f.turn for f in t.failures if f.kind in NO_MESSAGE_KINDS}
    return [n for n in range(1, t.turns + 1) if n not in silent]


def _arguments(call: ToolCall) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The call's arguments as ATIF's object, and the tool call's extra: the text the model
    wrote, when it is not a JSON object. ``NaN`` and ``Infinity``, which Python's reader takes
    and a JSON dump would turn into ``null``, make the text not JSON."""
    text = call.function.arguments
    value, why = read_arguments(text)
    if value is None:
        return {}, {EXTRA_KEY: {"arguments_text": text, "arguments_error": why}}
    return value, None


def _failure(f: TurnFailure) -> dict[str, Any]:
    return f.model_dump(mode="json")


def _result(
    m: ChatMessage, entry: ToolLogEntry | None, calls: set[str], models: Any
) -> atif.ObservationResult:
    """One tool message as an observation result, with the tool-log entry backing it."""
    extra: dict[str, Any] = {"tool": m.name, "logged": entry is not None}
    if entry is not None:
        extra |= {
            "result_digest": entry.result_digest, "error": entry.error,
            "latency_ms": entry.latency_ms,
        }  # fmt: skip
    answered = m.tool_call_id if m.tool_call_id in calls else None
    if answered is None:
        extra["tool_call_id"] = m.tool_call_id  # answers no call of its turn
    result: atif.ObservationResult = models.ObservationResult(
        source_call_id=answered, content=m.content or "", extra={EXTRA_KEY: extra}
    )
    return result


class _Steps:
    """The ATIF steps of one record, built message by message: an agent step is made once
    the tool messages answering it have been read."""

    def __init__(self, t: Trajectory, models: Any) -> None:
        self.t = t
        self.models = models
        self.steps: list[atif.Step] = []
        self.clock = _Clock(t.timings)
        self.bound = bind_tool_messages(t.messages, t.tool_log)
        self.timing = {x.turn: x for x in t.timings.turns}
        self.turns = iter(_message_turns(t))
        self.turn: int | None = None  # the turn of the latest assistant message
        self.pending: dict[str, Any] | None = None  # that message's step, not yet made
        self.calls: set[str] = set()  # its call ids
        self.results: list[atif.ObservationResult] = []  # the tool messages since it
        self.voiced: list[dict[str, Any]] = []  # others' words since it (user steps: the shopper's)

    def _add(self, **fields: Any) -> None:
        self.steps.append(self.models.Step(step_id=len(self.steps) + 1, **fields))

    def _flush(self) -> None:
        """Make the pending agent step with the results gathered; results that follow no
        agent turn become a system step's observation, as ATIF allows."""
        observation = self.models.Observation(results=self.results) if self.results else None
        if self.pending is not None:
            self._add(**self.pending, observation=observation)
        elif observation is not None:
            self._add(source="system", message="", observation=observation,
                      timestamp=self.clock.at(self.turn, reply=False))  # fmt: skip
        for words in self.voiced:
            self._add(**words)
        self.pending, self.calls, self.results, self.voiced = None, set(), [], []

    def message(self, index: int, m: ChatMessage) -> None:
        if m.role == "tool":
            entry = self.bound.get(index)
            log = self.t.tool_log[entry] if entry is not None else None
            pack = pack_of(log.name) if log is not None else None
            voice = pack.voice(m, log) if pack is not None and log is not None else None
            if voice is not None:
                self.voiced.append({
                    "source": "user", "message": voice.message,
                    "timestamp": self.clock.at(self.turn, reply=False),
                    "extra": {EXTRA_KEY: voice.extra},
                })  # fmt: skip
                return
            self.results.append(_result(m, log, self.calls, self.models))
            return
        self._flush()
        if m.role == "assistant":
            self._agent(m)
        else:  # system, user: the prompt and the query, and the loop's nudges
            self._add(source=m.role, message=m.content or "",
                      timestamp=self.clock.at(self.turn, reply=False))  # fmt: skip

    def _agent(self, m: ChatMessage) -> None:
        self.turn = next(self.turns, None)
        calls = []
        for c in m.tool_calls or []:
            arguments, extra = _arguments(c)
            calls.append(self.models.ToolCall(
                tool_call_id=c.id, function_name=c.function.name, arguments=arguments,
                extra=extra,
            ))  # fmt: skip
        info: dict[str, Any] = {"turn": self.turn}
        timing = self.timing.get(self.turn) if self.turn is not None else None
        if timing is not None:
            info |= {"policy_ms": timing.policy_ms, "env_ms": timing.env_ms}
        info["failures"] = [_failure(f) for f in self.t.failures if f.turn == self.turn]
        self.calls = {c.id for c in m.tool_calls or []}
        self.pending = {
            "source": "agent", "message": m.content or "",
            "reasoning_content": m.reasoning_content, "tool_calls": calls or None,
            "timestamp": self.clock.at(self.turn, reply=True), "extra": {EXTRA_KEY: info},
        }  # fmt: skip

    def build(self) -> list[atif.Step]:
        for i, m in enumerate(self.t.messages):
            self.message(i, m)
        self._flush()
        return self.steps


MODEL_DECLARED_BY = "the miner's agent card (self-declared, not checked)"
"""Who named an episode's model: a miner says what it runs, and nothing verifies it."""


def _agent_extra(t: Trajectory) -> dict[str, Any]:
    out: dict[str, Any] = {"system_prompt_version": t.system_prompt_version}
    if t.agent_revision is not None:
        out["model_revision"] = t.agent_revision  # ATIF's agent has a model, not a revision
    if t.agent_model is not None:
        out["model_declared_by"] = MODEL_DECLARED_BY
    return out


def _root_extra(t: Trajectory) -> dict[str, Any]:
    judge = None
    if t.judge is not None:
        judge = {
            "score": t.judge.score, "gates": t.judge.gates, "stopped_at": t.judge.stopped_at,
            "judge_id": t.judge.judge_id,
        }  # fmt: skip
    signer = t.signature.signer if t.signature is not None else None
    return {
        "record_schema_version": t.schema_version,
        "episode_id": t.episode_id,
        "task": t.card().model_dump(mode="json"),
        "bucket": t.bucket,
        "miner": {"uid": t.miner_uid, "hotkey": t.miner_hotkey},
        "validator_hotkey": t.validator_hotkey,
        "block": t.block,
        "epoch": t.epoch,
        "outcome": {
            "success": t.outcome.success, "rule_scores": t.outcome.rule_scores,
            "mean_rule": t.outcome.mean_rule, "reason": t.outcome.reason,
        },
        "judge": judge,
        "score": t.score,
        "termination": t.termination.value,
        "termination_detail": t.termination_detail,
        "status": t.status,
        "recommended": t.recommended,
        "recommended_ids": t.recommended_ids,
        "failures": [_failure(f) for f in t.failures],
        "diagnosis": t.diagnosis.model_dump(mode="json"),
        "signature": {
            "signer": signer,
            "signature": t.signature.signature if t.signature is not None else None,
            "payload_sha256": payload_sha256(t),
        },
    }  # fmt: skip


def _reward(t: Trajectory, metrics: dict[str, Any]) -> dict[str, Any]:
    """The trajectory's aggregate metrics: the reward where ATIF readers look for one
    (``final_metrics.extra.reward``: 1.0 when the outcome grade is a success, else 0.0, as
    ShoppingBench scores an episode), the success itself, the validator's combined score
    (absent when unjudged), and our own figures under ``shopbench``."""
    out: dict[str, Any] = {"reward": reward(t), "success": t.outcome.success}
    if t.score is not None:
        out["score"] = t.score
    out[EXTRA_KEY] = metrics
    return out


def to_atif(t: Trajectory) -> atif.Trajectory:
    """`t` as one ATIF v1.7 trajectory (see the module docstring), validated by the
    ``atif`` package's models; SinkError when the package is not installed."""
    models = load_atif()
    steps = _Steps(t, models).build()
    timings = t.timings
    metrics = {
        "turns": t.turns, "tool_calls": t.tool_calls,
        "tool_errors": sum(1 for e in t.tool_log if e.error is not None),
        "total_ms": timings.total_ms, "policy_ms": timings.policy_ms,
        "env_ms": timings.env_ms, "grade_ms": timings.grade_ms,
    }  # fmt: skip
    document: atif.Trajectory = models.Trajectory(
        schema_version=ATIF_VERSION,
        session_id=t.episode_id,
        trajectory_id=t.episode_id,
        agent=models.Agent(
            name=t.agent, version=shopbench.__version__, model_name=t.agent_model,
            tool_definitions=t.tools, extra={EXTRA_KEY: _agent_extra(t)},
        ),
        steps=steps,
        notes=NOTES,
        final_metrics=models.FinalMetrics(total_steps=len(steps), extra=_reward(t, metrics)),
        extra={EXTRA_KEY: _root_extra(t)},
    )  # fmt: skip
    return document


def atif_document(t: Trajectory) -> dict[str, Any]:
    """`t` as an ATIF document's JSON object (unset fields left out)."""
    document: dict[str, Any] = to_atif(t).model_dump(mode="json", exclude_none=True)
    return document


def atif_trial_name(episode_id: str) -> str:
    """An episode's name as a file or folder: the id, or, for an id that is not a plain
    file name, ``episode-<sha256 of the id, 16 hex>`` (the id itself is the document's
    ``trajectory_id``)."""
    if _SAFE_NAME.fullmatch(episode_id) and not episode_id.endswith("."):
        return episode_id
    return f"episode-{hashlib.sha256(episode_id.encode('utf-8')).hexdigest()[:16]}"


def atif_file_name(episode_id: str) -> str:
    """The file name one episode's document is served under: ``<trial name>.json``."""
    return f"{atif_trial_name(episode_id)}.json"


TRAJECTORY_FILE = "agent/trajectory.json"
"""An episode's ATIF document inside its trial folder (Harbor's trial layout)."""
REWARD_FILE = "verifier/reward.json"
"""Its reward inside the trial folder, as Harbor's verifier writes it: ``{"reward": r}``."""
RESULT_FILE = "result.json"
"""Its trial result inside the trial folder: the task, the times and the verifier's rewards,
in the fields of Harbor's trial ``result.json``."""


def reward(t: Trajectory) -> float:
    """The episode's reward in every ATIF export: 1.0 when the outcome grade is a success,
    else 0.0, as ShoppingBench scores an episode."""
    return 1.0 if t.outcome.success else 0.0


def trial_result(t: Trajectory, trial: str) -> dict[str, Any]:
    """The trial's ``result.json``: Harbor's fields for the task, the episode's times (the
    agent's turns are the whole episode here) and the verifier's rewards."""
    timings = t.timings
    started = _iso(timings.started_at)
    finished = _iso(timings.started_at + timings.total_ms / 1000)
    return {
        "trial_name": trial, "task_name": t.task_id, "started_at": started,
        "finished_at": finished,
        "agent_execution": {"started_at": started, "finished_at": finished},
        "verifier_result": {"rewards": {"reward": reward(t)}},
    }  # fmt: skip


def _write_json(path: Path, data: Any, indent: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, indent=indent)
    path.write_text(text + "\n", encoding="utf-8")


def write_atif(trajectories: Iterable[Trajectory], out: Path) -> list[Path]:
    """One trial folder per episode in the folder `out` (new or empty), in Harbor's layout
    that ATIF readers find by default: ``<trial>/agent/trajectory.json`` (the document),
    ``<trial>/verifier/reward.json`` and ``<trial>/result.json``, the trial named by
    :func:`atif_trial_name`. Returns the documents' paths; SinkError when `out` holds
    anything already or two episodes would share a folder."""
    load_atif()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SinkError(f"{out}: the ATIF export writes a new or empty folder; this one is not")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    paths: list[Path] = []
    for t in trajectories:
        name = atif_trial_name(t.episode_id)
        if name in written:
            raise SinkError(
                f"episodes {written[name]!r} and {t.episode_id!r} would both be {out / name}"
            )
        written[name] = t.episode_id
        trial = out / name
        _write_json(trial / TRAJECTORY_FILE, atif_document(t), indent=1)
        _write_json(trial / REWARD_FILE, {"reward": reward(t)})
        _write_json(trial / RESULT_FILE, trial_result(t, name), indent=1)
        paths.append(trial / TRAJECTORY_FILE)
    return paths


INDEX_FILE = "data/train-00000-of-00001.parquet"
"""An ATIF export's table of its documents, which ``datasets.load_dataset(folder)`` loads."""


def export_atif(table: pa.Table, out: Path) -> Path:
    """Every episode of `table` (the layout's columns) as its ATIF file in `out`, and
    :data:`INDEX_FILE`: one row per document (``episode_id``, ``file``, ``reward``,
    ``success``, ``score`` and the ``trajectory`` itself as an Arrow JSON column, which
    ``datasets`` decodes to the document's object however its tool arguments vary)."""
    trajectories = list(from_table(table))
    paths = write_atif(trajectories, out)
    index = pa.table({
        "episode_id": pa.array([t.episode_id for t in trajectories], pa.string()),
        "file": pa.array([p.relative_to(out).as_posix() for p in paths], pa.string()),
        "reward": pa.array([reward(t) for t in trajectories], pa.float64()),
        "success": pa.array([t.outcome.success for t in trajectories], pa.bool_()),
        "score": pa.array([t.score for t in trajectories], pa.float64()),
        "trajectory": pa.array([p.read_text(encoding="utf-8") for p in paths], pa.json_()),
    })  # fmt: skip
    (out / INDEX_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(index, out / INDEX_FILE, compression="zstd")
    return out


def atif_line(t: Trajectory) -> bytes:
    """`t`'s ATIF document as one compact JSON line, newline included."""
    line = json.dumps(atif_document(t), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return line.encode("utf-8") + b"\n"


def atif_lines(trajectories: Sequence[Trajectory]) -> bytes:
    """The documents of `trajectories` as JSON lines (one per episode)."""
    return b"".join(atif_line(t) for t in trajectories)
