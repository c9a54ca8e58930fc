"""A miner's report: its episodes, its scores, why it failed and which judge gates stopped it.

:func:`miner_report` builds a :class:`MinerReport` from the archived trajectories of one
miner (uid), so the numbers are testable without any HTML; the offline page
(:mod:`shopbench.traces.api.report_page`) only lays them out. Every string a miner wrote
(reasoning, content, tool arguments, the declared status, the agent's name and the model its
card named), and every one
that may quote it (the judge's evidence, the diagnosis's detail), is cut to
:attr:`ReportConfig.max_text_chars` here, with control and bidirectional-override characters
replaced, before any template sees it; the template escapes it.

The scores are the archive's own: ASR is successes over episodes, overall and per intent;
the failures are :attr:`~shopbench.records.trajectory.Trajectory.diagnosis` (one closed set
of kinds, with the failing constraint); the gates are the judge's verdict (``gates``,
``stopped_at``, ``criteria`` with their evidence). The EMA is rebuilt by the
leaderboard's fold (:func:`~shopbench.traces.ema.ema_rounds`): a round is one block of the
miner's episodes, its score their mean, folded with the release's ``ema_alpha``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import clip
from shopbench.records.diagnosis import DIAGNOSIS_KINDS
from shopbench.records.trajectory import MAX_AGENT_NAME_CHARS, Trajectory
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.traces.ema import RoundEma, ema_rounds

_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


class ReportConfig(BaseModel):
    """How much of each episode a miner's report shows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_text_chars: int = Field(
        default=600, ge=40, le=20_000,
        description="miner-written text (reasoning, content, arguments, status, agent name) "
        "and the judge's evidence are cut to this many characters",
    )  # fmt: skip
    examples_per_gate: int = Field(
        default=3, ge=0, le=100, description="episodes shown as examples under each failed gate"
    )
    ema_alpha: float | None = Field(
        default=None, gt=0, le=1,
        description="the EMA's weight of a round (default: the release's ema_alpha)",
    )  # fmt: skip


def cut(text: str | None, limit: int) -> str:
    """`text` with control and bidi-override characters replaced by U+FFFD, cut to `limit`
    characters (the last one ``…`` when cut)."""
    return clip(_UNPRINTABLE.sub("\ufffd", text or ""), limit)


class CallLine(BaseModel):
    """One tool call of a turn, as the miner wrote it."""

    name: str
    arguments: str


class TurnLine(BaseModel):
    """One assistant turn, cut."""

    number: int
    reasoning: str
    content: str
    calls: list[CallLine]


class CriterionLine(BaseModel):
    """One judge criterion of one episode."""

    name: str
    kind: str
    passed: bool
    evidence: str


class EpisodeLine(BaseModel):
    """One episode of the miner: what it was asked, how it scored and why it ended so."""

    episode_id: str
    task_id: str
    block: int | None
    intent: str
    query: str
    agent: str
    model: str = Field(
        description="the model (and revision) the miner's agent card named: self-declared, "
        "never checked, and shown as such"
    )
    success: bool
    rule_score: float
    judge_score: float | None
    score: float | None
    turns: int
    tool_calls: int
    termination: str
    termination_detail: str
    status: str
    diagnosis: str = Field(description="the diagnosis's label: kind, or kind:constraint")
    diagnosis_kind: str
    diagnosis_detail: str
    stopped_at: str | None = Field(description="the judge's first failing gate")
    failed_gates: list[str]
    criteria: list[CriterionLine]
    turn_lines: list[TurnLine]


class IntentLine(BaseModel):
    """The miner's episodes of one intent."""

    intent: str
    episodes: int
    successes: int
    asr: float
    mean_score: float


class GateExample(BaseModel):
    """An episode that failed a gate, and the judge's evidence."""

    episode_id: str
    evidence: str


class GateLine(BaseModel):
    """How often one judge gate was checked and failed, with examples."""

    gate: str
    judged: int
    failed: int
    stopped: int = Field(description="episodes where it was the first failing gate")
    examples: list[GateExample]


