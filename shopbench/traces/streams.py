"""The bytes of each export format, for the trace API's streams and ``traces export``'s files.

- JSONL: one :class:`~shopbench.records.trajectory.Trajectory` per line, what
  :func:`~shopbench.archive.jsonl.read_trajectories` reads;
- Parquet: the shard layout's columns, one row group per streamed batch;
- ``chat``: one row per episode — ``messages`` (the OpenAI chat list: reasoning in
  ``reasoning_content``, tool calls with their arguments as JSON text, tool results) and
  ``tools`` (the function schemas offered), what ``apply_chat_template`` and TRL read;
- ``eval``: an Inspect AI log (``.eval``, written with ``inspect_ai``'s own log API), one
  sample per episode: the conversation as Inspect chat messages, the final turn as the
  output, scores ``outcome`` (1 on success), ``rule``, ``judge`` and ``score``, the ids and
  the agent (its name, and the model and revision its miner's card named) in the sample's
  metadata, the model as the output's and, when the log holds one, the log's model, and
  the log's results scored (each scorer's mean, success rate as the headline), so
  Inspect's viewer shows them;
- ``atif``: one ATIF v1.7 document per episode, one per line (:mod:`shopbench.traces.atif`).

Which format is which, and which of these each uses: :mod:`shopbench.traces.formats`.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pydantic_core

from shopbench.archive.layout import SCHEMA, from_table, record_dicts
from shopbench.chat import read_arguments
from shopbench.records.trajectory import Trajectory
from shopbench.traces.atif import atif_lines, load_atif


def chat_row(record: Trajectory | Mapping[str, Any]) -> dict[str, Any]:
    """The episode (a record, or its dict as :func:`~shopbench.archive.layout.record_dicts`
    gives it) as one conversational row (``messages``, ``tools``): each message as an
    OpenAI-compatible server takes it, unset fields left out; ``apply_chat_template`` and
    TRL's ``SFTTrainer`` read it as it stands."""
    if isinstance(record, Trajectory):
        return {"messages": [m.to_openai() for m in record.messages], "tools": record.tools}
    messages = [{k: v for k, v in m.items() if v is not None} for m in record["messages"]]
    return {"messages": messages, "tools": record["tools"]}


def chat_lines(tables: Iterable[pa.Table]) -> Iterator[bytes]:
    """Each episode of `tables` (the layout's columns) as its chat row, one JSON line each."""
    for table in tables:
        rows = [pydantic_core.to_json(chat_row(r)) for r in record_dicts(table)]
        yield b"\n".join(rows) + b"\n"


def atif_chunks(tables: Iterable[pa.Table]) -> Iterator[bytes]:
    """Each episode of `tables` (the layout's columns) as its ATIF document, one JSON line
    each; SinkError at once, before anything streams, when the atif package is missing."""
    load_atif()
    return (atif_lines(from_table(table)) for table in tables if table.num_rows)


def record_lines(tables: Iterable[pa.Table]) -> Iterator[bytes]:
    """The ``line`` column of `tables` — each record's JSON text and its newline, by
    :func:`~shopbench.archive.layout.record_json_sql` — as bytes, straight from the Arrow
    buffer that holds the lines back to back (no Python string per line)."""
    for table in tables:
        for chunk in table.column("line").chunks:
            if chunk.null_count:
                raise ValueError("a record's JSON line is null")
            array = chunk.cast(pa.large_string()) if chunk.type == pa.string_view() else chunk
            offsets = array.buffers()[1]
            width = 8 if pa.types.is_large_string(array.type) else 4
            first = int.from_bytes(offsets[array.offset * width :][:width], "little", signed=True)
            last = int.from_bytes(
                offsets[(array.offset + len(array)) * width :][:width], "little", signed=True
            )
            yield array.buffers()[2][first:last].to_pybytes()


