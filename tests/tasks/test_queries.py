"""The template query writer: every constraint stated, parseable back, varied, deterministic."""

from __future__ import annotations

import random
import re

import pytest

from shopbench.catalog.schema import SERVICES
from shopbench.outcome.spec import PriceBound, Voucher
from shopbench.tasks.model import Task
from shopbench.tasks.queries import (
    SlotText,
    attribute_label,
    format_money,
    load_phrasings,
    product_phrase,
    voucher_rules,
    write_knowledge,
    write_product,
    write_shop,
    write_voucher,
)

# The reader's side of docs/tasks.md ("How queries state constraints").
MONEY = r"(?:PHP\s*|₱)?(\d{1,3}(?:,\d{3})+|\d+)(?:\s*(?:pesos|PHP))?"
SERVICE_KEYS = {
    "official": re.compile(r"official store|LazMall"),
    "freeShipping": re.compile(r"free shipping|free delivery"),
    "COD": re.compile(r"cash on delivery|\bCOD\b"),
    "flashsale": re.compile(r"flash sale|LazFlash"),
}
LESS = ["under", "below", "less than", "at most", "up to", "cheaper than"]
MORE = ["over", "above", "more than", "at least", "starting at", "pricier than"]


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def read_price(text: str) -> tuple[str, int | None, int | None] | None:
    """Parse the price clause back, as a reader following the docs would."""
    m = re.search(rf"(?:between|from|range) {MONEY} (?:and|to) {MONEY}", text)
    if m:
        return ("between", _num(m.group(1)), _num(m.group(2)))
    m = re.search(rf"{MONEY} (?:or less|max)", text)
    if m:
        return ("less than", None, _num(m.group(1)))
    m = re.search(rf"{MONEY} or more", text)
    if m:
        return ("greater than", _num(m.group(1)), None)
    for words, mode in ((LESS, "less than"), (MORE, "greater than")):
        m = re.search(rf"\b(?:{'|'.join(words)}) {MONEY}", text)
        if m:
            n = _num(m.group(1))
            return (mode, None, n) if mode == "less than" else (mode, n, None)
    return None


def _slot(rng: random.Random) -> SlotText:
    pairs = rng.sample(
        [("color_family", "navy blue"), ("size", "eu:42"), ("material", "cotton"),
         ("pack_type", "single"), ("fa_pattern", "plain"), ("type_of_inks", "oil-based")],
        rng.randint(0, 3),
    )  # fmt: skip
    mode = rng.choice(["less than", "greater than", "between", None])
    lo, hi = rng.randint(1, 900), rng.randint(1000, 25_000)
    price = None
    if mode == "less than":
        price = PriceBound(mode="less than", hi=hi)
    elif mode == "greater than":
        price = PriceBound(mode="greater than", lo=lo)
    elif mode == "between":
        price = PriceBound(mode="between", lo=lo, hi=hi)
    services = [s for s in SERVICES if rng.random() < 0.4]
    return SlotText(
        phrase="Kalibo Trail Ripstop Hiking Backpack 40L", leaf="backpacks", pairs=pairs,
        price=price, services=services,
    )  # fmt: skip


def _check_states_everything(query: str, slot: SlotText) -> None:
    for key, value in slot.pairs:
        label = attribute_label(key)
        assert re.search(rf"{re.escape(label)}(?::| is| of)? {re.escape(value)}", query), (
            key,
            value,
            query,
        )
    got = read_price(query)
    if slot.price is None:
        assert got is None, query
    else:
        b = slot.price
        want = (b.mode, None if b.lo is None else int(b.lo), None if b.hi is None else int(b.hi))
        if b.mode == "less than":
            want = (b.mode, None, int(b.hi or 0))
        assert got == want, query
    named = {s for s, pattern in SERVICE_KEYS.items() if pattern.search(query)}
    assert named == set(slot.services), query
    assert slot.phrase in query


