"""A clarify task's hidden card: which of its slot's constraints the query holds back.

The slot (the reward spec) keeps every constraint, so the grader checks the hidden ones like
any other; the card only says which parts the query leaves out, by topic: the price bound,
the services (one topic: how it is sold, paid and delivered), and each attribute or SKU key.
The card is gold data: it stays with the validator, which answers the agent's questions from
it (:mod:`shopbench.env.shopper`), and never goes into the task card a miner receives.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.outcome.spec import Slot

PRICE = "price"
SERVICE = "service"
PAIR = "pair:"


def pair_topic(key: str) -> str:
    """The topic of an attribute or SKU key, e.g. ``pair:color_family``."""
    return f"{PAIR}{key}"


class HiddenCard(BaseModel):
    """The topics of a slot the query does not state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    price: bool = Field(default=False, description="the price bound is held back")
    service: bool = Field(default=False, description="the services are held back")
    pairs: list[str] = Field(
        default_factory=list, description="the attribute / SKU keys held back, in slot order"
    )

    @model_validator(mode="after")
    def _holds_something(self) -> HiddenCard:
        if not (self.price or self.service or self.pairs):
            raise ValueError("a hidden card holds back at least one topic")
        if len(set(self.pairs)) != len(self.pairs):
            raise ValueError("a hidden card names each key once")
        return self

    def topics(self) -> list[str]:
        """The held-back topics: ``price``, ``service``, then ``pair:<key>`` in slot order."""
        out = [PRICE] if self.price else []
        out += [SERVICE] if self.service else []
        return out + [pair_topic(k) for k in self.pairs]

    def fits(self, slot: Slot) -> str | None:
        """Why the card does not fit `slot` (it holds back something the slot lacks); None
        when it fits."""
        if self.price and not slot.price:
            return "the card holds back a price bound the slot does not have"
        if self.service and not slot.service:
            return "the card holds back services the slot does not have"
        keys = {k for o in slot.sku_options or [] for k in o}
        keys |= {k for a in slot.attributes or [] for k in a}
        missing = [k for k in self.pairs if k not in keys]
        if missing:
            return f"the card holds back keys the slot does not ask for: {', '.join(missing)}"
        return None


def slot_topics(slot: Slot) -> list[str]:
    """Every topic a slot constrains besides its title, in card order."""
    out = [PRICE] if slot.price else []
    out += [SERVICE] if slot.service else []
    keys = [k for o in slot.sku_options or [] for k in o]
    keys += [k for a in slot.attributes or [] for k in a]
    return out + [pair_topic(k) for k in dict.fromkeys(keys)]


def visible_slot(slot: Slot, card: HiddenCard) -> Slot:
    """The slot as the query states it: the held-back constraints taken out."""
    hidden = set(card.pairs)
    options = [{k: v for k, v in o.items() if k not in hidden} for o in slot.sku_options or []]
    attributes = [
        {k: vs for k, vs in a.items() if k not in hidden} for a in slot.attributes or []
    ]
    return slot.model_copy(
        update={
            "price": None if card.price else slot.price,
            "service": None if card.service else slot.service,
            "sku_options": [o for o in options if o] or None,
            "attributes": [a for a in attributes if a] or None,
        }
    )
