"""The consensus bundle: what every validator of a release must agree on.

The process judge and its rubric, the LLM judge's pins, how an LLM verdict moves the
rubric's score, the template penalty, the decision check, the episode score formula, the
EMA and the weight curve. Validators that differ in any of them score the same episode
differently and their weights drift apart, so the release fixes them
(:class:`ConsensusConfig`'s defaults) under one :data:`SPEC_VERSION`, sent as the weights'
``version_key``. The subnet layer gives them no flag, no variable and no file key; only the
local arena and calibration experiments build another.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shopbench.judging.llm.release import RELEASE, JudgeRelease
from shopbench.scoring.combine import CombineRule
from shopbench.scoring.copies import CopyRules
from shopbench.scoring.decision_rules import DecisionConfig
from shopbench.scoring.score import ScoreFormula
from shopbench.scoring.template_penalty import TemplateConfig
from shopbench.scoring.weights import WeightCurve

SPEC_VERSION = 5
"""The release's consensus version, sent as the weights' ``version_key``; bumped with any
change to a consensus parameter (2: rubric v2 with the decision and claim checks, and the
round's decision check; 3: copies of another miner's decisions earn nothing; 4: rubric v4, a
claim of success with a slot left empty is false; 5: decisions version 2, a search known by
what it returned and every part of a copy's decisions compared by containment; who follows
whom decided by answer times first, and credit per task)."""


class ConsensusConfig(BaseModel):
    """What every validator of a release must agree on; not operator-settable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec_version: int = Field(default=SPEC_VERSION, ge=0, description="weights version_key")
    judge: str = Field(default="rubric", description="process judge name")
    rubric: str | None = Field(default=None, description="rubric file; None is the packaged one")
    score: ScoreFormula = Field(default_factory=ScoreFormula, description="episode score")
    template: TemplateConfig = Field(
        default_factory=TemplateConfig, description="cross-episode template penalty"
    )
    decisions: DecisionConfig = Field(
        default_factory=DecisionConfig,
        description="the round's decision check: picks a trivial rule explains",
    )
    copies: CopyRules = Field(
        default_factory=CopyRules,
        description="miners whose decisions copy an earlier-registered miner's score zero",
    )
    curve: WeightCurve = Field(default_factory=WeightCurve, description="EMA → weights")
    ema_alpha: float = Field(
        default=0.1, gt=0, le=1, description="weight of the newest round in a miner's EMA"
    )
    llm_judge: JudgeRelease = Field(
        default=RELEASE, description="the LLM judge's pins: model, revision, prompt, rubric"
    )
    combine: CombineRule = Field(
        default_factory=CombineRule, description="how an LLM verdict moves the rubric's score"
    )
