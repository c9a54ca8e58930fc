"""Task intents as declared units: what an intent declares, and the one registry of them.

An :class:`IntentSpec` is the one place a task intent is described; each built-in intent is
one module of :mod:`shopbench.tasks.intents`. The rest of the project asks this registry
instead of testing an intent's name: generation calls its drafter and its catalog support
check, the task model checks a task's shape against it, the grader reads its grading rules
(:class:`~shopbench.outcome.spec.GradingRules`, through the task), the environment offers
its tools, the ShoppingBench converter reads its record form, the RL environments route on
its tools.

The registry is :data:`REGISTRY`, the one registry idiom
(:class:`shopbench.registry.Registry`). The built-in intents are the wire vocabulary,
:data:`shopbench.records.task.Intent`, in its order: each name's module of
:mod:`shopbench.tasks.intents` is loaded on first use, not imported here (the modules import
the generators, which import the task model, which reads this registry). An add-on intent (a
test's toy) is added after them with :func:`register`; a signed record carries only the wire
vocabulary.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import AfterValidator

from shopbench.outcome.spec import GradingRules
from shopbench.packs.pack import ToolPack, tools_of
from shopbench.records.task import Intent
from shopbench.registry import Registry, declared_in
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
BUILTIN: tuple[str, ...] = get_args(Intent)
"""The built-in intents, in the order intents are listed: the wire vocabulary's names, each
declared by the module of the same name in :mod:`shopbench.tasks.intents`."""


def _spec_name(spec: IntentSpec) -> str:
    return spec.name


def _builtin() -> list[IntentSpec]:
    return declared_in(_PACKAGE, BUILTIN, "SPEC", _spec_name, kind="intent", error=TaskError)


REGISTRY: Registry[IntentSpec] = Registry("intent", key=_spec_name, error=TaskError, load=_builtin)
"""Every intent, built-in ones first (loaded on first use), then those registered."""


def register(
    spec: IntentSpec, *, before: str | None = None, after: str | None = None
) -> IntentSpec:
    """Add `spec` after the intents already registered (or before or after the one named);
    TaskError if its name is taken."""
    return REGISTRY.register(spec, before=before, after=after)


def unregister(name: str) -> None:
    """Remove the intent `name` (a test's toy intent); TaskError for a built-in or unknown one."""
    if name in BUILTIN or name not in REGISTRY:
        raise TaskError(f"intent {name!r} is not a registered add-on intent")
    REGISTRY.unregister(name)


def intent_names() -> tuple[str, ...]:
    """Every registered intent's name, in the registry's order (the built-in ones first, unless
    an add-on was registered before one)."""
    return REGISTRY.names()


def intent_specs() -> tuple[IntentSpec, ...]:
    """Every registered intent, in the order of :func:`intent_names`."""
    return tuple(REGISTRY.values())


def intent_spec(name: str) -> IntentSpec:
    """The intent `name`; TaskError naming the allowed ones when there is none."""
    return REGISTRY.lookup(name)


def _registered(name: str) -> str:
    if name not in REGISTRY:
        raise ValueError(REGISTRY.unknown(name))
    return name


IntentName = Annotated[str, AfterValidator(_registered)]
"""A registered intent's name, as a pydantic field checks it (configs and reports of the
task layer; a signed record keeps :data:`shopbench.records.task.Intent`)."""
