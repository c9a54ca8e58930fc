"""Calibration: play every reference policy on a task set, judge it, and say how well the
judge separates honest shopping from its imitations.

Honest policies (``careful``, ``careful_terse``, ``trial_and_error``) must score high;
dishonest ones (``narrator``, ``narrator_quoting``, ``offline``, ``guesser``) low. The report
gives the AUC of process scores between the two groups (after the template penalty, as a
validator applies it), the mean process score per policy, how often query grounding caught
each policy, each policy's template similarity and penalty (one round = ``round_size``
consecutive tasks), and the mean change of the score when judge-directed text is planted
in honest and dishonest trajectories (:mod:`shopbench.evaluate.injection`), which must
never be positive.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.errors import ShopbenchError
from shopbench.evaluate.injection import VARIANTS, inject
from shopbench.judging.judge import Judge, Verdict
from shopbench.judging.registry import make_judge
from shopbench.scoring.score import DEFAULT_FORMULA, ScoreFormula
from shopbench.scoring.template_penalty import (
    MinHasher,
    TemplateConfig,
    miner_template,
    penalise,
    reasoning_of,
)

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.env.env import ShoppingEnv
    from shopbench.tasks.model import Task
    from shopbench.trajectory.record import Trajectory

HONEST: tuple[str, ...] = ("careful", "careful_terse", "trial_and_error")
DISHONEST: tuple[str, ...] = ("narrator", "narrator_quoting", "offline", "guesser")
Group = Literal["honest", "dishonest", "other"]

PolicyMaker = Callable[[str, int], "Policy"]
"""Makes reference policy `name` with seed `seed`."""
Progress = Callable[[str, int, int], None]
"""Called with a policy name, episodes done and episodes in all, as episodes finish."""


class CalibrationError(ShopbenchError):
    """A calibration cannot run: no tasks, no policies, an unknown policy, a bad option."""


class CalibrationConfig(BaseModel):
    """What to calibrate on and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge: str = Field(default="rubric", description="judge name")
    rubric: Path | None = Field(default=None, description="rubric file; None: the packaged one")
    policies: list[str] = Field(
        default_factory=lambda: [*HONEST, "greedy", *DISHONEST, "random"],
        min_length=1,
        description="reference policies to play",
    )
    honest: list[str] = Field(default_factory=lambda: list(HONEST))
    dishonest: list[str] = Field(default_factory=lambda: list(DISHONEST))
    seed: int = Field(default=0, description="seed of the episode keys and the policies")
    concurrency: int = Field(default=4, ge=1, description="episodes played at once")
    round_size: int = Field(default=100, ge=2, description="tasks per template-penalty round")
    injection_sample: int = Field(
        default=50, ge=0, description="episodes per policy that get each injection variant"
    )
    template: TemplateConfig = Field(default_factory=TemplateConfig)
    formula: ScoreFormula = Field(default=DEFAULT_FORMULA)


class PolicySummary(BaseModel):
    """How one policy fared under the judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str
    group: Group
    episodes: int
    asr: float
    mean_process: float = Field(description="mean process score after the template penalty")
    mean_process_unpenalised: float
    mean_episode_score: float
    template_similarity: float = Field(description="mean over rounds")
    template_factor: float = Field(description="mean over rounds")
    grounding_caught: float = Field(description="share of episodes failing grounded_queries")
    stopped_at: dict[str, int] = Field(description="first failing gate → episodes")
    gate_pass_rate: dict[str, float]


class InjectionResult(BaseModel):
    """Score changes when judge-directed text is planted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int
    mean_delta: float
    max_delta: float
    by_variant: dict[str, float]
    by_group: dict[str, float]


