"""Task intents as declared units: what an intent declares, and the one registry of them.

An :class:`IntentSpec` is the one place a task intent is described; each built-in intent is
one module of :mod:`shopbench.tasks.intents`. The rest of the project asks this registry
instead of testing an intent's name: generation calls its drafter and its catalog support
check, the task model checks a task's shape against it, the grader reads its grading rules
(:class:`~shopbench.outcome.spec.GradingRules`, through the task), the environment offers
its tools, the ShoppingBench converter reads its record form, the RL environments route on
its tools.

The intent modules are loaded by name on first use, not imported here: they import the
generators, which import the task model, which reads this registry. A signed record carries
an intent as :data:`shopbench.records.task.Intent`, the wire vocabulary: the built-in names
are exactly its values (a test holds them equal).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator

from shopbench.outcome.spec import GradingRules
from shopbench.packs.pack import ToolPack, tools_of
from shopbench.tasks.errors import TaskError

if TYPE_CHECKING:
    from shopbench.tasks.draft import DraftResult, Sampler

Drafter = Callable[["Sampler", random.Random], "DraftResult"]
"""Drafts one task of the intent from the eligible products, with the task index's rng."""

Support = Callable[["Sampler", str], "str | None"]
"""Why the catalog cannot give any task of the intent (given the words saying where the
targets come from, e.g. "in the live split"); None when it may."""

RewardForm = Literal["slot", "slots", "target_record"]


@dataclass(frozen=True)
class TaskShape:
    """What a task of the intent holds (the task model rejects any other shape)."""

    min_slots: int
    max_slots: int
    voucher: bool = False
    hidden: bool = False
    """The task holds constraints back on a hidden card (:mod:`shopbench.tasks.hidden`)."""

    def slots_text(self) -> str:
        """The slot count in words, as the task model's errors say it."""
        if self.min_slots == self.max_slots == 1:
            return "exactly one slot"
        return f"{self.min_slots}-{self.max_slots} slots"


@dataclass(frozen=True)
class ShoppingBenchForm:
    """How ShoppingBench writes a record of the intent (see :mod:`shoppingbench_format`).

    `reward` is the reward's form: one slot object, a list of slots, or the full target
    product record (with the answer in ``Knowledge_Attribute``). `marker` is a record key
    only this intent's records carry; records are told apart by it first, then by the
    reward's form, a record carrying two markers being the one with the lower
    `precedence`. `name` is ShoppingBench's name of the intent when it differs from ours.
    """

    reward: RewardForm
    marker: str | None = None
    precedence: int = 0
    name: str | None = None


@dataclass(frozen=True)
class IntentSpec:
    """One task intent, declared once (one module per intent in this package)."""

    name: str
    shape: TaskShape
    draft: Drafter
    shoppingbench: ShoppingBenchForm
    grading: GradingRules = field(default_factory=GradingRules)
    support: Support | None = None
    packs: tuple[ToolPack, ...] = ()
    """The tool packs (:mod:`shopbench.packs`) whose tools this intent's tasks are offered
    besides the tools every task gets."""

    @property
    def tools(self) -> frozenset[str]:
        """The tools offered on this intent's tasks besides the tools every task gets."""
        return tools_of(self.packs)


_PACKAGE = "shopbench.tasks.intents"
BUILTIN: tuple[str, ...] = ("product", "shop", "voucher", "knowledge", "clarify")
"""The modules of :mod:`shopbench.tasks.intents` that declare an intent, in the order
intents are listed."""

_SPECS: dict[str, IntentSpec] = {}


def _specs() -> dict[str, IntentSpec]:
    if not _SPECS:
        for module in BUILTIN:
            spec: IntentSpec = importlib.import_module(f"{_PACKAGE}.{module}").SPEC
            _SPECS[spec.name] = spec
    return _SPECS


def register(spec: IntentSpec) -> None:
    """Add `spec` after the intents already registered; TaskError if its name is taken."""
    specs = _specs()
    if spec.name in specs:
        raise TaskError(f"intent {spec.name!r} is already registered")
    specs[spec.name] = spec


def unregister(name: str) -> None:
    """Remove the intent `name` (a test's toy intent); TaskError for a built-in or unknown one."""
    if name in BUILTIN or name not in _specs():
        raise TaskError(f"intent {name!r} is not a registered add-on intent")
    del _SPECS[name]


def intent_names() -> tuple[str, ...]:
    """Every registered intent's name, built-in ones first, in their order."""
    return tuple(_specs())


def intent_specs() -> tuple[IntentSpec, ...]:
    """Every registered intent, in the order of :func:`intent_names`."""
    return tuple(_specs().values())


def intent_spec(name: str) -> IntentSpec:
    """The intent `name`; TaskError naming the allowed ones when there is none."""
    spec = _specs().get(name)
    if spec is None:
        raise TaskError(f"unknown intent {name!r} (allowed: {', '.join(_specs())})")
    return spec


def _registered(name: str) -> str:
    if name not in _specs():
        raise ValueError(f"unknown intent {name!r} (allowed: {', '.join(_specs())})")
    return name


IntentName = Annotated[str, AfterValidator(_registered)]
"""A registered intent's name, as a pydantic field checks it (configs and reports of the
task layer; a signed record keeps :data:`shopbench.records.task.Intent`)."""
