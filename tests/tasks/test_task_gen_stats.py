"""Task statistics: exact on a hand-made set, and close to ShoppingBench's test set when built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shopbench.outcome.spec import PriceBound, Slot, Voucher
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.stats import task_stats


def _voucher(kind: str, discount: str) -> Voucher:
    extra = {"face_value": 10.0} if discount == "fixed" else {"discount": 0.2, "cap": 50.0}
    fields = {"voucher_type": kind, "threshold": 100.0, "discount_type": discount,
              "budget": 500.0, **extra}  # fmt: skip
    return Voucher.model_validate(fields)


def test_stats_count_what_shoppingbench_counts() -> None:
    a = Slot(title=["A"], attributes=[{"color_family": ["black"]}], service=["COD", "official"])
    b = Slot(title=["B"], price=[PriceBound(mode="between", lo=1, hi=9)],
             sku_options=[{"size": "m", "color_family": "red"}])  # fmt: skip
    tasks = [
        Task(id="p1", intent="product", query="one two three", reward=[a]),
        Task(id="p2", intent="product", query="one", reward=[b], cluster="c1"),
        Task(id="v1", intent="voucher", query="x y", reward=[a, b],
             voucher=_voucher("platform", "fixed")),
        Task(id="v2", intent="voucher", query="x y z w", reward=[b],
             voucher=_voucher("shop", "percentage")),
    ]  # fmt: skip
    stats = task_stats(tasks)
    assert stats.total == 4 and list(stats.intents) == ["product", "voucher"]
    p = stats.intents["product"]
    assert (p.count, p.mean_constraints_per_slot, p.slots) == (2, 4.0, {"1": 1.0})
    assert p.constraint_kinds == {"attribute": 0.5, "price": 0.5, "service": 0.5, "sku": 0.5}
    assert p.query_words_mean == 2.0 and p.clusters == 1 and p.voucher_types is None
    v = stats.intents["voucher"]
    assert v.slots == {"1": 0.5, "2": 0.5} and v.mean_constraints_per_task == 6.0
    assert v.voucher_types == {"platform": 0.5, "shop": 0.5}
    assert v.discount_types == {"fixed": 0.5, "percentage": 0.5}
    assert v.mean_discount_percent == 20.0


def test_generated_mix_is_close_to_shoppingbench_test_set(
    catalog_dir: Path, tmp_path: Path
) -> None:
    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=300, seed=4,
                      satisfy_window=50)  # fmt: skip
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, build_tasks(cfg).tasks)
    # Through the command a researcher runs.
    out = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", "tasks", "stats", str(path), "--json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    stats = json.loads(out.stdout)["intents"]
    assert abs(stats["product"]["mean_constraints_per_slot"] - 4.4) <= 0.6
    for k, share in {"2": 0.36, "3": 0.34, "4": 0.30}.items():
        assert abs(stats["shop"]["slots"][k] - share) <= 0.08
    v = stats["voucher"]
    for k, share in {"1": 0.09, "2": 0.28, "3": 0.32, "4": 0.31}.items():
        assert abs(v["slots"][k] - share) <= 0.08
    assert abs(v["voucher_types"]["platform"] - 0.52) <= 0.10
    assert abs(v["discount_types"]["percentage"] - 0.55) <= 0.10
    assert 10 <= v["mean_discount_percent"] <= 50
