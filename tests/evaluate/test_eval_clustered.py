"""Intervals clustered by product group, the detectable difference, the tasks' groups and
the check of the evaluation's groups against the training data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from shopbench.evaluate.errors import IntervalError, ModelEvalError
from shopbench.evaluate.intervals import BootstrapConfig, bootstrap, paired_difference
from shopbench.evaluate.power import (
    design_effect,
    detectable_difference,
    intra_cluster_correlation,
)
from shopbench.evaluate.trained.overlap import group_overlap, training_product_ids
from shopbench.evaluate.trained.report import render_markdown
from shopbench.evaluate.trained.run import ModelEvalConfig, evaluate_model
from shopbench.evaluate.trained.table import difference_table, run_table
from shopbench.tasks.model import Task
from shopbench.tasks.split import target_groups, task_groups


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(
        catalog=catalog_dir, intents=["product", "shop", "voucher"], n=3, seed=8,
        split="heldout",
    )  # fmt: skip
    return list(build_tasks(cfg).tasks)


def _width(e) -> float:  # type: ignore[no-untyped-def]
    return float(e.high - e.low)


# -- the clustered bootstrap -----------------------------------------------------------------


def test_a_group_whose_tasks_succeed_together_widens_the_interval() -> None:
    # 12 groups of 5 tasks; every task of a group has the same outcome.
    outcome = [1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1]
    num = [float(o) for o in outcome for _ in range(5)]
    den = [1.0] * len(num)
    keys = [f"g{g}" for g in range(12) for _ in range(5)]
    config = BootstrapConfig(seed=1)
    plain = bootstrap(num, den, config)
    clustered = bootstrap(num, den, config, clusters=keys)
    assert clustered.value == plain.value == pytest.approx(0.5)
    # 60 independent tasks vs 12 independent groups: about sqrt(5) times as wide.
    assert _width(clustered) > 1.8 * _width(plain)

    # The baseline fails every task of groups 0 and 3, where the model succeeds: the gain
    # comes in whole groups.
    other = [0.0 if k in ("g0", "g3") else x for k, x in zip(keys, num, strict=True)]
    d_plain = paired_difference((num, den), (other, den), config)
    d_clustered = paired_difference((num, den), (other, den), config, clusters=keys)
    assert d_clustered.value == d_plain.value
    assert d_clustered.value == pytest.approx(10 / 60)
    assert _width(d_clustered) > 1.8 * _width(d_plain)


def test_without_clusters_the_intervals_are_the_plain_bootstraps() -> None:
    rng = np.random.default_rng(1)
    num = [float(x) for x in rng.integers(0, 3, 50)]
    den = [2.0] * 50
    config = BootstrapConfig(seed=5)
    # The figures the task bootstrap gave before clusters existed, for these inputs.
    plain = bootstrap(num, den, config)
    assert plain.model_dump_json() == '{"value":0.48,"low":0.36,"high":0.6}'
    paired = paired_difference((num, den), (den, den), config)
    assert paired.model_dump_json() == '{"value":-0.52,"low":-0.64,"high":-0.4}'
    # One cluster per task draws exactly the tasks the plain bootstrap draws.
    own = [f"t{i}" for i in range(50)]
    assert bootstrap(num, den, config, clusters=own) == plain
    assert paired_difference((num, den), (den, den), config, clusters=own) == paired
    assert bootstrap(num, den, config, clusters=None) == plain


def test_the_clustered_bootstrap_is_deterministic_by_seed_and_checks_its_keys() -> None:
    spread = [0.11, 0.93, 0.42, 0.07, 0.68, 0.35, 0.81, 0.24, 0.5, 0.9]
    ones = [1.0] * 10
    keys = ["a", "a", "b", "c", "c", "c", "d", "e", "e", "f"]
    first = bootstrap(spread, ones, BootstrapConfig(seed=3), clusters=keys)
    assert first == bootstrap(spread, ones, BootstrapConfig(seed=3), clusters=keys)
    assert first != bootstrap(spread, ones, BootstrapConfig(seed=4), clusters=keys)
    # Clusters are keyed by name, not position: the same grouping spelled otherwise agrees.
    renamed = [{"a": "z", "b": "y"}.get(k, k) for k in keys]
    assert bootstrap(spread, ones, BootstrapConfig(seed=3), clusters=renamed) == first
    with pytest.raises(IntervalError, match="10 tasks but 3 cluster keys"):
        bootstrap(spread, ones, clusters=["a", "b", "c"])
    with pytest.raises(IntervalError, match="cluster keys"):
        paired_difference((spread, ones), (spread, ones), clusters=keys[:-1])


# -- the detectable difference ---------------------------------------------------------------


def test_the_intra_cluster_correlation_is_the_one_way_anova_estimate() -> None:
    # Groups of 4 with 4, 0 and 2 successes: MSB = 2/2 = 1, MSW = 1/9, m0 = 4,
    # rho = (1 - 1/9) / (1 + 3/9) = 2/3.
    assert intra_cluster_correlation([4, 0, 2], [4, 4, 4]) == pytest.approx(2 / 3)
    assert intra_cluster_correlation([4, 0, 4, 0], [4, 4, 4, 4]) == pytest.approx(1.0)
    # Less between-group spread than chance: negative, clamped to 0.
    assert intra_cluster_correlation([3, 1, 2], [4, 4, 4]) == 0.0
    assert intra_cluster_correlation([3], [5]) == 0.0  # one group
    assert intra_cluster_correlation([1, 0, 1], [1, 1, 1]) == 0.0  # no group of two
    assert intra_cluster_correlation([2, 2], [2, 2]) == 0.0  # no variation at all
    with pytest.raises(IntervalError, match="2 success counts but 1 cluster sizes"):
        intra_cluster_correlation([1, 1], [2])


def test_the_detectable_difference_matches_the_formula_by_hand() -> None:
    # z_0.975 = 1.959964, z_0.8 = 0.841621; n_eff = 200 / (1 + (2 - 1) * 0.25) = 160.
    by_hand = (1.959964 + 0.841621) * math.sqrt(2 * 0.3 * 0.7 / 160)
    got = detectable_difference(0.3, 200, mean_size=2.0, icc=0.25, level=0.95)
    assert got == pytest.approx(by_hand, abs=1e-5) and got == pytest.approx(0.14354, abs=1e-4)
    assert design_effect(2.0, 0.25) == 1.25 and design_effect(1.0, 0.9) == 1.0
    # A run that never succeeds is clamped to 5%, so it still has a difference to detect.
    assert detectable_difference(0.0, 100) == detectable_difference(0.05, 100) > 0
    assert detectable_difference(1.0, 100) == detectable_difference(0.95, 100)
    # Correlated groups detect less than as many independent episodes.
    assert detectable_difference(0.5, 100, mean_size=5, icc=0.5) > detectable_difference(0.5, 100)
    assert detectable_difference(0.5, 100, level=0.9) < detectable_difference(0.5, 100)
    with pytest.raises(IntervalError, match="no episodes"):
        detectable_difference(0.5, 0)


# -- the tasks' groups -----------------------------------------------------------------------


def test_task_groups_places_every_target_and_keeps_the_unplaced_apart(
    catalog, tasks: list[Task]  # type: ignore[no-untyped-def]
) -> None:
    groups = task_groups(tasks, catalog)
    assert set(groups) == {t.id for t in tasks}
    for t in tasks:
        keys = sorted({p.group_key for p in catalog.get([i for i in t.targets if i]) if p})
        assert groups[t.id] == "+".join(keys)
    multi = [t for t in tasks if len(set(groups[t.id].split("+"))) > 1]
    assert multi, "a shop task's slots span several groups"
    assert set(target_groups(tasks, catalog)[0]) == {
        g for v in groups.values() for g in v.split("+")
    }

    slot = tasks[0].reward[0]
    lost = tasks[0].model_copy(
        update={"id": "lost", "reward": [slot.model_copy(update={"product_id": "1"})]}
    )
    recorded = lost.model_copy(update={
        "id": "recorded",
        "target_record": {"product_id": "1", "category": "Home > Kettles", "brand": "Acme "},
    })  # fmt: skip
    assert task_groups([lost, recorded], catalog) == {
        "lost": "lost", "recorded": "home > kettles|acme",
    }  # fmt: skip


# -- the tables and the report ---------------------------------------------------------------


def _sft_parquet(path: Path, product_ids: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from shopbench.distill.dataset import SFT_SCHEMA

    def message(role: str, content: str | None, calls: list[dict] | None = None) -> dict:  # type: ignore[type-arg]
        return {
            "role": role, "content": content, "reasoning_content": None,
            "tool_calls": calls, "tool_call_id": None, "name": None,
        }  # fmt: skip

    call = {"id": "c1", "type": "function", "function": {
        "name": "view_product_information",
        "arguments": json.dumps({"product_ids": ",".join(product_ids)}),
    }}  # fmt: skip
    row = {
        "messages": [
            message("system", "s"), message("user", "a red kettle"),
            message("assistant", None, [call]),
            message("tool", json.dumps({"product_id": "9999999999"})),
        ],
        "tools": "[]", "train_turns": [True], "episode_id": "e", "task_id": "t",
        "cluster": "c", "intent": "product", "segment": 0, "step": None, "weight": 1.0,
    }  # fmt: skip
    pq.write_table(pa.Table.from_pylist([row], schema=SFT_SCHEMA), path)
    return path


def test_the_report_states_groups_and_detectable_difference_per_table(
    env, tasks: list[Task], tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    groups = task_groups(tasks, env.catalog)
    train = _sft_parquet(tmp_path / "train.parquet", ["4242424242"])  # no catalog id
    config = ModelEvalConfig(
        model="careful", baseline="greedy", training_set=train,
        bootstrap=BootstrapConfig(resamples=200),
    )  # fmt: skip
    report, model_ts, base_ts = evaluate_model(env, tasks, config, tasks_file="h.jsonl")
    overall = report.model.overall
    assert report.model.clustered and overall.tasks == len(tasks)
    assert overall.clusters == len(set(groups.values())) < len(tasks)
    assert overall.mde is not None and 0 < overall.mde < 2
    wins: dict[str, list[int]] = {}
    for t in model_ts:
        wins.setdefault(groups[t.task_id], []).append(int(t.success))
    icc = intra_cluster_correlation([sum(w) for w in wins.values()],
                                    [len(w) for w in wins.values()])  # fmt: skip
    rate = sum(t.success for t in model_ts) / len(model_ts)
    assert overall.mde == pytest.approx(detectable_difference(
        rate, len(model_ts), mean_size=len(model_ts) / len(wins), icc=icc,
    ))  # fmt: skip
    by_hand = run_table(model_ts, policy="careful", samples=1, boot=config.bootstrap,
                        groups=groups)  # fmt: skip
    assert by_hand == report.model
    plain = run_table(model_ts, policy="careful", samples=1, boot=config.bootstrap)
    assert not plain.clustered and plain.overall.clusters == len(tasks)
    diff = difference_table(model_ts, base_ts, 1, config.bootstrap, groups)
    assert report.difference == diff
    assert diff.tasks == len(tasks) and diff.clusters == overall.clusters
    assert set(diff.intent_clusters) == set(report.model.by_intent)

    assert report.group_overlap is not None
    assert report.group_overlap.shared_count == 0 and report.group_overlap.unplaced == 1
    md = render_markdown(report)
    assert (
        f"{len(tasks)} tasks in {overall.clusters} product groups, 1 sample a task; 95% "
        f"intervals clustered by product group; smallest detectable ASR difference at this "
        f"size: {overall.mde:.2f} (80% power)"
    ) in md
    assert md.count("smallest detectable ASR difference") == 1 + len(report.model.by_intent)
    assert f"paired over the {len(tasks)} tasks both runs played" in md
    assert "bootstrap over product groups" in md
    assert "are among the 0 groups" in md and "1 named ids are not catalog ids" in md


# -- the held-out groups against the training data -------------------------------------------


def test_shared_groups_are_refused_before_any_episode_or_warned(
    env, tasks: list[Task], tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    leaked = [t.targets[0] for t in tasks[:2] if t.targets[0]]
    train = _sft_parquet(tmp_path / "train.parquet", leaked)
    assert training_product_ids(train) == set(leaked)
    expected = {p.group_key for p in env.catalog.get(leaked) if p}

    played: list[str] = []
    strict = ModelEvalConfig(
        model="careful", training_set=train, forbid_shared_groups=True,
        bootstrap=BootstrapConfig(resamples=100),
    )  # fmt: skip
    with pytest.raises(ModelEvalError, match=f"{len(expected)} product groups") as e:
        evaluate_model(env, tasks, strict, on_done=lambda spec, t: played.append(spec))
    assert not played  # refused before any episode
    assert all(g in str(e.value) for g in expected)

    lenient = strict.model_copy(update={"forbid_shared_groups": False})
    report, _, _ = evaluate_model(env, tasks[:3], lenient)
    overlap = report.group_overlap
    assert overlap is not None
    eval_groups, _ = target_groups(tasks[:3], env.catalog)
    assert overlap.eval_groups == len(eval_groups)
    assert overlap.shared == sorted(expected & eval_groups)
    assert overlap.shared_count == len(expected & eval_groups) > 0
    assert overlap.line() in report.warnings
    assert overlap.line() in render_markdown(report)


def test_a_trajectory_file_names_its_products_by_catalog_id(
    env, catalog, tasks: list[Task], tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    from shopbench.agents.registry import make_policy
    from shopbench.evaluate.runner import run_evaluation

    played = run_evaluation(env, tasks[:2], lambda k: make_policy("careful"))[0]
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in played))
    ids = training_product_ids(path)
    recommended = {i for t in played for i in t.recommended_ids if i}
    assert recommended and recommended <= ids
    assert all(p is not None for p in catalog.get(sorted(ids)))  # tokens translated
    overlap = group_overlap({p.group_key for p in catalog.get(sorted(recommended)) if p},
                            ids, catalog)  # fmt: skip
    assert overlap.unplaced == 0 and overlap.shared_count == overlap.eval_groups > 0
