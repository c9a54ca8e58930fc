"""Calibration: play every reference policy on a task set, judge and score it as validators
do, and say how well the judge separates honest shopping from its imitations.

Whether a policy is honest is its own property (``honest`` on the reference policy, read
through :mod:`shopbench.agents.registry`): honest ones (``careful``, ``careful_terse``,
``trial_and_error``) must score high, dishonest ones (``narrator``, ``narrator_quoting``,
``bluffer``, ``offline``, ``guesser``) low. Each policy's episodes are scored in rounds of
``round_size`` consecutive tasks by :func:`shopbench.scoring.round.score_round`, the
function validators score with, under a :class:`~shopbench.scoring.consensus.ConsensusConfig`
(the release's by default): its rubric, combine rule, template penalty, decision check and
score formula. ``template_penalty=False`` switches the template penalty off, to measure what
the other checks catch alone. Model policies (``hf:PATH``, ``openai:MODEL@URL``) may be
played beside them, in neither group, with the ``policy_options`` they are given.

The report (:mod:`shopbench.calibration.report`) gives the AUC of process scores
between the two groups, the mean process score per policy, how often query grounding caught
each policy, each policy's template similarity and penalty, and the mean change of the
judge's score when judge-directed text is planted in honest and dishonest trajectories
(:mod:`shopbench.calibration.injection`), which must never be positive; and whether each target
of :mod:`shopbench.calibration.targets` holds.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.options import PolicyOptions, check_applies
from shopbench.agents.registry import (
    POLICY_NAMES,
    check_spec,
    dishonest_policies,
    honest_policies,
    honesty,
    make_policy,
)
from shopbench.calibration.errors import CalibrationError
from shopbench.calibration.injection import VARIANTS, inject
from shopbench.calibration.report import (
    CalibrationReport,
    Group,
    InjectionResult,
    PolicySummary,
    auc,
)
from shopbench.calibration.targets import check_targets, load_targets
from shopbench.judging.judge import Judge
from shopbench.judging.llm.fallback import is_fallback
from shopbench.judging.registry import make_judge
from shopbench.records.verdict import Verdict
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.round import ScoredRound, score_round
from shopbench.scoring.template_penalty import MinHasher
from shopbench.trajectory.loop import RunLimits

if TYPE_CHECKING:
    from shopbench.env.env import ShoppingEnv
    from shopbench.records.trajectory import Trajectory
    from shopbench.tasks.model import Task

Progress = Callable[[str, int, int], None]
"""Called with a policy name, episodes done and episodes in all, as episodes finish."""


class CalibrationConfig(BaseModel):
    """What to calibrate on and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    consensus: ConsensusConfig = Field(
        default_factory=ConsensusConfig, description="the rubric, combine rule, template "
        "penalty and score formula episodes are scored with (default: the release's)",
    )  # fmt: skip
    llm_judge: str | None = Field(
        default=None, description="openai:MODEL@URL: an LLM judge that reads every episode, "
        "combined with the rubric as validators combine it on the episodes they sample",
    )  # fmt: skip
    policies: list[str] = Field(
        default_factory=lambda: list(POLICY_NAMES), min_length=1,
        description="policies to play: reference policies, and model policies (hf:PATH, "
        "openai:MODEL@URL) measured beside them",
    )  # fmt: skip
    policy_options: PolicyOptions = Field(
        default_factory=PolicyOptions, description="options of the model policies (decoding, "
        "timeouts, template arguments); a turn timeout applies to every policy",
    )  # fmt: skip
    targets: Path | None = Field(default=None, description="targets file; None: the packaged one")
    seed: int = Field(default=0, description="seed of the episode keys and the policies")
    concurrency: int = Field(default=4, ge=1, description="episodes played at once")
    round_size: int = Field(default=100, ge=2, description="tasks per template-penalty round")
    injection_sample: int = Field(
        default=50, ge=0, description="episodes per policy that get each injection variant"
    )
    template_penalty: bool = Field(
        default=True, description="apply the consensus template penalty (off: measure what "
        "the other checks catch without it)",
    )  # fmt: skip


def _group(name: str) -> Group:
    honest = honesty(name)
    return "other" if honest is None else "honest" if honest else "dishonest"


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 6) if values else 0.0