def test_product_queries_state_every_constraint_so_a_reader_recovers_them() -> None:
    rng = random.Random(5)
    for _ in range(300):
        slot = _slot(rng)
        _check_states_everything(write_product(slot, rng), slot)


def test_shop_and_voucher_items_are_listed_in_slot_order_with_their_constraints() -> None:
    rng = random.Random(8)
    for _ in range(100):
        slots = [_slot(rng) for _ in range(rng.randint(2, 4))]
        slots = [s.model_copy(update={"phrase": f"Item{i} Widget"}) for i, s in enumerate(slots)]
        query = write_shop(slots, rng)
        assert re.search(r"same (?:shop|store|seller)|one shop|single (?:shop|store)", query, re.I)
        positions = [query.index(f"Item{i} Widget") for i in range(len(slots))]
        assert positions == sorted(positions)
        # Cut the query at the items and check each item's own constraints.
        for i, s in enumerate(slots):
            end = positions[i + 1] if i + 1 < len(slots) else len(query)
            _check_states_everything(query[positions[i] - 1 : end], s)


def test_voucher_block_is_shoppingbench_verbatim() -> None:
    v = Voucher(voucher_type="platform", threshold=170, discount_type="fixed", face_value=34,
                budget=425)  # fmt: skip
    assert voucher_rules(v) == (
        "My budget is only `425`, but I have a voucher with the following rules:\n"
        "1. The voucher applies to all products.\n"
        "2. It is valid only when the total price of the products exceeds `170`.\n"
        "3. It provides a fixed discount of `34`."
    )
    pct = Voucher(voucher_type="shop", threshold=1563, discount_type="percentage",
                  discount=0.14, cap=1465, budget=1807)  # fmt: skip
    assert voucher_rules(pct).splitlines()[1:] == [
        "1. The voucher only applies to the products from the same shop.",
        "2. It is valid only when the total price of the products exceeds `1563`.",
        "3. It provides a percentage discount of `14%` with a cap of `1465`.",
    ]
    q = write_voucher([_slot(random.Random(1))], v, random.Random(2))
    assert q.endswith("\n\n" + voucher_rules(v))


def test_at_least_twenty_phrasings_per_intent_and_they_are_all_used() -> None:
    p = load_phrasings()
    assert len(p.product) >= 20 and len(p.shop) >= 20 and len(p.knowledge) >= 20
    assert len(p.voucher_one) + len(p.voucher_many) >= 20
    rng = random.Random(3)
    slot = SlotText(phrase="Zento Steel Tumbler 500ml", leaf="tumblers")
    openings = {write_product(slot, rng).split("Zento")[0] for _ in range(2000)}
    assert len(openings) >= 20  # template x item form: many distinct openings


def test_constraint_order_and_number_styles_vary() -> None:
    rng = random.Random(11)
    slot = SlotText(
        phrase="Acme Desk Lamp", pairs=[("color_family", "black"), ("material", "metal")],
        price=PriceBound(mode="less than", hi=1200), services=["COD"],
    )  # fmt: skip
    orders = set()
    for _ in range(200):
        q = write_product(slot, rng)
        marks = {"black": q.index("black"), "metal": q.index("metal"),
                 "price": q.index("1")}  # fmt: skip
        orders.add(tuple(sorted(marks, key=marks.__getitem__)))
    assert len(orders) == 6
    styles = {format_money(1200, random.Random(i)) for i in range(200)}
    assert {"1,200 pesos", "PHP 1200", "₱1,200", "1200 PHP"} <= styles


def test_same_generator_state_writes_the_same_query() -> None:
    slot = _slot(random.Random(4))
    assert write_product(slot, random.Random(9)) == write_product(slot, random.Random(9))
    k1 = write_knowledge("Ripstop Backpack", "Which brand is based in Cebu?", "brand",
                         random.Random(9))  # fmt: skip
    assert k1 == write_knowledge("Ripstop Backpack", "Which brand is based in Cebu?", "brand",
                                 random.Random(9))  # fmt: skip
    assert "hich brand is based in Cebu?" in k1 and "Ripstop Backpack" in k1
    assert re.search(r"that brand|brand in question", k1)