class MinerReport(BaseModel):
    """Everything the offline report of one miner shows."""

    model_config = ConfigDict(frozen=True)

    uid: int
    hotkeys: list[str]
    agents: list[str]
    models: list[str] = Field(
        description="each model (and revision) the miner's agent card named, as in its "
        "episodes' signed records; empty when no record names one"
    )
    validators: list[str]
    episodes: int
    successes: int
    asr: float = Field(description="successes / episodes")
    mean_score: float = Field(description="mean final episode score (0 where unscored)")
    mean_rule_score: float
    judged: int = Field(description="episodes with a judge verdict")
    mean_judge_score: float | None = Field(description="mean judge score of the judged ones")
    ema_alpha: float
    ema: float | None = Field(description="the EMA after the last round; None without rounds")
    rounds: list[RoundEma]
    by_intent: list[IntentLine]
    failures: dict[str, int] = Field(description="diagnosis kind → failed episodes")
    failure_labels: dict[str, int] = Field(description="kind:constraint → failed episodes")
    gates: list[GateLine] = Field(description="every judge gate, in the rubric's order")
    lines: list[EpisodeLine] = Field(description="every episode, in block then id order")
    archive: str = Field(description="the archive the report was read from")
    signed_by: str | None = Field(description="the validator whose shards alone were read")
    embargo_lifted: bool

    @property
    def failed_gates(self) -> dict[str, int]:
        """gate → episodes that failed it, for the gates some episode failed."""
        return {g.gate: g.failed for g in self.gates if g.failed}


def model_label(t: Trajectory) -> str:
    """The model `t`'s record names, as a report shows it: ``model (revision)``, the model
    alone, or ``""`` when the record names none (no card came, or an older record)."""
    if t.agent_model is None:
        return ""
    if t.agent_revision is None:
        return t.agent_model
    return f"{t.agent_model} ({t.agent_revision})"


def _line(t: Trajectory, limit: int) -> EpisodeLine:
    d = t.diagnosis
    judge = t.judge
    criteria: list[CriterionLine] = []
    if judge is not None:
        criteria = [
            CriterionLine(name=c.name, kind=c.kind, passed=c.passed,
                          evidence=cut(c.evidence, limit))
            for c in judge.criteria
        ]  # fmt: skip
        if not criteria:
            criteria = [CriterionLine(name=k, kind="gate", passed=v, evidence="")
                        for k, v in judge.gates.items()]  # fmt: skip
    turns: list[TurnLine] = []
    for number, m in enumerate((m for m in t.messages if m.role == "assistant"), start=1):
        calls = [CallLine(name=cut(c.function.name, 80), arguments=cut(c.function.arguments, limit))
                 for c in m.tool_calls or []]  # fmt: skip
        turns.append(TurnLine(number=number, reasoning=cut(m.reasoning_content, limit),
                              content=cut(m.content, limit), calls=calls))  # fmt: skip
    return EpisodeLine(
        episode_id=t.episode_id, task_id=t.task_id, block=t.block, intent=t.intent,
        query=cut(t.query, limit), agent=cut(t.agent, 120),
        model=cut(model_label(t), 2 * MAX_AGENT_NAME_CHARS + 3), success=t.success,
        rule_score=t.outcome.mean_rule, judge_score=judge.score if judge else None,
        score=t.score, turns=t.turns, tool_calls=t.tool_calls,
        termination=t.termination.value, termination_detail=cut(t.termination_detail, limit),
        status=cut(t.status, 120), diagnosis=cut(d.label, 160), diagnosis_kind=d.kind,
        diagnosis_detail=cut(d.detail, limit), stopped_at=judge.stopped_at if judge else None,
        failed_gates=[g for g, ok in judge.gates.items() if not ok] if judge else [],
        criteria=criteria, turn_lines=turns,
    )  # fmt: skip


def _rounds(uid: int, episodes: Sequence[Trajectory], alpha: float) -> list[RoundEma]:
    """The miner's rounds (:func:`~shopbench.traces.ema.ema_rounds`, as the leaderboard
    folds them)."""
    return ema_rounds(((uid, t.miner_hotkey, t.block, 1, t.score or 0.0) for t in episodes), alpha)