async def _play(
    env: ShoppingEnv, tasks: Sequence[Task], name: str, cfg: CalibrationConfig,
    progress: Progress | None,
) -> list[Trajectory]:
    from shopbench.evaluate.runner import EvalConfig, evaluate

    done = 0

    def tick(_: Trajectory) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(name, done, len(tasks))

    chosen = cfg.policy_options
    limits = RunLimits()
    if chosen.turn_timeout_s is not None:
        limits = RunLimits(turn_timeout_s=chosen.turn_timeout_s)
    options = chosen.options(name, 1, defaults=False)
    return await evaluate(
        env, tasks, lambda seed: make_policy(name, catalog=env.catalog, seed=seed, **options),
        EvalConfig(samples=1, concurrency=cfg.concurrency, seed=cfg.seed, limits=limits),
        on_done=tick,
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


def _judgements(rubric: Sequence[Verdict], llm: Sequence[Verdict] | None) -> list[Judgement]:
    """As a validator's round judge pairs them: an LLM verdict that fell back is the
    rubric's own verdict (with the fallback recorded), not a second opinion."""
    if llm is None:
        return [Judgement(rubric=v) for v in rubric]
    return [
        Judgement(rubric=m) if is_fallback(m) else Judgement(rubric=r, llm=m)
        for r, m in zip(rubric, llm, strict=True)
    ]


def _rounds(
    name: str, trajectories: Sequence[Trajectory], judgements: Sequence[Judgement],
    consensus: ConsensusConfig, cfg: CalibrationConfig, hasher: MinHasher,
) -> list[ScoredRound]:
    """The policy's episodes scored in rounds of ``round_size`` consecutive tasks."""
    n = cfg.round_size
    return [
        score_round(name, trajectories[i : i + n], judgements[i : i + n], consensus, hasher)
        for i in range(0, len(trajectories), n)
    ]


def _summary(name: str, rounds: Sequence[ScoredRound]) -> PolicySummary:
    scored = [t for r in rounds for t in r.trajectories]
    verdicts = [v for r in rounds for v in r.verdicts]
    gates = list(verdicts[0].gates) if verdicts else []
    rules = Counter(r.decisions.rule for r in rounds if r.decisions.rule is not None)
    return PolicySummary(
        policy=name,
        group=_group(name),
        episodes=len(scored),
        asr=_mean([float(t.success) for t in scored]),
        mean_process=_mean([v.score for v in verdicts]),
        mean_process_unpenalised=_mean([_unpenalised(v) for v in verdicts]),
        mean_process_successes=_mean(
            [v.score for t, v in zip(scored, verdicts, strict=True) if t.success]
        ),
        mean_episode_score=_mean([t.score or 0.0 for t in scored]),
        template_similarity=_mean([r.template.similarity for r in rounds]),
        template_factor=_mean([r.template.factor for r in rounds]),
        decision_margin=_mean([r.decisions.margin for r in rounds]),
        decision_factor=_mean([r.decisions.factor for r in rounds]),
        decision_rule=rules.most_common(1)[0][0] if rules else None,
        claims_false=_mean([float(v.signals.get("claims_false", 0) > 0) for v in verdicts]),
        grounding_caught=_mean(
            [float(not v.gates.get("grounded_queries", True)) for v in verdicts]
        ),
        stopped_at=dict(Counter(v.stopped_at or "none" for v in verdicts).most_common()),
        gate_pass_rate={g: _mean([float(v.gates[g]) for v in verdicts]) for g in gates},
    )


def _unpenalised(v: Verdict) -> float:
    return v.unpenalised_score if v.unpenalised_score is not None else v.score


def _injection(
    judge: Judge, samples: dict[str, list[tuple[Trajectory, float]]], seed: int
) -> InjectionResult:
    deltas: list[float] = []
    by_variant: dict[str, list[float]] = {v: [] for v in VARIANTS}
    by_group: dict[str, list[float]] = {"honest": [], "dishonest": []}
    for name, pairs in samples.items():
        group = _group(name)
        for t, base in pairs:
            for variant in VARIANTS:
                delta = judge.judge(inject(t, variant, seed)).score - base
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


def run_calibration(
    env: ShoppingEnv,
    tasks: Sequence[Task],
    config: CalibrationConfig | None = None,
    *,
    progress: Progress | None = None,
    on_verdict: Callable[[str, Trajectory, Verdict], None] | None = None,
) -> CalibrationReport:
    """Play every configured policy on every task once, judge, score, and report.

    Policies come from the reference registry (``offline`` with the environment's catalog).
    `on_verdict` receives each episode's trajectory and its final verdict (for a verdict
    file). Injection deltas are the judge's own: the LLM judge's when one is configured.
    """
    cfg = config or CalibrationConfig()
    if not tasks:
        raise CalibrationError("no tasks to calibrate on")
    for name in cfg.policies:
        check_spec(name)
    check_applies(cfg.policy_options, cfg.policies)
    groups = {_group(n) for n in cfg.policies}
    if not {"honest", "dishonest"} <= groups:
        raise CalibrationError(
            "the policies must include an honest one and a dishonest one (honest: "
            f"{', '.join(honest_policies())}; dishonest: {', '.join(dishonest_policies())})"
        )
    targets = load_targets(cfg.targets)
    consensus = cfg.consensus
    if not cfg.template_penalty:
        off = consensus.template.model_copy(update={"min_factor": 1.0})
        consensus = consensus.model_copy(update={"template": off})
    rubric = make_judge(consensus.judge, consensus.rubric)
    llm = make_judge(cfg.llm_judge, consensus.rubric) if cfg.llm_judge else None
    judge = llm or rubric  # the judge whose verdicts the injections move
    hasher = MinHasher(consensus.template.permutations, consensus.template.seed)
    summaries: dict[str, PolicySummary] = {}
    scores: dict[str, tuple[list[float], list[float]]] = {}  # penalised, unpenalised
    samples: dict[str, list[tuple[Trajectory, float]]] = {}
    judge_id = rubric_version = ""
    llm_raw: list[Verdict] = []
    rubric_raw: list[Verdict] = []
    for name in cfg.policies:
        trajectories = asyncio.run(_play(env, tasks, name, cfg, progress))
        by_rubric = [rubric.judge(t) for t in trajectories]
        by_llm = _judge_all(llm, trajectories, cfg.concurrency) if llm is not None else None
        if by_llm is not None:
            llm_raw += by_llm
            rubric_raw += by_rubric
        rounds = _rounds(name, trajectories, _judgements(by_rubric, by_llm), consensus, cfg,
                         hasher)
        verdicts = [v for r in rounds for v in r.verdicts]
        if verdicts:
            judge_id, rubric_version = verdicts[0].judge_id, verdicts[0].rubric_version
        summaries[name] = _summary(name, rounds)
        scores[name] = ([v.score for v in verdicts], [_unpenalised(v) for v in verdicts])
        if _group(name) != "other":
            own = by_llm if by_llm is not None else by_rubric
            samples[name] = [(t, v.score) for t, v in zip(trajectories, own, strict=True)][
                : cfg.injection_sample
            ]
        if on_verdict is not None:
            for r in rounds:
                for t, v in zip(r.trajectories, r.verdicts, strict=True):
                    on_verdict(name, t, v)

    def pooled(group: Group, which: int) -> list[float]:
        return [s for n, pair in scores.items() if _group(n) == group for s in pair[which]]

    main_auc = auc(pooled("honest", 0), pooled("dishonest", 0))
    agree = None
    if llm_raw:
        from shopbench.judging.llm.agreement import agreement

        agree = agreement(llm_raw, rubric_raw)
    injection = _injection(judge, samples, cfg.seed)
    intents = Counter(t.intent for t in tasks)
    return CalibrationReport(
        judge_id=judge_id,
        rubric_version=rubric_version,
        score_formula=consensus.score.id,
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
        decision_penalty_by_policy={
            n: {"margin": s.decision_margin, "factor": s.decision_factor}
            for n, s in summaries.items()
        },
        template_penalty=consensus.template.min_factor < 1.0,
        grounding_caught_by_policy={n: s.grounding_caught for n, s in summaries.items()},
        injection=injection,
        policies=list(summaries.values()),
        acceptance=check_targets(targets, main_auc, injection.mean_delta, summaries),
        agreement_with_rubric=agree.spearman if agree else None,
        llm_fallbacks=agree.fallbacks if agree else 0,
    )
