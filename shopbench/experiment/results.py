"""What ``report.json`` holds: :class:`ExperimentReport`, one :class:`ArmResult` per arm."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from shopbench.evaluate.intervals import Estimate
from shopbench.evaluate.trained.table import MetricTable
from shopbench.experiment.arms import Arm


class ArmResult(BaseModel):
    """One arm: what it trained on, how it trained, how it played."""

    arm: Arm
    decoding: str = Field(default="free", description="how the model decoded its calls")
    key: str | None = Field(default=None, description="the evaluation's folder under eval/")
    model: str = Field(description="the model directory evaluated (relative to the folder "
                       "when inside it)")
    curated_episodes: int | None = Field(default=None, description="episodes curation kept")
    train_rows: int | None = Field(default=None, description="SFT train rows built")
    steps: int | None = None
    seen_tokens: int | None = Field(default=None, description="tokens the trainer processed")
    trained_tokens: int | None = Field(default=None, description="of the rows, tokens with loss")
    train_tokens_per_s: float | None = None
    sample: dict[str, Any] | None = Field(
        default=None, description="the token budget's sample of the arm's pool "
        "(shopbench.distill.token_budget.TokenSample)",
    )  # fmt: skip
    train_loss: list[tuple[int, float]] = Field(default_factory=list)
    eval_loss: list[tuple[int, float]] = Field(default_factory=list)
    table: MetricTable = Field(description="the evaluation's overall table")
    by_intent: dict[str, MetricTable] = Field(default_factory=dict)
    minus_base: dict[str, Estimate | None] = Field(
        default_factory=dict, description="this arm − base, paired over the held-out tasks"
    )
    step_accuracy: dict[str, Any] | None = Field(
        default=None, description="teacher-forced next actions on the reference episodes "
        "(shopbench.evaluate.trained.steps.StepReport)",
    )  # fmt: skip
    minus_baselines: dict[str, dict[str, Estimate | None]] = Field(
        default_factory=dict, description="baseline policy → metric → this arm − that "
        "baseline, paired over the held-out tasks",
    )  # fmt: skip
    steps_minus_base: dict[str, Estimate] = Field(
        default_factory=dict, description="step metric → this arm − base, paired over steps"
    )
    eval_s: float = Field(description="wall time of the evaluation's last run")
    eval_resumed: int = Field(
        default=0, description="episodes an interrupted run had played: kept, not in eval_s"
    )
    eval_episodes_per_s: float = Field(description="episodes the last run played, a second")
    train_s: float | None = None
    files: dict[str, str] = Field(
        description="what each figure was read from (paths inside the experiment's folder "
        "relative to it)"
    )


class BaselineResult(BaseModel):
    """A reference policy on the same held-out tasks under the same limits."""

    policy: str
    table: MetricTable
    eval_s: float
    files: dict[str, str]


class ExperimentReport(BaseModel):
    """``report.json``."""

    config: dict[str, Any]
    view: str
    heldout: dict[str, Any]
    level: float
    samples: int
    arms: list[ArmResult]
    baselines: list[BaselineResult] = Field(default_factory=list)
    differences: dict[str, dict[str, Estimate | None]] = Field(
        default_factory=dict, description="'a − b' → metric → paired difference (step "
        "metrics prefixed steps.)",
    )  # fmt: skip
    budget: dict[str, Any] | None = Field(
        default=None, description="the turn budget and the trained turns' lengths"
    )
    pending: list[str] = Field(
        default_factory=list, description="evaluations of the config not run yet (an arm, "
        "arm@decoding or baselines/policy)"
    )
    stages_s: dict[str, float]
    stages_at: dict[str, str] = Field(
        default_factory=dict, description="stage → when it finished (UTC)"
    )
