"""The table of a trained model's evaluation: per intent and overall, every metric with its
bootstrap interval over tasks, and the paired difference to a baseline.

Metrics (each a ratio of sums over tasks, see :mod:`shopbench.evaluate.intervals`):

- ``asr``: successful episodes / episodes.
- ``pass@1``, ``pass@K``: the unbiased estimator of :func:`shopbench.evaluate.metrics.pass_at_k`,
  averaged over tasks; ``pass^K``: all K attempts succeed (:func:`pass_hat_k`).
- ``completion``: episodes the agent ended with ``terminate`` / episodes.
- ``valid_tool_calls``: well-formed calls / calls the environment received — a call is
  malformed when it names no known tool or its arguments are not the tool's (unknown_tool,
  bad_argument); an invalid product id is a well-formed call that chose badly. Undefined
  (None, ``–`` in the Markdown) for a run that made no call at all.
- ``valid_turns``: assistant turns whose every call was well-formed and that made at least
  one / assistant turns (a turn without any call, or one the policy failed, is invalid).

Completion and format validity are reported apart from ASR: a small model can learn the
protocol long before it learns to shop.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.evaluate.intervals import BootstrapConfig, Estimate, bootstrap, paired_difference
from shopbench.evaluate.metrics import attempt_counts, pass_at_k, pass_hat_k
from shopbench.records.trajectory import TerminationReason, Trajectory

MALFORMED_CALLS = frozenset({"unknown_tool", "bad_argument"})
"""Tool-log error codes of a call that is not a well-formed call of a known tool."""
OVERALL = "overall"

Ratio = tuple[list[float], list[float]]
"""Per-task numerators and denominators of one metric, tasks in one fixed order."""


class MetricTable(BaseModel):
    """The metrics of one run over one group of tasks."""

    model_config = ConfigDict(frozen=True)

    tasks: int
    episodes: int
    metrics: dict[str, Estimate | None] = Field(
        description="None where the metric is undefined (valid_tool_calls of a run that made "
        "no call)"
    )


class RunTable(BaseModel):
    """One policy's table: overall and per intent."""

    model_config = ConfigDict(frozen=True)

    policy: str
    samples: int
    overall: MetricTable
    by_intent: dict[str, MetricTable]


class DifferenceTable(BaseModel):
    """Model − baseline for every metric, with paired bootstrap intervals."""

    model_config = ConfigDict(frozen=True)

    overall: dict[str, Estimate | None]
    by_intent: dict[str, dict[str, Estimate | None]]


def metric_names(samples: int) -> list[str]:
    """The table's metric names for K = `samples` (pass@K and pass^K only for K > 1)."""
    ks = [f"pass@{samples}", f"pass^{samples}"] if samples > 1 else []
    return ["asr", "pass@1", *ks, "completion", "valid_tool_calls", "valid_turns"]


def _valid_turns(t: Trajectory) -> int:
    calls: dict[int, list[str | None]] = defaultdict(list)
    for e in t.tool_log:
        calls[e.turn].append(e.error)
    return sum(
        1
        for errors in calls.values()
        if errors and not any(err in MALFORMED_CALLS for err in errors)
    )


def per_task(
    trajectories: Sequence[Trajectory], samples: int
) -> tuple[list[str], dict[str, Ratio]]:
    """The task ids in first-seen order, and per metric each task's (numerator,
    denominator) in that order."""
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_task[t.task_id].append(t)
    counts = attempt_counts(t.outcome for t in trajectories)
    out: dict[str, Ratio] = {m: ([], []) for m in metric_names(samples)}

    def add(metric: str, num: float, den: float) -> None:
        if metric in out:
            out[metric][0].append(num)
            out[metric][1].append(den)

    for task_id, ts in by_task.items():
        n, c = counts[task_id]
        add("asr", c, n)
        add("pass@1", pass_at_k(n, c, 1), 1)
        if samples > 1:
            add(f"pass@{samples}", pass_at_k(n, c, samples), 1)
            add(f"pass^{samples}", pass_hat_k(n, c, samples), 1)
        add("completion", sum(t.termination is TerminationReason.terminated for t in ts), n)
        calls = [e for t in ts for e in t.tool_log]
        add("valid_tool_calls", sum(e.error not in MALFORMED_CALLS for e in calls), len(calls))
        add("valid_turns", sum(_valid_turns(t) for t in ts), sum(t.turns for t in ts))
    return list(by_task), out


def _groups(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {OVERALL: list(trajectories)}
    for t in trajectories:
        groups.setdefault(t.intent, []).append(t)
    return groups


def _table(trajectories: Sequence[Trajectory], samples: int, boot: BootstrapConfig) -> MetricTable:
    tasks, ratios = per_task(trajectories, samples)
    return MetricTable(
        tasks=len(tasks),
        episodes=len(trajectories),
        metrics={
            m: bootstrap(num, den, boot) if sum(den) > 0 else None
            for m, (num, den) in ratios.items()
        },
    )


def run_table(
    trajectories: Sequence[Trajectory], *, policy: str, samples: int, boot: BootstrapConfig
) -> RunTable:
    """The table of one run (every task played `samples` times)."""
    groups = _groups(trajectories)
    return RunTable(
        policy=policy,
        samples=samples,
        overall=_table(groups.pop(OVERALL), samples, boot),
        by_intent={intent: _table(ts, samples, boot) for intent, ts in groups.items()},
    )


def _paired(
    model: Sequence[Trajectory], base: Sequence[Trajectory], samples: int, boot: BootstrapConfig
) -> dict[str, Estimate | None]:
    m_tasks, m = per_task(model, samples)
    b_tasks, b = per_task(base, samples)
    shared = [t for t in m_tasks if t in set(b_tasks)]
    mi = [m_tasks.index(t) for t in shared]
    bi = [b_tasks.index(t) for t in shared]
    out: dict[str, Estimate | None] = {}
    for metric in m:
        a = ([m[metric][0][i] for i in mi], [m[metric][1][i] for i in mi])
        b_ = ([b[metric][0][i] for i in bi], [b[metric][1][i] for i in bi])
        defined = sum(a[1]) > 0 and sum(b_[1]) > 0
        out[metric] = paired_difference(a, b_, boot) if defined else None
    return out


def difference_table(
    model: Sequence[Trajectory], baseline: Sequence[Trajectory], samples: int,
    boot: BootstrapConfig,
) -> DifferenceTable:
    """Model − baseline over the tasks both played, overall and per intent."""
    mg, bg = _groups(model), _groups(baseline)
    return DifferenceTable(
        overall=_paired(mg.pop(OVERALL), bg.pop(OVERALL), samples, boot),
        by_intent={i: _paired(ts, bg[i], samples, boot) for i, ts in mg.items() if i in bg},
    )
