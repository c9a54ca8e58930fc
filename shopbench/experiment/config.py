"""What an experiment runs: :class:`ExperimentConfig`, read from one YAML (or TOML, JSON)
file.

The file names the archive (an arena to play, or one that exists), the model, the view the
rows and the policies read, the training budget every arm shares, the arms and the held-out
evaluation. Every check that needs no work runs when the file loads: an unknown arm, view or
key, an arena option the arena refuses, a model directory that cannot be played, arms
without ``base``. Paths in the file are read from the working folder, as a command's paths
are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from shopbench.agents.format.views import ObservationView
from shopbench.agents.local.config import check_model_dir
from shopbench.agents.local.grammar import Decoding
from shopbench.arena.config import ArenaConfig
from shopbench.datafiles import read_mapping
from shopbench.distill.config import CONFIGS, shipped_config
from shopbench.errors import ShopbenchError, first_problem
from shopbench.experiment.arms import ARMS, BASE, UNTRAINED, Arm, rows_of
from shopbench.experiment.errors import ExperimentError
from shopbench.records.task import Intent


class ArchiveSpec(BaseModel):
    """An archive that exists: its folder and the arena's truth file (``arena.json``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path = Field(description="the archive folder (an arena's OUT/archive)")
    truth: Path | None = Field(
        default=None, description="the arena's arena.json: which miners are honest"
    )
    catalog: Path = Field(description="the catalog the archive's episodes were played on")


