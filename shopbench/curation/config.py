"""What a curation run is told: each rule's parameters, recovery mining, the test sets.

A config is a TOML file with one table per rule (``[validity]``, ``[narrator]``, ...) and
``[recovery]``; every table is optional and every parameter has a default, and a rule with
``enabled = false`` drops nothing. An unknown table or parameter is refused before any work,
naming the valid ones. The release's default is ``shopbench/curation/data/curate.toml``
(``docs/curation.md`` gives each rule's measured effect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.curation.errors import CurationError
from shopbench.datafiles import load_toml

DEFAULT_CONFIG = "curate.toml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True


class ValidityParams(_Section):
    """Records that cannot be trusted or used are rejected, with the reason."""

    verify_signatures: bool = Field(
        default=True, description="each record's signature must verify, by its validator"
    )
    signatures: Literal["record", "shard"] = Field(
        default="record",
        description="record: check each record's own signature; shard: a shard whose signed "
        "manifest and sha256 verify vouches for its rows (each must name the manifest's signer)",
    )
    require_terminated: bool = Field(default=True, description="the agent called terminate")
    require_one_recommendation: bool = Field(
        default=True, description="exactly one recommend_product call was accepted"
    )
    require_results: bool = Field(default=True, description="every tool call has a result")
    require_shown_ids: bool = Field(
        default=True, description="every recommended id was shown in the episode"
    )
    failure_kinds: list[str] = Field(
        default_factory=lambda: ["policy_error", "policy_timeout", "invalid_reply", "oversized"],
        description="turn failures that make a record unusable",
    )


class ContaminationParams(_Section):
    """Queries that overlap a test set are dropped (and counted either way)."""

    test_sets: list[str] = Field(
        default_factory=list,
        description="task files (ours or ShoppingBench's) whose queries must not be trained on",
    )
    threshold: float = Field(
        default=0.6, gt=0, le=1,
        description="share of a query's word weight (IDF over the test set, words normalised) "
        "found in one test query that contaminates it",
    )  # fmt: skip
    cover_threshold: float = Field(
        default=0.9, gt=0, le=1,
        description="share of one test query's word weight found in a query that contaminates "
        "it (a test query padded with words of its own)",
    )  # fmt: skip


class NarratorParams(_Section):
    """Calls not driven by the agent's own reasoning, as one score with a threshold."""

    threshold: float = Field(default=0.6, ge=0, description="score at or above: dropped")
    ungrounded_weight: float = Field(
        default=1.0, ge=0, description="x share of searches with words the agent never saw"
    )
    mismatch_weight: float = Field(
        default=0.5, ge=0, description="x share of calls the turn's reasoning does not name"
    )
    skeleton_weight: float = Field(
        default=0.6, ge=0,
        description="x share of the miner's episodes with this episode's call skeleton",
    )  # fmt: skip
    claims_weight: float = Field(
        default=0.25, ge=0, description="x 1 when the reasoning cites ids or prices never shown"
    )
    skeleton_min_episodes: int = Field(
        default=8, ge=2, description="a miner needs this many episodes for the skeleton signal"
    )
    skeleton_floor: float = Field(
        default=0.3, ge=0, le=1,
        description="skeleton shares up to this count as zero (tasks of one kind look alike)",
    )  # fmt: skip


class ClaimsParams(_Section):
    """Miners whose claims of success the validator's grader refutes too often: all their
    episodes go (their lucky successes are luck, not checking). Decided per miner with an
    interval, not a fixed minimum of episodes, so a liar split over many hotkeys with a few
    episodes each is judged on each: a miner goes when, at `confidence`, its refuted share
    is above `honest_share` (the Wilson interval's lower bound)."""

    honest_share: float = Field(
        default=0.05, ge=0, lt=1,
        description="refuted share of claims an honest miner stays below (honest reference "
        "policies: 0 of 232)",
    )  # fmt: skip
    confidence: float = Field(
        default=0.95, ge=0.5, lt=1,
        description="one-sided confidence that the miner's refuted share exceeds honest_share",
    )  # fmt: skip
    min_episodes: int = Field(
        default=1, ge=1, description="claiming episodes a miner needs before it is judged"
    )
    count_unsupported: bool = Field(
        default=True,
        description="a claim about a missed constraint in details the agent never opened "
        "counts as refuted",
    )
    count_beaten: bool = Field(
        default=True,
        description="a pick meeting fewer visible constraints than a product the agent "
        "opened counts as refuted",
    )


class OutcomeParams(_Section):
    """Kept: a success, or a mean rule score at least the bar."""

    rule_score_min: float = Field(default=0.5, ge=0, le=1, description="the rule-score bar")


class JudgeParams(_Section):
    """Kept: a process score at least the bar; an LLM judge's score weights the episode."""

    process_score_min: float = Field(default=0.5, ge=0, le=1, description="the process bar")
    llm_soft_weight: bool = Field(
        default=True,
        description="where an LLM judge scored the episode, weight it by that score",
    )
    require_verdict: bool = Field(default=False, description="drop episodes with no verdict")


