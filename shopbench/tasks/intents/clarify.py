"""A product task whose shopper holds part of the constraints back, answering when asked.

The query states part of the constraints and names the topics it holds back; the agent asks
the shopper (``ask_shopper``), who answers from the task's hidden card. The grader checks
every constraint, the held-back ones too; each answered question costs
:data:`QUESTION_COST` of the episode score, and the shopper answers at most
:data:`MAX_QUESTIONS` questions per episode.
"""

from __future__ import annotations

from shopbench.outcome.spec import GradingRules
from shopbench.packs.shopper import PACK as SHOPPER
from shopbench.tasks.gen_clarify import draft_clarify
from shopbench.tasks.intent_registry import IntentSpec, ShoppingBenchForm, TaskShape

QUESTION_COST = 0.07
"""The share of the episode score each answered question takes."""
MAX_QUESTIONS = 6
"""Questions answered per episode; with the cost above a success asking all of them still
scores 0.3 × 0.58 = 0.174, above every failure's 0.1."""

SPEC = IntentSpec(
    name="clarify",
    shape=TaskShape(min_slots=1, max_slots=1, hidden=True),
    draft=draft_clarify,
    grading=GradingRules(
        single_pick=True, question_cost=QUESTION_COST, max_questions=MAX_QUESTIONS
    ),
    packs=(SHOPPER,),
    shoppingbench=ShoppingBenchForm(reward="slot", marker="hidden", precedence=2),
)
