"""What a curation rule is, and the ordered registry the whole run is derived from.

A :class:`Rule` declares in one place its name, its parameters (a :class:`RuleParams`
model: every default and bound lives there), its reason column (the ledger column saying why
it would drop an episode) and how it decides:

- **per episode**, in the first pass: :attr:`Rule.decide` returns the episode's reason or
  None (and :attr:`Rule.features` fills the rule's other ledger ``columns``);
- **over the ledger**, in SQL once every episode is in: :attr:`Rule.flag` writes the reason
  column of every valid episode, whatever ran before (a miner-level verdict, a score over
  the miner's episodes), and :attr:`Rule.drop` drops live episodes itself (duplicates, caps:
  what depends on what is still kept).

The :class:`RuleRegistry` holds the rules in pipeline order, the one registry idiom
(:class:`shopbench.registry.Registry`) with a rule's own checks on top. The config's tables
(:mod:`shopbench.curation.config`), the ledger's schema (:mod:`shopbench.curation.ledger`),
the first pass (:mod:`shopbench.curation.pipeline`), the report's rows
(:mod:`shopbench.curation.report`) and ``shopbench curate --rules`` all read it, so a new
rule is one module of :mod:`shopbench.curation.rules` and its place in the order there (or,
at run time, :meth:`RuleRegistry.register`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from shopbench.archive.signing import Verifier
from shopbench.curation.features import EpisodeFacts
from shopbench.records.trajectory import Trajectory
from shopbench.registry import Registry

LIVE = "drop_rule IS NULL"
"""The ledger's condition for an episode no rule has dropped yet."""

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_ID = re.compile(r"[0-9a-f]{16,}")
_BAR = r"(?:[<>]=?|[≤≥]) ?[0-9]+(?:\.[0-9]+)?"
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def safe(text: str, limit: int = 40) -> str:
    """Miner-written text as a report may show it: letters, digits and ``_.-`` only, cut."""
    return _UNSAFE.sub("?", text[:limit])


def fold(reason: str, keep: Iterable[str] = ()) -> str:
    """`reason` with what is the episode's own folded, so reasons group: ids of 16 or more
    hex digits become ``…`` and numbers ``N``, except a number right after a comparison
    (``<``, ``<=``, ``>``, ``>=``: the bar it was compared with, a parameter) and the
    matches of the `keep` patterns (a rule's other parameters as its reasons write them)."""
    text = _ID.sub("…", reason)
    kept = "|".join([*keep, _BAR])
    pattern = re.compile(f"(?P<keep>{kept})|{_NUMBER}")
    return pattern.sub(lambda m: m.group(0) if m.group("keep") is not None else "N", text)


class RuleParams(BaseModel):
    """The parameters every rule has. A config's table for the rule may set any of them;
    every one has its default here, in the model, and nowhere else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=True,
        description="false: the rule drops nothing (the report still says what it would "
        "flag when that is decided per episode or over every valid episode)",
    )


P = TypeVar("P", bound=RuleParams)


@dataclass(frozen=True, slots=True)
class Episode:
    """One rebuilt record as the per-episode rules read it."""

    t: Trajectory
    facts: EpisodeFacts
    verifier: Verifier | None = None
    shard_signer: str | None = None  # the verified manifest's signer of the record's shard
    record: dict[str, Any] | None = None  # the plain dict `t` was validated from
    state: Mapping[str, Any] = field(default_factory=dict)  # each rule's `prepare`d state


class LedgerOps(Protocol):
    """What a rule's SQL may do with the ledger (:class:`shopbench.curation.ledger.Ledger`):
    its table of episodes is ``ep``, the live ones those where :data:`LIVE` holds."""

    @property
    def valid(self) -> str:
        """The condition for an episode the gate let through (``TRUE`` without a gate)."""
        ...

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        """Run statements over the ledger."""
        ...

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of a query over the ledger."""
        ...

    def load(self, name: str, table: pa.Table) -> None:
        """(Re)create the temporary table `name` holding `table`'s rows."""
        ...

    def drop(self, rule: str, where: str, reason: str, params: list[Any] | None = None) -> None:
        """Drop the live episodes where `where` holds, `reason` (SQL) saying why."""
        ...

    def drop_from(self, rule: str, table: str) -> None:
        """Drop the live episodes listed in `table` (columns ``seq``, ``why``)."""
        ...

    def kept_count(self) -> int:
        """Episodes still kept."""
        ...