class _Chunks(io.RawIOBase):
    """A write-only file that keeps what is written until it is taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.parts.append(bytes(b))
        return len(b)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def parquet_chunks(tables: Iterable[pa.Table]) -> Iterator[bytes]:
    """One Parquet file (zstd, the layout's columns) holding every row of `tables`, in
    pieces as each batch is written."""
    sink = _Chunks()
    writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), SCHEMA, compression="zstd")
    try:
        for table in tables:
            writer.write_table(table.select(SCHEMA.names).cast(SCHEMA))  # in layout order
            if piece := sink.take():
                yield piece
    finally:
        writer.close()
    yield sink.take()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def _inspect_messages(t: Trajectory) -> list[Any]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        ContentText,
    )
    from inspect_ai.tool import ToolCall

    names = {c.id: c.function.name for m in t.messages for c in m.tool_calls or []}
    out: list[Any] = []
    for m in t.messages:
        if m.role == "system":
            out.append(ChatMessageSystem(content=m.content or ""))
        elif m.role == "user":
            out.append(ChatMessageUser(content=m.content or ""))
        elif m.role == "tool":
            out.append(ChatMessageTool(
                content=m.content or "", tool_call_id=m.tool_call_id,
                function=m.name or names.get(m.tool_call_id or ""),
            ))  # fmt: skip
        else:
            parts: list[Any] = []
            if m.reasoning_content:
                parts.append(ContentReasoning(reasoning=m.reasoning_content))
            if m.content:
                parts.append(ContentText(text=m.content))
            calls = []
            for c in m.tool_calls or []:
                parsed, error = read_arguments(c.function.arguments)
                arguments = parsed if parsed is not None else {}
                calls.append(ToolCall(
                    id=c.id, function=c.function.name, arguments=arguments, parse_error=error,
                ))  # fmt: skip
            out.append(ChatMessageAssistant(content=parts or "", tool_calls=calls or None))
    return out


def _model(t: Trajectory) -> str:
    """What Inspect names as an episode's model: the one its miner's card named, else the
    agent's name (a local policy, or a record from before cards were kept)."""
    return t.agent_model or t.agent


def _sample(t: Trajectory) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import Score

    messages = _inspect_messages(t)
    last = next((m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)), None)
    output = ModelOutput(
        model=_model(t),
        choices=[ChatCompletionChoice(
            message=last or ChatMessageAssistant(content=""), stop_reason="stop",
        )],
    )  # fmt: skip
    scores = {
        "outcome": Score(
            value=1.0 if t.outcome.success else 0.0, answer=",".join(t.recommended),
            explanation=t.outcome.reason or "every constraint holds",
        ),
        "rule": Score(value=t.outcome.mean_rule),
    }  # fmt: skip
    if t.judge is not None:
        scores["judge"] = Score(value=t.judge.score, explanation=t.judge.rationale)
    if t.score is not None:
        scores["score"] = Score(value=t.score)
    return EvalSample(
        id=t.episode_id, epoch=1, input=t.query, target="", messages=messages, output=output,
        scores=scores,
        metadata={
            "task_id": t.task_id, "intent": t.intent, "split": t.split, "cluster": t.cluster,
            "validator_hotkey": t.validator_hotkey, "miner_uid": t.miner_uid,
            "miner_hotkey": t.miner_hotkey, "block": t.block, "epoch": t.epoch,
            "agent": t.agent, "agent_model": t.agent_model, "agent_revision": t.agent_revision,
            "termination": t.termination.value, "turns": t.turns,
            "gates": t.judge.gates if t.judge is not None else {},
        },
        started_at=_iso(t.timings.started_at),
        completed_at=_iso(t.timings.started_at + t.timings.total_ms / 1000),
        total_time=t.timings.total_ms / 1000, working_time=t.timings.policy_ms / 1000,
    )  # fmt: skip


def _results(samples: list[Any]) -> list[Any]:
    """Each scorer's mean over the samples it scored (``outcome``'s is the success rate, the
    log's headline), as Inspect's viewer and ``inspect log`` readers show a run's results."""
    from inspect_ai.log import EvalMetric, EvalScore

    out = []
    for name in ("outcome", "score", "judge", "rule"):
        values = [float(s.scores[name].value) for s in samples if name in s.scores]
        if not values:
            continue
        metric = "accuracy" if name == "outcome" else "mean"
        out.append(EvalScore(
            name=name, scorer=name, scored_samples=len(values),
            unscored_samples=len(samples) - len(values),
            metrics={metric: EvalMetric(name=metric, value=sum(values) / len(values))},
        ))  # fmt: skip
    return out


def eval_log(trajectories: list[Trajectory], task: str = "shopbench/archive") -> bytes:
    """The episodes as one Inspect AI ``.eval`` log's bytes (see the module docstring)."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalResults,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )

    samples = [_sample(t) for t in trajectories]

    agents = sorted({t.agent for t in trajectories})
    models = sorted({_model(t) for t in trajectories})
    starts = [t.timings.started_at for t in trajectories] or [0.0]
    ends = [t.timings.started_at + t.timings.total_ms / 1000 for t in trajectories] or [0.0]
    n = len(trajectories)
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created=_iso(min(starts)), task=task,
            dataset=EvalDataset(name="shopbench-archive", samples=n,
                                sample_ids=[t.episode_id for t in trajectories]),
            model=models[0] if len(models) == 1 else "shopbench/miners",
            config=EvalConfig(), metadata={"agents": agents, "models": models},
        ),
        results=EvalResults(total_samples=n, completed_samples=n, scores=_results(samples)),
        stats=EvalStats(started_at=_iso(min(starts)), completed_at=_iso(max(ends))),
        samples=samples,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="shopbench-eval-") as tmp:
        path = Path(tmp) / "episodes.eval"
        write_eval_log(log, str(path), format="eval")
        return path.read_bytes()
