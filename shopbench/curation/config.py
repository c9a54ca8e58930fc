"""What a curation run is told: each rule's parameters, recovery mining, the test sets.

A config is a TOML file with one table per rule (``[validity]``, ``[narrator]``, ...: the
rules of :data:`shopbench.curation.rules.RULES`) and ``[recovery]``. Every table and every
parameter is optional: each default is declared once, in the rule's parameters model, and a
config holds only what it changes. A rule with ``enabled = false`` drops nothing. An unknown
table or parameter is refused before any work, naming the valid ones. The release's config
is ``shopbench/curation/data/curate.toml`` (its departures from the defaults);
``shopbench curate --rules`` prints every rule with every default (:func:`defaults_toml`).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shopbench.curation.contamination import ContaminationParams
from shopbench.curation.errors import CurationError
from shopbench.curation.registry import Rule, RuleParams
from shopbench.curation.rules import RULES
from shopbench.curation.rules.caps import CapsParams
from shopbench.curation.rules.claims import ClaimsParams
from shopbench.curation.rules.clones import ClonesParams
from shopbench.curation.rules.dedup import DedupParams
from shopbench.curation.rules.duplicates import DuplicatesParams
from shopbench.curation.rules.judge import JudgeParams
from shopbench.curation.rules.narrator import NarratorParams
from shopbench.curation.rules.outcome import OutcomeParams
from shopbench.curation.rules.structure import StructureParams
from shopbench.curation.rules.validity import ValidityParams
from shopbench.datafiles import load_toml
from shopbench.errors import first_problem

DEFAULT_CONFIG = "curate.toml"
RECOVERY = "recovery"

__all__ = [
    "DEFAULT_CONFIG", "CapsParams", "ClaimsParams", "ClonesParams", "ContaminationParams",
    "CurateConfig", "DedupParams", "DuplicatesParams", "JudgeParams", "NarratorParams",
    "OutcomeParams", "RecoveryParams", "StructureParams", "ValidityParams", "defaults_toml",
    "load_config",
]  # fmt: skip


class RecoveryParams(BaseModel):
    """Trial-and-error segments that end in success: tagged, up-weighted, optionally masked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    weight: float = Field(default=1.5, ge=0, description="weight factor of a recovery episode")
    mask_errors: bool = Field(default=False, description="mask the erroneous turns out of training")
    mask_refused: bool = Field(
        default=False,
        description="mask every turn with a call the environment refused out of training, in "
        "every kept episode (later turns keep it as context)",
    )  # fmt: skip


def _section(name: str, model: type[BaseModel], value: Any) -> BaseModel:
    """`value` (a table of the config, or a model already) as `model`; ValueError naming
    the table and the first problem."""
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        unknown = [k for k in value if k not in model.model_fields]
        if unknown:
            raise ValueError(
                f"{name}: unknown parameter {unknown[0]!r} "
                f"(parameters: {', '.join(model.model_fields)})"
            )
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise ValueError(first_problem(e, under=name)) from None


class CurateConfig(BaseModel):
    """A whole curation run: one table per rule of the registry, in pipeline order, then
    ``recovery``. ``cfg.<rule>`` (or :meth:`params`) is the rule's parameters model."""

    model_config = ConfigDict(extra="allow", frozen=True)

    if TYPE_CHECKING:  # the tables are the registry's, read as attributes

        def __getattr__(self, name: str) -> Any: ...

    @model_validator(mode="before")
    @classmethod
    def _tables(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name in data:
            if name not in RULES and name != RECOVERY:
                raise ValueError(f"{RULES.unknown(name)}, or {RECOVERY} (its own table)")
        tables: dict[str, Any] = {
            rule.name: _section(rule.name, rule.params, data.get(rule.name, {}))
            for rule in RULES.values()
        }
        tables[RECOVERY] = _section(RECOVERY, RecoveryParams, data.get(RECOVERY, {}))
        return tables

    @property
    def recovery(self) -> RecoveryParams:
        """Recovery mining's parameters."""
        value = (self.__pydantic_extra__ or {}).get(RECOVERY)
        return value if isinstance(value, RecoveryParams) else RecoveryParams()

    def params(self, rule: str | Rule[Any]) -> RuleParams:
        """The parameters of `rule` (a rule registered after this config was read gets its
        defaults)."""
        name = rule if isinstance(rule, str) else rule.name
        value = (self.__pydantic_extra__ or {}).get(name)
        if isinstance(value, RuleParams):
            return value
        default: RuleParams = RULES[name].params()
        return default

    def plan(self) -> list[tuple[Rule[Any], RuleParams]]:
        """Every registered rule with its parameters, in pipeline order."""
        return [(rule, self.params(rule)) for rule in RULES.values()]

    def with_test_sets(self, paths: list[str]) -> CurateConfig:
        """This config with `paths` added to the contamination test sets."""
        if not paths:
            return self
        c = self.contamination
        merged = c.model_copy(update={"test_sets": [*c.test_sets, *paths]})
        return self.model_copy(update={"contamination": merged})


def load_config(path: str | Path | None = None) -> CurateConfig:
    """The config at `path`, or the release's default; CurationError naming the file and the
    first problem (an unknown rule or parameter lists the valid ones)."""
    return load_toml(
        CurateConfig, path, package="shopbench.curation", name=DEFAULT_CONFIG,
        what="curation config", error=CurationError,
    )  # fmt: skip


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _table(name: str, model: BaseModel) -> list[str]:
    lines = [f"[{name}]"]
    for key, info in type(model).model_fields.items():
        entry = f"{key} = {_toml_value(getattr(model, key))}"
        note = info.description or ""
        lines += [f"# {line}" for line in textwrap.wrap(note, 96 - 2)] if note else []
        lines.append(entry)
    return lines


def defaults_toml(cfg: CurateConfig | None = None) -> str:
    """A complete config as TOML, every rule in pipeline order with how it decides, each
    parameter with its description: the defaults, or `cfg`'s values."""
    cfg = cfg if cfg is not None else CurateConfig()
    out = [
        "# Every curation rule in pipeline order, each parameter at its value. A config needs",
        "# only the entries it changes (`shopbench curate --config FILE`).",
    ]
    for rule, params in cfg.plan():
        out += ["", rule.describe(), *_table(rule.name, params)]
    out += ["", "# recovery: " + (RecoveryParams.__doc__ or "").strip()]
    out += _table(RECOVERY, cfg.recovery)
    return "\n".join(out) + "\n"