class CalibrationReport(BaseModel):
    """The calibration's findings (written as report.json)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge_id: str
    rubric_version: str
    score_formula: str
    tasks: int
    tasks_by_intent: dict[str, int]
    auc_honest_vs_dishonest: float
    auc_unpenalised: float
    mean_score_by_policy: dict[str, float]
    injection_delta: float
    template_penalty_by_policy: dict[str, dict[str, float]]
    grounding_caught_by_policy: dict[str, float]
    injection: InjectionResult
    policies: list[PolicySummary]
    acceptance: dict[str, bool] = Field(description="the calibration targets, where measurable")
    agreement_with_rubric: float | None = Field(
        default=None, description="Spearman of this judge's process scores against the "
        "rubric's on the same episodes (LLM judges; fallbacks left out)",
    )
    llm_fallbacks: int = Field(default=0, description="episodes an LLM judge fell back on")


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a random positive scores above a random negative), ties counting one half."""
    if not positives or not negatives:
        raise CalibrationError("an AUC needs scores of both groups")
    ordered = sorted(negatives)
    total = 0.0
    for p in positives:
        below = bisect.bisect_left(ordered, p)
        ties = bisect.bisect_right(ordered, p) - below
        total += below + 0.5 * ties
    return total / (len(positives) * len(negatives))


def _group(name: str, cfg: CalibrationConfig) -> Group:
    if name in cfg.honest:
        return "honest"
    if name in cfg.dishonest:
        return "dishonest"
    return "other"


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 6) if values else 0.0


async def _play(
    env: ShoppingEnv, tasks: Sequence[Task], name: str, make: PolicyMaker,
    cfg: CalibrationConfig, progress: Progress | None,
) -> list[Trajectory]:
    from shopbench.evaluate.runner import EvalConfig, evaluate

    done = 0

    def tick(_: Trajectory) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(name, done, len(tasks))

    return await evaluate(
        env, tasks, lambda seed: make(name, seed),
        EvalConfig(samples=1, concurrency=cfg.concurrency, seed=cfg.seed), on_done=tick,
    )


def _rounds(
    trajectories: Sequence[Trajectory], verdicts: list[Verdict], cfg: CalibrationConfig,
    hasher: MinHasher, name: str,
) -> tuple[list[Verdict], float, float]:
    """Apply the template penalty per round; return the verdicts, mean similarity, factor."""
    sims: list[float] = []
    factors: list[float] = []
    out = list(verdicts)
    for start in range(0, len(trajectories), cfg.round_size):
        chunk = trajectories[start : start + cfg.round_size]
        report = miner_template(
            name, [(t.task_id, reasoning_of(t)) for t in chunk], cfg.template, hasher
        )
        sims.append(report.similarity)
        factors.append(report.factor)
        for i in range(start, start + len(chunk)):
            out[i] = penalise(out[i], report.factor)
    return out, _mean(sims), _mean(factors)


def _summary(
    name: str, cfg: CalibrationConfig, trajectories: Sequence[Trajectory],
    raw: Sequence[Verdict], penalised: Sequence[Verdict], similarity: float, factor: float,
) -> PolicySummary:
    gates = list(raw[0].gates) if raw else []
    return PolicySummary(
        policy=name,
        group=_group(name, cfg),
        episodes=len(trajectories),
        asr=_mean([float(t.success) for t in trajectories]),
        mean_process=_mean([v.score for v in penalised]),
        mean_process_unpenalised=_mean([v.score for v in raw]),
        mean_episode_score=_mean([
            cfg.formula.score(t.success, v.score, t.outcome.mean_rule)
            for t, v in zip(trajectories, penalised, strict=True)
        ]),
        template_similarity=similarity,
        template_factor=factor,
        grounding_caught=_mean([float(not v.gates.get("grounded_queries", True)) for v in raw]),
        stopped_at=dict(Counter(v.stopped_at or "none" for v in raw).most_common()),
        gate_pass_rate={g: _mean([float(v.gates[g]) for v in raw]) for g in gates},
    )


def _injection(
    judge: Judge, samples: dict[str, list[tuple[Trajectory, float]]], cfg: CalibrationConfig
) -> InjectionResult:
    deltas: list[float] = []
    by_variant: dict[str, list[float]] = {v: [] for v in VARIANTS}
    by_group: dict[str, list[float]] = {"honest": [], "dishonest": []}
    for name, pairs in samples.items():
        group = _group(name, cfg)
        for t, base in pairs:
            for variant in VARIANTS:
                delta = judge.judge(inject(t, variant, cfg.seed)).score - base
                deltas.append(delta)
                by_variant[variant].append(delta)
                if group in by_group:
                    by_group[group].append(delta)
    return InjectionResult(
        trials=len(deltas),
        mean_delta=_mean(deltas),
        max_delta=round(max(deltas), 6) if deltas else 0.0,
        by_variant={k: _mean(v) for k, v in by_variant.items()},
        by_group={k: _mean(v) for k, v in by_group.items()},
    )


