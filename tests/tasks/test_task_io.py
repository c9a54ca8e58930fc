"""Task files: ShoppingBench's four formats and ours, read, rejected with reasons, written back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shopbench.errors import ImportRecordError
from shopbench.tasks.errors import TaskError
from shopbench.tasks.io import format_task, read_tasks, write_tasks
from shopbench.tasks.shoppingbench_format import infer_intent, task_from_record, task_to_record

FILES = ("product_test.jsonl", "voucher_test.jsonl")

SHOP = {
    "query": "Find a shop that offers a spring contact plate and rubber plugs.",
    "reward": [
        {"product_id": "4098726003", "title": ["Spring Contact Plate"]},
        {"product_id": "3971631378", "title": ["Rubber Plug"], "price": [{"between": [75, 95]}]},
    ],
}
WEB = {
    "query": "In which year did he get his degree? I want a collectible from that year.",
    "Knowledge_Attribute": 1989,
    "reward": {
        "product_id": "4289044292",
        "shop_id": "5153525",
        "title": "2P 1989 SOUVENIR ANTIQUE COLLECTIBLE",
        "price": 75.0,
        "main_image_url": "https://example.invalid/x.jpg",
        "service": ["flashsale"],
    },
}
PRODUCT = {
    "query": "A rubber wheel",
    "reward": {
        "product_id": "1",
        "title": ["Rubber Wheel"],
        "price": [{"less than": [0, 200]}],
    },
}


def lines_of(path: Path) -> list[str]:
    """The lines of a UTF-8 text file."""
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name", FILES)
def test_shoppingbench_files_load_and_round_trip(
    name: str, tmp_path: Path, shoppingbench_data: Path
) -> None:
    path = shoppingbench_data / name
    load = read_tasks(path)
    assert (load.lines_read, len(load.tasks), load.rejected) == (250, 250, [])
    intent = name.split("_")[0]
    assert load.counts() == {intent: 250}
    assert all(t.split == "external" and t.cluster is None for t in load.tasks)
    assert len({t.id for t in load.tasks}) == 250

    originals = path.read_text(encoding="utf-8").splitlines()
    written = [json.loads(format_task(t, "shoppingbench")) for t in load.tasks]
    assert written == [json.loads(line) for line in originals]

    # Through our own format and back out to theirs: the same bytes.
    ours = tmp_path / "ours.jsonl"
    write_tasks(ours, load.tasks)
    again = read_tasks(ours, strict=True).tasks
    assert again == load.tasks
    theirs = tmp_path / "theirs.jsonl"
    write_tasks(theirs, again, "shoppingbench")
    assert theirs.read_bytes() == path.read_bytes()


def test_the_four_shapes_infer_their_intent(shoppingbench_data: Path) -> None:
    voucher_line = lines_of(shoppingbench_data / "voucher_test.jsonl")[0]
    shapes = {
        "product": PRODUCT,
        "shop": SHOP,
        "voucher": json.loads(voucher_line),
        "knowledge": WEB,
    }
    for intent, record in shapes.items():
        assert infer_intent(record) == intent
        task = task_from_record(record)
        assert task.intent == intent
        assert task_to_record(task) == record


def test_knowledge_record_keeps_its_target_and_attribute_type() -> None:
    task = task_from_record(WEB, "web")
    assert task.knowledge_attribute == "1989"
    assert task.reward[0].product_id == "4289044292"
    assert task.reward[0].title == ["2P 1989 SOUVENIR ANTIQUE COLLECTIBLE"]
    assert task.target_record == WEB["reward"]
    back = json.loads(format_task(task, "shoppingbench"))
    assert back == WEB and isinstance(back["Knowledge_Attribute"], int)


def test_less_than_bound_keeps_shoppingbench_lower_zero() -> None:
    task = task_from_record(PRODUCT)
    bound = (task.reward[0].price or [])[0]
    assert (bound.mode, bound.lo, bound.hi) == ("less than", 0, 200)
    assert format_task(task, "shoppingbench") == json.dumps(PRODUCT)


def test_ids_are_stable_and_distinguish_records() -> None:
    assert task_from_record(SHOP).id == task_from_record(json.loads(json.dumps(SHOP))).id
    other = {**SHOP, "query": SHOP["query"] + "!"}
    assert task_from_record(other).id != task_from_record(SHOP).id
    assert task_from_record(SHOP).id.startswith("sb-shop-")


BAD = [
    ("{not json", "not JSON"),
    (
        json.dumps({"query": "q", "reward": {"title": ["t"], "colour": ["red"]}}),
        "unknown key 'colour'",
    ),
    (
        json.dumps({"query": "q", "reward": {"title": ["t"], "price": [{"between": [95, 75]}]}}),
        "impossible price bounds",
    ),
    (
        json.dumps({"query": "q", "reward": {"title": ["t"], "price": [{"about": [1, 2]}]}}),
        "unknown price mode 'about'",
    ),
    (json.dumps({"query": "q", "reward": {"title": ["t"], "service": ["teleport"]}}), "service"),
    (json.dumps({"query": "q", "reward": {"title": []}}), "title"),
    (json.dumps({"query": "q", "reward": [{"title": ["t"]}]}), "2-4 slots"),
    (json.dumps({"query": "", "reward": {"title": ["t"]}}), "query"),
    (json.dumps({"query": "q", "reward": {"title": ["t"]}, "extra": 1}), "unknown record key"),
]


def test_bad_lines_are_rejected_with_file_line_and_reason(
    tmp_path: Path, shoppingbench_data: Path
) -> None:
    good = lines_of(shoppingbench_data / "product_test.jsonl")[:2]
    lines = [good[0], *[b for b, _ in BAD], "", good[1]]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load = read_tasks(path)
    assert len(load.tasks) == 2 and load.lines_read == 2 + len(BAD)
    assert len(load.rejected) == len(BAD)
    for i, ((_, reason), msg) in enumerate(zip(BAD, load.rejected, strict=True)):
        assert msg.startswith(f"{path}:{i + 2}: "), msg
        assert reason in msg, msg

    with pytest.raises(ImportRecordError) as e:
        read_tasks(path, strict=True)
    assert (e.value.line, e.value.path) == (2, str(path)) and "not JSON" in str(e.value)


def test_voucher_with_a_percent_instead_of_a_fraction_is_rejected(shoppingbench_data: Path) -> None:
    record = json.loads(lines_of(shoppingbench_data / "voucher_test.jsonl")[6])
    record["voucher"]["discount"] = 34
    with pytest.raises(TaskError, match=r"voucher\.discount"):
        task_from_record(record)
    record["voucher"]["discount"] = 0.34
    record["voucher"]["expiry"] = "2025"
    with pytest.raises(TaskError, match="unknown key 'expiry'"):
        task_from_record(record)


def test_given_intent_must_fit_the_shape_and_repeats_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (SHOP, PRODUCT, SHOP)) + "\n")
    load = read_tasks(path, intent="shop")
    assert [t.intent for t in load.tasks] == ["shop"]
    assert "shape of 'product'" in load.rejected[0] and ":2:" in load.rejected[0]
    assert "duplicate task id" in load.rejected[1] and "first on line 1" in load.rejected[1]
    with pytest.raises(TaskError, match="unknown intent 'food'"):
        read_tasks(path, intent="food")


def test_our_format_round_trips_and_checks_its_intent(tmp_path: Path) -> None:
    tasks = [task_from_record(r) for r in (SHOP, PRODUCT, WEB)]
    path = tmp_path / "ours.jsonl"
    assert write_tasks(path, tasks) == 3
    assert path.read_text().splitlines()[0] == tasks[0].model_dump_json()
    assert read_tasks(path).tasks == tasks
    only = read_tasks(path, intent="knowledge")
    assert [t.intent for t in only.tasks] == ["knowledge"] and len(only.rejected) == 2


def test_cli_import_reports_counts_and_writes(tmp_path: Path, shoppingbench_data: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = lines_of(shoppingbench_data / "voucher_test.jsonl")[:3]
    src.write_text("\n".join([lines[0], "{oops", lines[1], lines[2]]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "shopbench.cli", "tasks", "import", str(src), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "4 lines read, 1 rejected; wrote 3 tasks (voucher 3)" in r.stdout
    assert f"{src}:2: not JSON" in r.stderr
    assert [t.intent for t in read_tasks(out, strict=True).tasks] == ["voucher"] * 3

    strict = subprocess.run([*cmd, "--strict"], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 2
    assert strict.stderr.strip().splitlines() == [
        f"error: {src}:2: not JSON (Expecting property name enclosed in double quotes at column 2)"
    ]