class StructureParams(_Section):
    """Loops and repeated identical calls; optionally the shortest success per task and miner."""

    max_identical_calls: int = Field(
        default=3, ge=1, description="the same call with the same arguments at most this often"
    )
    loop_repeats: int = Field(
        default=3, ge=2, description="a block of calls repeated this many times in a row is a loop"
    )
    max_loop_period: int = Field(default=4, ge=1, description="longest block a loop repeats")
    shortest_success: bool = Field(
        default=False, description="keep only the shortest success per (task, miner)"
    )


class ClonesParams(_Section):
    """Miners whose replies are identical on shared tasks: the earliest registered is kept."""

    min_shared_tasks: int = Field(
        default=4, ge=1, description="shared tasks needed before two miners can be clones"
    )
    min_identical_share: float = Field(
        default=1.0, gt=0, le=1, description="share of shared tasks with identical replies"
    )


class DuplicatesParams(_Section):
    """Episodes of one task with the same decisions (whatever their wording): one is kept,
    that of the miner seen first (first block, then uid), else the earliest started."""

    compare: Literal["decisions", "calls", "picks"] = Field(
        default="decisions",
        description="decisions: the products opened (one set), the picks, the refused calls, "
        "and searches where one episode's contain the other's (shopbench.records.decisions, "
        "as the weights group copies); calls: every call's name and normalised arguments and "
        "the picks, exactly; picks: the products opened and the picks",
    )


class DedupParams(_Section):
    """Near-duplicate trajectories of one cluster collapse to the best-scored one."""

    threshold: float = Field(
        default=0.9, gt=0, le=1, description="estimated Jaccard similarity of two duplicates"
    )
    shingle: int = Field(default=3, ge=1, le=16, description="word shingle length")
    permutations: int = Field(default=64, ge=8, le=256, description="MinHash permutations")


class CapsParams(_Section):
    """Diversity caps: no cluster, miner or intent may fill the set (0 = no cap)."""

    max_per_cluster: int = Field(default=0, ge=0, description="episodes per cluster")
    max_per_miner: int = Field(default=0, ge=0, description="episodes per miner")
    max_per_intent: int = Field(default=0, ge=0, description="episodes per intent")
    max_miner_share: float = Field(
        default=0.0, ge=0, le=1, description="share of the kept episodes per miner (0 = none)"
    )
    max_intent_share: float = Field(
        default=0.0, ge=0, le=1, description="share of the kept episodes per intent (0 = none)"
    )


class RecoveryParams(_Section):
    """Trial-and-error segments that end in success: tagged, up-weighted, optionally masked."""

    weight: float = Field(default=1.5, ge=0, description="weight factor of a recovery episode")
    mask_errors: bool = Field(default=False, description="mask the erroneous turns out of training")


class CurateConfig(BaseModel):
    """A whole curation run's rules, in the order the pipeline applies them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    validity: ValidityParams = ValidityParams()
    contamination: ContaminationParams = ContaminationParams()
    narrator: NarratorParams = NarratorParams()
    claims: ClaimsParams = ClaimsParams()
    outcome: OutcomeParams = OutcomeParams()
    judge: JudgeParams = JudgeParams()
    structure: StructureParams = StructureParams()
    clones: ClonesParams = ClonesParams()
    duplicates: DuplicatesParams = DuplicatesParams()
    dedup: DedupParams = DedupParams()
    caps: CapsParams = CapsParams()
    recovery: RecoveryParams = RecoveryParams()

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        sections = cls.model_fields
        for name, value in data.items():
            if name not in sections:
                raise ValueError(
                    f"unknown rule {name!r} (rules: {', '.join(RULES)}; also: recovery)"
                )
            model = sections[name].annotation
            if isinstance(value, dict) and isinstance(model, type):
                params = model.model_fields  # type: ignore[attr-defined]
                for key in value:
                    if key not in params:
                        raise ValueError(
                            f"{name}: unknown parameter {key!r} (parameters: {', '.join(params)})"
                        )
        return data

    def with_test_sets(self, paths: list[str]) -> CurateConfig:
        """This config with `paths` added to the contamination test sets."""
        if not paths:
            return self
        c = self.contamination
        merged = c.model_copy(update={"test_sets": [*c.test_sets, *paths]})
        return self.model_copy(update={"contamination": merged})


RULES: tuple[str, ...] = (
    "validity", "contamination", "narrator", "claims", "outcome", "judge", "structure",
    "clones", "duplicates", "dedup", "caps",
)  # fmt: skip
"""The rules, in pipeline order (each drop is charged to the first rule that drops it)."""


def load_config(path: str | Path | None = None) -> CurateConfig:
    """The config at `path`, or the release's default; CurationError naming the file and the
    first problem (an unknown rule or parameter lists the valid ones)."""
    return load_toml(
        CurateConfig, path, package="shopbench.curation", name=DEFAULT_CONFIG,
        what="curation config", error=CurationError,
    )  # fmt: skip
