"""Products bought within a budget once a voucher applies."""

from __future__ import annotations

from shopbench.tasks.gen_voucher import draft_voucher
from shopbench.tasks.intent_registry import IntentSpec, ShoppingBenchForm, TaskShape

SPEC = IntentSpec(
    name="voucher",
    shape=TaskShape(min_slots=1, max_slots=4, voucher=True),
    draft=draft_voucher,
    shoppingbench=ShoppingBenchForm(reward="slots", marker="voucher", precedence=1),
)
