"""The voucher task's budget check, with ShoppingBench's arithmetic.

The recommended products' total must be within the budget, or the voucher must apply and
bring it within: the voucher applies when the total reaches its threshold (>=, although the
query says "exceeds") and, for a shop voucher, every product comes from one shop. A fixed
voucher takes `face_value` off; a percentage voucher takes `discount` × total off, at most
`cap`. The same floating-point operations as ShoppingBench's evaluator are used, in the same
order, so a total exactly at a bound is judged the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from shopbench.catalog.schema import Product
from shopbench.outcome.spec import Voucher
from shopbench.records.outcome import BudgetCheck


def _money(x: float) -> str:
    return f"{x:.2f}"


def check_budget(voucher: Voucher, products: Sequence[Product | None]) -> BudgetCheck:
    """Judge the budget for products recommended for a voucher task's slots, in slot order.

    A missing product (None) makes the check fail, as ShoppingBench only checks the budget
    when every slot was filled. Never raises.
    """
    filled = [p for p in products if p is not None]
    # Summed in slot order from 0, like ShoppingBench, so float rounding is the same.
    total = sum((p.price for p in filled), 0.0)
    shops = len({p.shop_id for p in filled})
    base = {
        "total": total,
        "budget": voucher.budget,
        "threshold": voucher.threshold,
        "voucher_type": voucher.voucher_type,
        "discount_type": voucher.discount_type,
        "shops": shops,
    }
    missing = [i + 1 for i, p in enumerate(products) if p is None]
    if missing or not products:
        return BudgetCheck(
            **base,
            complete=False,
            applies=False,
            holds=False,
            reason=f"no product for slot(s) {missing}; the budget needs every slot filled",
        )

    not_applying = ""
    if voucher.voucher_type == "shop" and shops != 1:
        not_applying = f"a shop voucher needs one shop, got {shops}"
    elif total < voucher.threshold:
        not_applying = f"total {_money(total)} is below the threshold {_money(voucher.threshold)}"

    discount = discounted = None
    capped = False
    if not not_applying:
        if voucher.discount_type == "fixed":
            discounted = total - (voucher.face_value or 0.0)
        else:
            pct = total * (1 - (voucher.discount or 0.0))
            # A missing cap means an uncapped percentage (ShoppingBench always writes one).
            if voucher.cap is not None and total - voucher.cap > pct:
                discounted, capped = total - voucher.cap, True
            else:
                discounted = pct
        discount = total - discounted

    if total <= voucher.budget:
        holds, reason = True, f"total {_money(total)} is within the budget {_money(voucher.budget)}"
    elif not_applying:
        holds = False
        reason = (
            f"total {_money(total)} is over the budget {_money(voucher.budget)} "
            f"and the voucher does not apply: {not_applying}"
        )
    else:
        assert discounted is not None
        holds = discounted <= voucher.budget
        verdict = "within" if holds else "still over"
        reason = (
            f"total {_money(total)} less the voucher's {_money(total - discounted)}"
            f"{' (capped)' if capped else ''} is {_money(discounted)}, "
            f"{verdict} the budget {_money(voucher.budget)}"
        )
    return BudgetCheck(
        **base,
        complete=True,
        applies=not not_applying,
        discount=discount,
        capped=capped,
        discounted_total=discounted,
        holds=holds,
        reason=reason,
    )