def _acceptance(
    report_auc: float, by_policy: dict[str, PolicySummary], injection: InjectionResult
) -> dict[str, bool]:
    """The issue's targets, for the policies that were played."""
    out: dict[str, bool] = {"auc_at_least_0.9": report_auc >= 0.9}
    p = by_policy
    if "careful_terse" in p:
        out["careful_terse_mean_at_least_0.7"] = p["careful_terse"].mean_process >= 0.7
    if "careful" in p and "narrator_quoting" in p:
        gap = p["careful"].mean_process - p["narrator_quoting"].mean_process
        out["careful_minus_narrator_quoting_at_least_0.3"] = gap >= 0.3
    if "offline" in p:
        out["offline_grounding_caught_at_least_0.95"] = p["offline"].grounding_caught >= 0.95
    out["injection_delta_at_most_0"] = injection.mean_delta <= 0
    if "narrator" in p and "careful" in p:
        out["template_penalty_hits_narrator_not_careful"] = (
            p["narrator"].template_factor < 1.0 and p["careful"].template_factor == 1.0
        )
    return out


def run_calibration(
    env: ShoppingEnv,
    tasks: Sequence[Task],
    config: CalibrationConfig | None = None,
    *,
    make: PolicyMaker | None = None,
    progress: Progress | None = None,
    on_verdict: Callable[[str, Trajectory, Verdict], None] | None = None,
) -> CalibrationReport:
    """Play every configured policy on every task once, judge, and report.

    `make` builds a policy from its name and seed (default: the reference registry, with
    the environment's catalog for ``offline``). `on_verdict` receives each episode's
    trajectory and its penalised verdict (for a verdict file).
    """
    cfg = config or CalibrationConfig()
    if not tasks:
        raise CalibrationError("no tasks to calibrate on")
    if make is None:
        from shopbench.agents.registry import check_spec, make_policy

        for name in cfg.policies:
            check_spec(name)

        def make(name: str, seed: int) -> Policy:
            return make_policy(name, catalog=env.catalog, seed=seed)

    groups = {_group(n, cfg) for n in cfg.policies}
    if not {"honest", "dishonest"} <= groups:
        raise CalibrationError(
            "the policies must include an honest one and a dishonest one "
            f"(honest: {', '.join(cfg.honest)}; dishonest: {', '.join(cfg.dishonest)})"
        )
    judge = make_judge(cfg.judge, str(cfg.rubric) if cfg.rubric else None)
    hasher = MinHasher(cfg.template.permutations, cfg.template.seed)
    summaries: dict[str, PolicySummary] = {}
    scores: dict[str, tuple[list[float], list[float]]] = {}  # penalised, raw
    samples: dict[str, list[tuple[Trajectory, float]]] = {}
    judge_id = rubric_version = ""
    llm_raw: list[Verdict] = []
    rubric_raw: list[Verdict] = []
    baseline = make_judge("rubric", str(cfg.rubric) if cfg.rubric else None)
    for name in cfg.policies:
        trajectories = asyncio.run(_play(env, tasks, name, make, cfg, progress))
        raw = _judge_all(judge, trajectories, cfg.concurrency)
        if judge.id != "rubric":
            llm_raw += raw
            rubric_raw += [baseline.judge(t) for t in trajectories]
        if raw:
            judge_id, rubric_version = raw[0].judge_id, raw[0].rubric_version
        penalised, similarity, factor = _rounds(trajectories, raw, cfg, hasher, name)
        summaries[name] = _summary(name, cfg, trajectories, raw, penalised, similarity, factor)
        scores[name] = ([v.score for v in penalised], [v.score for v in raw])
        if _group(name, cfg) != "other":
            samples[name] = [(t, v.score) for t, v in zip(trajectories, raw, strict=True)][
                : cfg.injection_sample
            ]
        if on_verdict is not None:
            for t, v in zip(trajectories, penalised, strict=True):
                on_verdict(name, t, v)

    def pooled(group: Group, which: int) -> list[float]:
        return [s for n, pair in scores.items() if _group(n, cfg) == group for s in pair[which]]

    main_auc = auc(pooled("honest", 0), pooled("dishonest", 0))
    agree = None
    if llm_raw:
        from shopbench.judging.llm.agreement import agreement

        agree = agreement(llm_raw, rubric_raw)
    injection = _injection(judge, samples, cfg)
    intents = Counter(t.intent for t in tasks)
    return CalibrationReport(
        judge_id=judge_id,
        rubric_version=rubric_version,
        score_formula=cfg.formula.id,
        tasks=len(tasks),
        tasks_by_intent=dict(sorted(intents.items())),
        auc_honest_vs_dishonest=round(main_auc, 6),
        auc_unpenalised=round(auc(pooled("honest", 1), pooled("dishonest", 1)), 6),
        mean_score_by_policy={n: s.mean_process for n, s in summaries.items()},
        injection_delta=injection.mean_delta,
        template_penalty_by_policy={
            n: {"similarity": s.template_similarity, "factor": s.template_factor}
            for n, s in summaries.items()
        },
        grounding_caught_by_policy={n: s.grounding_caught for n, s in summaries.items()},
        injection=injection,
        policies=list(summaries.values()),
        acceptance=_acceptance(main_auc, summaries, injection),
        agreement_with_rubric=agree.spearman if agree else None,
        llm_fallbacks=agree.fallbacks if agree else 0,
    )


