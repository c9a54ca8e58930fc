"""The shopper of a clarify episode: answers the agent's questions from the hidden card.

Deterministic and validator-owned. A question (at most
:data:`~shopbench.env.shopper.questions.MAX_QUESTION_CHARS` characters) is read for its
topics (:mod:`.questions`); the shopper answers the first one it names, truthfully:

- a held-back topic: the constraint, in the query's own forms (:mod:`.answers`);
- a topic the request stated: the same constraint again;
- a topic the task does not constrain (another attribute, the shop) or no topic at all:
  "I don't mind";
- a request for the product, an id, a title or the answer: a refusal, naming none.

The wording is drawn from a generator seeded with the episode's dialogue id and the
question's number, so a replay of the episode gets the same words. Each answered question
is logged (:class:`~shopbench.records.dialogue.ShopperTurn`); past the task's cap the
shopper answers no more (the call is refused and costs nothing). An optional LLM shopper
(:mod:`.rephrase`) may reword an answer; its words stand only when faithful,
and the log says who answered.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from shopbench.env.errors import ArgumentError, LimitError
from shopbench.env.packs import Rephraser
from shopbench.env.shopper.answers import (
    no_mind,
    one_at_a_time,
    open_words,
    pair_words,
    price_words,
    refuse,
    service_words,
    state,
)
from shopbench.env.shopper.questions import MAX_QUESTION_CHARS, read_question
from shopbench.env.shopper.rephrase import unfaithful_reason
from shopbench.errors import ShopbenchError
from shopbench.outcome.spec import Slot
from shopbench.records.dialogue import Dialogue, ShopperTurn
from shopbench.tasks.hidden import PAIR, PRICE, SERVICE, HiddenCard, slot_topics


class Shopper:
    """One episode's shopper: the full slot, what the query held back, and the log."""

    def __init__(
        self,
        slot: Slot,
        card: HiddenCard,
        keys: Sequence[str],
        dialogue_id: str,
        *,
        question_cost: float,
        max_questions: int,
        title: str = "",
    ) -> None:
        self._slot = slot
        self._card = card
        self._hidden = set(card.topics())
        self._constrained = set(slot_topics(slot))
        self._pairs = _pairs(slot)
        self._values = list(self._pairs.values())
        self._keys = tuple(dict.fromkeys([*self._pairs, *keys]))
        self._id = dialogue_id
        self._cost = question_cost
        self._cap = max_questions
        self._turns: list[ShopperTurn] = []
        self._title_words = [w for w in title.lower().split() if len(w) >= 4]
        self._last: str | None = None  # the rules' words for the last answered question

    def answer(self, question: str, turn: int) -> str:
        """The shopper's answer to `question`, asked in assistant turn `turn`; LimitError
        past the cap, ArgumentError for an empty or over-long question (neither counts)."""
        self._last = None
        text = self._answer(question, turn)
        self._last = text
        return text

    async def reword(self, rephraser: Rephraser) -> str | None:
        """The last answer reworded by `rephraser` (the LLM shopper), kept and logged as the
        LLM's when :meth:`accept` takes it; None, the rules' words standing, on any failure."""
        if self._last is None:
            return None
        try:
            text = await rephraser.rephrase(self._last)
        except (ShopbenchError, OSError, ValueError):
            return None
        return text if self.accept(text) else None

    def accept(self, text: str) -> bool:
        """Take `text` as the last answer's wording when it says what the rules said and
        nothing more (:func:`~shopbench.env.shopper.rephrase.unfaithful_reason` finds no
        reason to refuse it); a replay passes the archived wording here."""
        if self._last is None or not self._turns:
            return False
        refused = unfaithful_reason(
            self._last, text, values=self._values, forbidden=self._title_words
        )
        if refused is not None:
            return False
        self._turns[-1] = self._turns[-1].model_copy(update={"by": "llm"})
        self._last = None
        return True

    def _answer(self, question: str, turn: int) -> str:
        if len(self._turns) >= self._cap:
            raise LimitError(
                f"ask_shopper: the customer has answered {self._cap} questions, the most per "
                "episode; decide with what you know"
            )
        if not question.strip():
            raise ArgumentError("ask_shopper: argument 'question' is empty; ask one question")
        if len(question) > MAX_QUESTION_CHARS:
            raise ArgumentError(
                f"ask_shopper: argument 'question' is {len(question)} characters long; the "
                f"limit is {MAX_QUESTION_CHARS}"
            )
        rng = random.Random(_seed(self._id, len(self._turns)))
        reading = read_question(question, self._keys)
        if reading.product:
            self._log(turn, (), (), refused=True)
            return refuse(rng)
        if not reading.topics:
            self._log(turn, (), ())
            return no_mind(rng)
        topic = reading.topics[0]
        text = self._say(topic, rng)
        if len(reading.topics) > 1:
            text += one_at_a_time(rng)
        revealed = (topic,) if topic in self._hidden else ()
        self._log(turn, reading.topics, revealed)
        return text

    def dialogue(self) -> Dialogue:
        """The log so far, as the outcome records it."""
        return Dialogue(
            hidden=self._card.topics(), question_cost=self._cost, max_questions=self._cap,
            turns=list(self._turns),
        )  # fmt: skip

    # -- answering ---------------------------------------------------------------------------

    def _say(self, topic: str, rng: random.Random) -> str:
        if topic not in self._constrained:
            return no_mind(rng, open_words(topic))
        stated = topic not in self._hidden
        slot = self._slot
        if topic == PRICE and slot.price:
            clause = price_words(slot.price[0], rng)
        elif topic == SERVICE and slot.service:
            clause = service_words(list(slot.service), rng)
        else:
            key = topic[len(PAIR) :]
            clause = pair_words(key, self._pairs[key], rng)
        return state(clause, rng, stated=stated)

    def _log(
        self, turn: int, about: Sequence[str], revealed: Sequence[str], *, refused: bool = False
    ) -> None:
        self._turns.append(
            ShopperTurn(
                turn=max(1, turn), about=[t for t in about if t in self._constrained],
                revealed=list(revealed), refused=refused,
            )
        )  # fmt: skip


def _pairs(slot: Slot) -> dict[str, str]:
    """The slot's (key, value) pairs as the grader reads them: SKU options, then attributes."""
    out: dict[str, str] = {}
    for option in slot.sku_options or []:
        out.update({k: v for k, v in option.items() if k not in out})
    for attr in slot.attributes or []:
        for k, vs in attr.items():
            if k not in out and vs:
                out[k] = vs[0]
    return out


def _seed(dialogue_id: str, n: int) -> int:
    """The wording seed of the n-th question of a dialogue."""
    digest = hashlib.sha256(f"shopbench-shopper|{dialogue_id}|{n}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
