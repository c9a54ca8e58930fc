"""ShoppingBench's task records, converted to and from our :class:`Task`.

Their four shapes, one JSON object per line:

- product:   ``{query, reward: slot}``
- shop:      ``{query, reward: [slot, ...]}`` (2-4 slots, one shop)
- voucher:   ``{query, reward: [slot, ...], voucher: {...}}``
- knowledge: ``{query, Knowledge_Attribute, reward: <full target product record>}``
  (their intent is called ``web``)

A slot is ``{product_id, title: [str], sku_options?: [{k: v}], attributes?: [{k: [v]}],
service?: [str], price?: [{mode: [lo, hi]}]}``. Converting a record to a task and back gives
an equal record, key order and number types included, so a file read and written back is the
same file (ShoppingBench writes ``json.dumps`` with its default separators).

Each intent declares its record's form (:class:`~shopbench.tasks.intent_registry.
ShoppingBenchForm`): the reward's form, the key only its records carry, and
ShoppingBench's name for it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from shopbench.errors import first_problem
from shopbench.outcome.spec import PriceBound, Slot, Voucher
from shopbench.records.task import Intent
from shopbench.tasks.errors import TaskError
from shopbench.tasks.hidden import HiddenCard
from shopbench.tasks.intent_registry import IntentSpec, intent_names, intent_spec, intent_specs
from shopbench.tasks.model import Task

SLOT_KEYS: tuple[str, ...] = (
    "product_id",
    "title",
    "sku_options",
    "attributes",
    "service",
    "price",
)
RECORD_KEYS: frozenset[str] = frozenset(
    {"query", "reward", "voucher", "Knowledge_Attribute", "prompt", "hidden"}
)
"""ShoppingBench's record keys, and ``hidden``: our extension, a clarify task's hidden card
(which topics of the reward the query holds back, :class:`~shopbench.tasks.hidden.HiddenCard`)."""
VOUCHER_KEYS: tuple[str, ...] = (
    "voucher_type", "threshold", "discount_type", "face_value", "discount", "cap",
    "price_after_voucher", "budget",
)  # fmt: skip
PRICE_MODES: tuple[str, ...] = ("less than", "greater than", "between")
# Voucher amounts ShoppingBench writes as integers when whole; the others stay floats.
_INT_VOUCHER_FIELDS = frozenset({"threshold", "face_value", "cap", "budget"})
# Where the original JSON value of Knowledge_Attribute (1989, not "1989") is kept.
KNOWLEDGE_RAW_META = "shoppingbench.knowledge_attribute"
PROMPT_META = "shoppingbench.prompt"


def intent_name(name: str) -> Intent:
    """Our intent for `name`; ShoppingBench's ``web`` is ``knowledge``. Raises TaskError."""
    key = name.strip().lower()
    theirs = {s.shoppingbench.name: s.name for s in intent_specs() if s.shoppingbench.name}
    if key in theirs:
        return theirs[key]  # type: ignore[return-value]
    if key in intent_names():
        return key  # type: ignore[return-value]
    allowed = ", ".join((*intent_names(), *theirs))
    raise TaskError(f"unknown intent {name!r} (allowed: {allowed})")


def infer_intent(record: dict[str, Any]) -> Intent:
    """The intent a ShoppingBench record's shape implies: the intent whose marker key it
    carries, else the one without a marker whose reward has the record's form."""
    specs = intent_specs()
    marked = sorted((s for s in specs if s.shoppingbench.marker), key=_precedence)
    for spec in marked:
        if spec.shoppingbench.marker in record:
            return spec.name  # type: ignore[return-value]
    form = "slots" if isinstance(record.get("reward"), list) else "slot"
    plain = (s for s in specs if not s.shoppingbench.marker and s.shoppingbench.reward == form)
    return next(plain).name  # type: ignore[return-value]


def _precedence(spec: IntentSpec) -> int:
    return spec.shoppingbench.precedence