class TrainSpec(BaseModel):
    """The training budget every arm shares: a shipped or given config and overrides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config: str = Field(
        default="smollm2-lora", description=f"a shipped config ({', '.join(CONFIGS)}) or a file"
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="TrainConfig fields over the config (max_steps, ...)"
    )
    tokens: int | None = Field(
        default=None, ge=1,
        description="every trained arm trains on this many tokens of its own pool's rows, "
        "distinct tasks first (shopbench.distill.token_budget); None: on its whole pool",
    )  # fmt: skip


class EvalSpec(BaseModel):
    """The held-out evaluation every arm and the base play: the same tasks, the same bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: int = Field(default=200, ge=1, description="held-out tasks evaluated")
    intents: list[Intent] = Field(default=["product"], min_length=1, description="intents")
    seed: int = Field(default=8, description="seed of the held-out task draw")
    draw_factor: int = Field(
        default=2, ge=1,
        description="tasks drawn per task evaluated, before those of a product group any "
        "training row touches are left out",
    )  # fmt: skip
    decoding: list[Decoding] = Field(
        default=["free"], min_length=1,
        description="each arm is evaluated under each: free (the model's own tokens), "
        "constrained (every tool call decoded under a grammar of the tool schemas, ids "
        "limited to those the episode showed) or grounded (constrained, prices built from "
        "the customer's numbers); the first listed runs first",
    )  # fmt: skip
    baselines: list[str] = Field(
        default_factory=list,
        description="reference policies played on the same held-out tasks under the same "
        "limits, reported beside the arms (careful, greedy, first_hit, ...)",
    )  # fmt: skip
    samples: int = Field(default=1, ge=1, description="episodes per task (K of pass@K)")
    max_turns: int = Field(default=10, ge=1, description="assistant turns an episode")
    max_idle_turns: int = Field(
        default=2, ge=1, description="turns in a row without a tool call that ran"
    )
    max_tokens: int | None = Field(
        default=None, ge=1,
        description="tokens a model generates a turn; None: derived from the trained rows "
        "(their assistant turns' p95, rounded up to 8)",
    )  # fmt: skip
    max_cut_share: float = Field(
        default=0.05, ge=0, lt=1,
        description="the largest share of the trained assistant turns the budget may cut; a "
        "max_tokens that cuts more is refused before any training",
    )  # fmt: skip
    step_tasks: int = Field(
        default=40, ge=0,
        description="held-out tasks whose reference episodes measure step accuracy (0: none)",
    )  # fmt: skip
    step_policy: str = Field(
        default="careful", description="the honest reference policy those episodes are played by"
    )
    concurrency: int = Field(default=16, ge=1, description="episodes played at once")

    @field_validator("baselines")
    @classmethod
    def _baselines(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError("a baseline is named twice")
        return [_reference_policy(n) for n in names]

    @field_validator("decoding")
    @classmethod
    def _decodings(cls, value: list[Decoding]) -> list[Decoding]:
        if len(set(value)) != len(value):
            raise ValueError("a decoding is named twice")
        return value
    turn_timeout_s: float = Field(default=1800.0, gt=0, description="seconds a turn may take")


def _reference_policy(name: str) -> str:
    from shopbench.agents.options import is_model_spec
    from shopbench.agents.registry import check_spec

    if is_model_spec(name):
        raise ValueError(f"{name}: a baseline is a reference policy, not a model")
    try:
        check_spec(name)
    except ShopbenchError as e:
        raise ValueError(str(e)) from None
    return name


class ExperimentConfig(BaseModel):
    """One experiment: the archive, the model, the view, the arms, the training, the eval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(default=0, description="seed of the build's split, training, sampling")
    model: Path = Field(description="the base model's directory (distill prepare's --out)")
    arena: ArenaConfig | None = Field(
        default=None, description="shopbench arena options (products, rounds, miners, ...) "
        "of the arena that makes the archive (its out: the experiment's arena/ folder)",
    )  # fmt: skip
    archive: ArchiveSpec | None = Field(default=None, description="an archive that exists")
    view: str = Field(default="full", description="observation view id of rows and policies")
    format: Literal["episode", "step"] = Field(
        default="step", description="row layout: episode or step"
    )
    train_intents: list[Intent] | None = Field(
        default=None, description="train on these intents' episodes only (None: every one)"
    )
    arms: list[Arm] = Field(default_factory=lambda: list(ARMS), min_length=1)
    min_rows: int = Field(
        default=50, ge=1, description="train rows an arm needs; fewer is an error before training"
    )
    recovery_weight: float = Field(
        default=3.0, gt=0, description="the recovery arm's weight of a recovery episode"
    )
    mask_refused: bool = Field(
        default=False,
        description="every trained arm takes no loss on a turn with a call the environment "
        "refused (the turns after it keep it as context)",
    )  # fmt: skip
    train: TrainSpec = Field(default_factory=TrainSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)

    @field_serializer("arena")
    def _arena_as_given(self, arena: ArenaConfig | None) -> dict[str, Any] | None:
        # The options the file gave, not every default: config.json, which a rerun compares,
        # keeps reading as it did, and a default the arena changes later is no difference.
        return None if arena is None else arena.model_dump(mode="json", exclude_unset=True)

    @field_validator("view")
    @classmethod
    def _view(cls, value: str) -> str:
        ObservationView.from_id(value)
        return value

    @field_validator("arms")
    @classmethod
    def _arms(cls, value: list[Arm]) -> list[Arm]:
        if len(set(value)) != len(value):
            raise ValueError("an arm is named twice")
        if BASE not in value:
            raise ValueError("the arms must include base: every arm is compared with it")
        if ("prompted" in value or "curated-2" in value) and "curated" not in value:
            raise ValueError("prompted and curated-2 read curated's rows: name curated too")
        return value

    @property
    def observation_view(self) -> ObservationView:
        """The view of every arm's rows and every policy."""
        return ObservationView.from_id(self.view)

    @property
    def trained_arms(self) -> list[Arm]:
        """The arms that train (all but base), in the config's order."""
        return [a for a in self.arms if a not in UNTRAINED]

    @property
    def pooled_arms(self) -> list[Arm]:
        """The arms whose own curation and rows the trained arms train on, in order."""
        return list(dict.fromkeys(rows_of(a) for a in self.trained_arms))


def load_experiment(path: Path, **overrides: Any) -> ExperimentConfig:
    """The experiment in the file at `path`, with `overrides` (keys given on the command
    line) over the file's. ExperimentError naming the file and the first key refused (an
    unknown arm, view or key, an arena option the arena refuses), a model directory that
    cannot be played, or a config naming both or neither of an arena and an archive."""
    data = read_mapping(path, what="the experiment config", error=ExperimentError,
                        default="yaml")  # fmt: skip
    try:
        config = ExperimentConfig.model_validate({**data, **overrides})
    except ValidationError as e:
        raise ExperimentError(f"{path}: {first_problem(e, default='config')}") from None
    if (config.arena is None) == (config.archive is None):
        raise ExperimentError(f"{path}: give an arena (to play) or an archive (that exists)")
    try:
        check_model_dir(config.model)
    except ShopbenchError as e:
        raise ExperimentError(f"{path}: model: {e}") from None
    if config.train.config not in CONFIGS and not Path(config.train.config).is_file():
        raise ExperimentError(
            f"{path}: train.config: {config.train.config} is neither a shipped config "
            f"({', '.join(CONFIGS)}) nor a file"
        )
    return config


__all__ = ["ArchiveSpec", "EvalSpec", "ExperimentConfig", "TrainSpec", "load_experiment",
           "shipped_config"]  # fmt: skip