@pytest.mark.parametrize(
    ("title", "phrase"),
    [
        ("Gorillaz Cracker Island Album CD [Sealed] Brand New", "Gorillaz Cracker Island Album CD"),
        ("HOT SALE Nike Air Zoom (Ready Stock) COD Free Shipping", "Nike Air Zoom"),
        ("Original LazMall Official Store Steel Pan 28cm", "Steel Pan 28cm"),
        ("Nail Remover (15ml) Flash Sale", "Nail Remover (15ml)"),
        ("Original", "Original"),  # only noise: the title as it is
        ("Local Stock Habagat Shorts UPF 50+ 100% Original", "Habagat Shorts UPF 50+"),
    ],
)
def test_product_phrase_drops_noise_and_service_words_only(title: str, phrase: str) -> None:
    assert product_phrase(title) == phrase


def test_product_phrase_can_leave_out_a_knowledge_answer() -> None:
    assert product_phrase("Kalibo Trail Ripstop Backpack", drop="kalibo trail") == (
        "Ripstop Backpack"
    )


def test_attribute_labels_are_the_keys_words() -> None:
    assert attribute_label("color_family") == "color family"
    assert attribute_label("fa_pattern") == "fa pattern"
    assert attribute_label("country_origin_hb") == "country origin hb"


# --- the optional paraphraser, against a real HTTP server speaking the chat API -------------


class _ChatServer:
    """A local OpenAI-compatible endpoint whose replies a test scripts, one per request."""

    def __init__(self, replies: list[str | int]) -> None:
        import json as _json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[dict[str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(_json.loads(body))
                reply = replies.pop(0)
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    return
                data = _json.dumps({"choices": [{"message": {"content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _voucher_task() -> Task:
    from shopbench.outcome.spec import Slot

    v = Voucher(voucher_type="platform", threshold=170, discount_type="fixed", face_value=34,
                budget=425)  # fmt: skip
    slot = Slot(product_id="1", title=["Sakura Craypas Junior 50 Colors [Sealed]"],
                attributes=[{"type_of_inks": ["oil-based"]}], service=["COD"])  # fmt: skip
    query = ("Looking for Sakura Craypas Junior 50 Colors, with inks oil-based, with COD.\n\n"
             + voucher_rules(v))  # fmt: skip
    return Task(id="v", intent="voucher", query=query, reward=[slot], voucher=v)


def test_paraphrases_keep_every_fragment_or_the_template_stays() -> None:
    from shopbench.tasks.paraphrase import ParaphraseConfig, paraphrase

    task = _voucher_task()
    good = "Hi! I need Sakura Craypas Junior 50 Colors (inks: oil-based), cash on delivery please."
    dropped_value = "I need Sakura Craypas Junior 50 Colors with COD."
    added_service = "I need Sakura Craypas Junior 50 Colors, oil-based, COD, free shipping."
    server = _ChatServer([good, dropped_value, added_service, 400, "   "])
    try:
        out, report = paraphrase(
            ParaphraseConfig(base_url=server.url, model="tiny", temperature=0.0), [task] * 5
        )
    finally:
        server.close()
    assert out[0].query == good + "\n\n" + voucher_rules(task.voucher)  # type: ignore[arg-type]
    assert out[0].meta["paraphrased"] == "tiny"
    assert [t.query for t in out[1:]] == [task.query] * 4
    assert report.rewritten == 1 and report.kept == {
        "a required fragment was changed": 1, "a service was added": 1,
        "endpoint error (rejected)": 1, "empty rewrite": 1,
    }  # fmt: skip
    sent = server.requests[0]
    assert sent["model"] == "tiny" and sent["temperature"] == 0.0
    user = sent["messages"][1]["content"]  # type: ignore[index]
    assert "- Sakura Craypas Junior 50 Colors\n- oil-based" in user
    assert "My budget is only" not in user  # the voucher rules are never sent
