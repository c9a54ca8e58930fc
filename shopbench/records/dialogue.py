"""The shopper's side of a clarify episode, as the validator logged it.

A ``clarify`` task holds part of its constraints back (the hidden card); the agent learns
them only by asking the shopper (``ask_shopper``). The environment logs, per answered
question, which of the task's topics the question was read as being about and which hidden
ones the answer revealed. The record carries that log inside the outcome
(:attr:`shopbench.records.outcome.Outcome.dialogue`): the episode score reads the question
cost from it, and the rubric judge reads which hidden topics were asked before the
recommendation and which questions were about nothing held back.

A topic is ``price``, ``service`` or ``pair:<key>`` (an attribute or SKU key of the catalog).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AnsweredBy = Literal["rules", "llm"]


class ShopperTurn(BaseModel):
    """One answered question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int = Field(ge=1, description="the assistant turn the question was asked in")
    about: list[str] = Field(
        default_factory=list,
        description="the topics the question was read as being about (empty: none of the "
        "task's, answered 'I don't mind')",
    )
    revealed: list[str] = Field(
        default_factory=list, description="the hidden topics the answer stated"
    )
    refused: bool = Field(
        default=False, description="the question asked for a product, an id or a title"
    )
    by: AnsweredBy = Field(
        default="rules", description="who worded the answer: the rules, or the LLM shopper"
    )


class Dialogue(BaseModel):
    """What the shopper was asked in one episode, and what it cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden: list[str] = Field(description="the topics the query held back")
    question_cost: float = Field(ge=0, le=1, description="score taken per answered question")
    max_questions: int = Field(ge=0, description="questions answered at most per episode")
    turns: list[ShopperTurn] = Field(default_factory=list)

    @property
    def questions(self) -> int:
        """Answered questions (those over the cap were refused and cost nothing)."""
        return len(self.turns)

    @property
    def factor(self) -> float:
        """What the episode score is multiplied by: 1 − cost × questions, at least 0."""
        return max(0.0, round(1.0 - self.question_cost * self.questions, 6))

    def asked(self, before_turn: int | None = None) -> set[str]:
        """The hidden topics revealed (before the assistant turn `before_turn`, if given)."""
        return {
            t for q in self.turns if before_turn is None or q.turn < before_turn
            for t in q.revealed
        }  # fmt: skip

    def wasted(self) -> int:
        """Questions that revealed nothing held back (about a stated or an open topic, or
        asking for the product itself)."""
        return sum(1 for q in self.turns if not q.revealed)
