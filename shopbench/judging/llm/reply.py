"""The judge's answer: the JSON schema it is asked for, and reading what comes back.

The schema lists every rubric criterion, in rubric order, each as ``{"reason", "verdict"}``
with the reason first: servers with structured output (vLLM's ``response_format`` of type
``json_schema``) generate properties in schema order, so the model writes its reason before
it commits to a verdict. Replies are read strictly first; when that fails (a server without
structured output, a model that wraps its JSON in prose, fences or ``<think>``), a tolerant
extractor looks for the first JSON object in the text that holds a judgement of every
criterion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.agents.format.markers import THINK_CLOSE, THINK_OPEN
from shopbench.judging.errors import JudgeUnavailable

SCHEMA_NAME = "shopbench_judgement"
MAX_REASON_CHARS = 600  # a reason is kept up to this length in the verdict
_MAX_STARTS = 64  # '{' positions tried by the extractor (bounds its work on garbage)
_THINK = re.compile(rf"{re.escape(THINK_OPEN)}.*?{re.escape(THINK_CLOSE)}", re.DOTALL)
_PASS = frozenset({"pass", "passed", "yes", "true", "met", "ok"})
_FAIL = frozenset({"fail", "failed", "no", "false", "not met"})

Verdict = Literal["pass", "fail"]


class CriterionAnswer(BaseModel):
    """The model's judgement of one criterion."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str
    verdict: Verdict


class Answer(BaseModel):
    """A whole strict reply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    criteria: dict[str, CriterionAnswer]
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Judgement:
    """A reply read: one answer per criterion (rubric order), the summary, and whether the
    tolerant extractor was needed."""

    answers: dict[str, CriterionAnswer]
    summary: str
    tolerant: bool


def response_schema(names: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a reply judging criteria `names`, in order, reason first."""
    item = {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
        },
        "required": ["reason", "verdict"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "criteria": {
                "type": "object",
                "properties": {n: item for n in names},
                "required": list(names),
                "additionalProperties": False,
            },
            "summary": {"type": "string"},
        },
        "required": ["criteria", "summary"],
        "additionalProperties": False,
    }


def response_format(names: Sequence[str]) -> dict[str, Any]:
    """The ``response_format`` request field asking for :func:`response_schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": response_schema(names), "strict": True},
    }


def _clip(reason: str) -> str:
    one_line = " ".join(reason.split())
    if len(one_line) <= MAX_REASON_CHARS:
        return one_line
    return one_line[: MAX_REASON_CHARS - 3] + "..."


def _strict(text: str, names: Sequence[str]) -> Judgement | None:
    try:
        answer = Answer.model_validate_json(text)
    except ValidationError:
        return None
    if list(answer.criteria) != list(names):
        return None
    answers = {
        n: a.model_copy(update={"reason": _clip(a.reason)}) for n, a in answer.criteria.items()
    }
    return Judgement(answers, _clip(answer.summary), tolerant=False)


def _verdict(value: Any) -> Verdict | None:
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, str):
        word = value.strip().strip(".").lower()
        if word in _PASS:
            return "pass"
        if word in _FAIL:
            return "fail"
    return None


def _entries(obj: Any) -> dict[str, Any] | None:
    """Criterion name → raw entry, from the shapes models produce: ``{"criteria": {...}}``,
    ``{"criteria": [{"name": ...}, ...]}``, or the criteria at the top level."""
    if not isinstance(obj, dict):
        return None
    inner = obj.get("criteria", obj)
    if isinstance(inner, list):
        out = {}
        for e in inner:
            if isinstance(e, dict) and isinstance(e.get("name"), str):
                out[e["name"]] = e
        return out
    return inner if isinstance(inner, dict) else None


def _tolerant_one(obj: Any, names: Sequence[str]) -> Judgement | None:
    entries = _entries(obj)
    if entries is None:
        return None
    answers: dict[str, CriterionAnswer] = {}
    for n in names:
        e = entries.get(n)
        if isinstance(e, dict):
            verdict = _verdict(e.get("verdict", e.get("passed", e.get("result"))))
            reason = e.get("reason", e.get("rationale", ""))
        else:
            verdict, reason = _verdict(e), ""
        if verdict is None:
            return None
        answers[n] = CriterionAnswer(reason=_clip(str(reason)), verdict=verdict)
    summary = obj.get("summary", "") if isinstance(obj, dict) else ""
    return Judgement(answers, _clip(str(summary)), tolerant=True)


def _objects(text: str) -> list[Any]:
    """Every JSON object that starts at a '{' of `text` and parses, in order of position."""
    decoder = json.JSONDecoder()
    found = []
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_STARTS:
        tries += 1
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            found.append(obj)
        start = text.find("{", start + 1)
    return found


def read_reply(text: str, names: Sequence[str]) -> Judgement:
    """The judgement in a reply's text. Raises ``JudgeUnavailable("bad_reply")`` saying what
    is missing when no object in it judges every criterion."""
    strict = _strict(text.strip(), names)
    if strict is not None:
        return strict
    cleaned = _THINK.sub("", text)
    for obj in _objects(cleaned):
        judged = _tolerant_one(obj, names)
        if judged is not None:
            return judged
    snippet = " ".join(text.split())[:80]
    raise JudgeUnavailable(
        "bad_reply",
        f"the reply judges not every criterion ({', '.join(names)}): {snippet!r}",
    )


class Completion(BaseModel):
    """The parts of a chat completion the judge reads."""

    model_config = ConfigDict(frozen=True)

    text: str
    finish_reason: str | None = None
    model: str | None = Field(default=None, description="the model the server says answered")


def read_completion(data: dict[str, Any], where: str) -> Completion:
    """The first choice's text (content, else reasoning) and finish reason; raises
    ``JudgeUnavailable("bad_reply")`` for a body that has none."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise JudgeUnavailable("bad_reply", f"{where}: the reply has no choices[0].message",
                               transient=True) from None
    if not isinstance(message, dict):
        raise JudgeUnavailable("bad_reply", f"{where}: choices[0].message is not an object")
    text = ""
    for key in ("content", "reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, list):  # content parts: keep the text ones
            value = "".join(p.get("text", "") for p in value if isinstance(p, dict)
                            and isinstance(p.get("text"), str))
        if isinstance(value, str) and value.strip():
            text = value
            break
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    model = data.get("model")
    return Completion(text=text, finish_reason=finish if isinstance(finish, str) else None,
                      model=model if isinstance(model, str) else None)
