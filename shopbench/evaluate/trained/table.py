"""The table of a trained model's evaluation: per intent and overall, every metric with its
bootstrap interval, and the paired difference to a baseline.

Given each task's product group, the intervals are clustered by group (a resample draws
groups, see :mod:`shopbench.evaluate.intervals`; a task missing from the map is its own
group), and each table states how many groups its tasks are in and the smallest ASR
difference its episodes can detect (:func:`shopbench.evaluate.power.detectable_difference`,
the design effect from the intra-group correlation of success). Without the map every task
is its own group.

Metrics (each a ratio of sums over tasks, see :mod:`shopbench.evaluate.intervals`):

- ``asr``: successful episodes / episodes.
- ``pass@1``, ``pass@K``: the unbiased estimator of :func:`shopbench.evaluate.metrics.pass_at_k`,
  averaged over tasks; ``pass^K``: all K attempts succeed (:func:`pass_hat_k`).
- ``completion``: episodes the agent ended with ``terminate`` after a recommendation the
  environment accepted / episodes (a ``terminate`` with nothing recommended is not a
  completed task).
- ``accepted_calls``: calls the environment accepted (ran without an error) / calls it
  received. Undefined (None, ``–`` in the Markdown) for a run that made no call at all.
- ``shown_ids``: calls naming ids (``product_ids``, ``shop_id``) whose every id is one the
  episode showed / calls naming ids: whether the model copies ids or invents them.
  Undefined for a run that named none.
- ``filters_read``: one-item product episodes whose first search used the price bound and
  services the request states / such episodes that searched
  (:func:`shopbench.evaluate.trained.reading.filters_read`): whether the model reads the
  request's filters. Undefined without such an episode.

Completion and format validity are reported apart from ASR: a small model can learn the
protocol long before it learns to shop.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from shopbench.evaluate.intervals import BootstrapConfig, Estimate, bootstrap, paired_difference
from shopbench.evaluate.metrics import attempt_counts, pass_at_k, pass_hat_k
from shopbench.evaluate.power import detectable_difference, intra_cluster_correlation
from shopbench.evaluate.trained.reading import filters_read
from shopbench.records.trajectory import TerminationReason, Trajectory

INVALID_ID = "invalid_id"
"""The tool-log error code of a call naming an id the episode never showed (or no id)."""
ID_ARGUMENTS = frozenset({"product_ids", "shop_id"})
"""Arguments that name ids the episode showed."""
OVERALL = "overall"

Ratio = tuple[list[float], list[float]]
"""Per-task numerators and denominators of one metric, tasks in one fixed order."""
Groups = Mapping[str, str]
"""Task id → product group, the clusters of the intervals."""


class MetricTable(BaseModel):
    """The metrics of one run over one group of tasks."""

    model_config = ConfigDict(frozen=True)

    tasks: int
    episodes: int
    clusters: int = Field(description="distinct product groups among the tasks")
    mde: float | None = Field(
        description="the smallest ASR difference these episodes detect in a paired comparison "
        "(two-sided at the intervals' level, 80% power, clustered by product group); None "
        "without episodes"
    )
    metrics: dict[str, Estimate | None] = Field(
        description="None where the metric is undefined (accepted_calls of a run that made "
        "no call)"
    )


class RunTable(BaseModel):
    """One policy's table: overall and per intent."""

    model_config = ConfigDict(frozen=True)

    policy: str
    samples: int
    clustered: bool = Field(
        default=False, description="whether the intervals are clustered by product group"
    )
    overall: MetricTable
    by_intent: dict[str, MetricTable]


class DifferenceTable(BaseModel):
    """Model − baseline for every metric, with paired bootstrap intervals."""

    model_config = ConfigDict(frozen=True)

    tasks: int = Field(description="tasks both runs played")
    clusters: int = Field(description="distinct product groups among those tasks")
    overall: dict[str, Estimate | None]
    by_intent: dict[str, dict[str, Estimate | None]]
    intent_clusters: dict[str, int] = Field(
        default_factory=dict, description="per intent, the product groups of its shared tasks"
    )


def metric_names(samples: int) -> list[str]:
    """The table's metric names for K = `samples` (pass@K and pass^K only for K > 1)."""
    ks = [f"pass@{samples}", f"pass^{samples}"] if samples > 1 else []
    return ["asr", "pass@1", *ks, "completion", "accepted_calls", "shown_ids", "filters_read"]


