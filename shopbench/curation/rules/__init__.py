"""The curation rules, one module each, and :data:`RULES`: their order in the pipeline.

Each drop is charged to the first rule, in this order, that drops it. A new rule is a module
here declaring its :class:`~shopbench.curation.registry.Rule` (name, parameters with their
defaults, reason column, how it decides) and its place in the list below (or, from outside,
``RULES.register(rule, before=..., after=...)``); the config, the
ledger, the pipeline, the report and ``shopbench curate --rules`` follow from it.
"""

from __future__ import annotations

from shopbench.curation.registry import RuleRegistry
from shopbench.curation.rules.caps import CAPS
from shopbench.curation.rules.claims import CLAIMS
from shopbench.curation.rules.clones import CLONES
from shopbench.curation.rules.contamination import CONTAMINATION
from shopbench.curation.rules.dedup import DEDUP
from shopbench.curation.rules.duplicates import DUPLICATES
from shopbench.curation.rules.judge import JUDGE
from shopbench.curation.rules.narrator import NARRATOR
from shopbench.curation.rules.outcome import OUTCOME
from shopbench.curation.rules.structure import STRUCTURE, loop_reason
from shopbench.curation.rules.validity import VALIDITY

RULES = RuleRegistry(
    [
        VALIDITY, CONTAMINATION, NARRATOR, CLAIMS, OUTCOME, JUDGE, STRUCTURE, CLONES,
        DUPLICATES, DEDUP, CAPS,
    ],
    reserved=("recovery",),
)  # fmt: skip
"""Every rule, in pipeline order (``recovery`` names the config's recovery table)."""

__all__ = ["RULES", "loop_reason"]  # loop_reason: its import path before the registry