@dataclass(frozen=True)
class Rule(Generic[P]):
    """One named curation rule (see the module doc).

    `features` gives one episode's values of `columns` (the ledger columns the rule's SQL
    reads; a rule that decides in the same pass may set its `reason_column` there too);
    `weight` a factor of the episode's training weight while the rule is on; `prepare` the
    rule's state for a run, built before any work and read as ``ep.state[name]``. `gate`
    marks the rule that rejects what cannot be used at all: records that do not rebuild and
    refused shards are charged to it, on or off, and an episode it rejects is read by no
    later rule. `keeps_decisions` marks a rule whose drops repeat a kept episode's
    decisions: the report counts them as retained. `keep_in_reasons` are patterns of the
    rule's parameters as its reasons write them, kept when the report folds reasons (a
    number after a comparison is kept anyway)."""

    name: str
    params: type[P]
    decide: Callable[[Episode, P], str | None] | None = None
    features: Callable[[Episode, P], Mapping[str, Any]] | None = None
    columns: Mapping[str, pa.DataType] = field(default_factory=dict)
    weight: Callable[[Episode, P], float] | None = None
    prepare: Callable[[P], Any] | None = None
    flag: Callable[[LedgerOps, P], None] | None = None
    drop: Callable[[LedgerOps, P], None] | None = None
    reason_column: str | None = None
    gate: bool = False
    keeps_decisions: bool = False
    keep_in_reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"rule name {self.name!r}: lower-case letters, digits and _")
        if not (isinstance(self.params, type) and issubclass(self.params, RuleParams)):
            raise ValueError(f"rule {self.name}: params must be a RuleParams model")
        if not (self.decide or self.flag or self.drop or self.reason_column):
            raise ValueError(f"rule {self.name}: decides nothing (decide, flag or drop)")
        for name in self.columns:
            if not _NAME.match(name):
                raise ValueError(f"rule {self.name}: column name {name!r}")
        if self.gate and self.decide is None:
            raise ValueError(f"rule {self.name}: a gate decides per episode")

    @property
    def column(self) -> str | None:
        """The ledger column holding why the rule would drop each episode (None for a rule
        that only drops live episodes in SQL, its reasons going straight to the drop)."""
        if self.reason_column is not None:
            return self.reason_column
        return f"r_{self.name}" if self.decide or self.flag else None

    @property
    def ledger_columns(self) -> dict[str, pa.DataType]:
        """Every ledger column the rule adds: its reason column, then its `columns`."""
        own = {self.column: pa.string()} if self.column else {}
        return own | dict(self.columns)

    @property
    def alone(self) -> bool:
        """Whether what the rule flags is decided whatever ran before (per episode, or in
        SQL over every valid episode): the report gives its effect on its own."""
        return self.column is not None and not self.gate

    @property
    def how(self) -> str:
        """How the rule decides, in words."""
        parts = []
        if self.decide or (self.column and not self.flag):
            parts.append("per episode")
        if self.flag:
            parts.append("over the ledger (SQL), every valid episode")
        if self.drop:
            parts.append("over the ledger (SQL), the live episodes")
        return "; ".join(parts)

    def summary(self) -> str:
        """The first paragraph of the parameters model's docstring, on one line."""
        doc = (self.params.__doc__ or "").strip().split("\n\n", 1)[0]
        return " ".join(doc.split())

    def describe(self) -> str:
        """The rule as comment lines of a TOML listing."""
        what = [f"{self.name}: {self.summary()}", f"decides {self.how}"]
        if self.column:
            what[-1] += f"; reason column {self.column}"
        if self.gate:
            what[-1] += "; off, it still rejects what does not rebuild"
        lines: list[str] = []
        for text in what:
            lines += textwrap.wrap(text, 96, initial_indent="# ", subsequent_indent="#   ")
        return "\n".join(lines)


class RuleRegistry(Registry[Rule[Any]]):
    """The rules in pipeline order (each drop is charged to the first rule that drops it):
    the one registry idiom (:class:`shopbench.registry.Registry`) with a rule's own checks
    on top (:meth:`admit`: no ledger column taken twice, one gate and it first). Iterating
    it gives the rules' names, as a mapping's keys; :meth:`rules` the rules. RegistryError
    for a name taken or an unknown neighbour, naming the rules."""

    def __init__(self, rules: Iterable[Rule[Any]] = (), *, reserved: Iterable[str] = ()) -> None:
        super().__init__("rule", key=_rule_name, reserved=reserved)
        for rule in rules:
            self.register(rule)

    def admit(self, name: str, entry: Rule[Any], at: int) -> None:
        """ValueError for a ledger column another rule has, a second gate, a gate anywhere
        but first, or a rule before the gate."""
        taken = {c: r.name for r in self.values() for c in r.ledger_columns}
        clash = sorted(set(entry.ledger_columns) & set(taken))
        if clash:
            raise ValueError(f"rule {name}: ledger column {clash[0]!r} is rule {taken[clash[0]]}'s")
        gate = self.gate
        if entry.gate and gate is not None:
            raise ValueError(f"rule {name}: {gate.name} is the gate already")
        if entry.gate and at != 0:
            raise ValueError(f"rule {name}: the gate comes first")
        if gate is not None and at == 0:
            raise ValueError(f"rule {name}: nothing comes before {gate.name}")

    def rules(self) -> tuple[Rule[Any], ...]:
        """The rules, in pipeline order."""
        return tuple(self.values())

    @property
    def gate(self) -> Rule[Any] | None:
        """The rule that rejects what cannot be used (see :class:`Rule`), if any."""
        return next((r for r in self.values() if r.gate), None)


def _rule_name(rule: Rule[Any]) -> str:
    return rule.name