def record_id(record: dict[str, Any], intent: Intent) -> str:
    """A stable id for an imported record: a hash of its canonical JSON and its intent."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(f"{intent}\n{canonical}".encode()).hexdigest()
    return f"sb-{intent}-{digest[:16]}"


def _whole(x: float | None) -> int | float | None:
    if x is not None and float(x).is_integer():
        return int(x)
    return x


def _price_from_record(entry: Any, where: str) -> PriceBound:
    if not isinstance(entry, dict) or len(entry) != 1:
        raise TaskError(f"{where}: a price entry is one {{mode: [lo, hi]}} object, got {entry!r}")
    ((mode, bounds),) = entry.items()
    if mode not in PRICE_MODES:
        raise TaskError(f"{where}: unknown price mode {mode!r} (allowed: {', '.join(PRICE_MODES)})")
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise TaskError(f"{where}: price {mode!r} needs [lo, hi], got {bounds!r}")
    for b in bounds:
        if b is not None and (isinstance(b, bool) or not isinstance(b, int | float)):
            raise TaskError(f"{where}: price bound {b!r} is not a number")
    try:
        return PriceBound(mode=mode, lo=bounds[0], hi=bounds[1])
    except ValidationError as e:
        raise TaskError(validation_reason(e, where)) from None


def _slot_from_record(raw: Any, where: str) -> Slot:
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: a slot is a JSON object, got {type(raw).__name__}")
    unknown = [k for k in raw if k not in SLOT_KEYS]
    if unknown:
        raise TaskError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(SLOT_KEYS)})")
    data = {k: v for k, v in raw.items() if k != "price"}
    if "price" in raw:
        prices = raw["price"]
        if not isinstance(prices, list):
            raise TaskError(f"{where}.price: a list of price entries, got {prices!r}")
        data["price"] = [_price_from_record(p, f"{where}.price[{i}]") for i, p in enumerate(prices)]
    try:
        return Slot.model_validate(data)
    except ValidationError as e:
        raise TaskError(validation_reason(e, where)) from None


def validation_reason(e: ValidationError, where: str = "") -> str:
    """One line from a pydantic error: the first problem's location under `where`, its
    message, how many more there are."""
    return first_problem(e, under=where, more=True)


def task_from_record(record: Any, intent: Intent | str | None = None) -> Task:
    """Build a task from one ShoppingBench record; raise TaskError with the reason if invalid.

    `intent` (ours or ``web``) overrides the shape-inferred intent; a record whose shape does
    not fit the given intent is rejected. The task gets split "external", no cluster, and
    the id :func:`record_id`.
    """
    if not isinstance(record, dict):
        raise TaskError(f"a task record is a JSON object, got {type(record).__name__}")
    unknown = sorted(k for k in record if k not in RECORD_KEYS)
    if unknown:
        allowed = ", ".join(sorted(RECORD_KEYS))
        raise TaskError(f"unknown record key {unknown[0]!r} (allowed: {allowed})")
    shape = infer_intent(record)
    want = intent_name(intent) if intent is not None else shape
    if want != shape:
        raise TaskError(f"intent {want!r} given, but the record has the shape of {shape!r}")
    query = record.get("query")
    if not isinstance(query, str) or not query.strip():
        raise TaskError("query: missing or empty")
    reward = record.get("reward")
    meta: dict[str, str | int | float] = {}
    if isinstance(record.get("prompt"), str):
        meta[PROMPT_META] = record["prompt"]
    elif "prompt" in record:
        raise TaskError("prompt: must be a string")

    fields: dict[str, Any] = {}
    spec = intent_spec(want)
    form = spec.shoppingbench.reward
    if form == "target_record":
        if not isinstance(reward, dict):
            raise TaskError("reward: a knowledge task's reward is the target product record")
        pid, title = reward.get("product_id"), reward.get("title")
        if not isinstance(title, str) or not title:
            raise TaskError("reward.title: the target record needs a title string")
        if pid is not None and not isinstance(pid, str | int):
            raise TaskError(f"reward.product_id: expected a string, got {pid!r}")
        kw = record["Knowledge_Attribute"]
        if isinstance(kw, bool) or not isinstance(kw, str | int | float) or not str(kw).strip():
            raise TaskError(f"Knowledge_Attribute: expected a non-empty value, got {kw!r}")
        if not isinstance(kw, str):
            meta[KNOWLEDGE_RAW_META] = kw
        slots = [Slot(product_id=None if pid is None else str(pid), title=[title])]
        fields.update(knowledge_attribute=str(kw), target_record=reward)
    elif form == "slot":
        slots = [_slot_from_record(reward, "reward")]
        if spec.shape.hidden:
            fields["hidden"] = _hidden_from_record(record.get("hidden"))
    else:
        if not isinstance(reward, list):
            raise TaskError(f"reward: a {want} task's reward is a list of slots")
        slots = [_slot_from_record(s, f"reward[{i}]") for i, s in enumerate(reward)]
        if spec.shape.voucher:
            fields["voucher"] = _voucher_from_record(record.get("voucher"))
    try:
        return Task(
            id=record_id(record, want),
            intent=want,
            query=query,
            split="external",
            cluster=None,
            reward=slots,
            meta=meta,
            **fields,
        )
    except ValidationError as e:
        raise TaskError(validation_reason(e)) from None


def _hidden_from_record(raw: Any) -> HiddenCard:
    if not isinstance(raw, dict):
        raise TaskError(f"hidden: expected an object, got {raw!r}")
    try:
        return HiddenCard.model_validate(raw)
    except ValidationError as e:
        raise TaskError(validation_reason(e, "hidden")) from None


def _voucher_from_record(raw: Any) -> Voucher:
    if not isinstance(raw, dict):
        raise TaskError(f"voucher: expected an object, got {raw!r}")
    unknown = [k for k in raw if k not in VOUCHER_KEYS]
    if unknown:
        allowed = ", ".join(VOUCHER_KEYS)
        raise TaskError(f"voucher: unknown key {unknown[0]!r} (allowed: {allowed})")
    try:
        return Voucher.model_validate(raw)
    except ValidationError as e:
        raise TaskError(validation_reason(e, "voucher")) from None


def _slot_to_record(slot: Slot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if slot.product_id is not None:
        out["product_id"] = slot.product_id
    out["title"] = list(slot.title)
    if slot.sku_options is not None:
        out["sku_options"] = [dict(o) for o in slot.sku_options]
    if slot.attributes is not None:
        out["attributes"] = [{k: list(vs) for k, vs in a.items()} for a in slot.attributes]
    if slot.service is not None:
        out["service"] = list(slot.service)
    if slot.price is not None:
        out["price"] = [{p.mode: [_whole(p.lo), _whole(p.hi)]} for p in slot.price]
    return out


def task_to_record(task: Task) -> dict[str, Any]:
    """The ShoppingBench record of `task` (the inverse of :func:`task_from_record`).

    A knowledge task without a stored target record is written with a minimal one
    (product_id and title).
    """
    record: dict[str, Any] = {}
    if PROMPT_META in task.meta:
        record["prompt"] = task.meta[PROMPT_META]
    record["query"] = task.query
    form = intent_spec(task.intent).shoppingbench.reward
    if form == "target_record":
        raw = task.meta.get(KNOWLEDGE_RAW_META)
        keep_raw = raw is not None and str(raw) == task.knowledge_attribute
        record["Knowledge_Attribute"] = raw if keep_raw else task.knowledge_attribute
        slot = task.reward[0]
        target = task.target_record
        if target is None:
            target = {"product_id": slot.product_id, "title": slot.title[0]}
        record["reward"] = target
        return record
    slots = [_slot_to_record(s) for s in task.reward]
    record["reward"] = slots[0] if form == "slot" else slots
    if task.hidden is not None:
        record["hidden"] = task.hidden.model_dump()
    if task.voucher is not None:
        v = task.voucher.model_dump()
        record["voucher"] = {
            k: _whole(v[k]) if k in _INT_VOUCHER_FIELDS else v[k] for k in VOUCHER_KEYS
        }
    return record
