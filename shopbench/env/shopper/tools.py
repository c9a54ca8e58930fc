"""``ask_shopper`` and the shopper pack's handler: how an episode opens the shopper.

An episode that offers the pack (a clarify task) gets a :class:`ShopperSession`: the tool,
the episode's shopper (when the task has a hidden card) and the environment's optional LLM
rewording; the episode's outcome records the shopper's log (:meth:`ShopperSession.dialogue`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shopbench.env.errors import NotAllowedError
from shopbench.env.packs import PackHandler, PackSession
from shopbench.env.results import ShopperReply
from shopbench.env.shopper.shopper import Shopper
from shopbench.env.toolkit import Toolkit, tool
from shopbench.packs.shopper import PACK

if TYPE_CHECKING:
    from shopbench.env.packs import Rephraser, Setting
    from shopbench.records.dialogue import Dialogue
    from shopbench.tasks.model import Task


class ShopperTools(Toolkit):
    """``ask_shopper``, bound to one episode's shopper (None: a task with nothing held back)."""

    def __init__(self, shopper: Shopper | None) -> None:
        self._shopper = shopper

    @tool
    def ask_shopper(self, question: str) -> ShopperReply:
        """Ask the customer one question about what they want: their budget, a service they
        need, or a feature such as the color family or the size. The customer answers only
        what you ask and never names a product, an id or a title. Each answered question
        lowers the score of the episode, and the customer answers a few at most: ask only
        about what the request leaves open.

        Args:
            question: One question about one thing, at most 300 characters, e.g. "What is
                your budget?" or "Which color family would you like?".
        """
        if self._shopper is None:
            raise NotAllowedError("ask_shopper: this customer has said everything already")
        return ShopperReply(answer=self._shopper.answer(question, self.turn))


class ShopperSession(PackSession):
    """One episode's shopper: its tool, its log, and the LLM's rewording of its answers."""

    def __init__(self, shopper: Shopper | None, rephraser: Rephraser | None) -> None:
        super().__init__(ShopperTools(shopper))
        self._shopper = shopper
        self._rephraser = rephraser if shopper is not None else None

    def dialogue(self) -> Dialogue | None:
        """The shopper's log (None on a task with nothing held back)."""
        return None if self._shopper is None else self._shopper.dialogue()

    async def reword(self) -> str | None:
        """The last answer in the LLM shopper's words, where it has one and they are
        faithful; None: the rules' words stand."""
        if self._rephraser is None or self._shopper is None:
            return None
        return await self._shopper.reword(self._rephraser)

    def accept(self, text: str) -> bool:
        """Take an LLM shopper's archived `text` for the last answer where it is faithful."""
        return self._shopper is not None and self._shopper.accept(text)


def open_shopper(env: Setting, task: Task, dialogue_id: str) -> ShopperSession:
    """The shopper of a task with a hidden card: it knows the target's attribute and SKU
    keys, to tell the ones it does not mind about from questions about nothing."""
    if task.hidden is None:
        return ShopperSession(None, None)
    slot = task.reward[0]
    target = env.catalog.index.get([slot.product_id])[0] if slot.product_id else None
    keys = [] if target is None else [*target.attributes, *(
        k for option in target.sku_options.values() for k in option
    )]  # fmt: skip
    shopper = Shopper(
        slot, task.hidden, keys, dialogue_id,
        question_cost=task.rules.question_cost, max_questions=task.rules.max_questions,
        title=target.title if target is not None else "",
    )  # fmt: skip
    return ShopperSession(shopper, env.rephraser)


HANDLER = PackHandler(pack=PACK, toolkit=ShopperTools, open=open_shopper)