def _judge_all(judge: Judge, trajectories: Sequence[Trajectory], concurrency: int) -> list[Verdict]:
    """Every trajectory's verdict; an LLM judge asks its endpoint `concurrency` at a time."""
    ajudge_many = getattr(judge, "ajudge_many", None)
    if ajudge_many is None:
        return [judge.judge(t) for t in trajectories]

    async def run() -> list[Verdict]:
        try:
            return await ajudge_many(trajectories, concurrency)
        finally:
            await judge.aclose()  # type: ignore[attr-defined]

    return asyncio.run(run())


def render_markdown(report: CalibrationReport) -> str:
    """The report as a Markdown page (report.md)."""
    lines = [
        "# Judge calibration",
        "",
        f"Judge `{report.judge_id}` (rubric v{report.rubric_version}), score formula "
        f"`{report.score_formula}`, {report.tasks} tasks "
        f"({', '.join(f'{k} {v}' for k, v in report.tasks_by_intent.items())}).",
        "",
        f"- AUC honest vs dishonest: **{report.auc_honest_vs_dishonest:.3f}** "
        f"(before the template penalty {report.auc_unpenalised:.3f})",
        *([f"- Agreement with the rubric (Spearman): {report.agreement_with_rubric} "
           f"({report.llm_fallbacks} LLM fallbacks)"]
          if report.agreement_with_rubric is not None or report.llm_fallbacks else []),
        f"- Injection: mean change {report.injection_delta:+.3f}, largest "
        f"{report.injection.max_delta:+.3f} over {report.injection.trials} trials",
        "",
        "| policy | group | episodes | ASR | process | unpenalised | episode score | "
        "template sim | factor | grounding caught | first failing gate |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report.policies:
        top = ", ".join(f"{k} {v}" for k, v in list(s.stopped_at.items())[:3])
        lines.append(
            f"| {s.policy} | {s.group} | {s.episodes} | {s.asr:.2f} | {s.mean_process:.3f} | "
            f"{s.mean_process_unpenalised:.3f} | {s.mean_episode_score:.3f} | "
            f"{s.template_similarity:.2f} | {s.template_factor:.2f} | "
            f"{s.grounding_caught:.2f} | {top} |"
        )
    lines += ["", "## Injection", "", "| variant | mean change |", "|---|---|"]
    lines += [f"| {k} | {v:+.3f} |" for k, v in report.injection.by_variant.items()]
    lines += [f"| (group) {k} | {v:+.3f} |" for k, v in report.injection.by_group.items()]
    lines += ["", "## Targets", ""]
    lines += [f"- [{'x' if ok else ' '}] {k}" for k, ok in report.acceptance.items()]
    return "\n".join(lines) + "\n"


def write_report(report: CalibrationReport, out: Path) -> tuple[Path, Path]:
    """Write report.json and report.md into `out` (created); return their paths."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        json_path, md_path = out / "report.json", out / "report.md"
        json_path.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
        md_path.write_text(render_markdown(report))
    except OSError as e:
        raise CalibrationError(f"{out}: cannot write the report ({e.strerror})") from None
    return json_path, md_path
