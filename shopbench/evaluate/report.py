"""What an evaluation writes: ``trajectories.jsonl``, ``report.json`` and ``report.md``.

The report holds ASR overall and per intent, the mean rule score, pass@k and pass^k for k in
1..K, mean turns and tool calls, and the failures: episodes ended by the policy (errors,
timeouts, garbage), turns without a usable tool call, tool calls the environment refused.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shopbench.evaluate.errors import EvalError
from shopbench.evaluate.metrics import by_intent, summarize
from shopbench.records.trajectory import TerminationReason, Trajectory

TRAJECTORIES_FILE = "trajectories.jsonl"
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
_POLICY_ENDINGS = (
    TerminationReason.policy_error,
    TerminationReason.policy_timeout,
    TerminationReason.invalid_reply,
    TerminationReason.deadline,
    TerminationReason.no_progress,
)


class IntentReport(BaseModel):
    """The numbers of one intent."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    tasks: int
    asr: float
    mean_rule: float
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]


class EvalReport(BaseModel):
    """The summary of an evaluation (``report.json``)."""

    model_config = ConfigDict(frozen=True)

    policy: str
    samples: int = Field(description="episodes per task (K)")
    tasks: int
    episodes: int
    asr: float
    asr_by_intent: dict[str, float]
    mean_rule: float
    pass_at_k: dict[str, float] = Field(description="k (as text) → pass@k, k in 1..K")
    pass_hat_k: dict[str, float] = Field(description="k (as text) → pass^k, k in 1..K")
    by_intent: dict[str, IntentReport]
    mean_turns: float
    mean_tool_calls: float
    errors: dict[str, int] = Field(
        description="episodes ended by the policy (policy_error, policy_timeout, ...), turn "
        "failures (no_tool_call, oversized, ...) and tool calls refused (tool_errors)"
    )
    terminations: dict[str, int]
    seconds: float
    episodes_per_s: float


def _ks(samples: int) -> list[int]:
    return list(range(1, samples + 1))


def _text_keys(d: dict[int, float]) -> dict[str, float]:
    return {str(k): v for k, v in sorted(d.items())}


def error_counts(trajectories: Iterable[Trajectory]) -> dict[str, int]:
    """Episodes ended by the policy, per reason; turn failures per kind; refused tool calls."""
    ended: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    tool_errors = 0
    for t in trajectories:
        if t.termination in _POLICY_ENDINGS:
            ended[t.termination.value] += 1
        for f in t.failures:
            turns[f.kind] += 1
        tool_errors += sum(1 for e in t.tool_log if e.error is not None)
    out = {f"ended_{r.value}": ended.get(r.value, 0) for r in _POLICY_ENDINGS}
    out["episodes_ended_by_policy"] = sum(ended.values())
    out.update({f"turns_{k}": v for k, v in sorted(turns.items())})
    out["tool_errors"] = tool_errors
    return out


def build_report(
    trajectories: Sequence[Trajectory], *, policy: str, samples: int, seconds: float
) -> EvalReport:
    """Summarise an evaluation's trajectories (every task played `samples` times)."""
    if not trajectories:
        raise EvalError("no episodes were played; nothing to report")
    outcomes = [t.outcome for t in trajectories]
    ks = _ks(samples)
    total = summarize(outcomes, ks)
    per = by_intent(outcomes, ks)
    n = len(trajectories)
    return EvalReport(
        policy=policy,
        samples=samples,
        tasks=total.tasks,
        episodes=total.episodes,
        asr=total.asr,
        asr_by_intent={intent: s.asr for intent, s in per.items()},
        mean_rule=total.mean_rule,
        pass_at_k=_text_keys(total.pass_at_k),
        pass_hat_k=_text_keys(total.pass_hat_k),
        by_intent={
            intent: IntentReport(
                episodes=s.episodes, tasks=s.tasks, asr=s.asr, mean_rule=s.mean_rule,
                pass_at_k=_text_keys(s.pass_at_k), pass_hat_k=_text_keys(s.pass_hat_k),
            )
            for intent, s in per.items()
        },
        mean_turns=sum(t.turns for t in trajectories) / n,
        mean_tool_calls=sum(t.tool_calls for t in trajectories) / n,
        errors=error_counts(trajectories),
        terminations=dict(Counter(t.termination.value for t in trajectories)),
        seconds=seconds,
        episodes_per_s=n / seconds if seconds > 0 else 0.0,
    )


def render_markdown(r: EvalReport) -> str:
    """The report as a Markdown page: headline numbers, per-intent table, pass@k, errors."""
    lines = [
        f"# Evaluation of `{r.policy}`",
        "",
        f"{r.tasks} tasks × {r.samples} sample(s) = {r.episodes} episodes in {r.seconds:.1f} s "
        f"({r.episodes_per_s:.1f} episodes/s).",
        "",
        f"- **ASR**: {r.asr:.3f}",
        f"- **mean rule score**: {r.mean_rule:.3f}",
        f"- **mean turns**: {r.mean_turns:.2f}; **mean tool calls**: {r.mean_tool_calls:.2f}",
        "",
        "| intent | tasks | episodes | ASR | mean rule | pass@1 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for intent, s in r.by_intent.items():
        lines.append(
            f"| {intent} | {s.tasks} | {s.episodes} | {s.asr:.3f} | {s.mean_rule:.3f} | "
            f"{s.pass_at_k.get('1', 0.0):.3f} |"
        )
    lines += ["", "| k | pass@k | pass^k |", "|---:|---:|---:|"]
    for k, v in r.pass_at_k.items():
        lines.append(f"| {k} | {v:.3f} | {r.pass_hat_k.get(k, 0.0):.3f} |")
    lines += ["", "| errors | count |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in r.errors.items()]
    lines += ["", "| termination | episodes |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(r.terminations.items())]
    return "\n".join(lines) + "\n"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_outputs(out: str | Path, trajectories: Sequence[Trajectory], report: EvalReport) -> Path:
    """Write the three files into directory `out` (created); EvalError if it cannot."""
    d = Path(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(
            d / TRAJECTORIES_FILE, "".join(t.model_dump_json() + "\n" for t in trajectories)
        )
        _atomic_write(d / REPORT_JSON, json.dumps(report.model_dump(), indent=2) + "\n")
        _atomic_write(d / REPORT_MD, render_markdown(report))
    except OSError as e:
        raise EvalError(f"{d}: cannot write the evaluation output ({e.strerror})") from None
    return d
