"""What ``distill eval`` writes: ``report.json``, ``report.md`` and each run's trajectories.

``report.md`` leads with the overall table (model, baseline, difference), then one table
per intent, the contamination and group-overlap lines and the warnings. Every figure is
``value [low, high]`` with the report's confidence level; under each table a line says how
many tasks in how many product groups it stands on, how its intervals were drawn, and the
smallest ASR difference its episodes can detect.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from shopbench.archive.durable import replace_durably
from shopbench.evaluate.errors import ModelEvalError
from shopbench.evaluate.intervals import Estimate
from shopbench.evaluate.power import DEFAULT_POWER
from shopbench.evaluate.trained.run import ModelEvalReport
from shopbench.evaluate.trained.table import MetricTable, metric_names
from shopbench.records.trajectory import Trajectory

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
MODEL_TRAJECTORIES = "trajectories.jsonl"
BASELINE_TRAJECTORIES = "baseline_trajectories.jsonl"


def _cell(e: Estimate | None, signed: bool = False) -> str:
    if e is None:
        return "–"
    fmt = "+.3f" if signed else ".3f"
    return f"{e.value:{fmt}} [{e.low:{fmt}}, {e.high:{fmt}}]"


def _table(
    r: ModelEvalReport, model: MetricTable, base: MetricTable | None,
    diff: dict[str, Estimate | None] | None,
) -> list[str]:
    head = "| metric | model |"
    rule = "|---|---:|"
    if base is not None:
        head += " baseline | difference |"
        rule += "---:|---:|"
    lines = [head, rule]
    for m in metric_names(r.samples):
        row = f"| {m} | {_cell(model.metrics.get(m))} |"
        if base is not None:
            row += f" {_cell(base.metrics.get(m))} | {_cell((diff or {}).get(m), signed=True)} |"
        lines.append(row)
    return lines


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _sizes(r: ModelEvalReport, table: MetricTable, clustered: bool) -> str:
    """The line under a table: its tasks and groups, the intervals, the detectable difference."""
    drawn = "clustered by product group" if clustered else "over tasks"
    mde = "–" if table.mde is None else f"{table.mde:.2f}"
    return (
        f"{_plural(table.tasks, 'task', 'tasks')} in "
        f"{_plural(table.clusters, 'product group', 'product groups')}, "
        f"{_plural(r.samples, 'sample', 'samples')} a task; {r.level * 100:g}% intervals "
        f"{drawn}; smallest detectable ASR difference at this size: {mde} "
        f"({DEFAULT_POWER * 100:g}% power)"
    )


def render_markdown(r: ModelEvalReport) -> str:
    """The report as a Markdown page."""
    level = f"{r.level * 100:g}%"
    bounds = [
        f"at most {value} {what}" for value, what in (
            (r.max_turns, "turns an episode"), (r.max_idle_turns, "idle turns in a row"),
            (r.max_tokens, "tokens a turn"),
        ) if value is not None
    ]  # fmt: skip
    lines = [
        f"# Evaluation of `{r.model.policy}`",
        "",
        f"{r.tasks} tasks from `{r.tasks_file}` × {r.samples} sample(s); seed {r.seed}"
        + "".join(f"; {b}" for b in bounds)
        + f". Intervals: {level} bootstrap over "
        + ("product groups" if r.model.clustered else "tasks")
        + f" ({r.resamples} resamples)"
        + ("; differences paired over tasks." if r.baseline else "."),
    ]
    if r.baseline:
        lines.append(f"Baseline: `{r.baseline.policy}`.")
    if r.decoding:
        grammar = f" (grammar {r.grammar})" if r.grammar is not None else ""
        lines.append(f"Decoding: {r.decoding}{grammar}.")
    lines += ["", "## Overall", ""]
    lines += _table(
        r, r.model.overall, r.baseline.overall if r.baseline else None,
        r.difference.overall if r.difference else None,
    )
    lines += ["", _sizes(r, r.model.overall, r.model.clustered)]
    if r.difference is not None:
        lines.append(
            f"The difference is paired over the {r.difference.tasks} tasks both runs played, "
            f"in {r.difference.clusters} product groups."
        )
    for intent, table in r.model.by_intent.items():
        base = r.baseline.by_intent.get(intent) if r.baseline else None
        diff = r.difference.by_intent.get(intent) if r.difference else None
        lines += ["", f"## {intent} ({table.tasks} tasks, {table.episodes} episodes)", ""]
        lines += _table(r, table, base, diff)
        lines += ["", _sizes(r, table, r.model.clustered)]
    lines += ["", "## Contamination", ""]
    lines.append(
        r.contamination.line() if r.contamination else "not checked (no --train given)"
    )
    if r.group_overlap is not None:
        lines += ["", r.group_overlap.line()]
    if r.warnings:
        lines += ["", "## Warnings", ""]
        lines += [f"- {w}" for w in r.warnings]
    lines += ["", "| run | seconds |", "|---|---:|"]
    lines += [f"| `{spec}` | {s:.1f} |" for spec, s in r.seconds.items()]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    replace_durably(path, text.encode("utf-8"))


def write_model_eval(
    out: str | Path, report: ModelEvalReport, model: Sequence[Trajectory],
    baseline: Sequence[Trajectory] = (),
) -> Path:
    """Write the report and the trajectories into directory `out` (created)."""
    d = Path(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
        _write(d / MODEL_TRAJECTORIES, "".join(t.model_dump_json() + "\n" for t in model))
        if baseline:
            _write(
                d / BASELINE_TRAJECTORIES, "".join(t.model_dump_json() + "\n" for t in baseline)
            )
        _write(d / REPORT_JSON, json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
        _write(d / REPORT_MD, render_markdown(report))
    except OSError as e:
        raise ModelEvalError(f"{d}: cannot write the evaluation ({e.strerror})") from None
    return d