def _gates(episodes: Sequence[Trajectory], lines: Sequence[EpisodeLine],
           examples: int) -> list[GateLine]:  # fmt: skip
    order: dict[str, None] = {}
    judged: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    stopped: Counter[str] = Counter()
    shown: dict[str, list[GateExample]] = {}
    for t, line in zip(episodes, lines, strict=True):
        if t.judge is None:
            continue
        evidence = {c.name: c.evidence for c in line.criteria}
        for gate, ok in t.judge.gates.items():
            order.setdefault(gate)
            judged[gate] += 1
            if ok:
                continue
            failed[gate] += 1
            chosen = shown.setdefault(gate, [])
            if len(chosen) < examples:
                chosen.append(GateExample(episode_id=t.episode_id, evidence=evidence.get(gate, "")))
        if t.judge.stopped_at:
            stopped[t.judge.stopped_at] += 1
    return [GateLine(gate=g, judged=judged[g], failed=failed[g], stopped=stopped[g],
                     examples=shown.get(g, [])) for g in order]  # fmt: skip


def _mean(values: Iterable[float]) -> float:
    xs = list(values)
    return round(sum(xs) / len(xs), 6) if xs else 0.0


def miner_report(
    uid: int,
    trajectories: Iterable[Trajectory],
    config: ReportConfig | None = None,
    *,
    archive: str = "",
    signed_by: str | None = None,
    embargo_lifted: bool = False,
) -> MinerReport | None:
    """The report of miner `uid` over `trajectories` (records of other miners are left
    out); None when none of them is the miner's."""
    config = config or ReportConfig()
    alpha = ConsensusConfig().ema_alpha if config.ema_alpha is None else config.ema_alpha
    mine = sorted((t for t in trajectories if t.miner_uid == uid),
                  key=lambda t: (t.block is not None, t.block or 0, t.episode_id))  # fmt: skip
    if not mine:
        return None
    limit = config.max_text_chars
    lines = [_line(t, limit) for t in mine]
    wins = sum(t.success for t in mine)
    judged = [t.judge.score for t in mine if t.judge is not None]
    by_intent: dict[str, list[Trajectory]] = {}
    for t in mine:
        by_intent.setdefault(t.intent, []).append(t)
    kinds: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    for line in lines:
        if line.diagnosis_kind != "success":
            kinds[line.diagnosis_kind] += 1
            labels[line.diagnosis] += 1
    rounds = _rounds(uid, mine, alpha)

    def distinct(values: Iterable[str | None], chars: int) -> list[str]:
        return sorted({cut(v, chars) for v in values if v})

    return MinerReport(
        uid=uid, hotkeys=distinct((t.miner_hotkey for t in mine), 120),
        agents=distinct((t.agent for t in mine), 120),
        models=distinct((model_label(t) for t in mine), 2 * MAX_AGENT_NAME_CHARS + 3),
        validators=distinct((t.validator_hotkey for t in mine), 120),
        episodes=len(mine), successes=wins, asr=round(wins / len(mine), 6),
        mean_score=_mean(t.score or 0.0 for t in mine),
        mean_rule_score=_mean(t.outcome.mean_rule for t in mine),
        judged=len(judged), mean_judge_score=_mean(judged) if judged else None,
        ema_alpha=alpha, ema=rounds[-1].ema if rounds else None, rounds=rounds,
        by_intent=[
            IntentLine(intent=k, episodes=len(v), successes=sum(t.success for t in v),
                       asr=round(sum(t.success for t in v) / len(v), 6),
                       mean_score=_mean(t.score or 0.0 for t in v))
            for k, v in sorted(by_intent.items())
        ],
        failures={k: kinds[k] for k in DIAGNOSIS_KINDS if kinds[k]},
        failure_labels=dict(sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))),
        gates=_gates(mine, lines, config.examples_per_gate), lines=lines,
        archive=archive, signed_by=signed_by, embargo_lifted=embargo_lifted,
    )  # fmt: skip