def completed(t: Trajectory) -> bool:
    """Whether the agent ended `t` with ``terminate`` after an accepted recommendation."""
    return t.termination is TerminationReason.terminated and any(t.recommended)


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
        add("completion", sum(completed(t) for t in ts), n)
        calls = [e for t in ts for e in t.tool_log]
        add("accepted_calls", sum(e.error is None for e in calls), len(calls))
        naming = [e for e in calls if isinstance(e.arguments, dict)
                  and any(e.arguments.get(a) for a in ID_ARGUMENTS)]  # fmt: skip
        add("shown_ids", sum(e.error != INVALID_ID for e in naming), len(naming))
        reads = [r for r in map(filters_read, ts) if r is not None]
        add("filters_read", sum(reads), len(reads))
    return list(by_task), out


def _groups(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {OVERALL: list(trajectories)}
    for t in trajectories:
        groups.setdefault(t.intent, []).append(t)
    return groups


def cluster_keys(tasks: Sequence[str], groups: Groups | None) -> list[str]:
    """Each task's product group, a task missing from `groups` its own."""
    return [(groups or {}).get(t, t) for t in tasks]


def _mde(
    successes: Sequence[float], episodes: Sequence[float], keys: Sequence[str], level: float
) -> float | None:
    """The detectable ASR difference of tasks with these successes and episodes."""
    total = int(sum(episodes))
    if total < 1:
        return None
    order: dict[str, int] = {}
    wins: list[float] = []
    sizes: list[float] = []
    for c, n, key in zip(successes, episodes, keys, strict=True):
        at = order.setdefault(key, len(order))
        if at == len(wins):
            wins.append(0.0)
            sizes.append(0.0)
        wins[at] += c
        sizes[at] += n
    return detectable_difference(
        sum(wins) / total, total, mean_size=total / len(order),
        icc=intra_cluster_correlation(wins, sizes), level=level,
    )  # fmt: skip


def _table(
    trajectories: Sequence[Trajectory], samples: int, boot: BootstrapConfig,
    groups: Groups | None,
) -> MetricTable:
    tasks, ratios = per_task(trajectories, samples)
    keys = cluster_keys(tasks, groups)
    clusters = keys if groups is not None else None
    return MetricTable(
        tasks=len(tasks),
        episodes=len(trajectories),
        clusters=len(set(keys)),
        mde=_mde(*ratios["asr"], keys, boot.level),
        metrics={
            m: bootstrap(num, den, boot, clusters=clusters) if sum(den) > 0 else None
            for m, (num, den) in ratios.items()
        },
    )


def run_table(
    trajectories: Sequence[Trajectory], *, policy: str, samples: int, boot: BootstrapConfig,
    groups: Groups | None = None,
) -> RunTable:
    """The table of one run (every task played `samples` times); with `groups` (task id →
    product group) its intervals are clustered by group."""
    by = _groups(trajectories)
    return RunTable(
        policy=policy,
        samples=samples,
        clustered=groups is not None,
        overall=_table(by.pop(OVERALL), samples, boot, groups),
        by_intent={intent: _table(ts, samples, boot, groups) for intent, ts in by.items()},
    )


def _paired(
    model: Sequence[Trajectory], base: Sequence[Trajectory], samples: int, boot: BootstrapConfig,
    groups: Groups | None,
) -> tuple[dict[str, Estimate | None], list[str]]:
    """Every metric's paired difference, and the cluster key of each shared task."""
    m_tasks, m = per_task(model, samples)
    b_tasks, b = per_task(base, samples)
    shared = [t for t in m_tasks if t in set(b_tasks)]
    mi = [m_tasks.index(t) for t in shared]
    bi = [b_tasks.index(t) for t in shared]
    keys = cluster_keys(shared, groups)
    clusters = keys if groups is not None else None
    out: dict[str, Estimate | None] = {}
    for metric in m:
        a = ([m[metric][0][i] for i in mi], [m[metric][1][i] for i in mi])
        b_ = ([b[metric][0][i] for i in bi], [b[metric][1][i] for i in bi])
        defined = sum(a[1]) > 0 and sum(b_[1]) > 0
        out[metric] = paired_difference(a, b_, boot, clusters=clusters) if defined else None
    return out, keys


def difference_table(
    model: Sequence[Trajectory], baseline: Sequence[Trajectory], samples: int,
    boot: BootstrapConfig, groups: Groups | None = None,
) -> DifferenceTable:
    """Model − baseline over the tasks both played, overall and per intent; with `groups`
    (task id → product group) the paired intervals are clustered by group."""
    mg, bg = _groups(model), _groups(baseline)
    overall, keys = _paired(mg.pop(OVERALL), bg.pop(OVERALL), samples, boot, groups)
    by_intent = {i: _paired(ts, bg[i], samples, boot, groups) for i, ts in mg.items() if i in bg}
    return DifferenceTable(
        tasks=len(keys),
        clusters=len(set(keys)),
        overall=overall,
        by_intent={i: d for i, (d, _) in by_intent.items()},
        intent_clusters={i: len(set(k)) for i, (_, k) in by_intent.items()},
    )
