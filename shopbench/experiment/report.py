"""The experiment's report: ``report.json`` (every figure, each traceable to its files),
``report.md`` (one table, the paired differences, the wall times) and ``plot.svg``.

Each arm's row comes from its own files: the curation's ``report.json`` (episodes kept), the
build's ``build.json`` (train rows), the training's ``train_report.json`` (steps, tokens, the
loss curve) and the evaluation's ``report.json`` and ``trajectories.jsonl``. The differences
are paired over the held-out tasks every arm played, with intervals clustered by product
group, recomputed here from the trajectories.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shopbench.archive.jsonl import read_trajectories
from shopbench.catalog.store import Catalog
from shopbench.evaluate.intervals import BootstrapConfig, Estimate, paired_difference
from shopbench.evaluate.trained.steps import Step
from shopbench.evaluate.trained.table import difference_table, run_table
from shopbench.experiment.arms import BASE, UNTRAINED, Arm, rows_of
from shopbench.experiment.config import ExperimentConfig
from shopbench.experiment.folder import HeldOut, Stages, baseline_key, eval_key, model_dir
from shopbench.experiment.plot import render_plot
from shopbench.experiment.results import ArmResult, BaselineResult, ExperimentReport
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.io import read_tasks
from shopbench.tasks.split import task_groups

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
PLOT_SVG = "plot.svg"
PAIRS: tuple[tuple[Arm, Arm], ...] = (
    ("curated", "unfiltered"), ("curated", "successes"), ("recovery", "curated"),
    ("curated-2", "curated"), ("curated", "prompted"),
)  # fmt: skip
"""The differences between arms the report gives (under each decoding), when both ran:
curation against its alternatives, the seed-to-seed difference of curated beside them, and
fine-tuning against the prompted base."""
PAIRED_STEP_METRICS = ("parses", "right_tool", "right_pick")
"""Step metrics the reference decides where they apply: paired over the same steps."""


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _arm(
    arm: Arm, decoding: str, key: str, stages: Stages, config: ExperimentConfig,
    played: list[Trajectory], base: list[Trajectory] | None,
    baselines: dict[str, list[Trajectory]], groups: dict[str, str], boot: BootstrapConfig,
) -> ArmResult:  # fmt: skip
    folder = stages.arm(arm)
    pool = stages.arm(rows_of(arm))
    evaluation = stages.out / "eval" / key
    report = _read(evaluation / "report.json")
    def named(path: Path) -> str:  # inside the folder: relative to it, so the report travels
        return str(path.relative_to(stages.out)) if path.is_relative_to(stages.out) else str(path)

    files = {"eval": named(evaluation / "report.json"),
             "trajectories": named(evaluation / "trajectories.jsonl")}  # fmt: skip
    seconds = float(next(iter(report.get("seconds", {}).values()), 0.0))
    resumed = int(next(iter(report.get("resumed", {}).values()), 0))
    samples = config.eval.samples
    result: dict[str, Any] = {
        "arm": arm, "decoding": decoding, "key": key,
        "model": named(model_dir(stages, arm, config)),
        "table": report["model"]["overall"], "by_intent": report["model"]["by_intent"],
        "eval_s": seconds,
        "eval_resumed": resumed,
        "eval_episodes_per_s": round((len(played) - resumed) / seconds, 4) if seconds > 0 else 0.0,
        "minus_base": (difference_table(played, base, samples, boot, groups).overall
                       if base is not None and arm != BASE else {}),
        "minus_baselines": {p: difference_table(played, ts, samples, boot, groups).overall
                            for p, ts in baselines.items()},
    }  # fmt: skip
    steps = _read(stages.out / "steps" / arm / "steps.json")
    if steps and key == arm:
        result["step_accuracy"] = steps
        files["steps"] = named(stages.out / "steps" / arm / "steps.json")
        if arm != BASE:
            result["steps_minus_base"] = step_differences(stages, arm, BASE, groups, boot)
    if arm not in UNTRAINED:
        curated = _read(pool / "curated" / "report.json")
        build = _read(pool / "sft" / "build.json")
        train = _read(folder / "train" / "train_report.json")
        sample = _read(pool / "sampled" / "tokens.json") or None
        files.update(curated=named(pool / "curated" / "report.json"),
                     build=named(pool / "sft" / "build.json"),
                     train=named(folder / "train" / "train_report.json"))  # fmt: skip
        if sample is not None:
            files["sample"] = named(pool / "sampled" / "tokens.json")
        result.update(
            curated_episodes=curated.get("kept"), sample=sample,
            train_rows=sample["rows"] if sample else build.get("rows", {}).get("train"),
            steps=train.get("steps"), seen_tokens=train.get("seen_tokens"),
            trained_tokens=train.get("trained_tokens"),
            train_tokens_per_s=train.get("tokens_per_s"), train_s=train.get("train_s"),
            train_loss=[(p["step"], p["loss"]) for p in train.get("train_loss", [])],
            eval_loss=[(p["step"], p["loss"]) for p in train.get("eval_loss", [])],
        )  # fmt: skip
    result["files"] = files
    return ArmResult.model_validate(result)


def _baseline(
    policy: str, stages: Stages, played: list[Trajectory], groups: dict[str, str],
    boot: BootstrapConfig, samples: int,
) -> BaselineResult:  # fmt: skip
    folder = stages.out / "eval" / baseline_key(policy)
    report = _read(folder / "report.json")
    return BaselineResult(
        policy=policy,
        table=run_table(played, policy=policy, samples=samples, boot=boot, groups=groups).overall,
        eval_s=float(next(iter(report.get("seconds", {}).values()), 0.0)),
        files={"trajectories": str((folder / "trajectories.jsonl").relative_to(stages.out))},
    )


def step_differences(
    stages: Stages, a: Arm, b: Arm, groups: dict[str, str], boot: BootstrapConfig
) -> dict[str, Estimate]:
    """Step metric → `a` − `b`, paired over the reference steps both took (the metrics the
    reference decides where they apply: parses, right_tool, right_pick)."""
    def load(arm: Arm) -> dict[tuple[str, int], Step]:
        path = stages.out / "steps" / arm / "steps.jsonl"
        if not path.is_file():
            return {}
        with path.open(encoding="utf-8") as f:
            steps = [Step.model_validate_json(line) for line in f if line.strip()]
        return {(s.episode_id, s.turn): s for s in steps}

    mine, theirs = load(a), load(b)
    shared = sorted(mine.keys() & theirs.keys())
    out: dict[str, Estimate] = {}
    for metric in PAIRED_STEP_METRICS:
        keys = [k for k in shared if metric in mine[k].checks and metric in theirs[k].checks]
        if not keys:
            continue
        ones = [1.0] * len(keys)
        out[metric] = paired_difference(
            ([float(mine[k].checks[metric]) for k in keys], ones),
            ([float(theirs[k].checks[metric]) for k in keys], ones), boot,
            clusters=[groups.get(mine[k].task_id, mine[k].task_id) for k in keys],
        )  # fmt: skip
    return out


def build_report(
    config: ExperimentConfig, stages: Stages, held: HeldOut, catalog: Path
) -> ExperimentReport:
    """The report of the experiment folder as it stands: every evaluation run so far
    (`catalog`: the tasks' catalog); the ones still to run are listed as pending."""
    def done(key: str) -> bool:
        return stages.done(stages.out / "eval" / key)

    def load(key: str) -> list[Trajectory]:
        return list(read_trajectories(stages.out / "eval" / key / "trajectories.jsonl"))

    planned = [(a, d, eval_key(config, a, d)) for d in config.eval.decoding for a in config.arms]
    runs = {k: load(k) for _, _, k in planned if done(k)}
    baseline_runs = {p: load(baseline_key(p)) for p in config.eval.baselines
                     if done(baseline_key(p))}  # fmt: skip
    tasks = read_tasks(stages.out / "heldout.jsonl").tasks
    groups = task_groups(tasks, Catalog.open(catalog))
    boot = BootstrapConfig(seed=config.seed)
    samples = config.eval.samples
    arms = [
        _arm(a, d, k, stages, config, runs[k], runs.get(eval_key(config, BASE, d)),
             baseline_runs, groups, boot)
        for a, d, k in planned if k in runs
    ]  # fmt: skip
    differences: dict[str, dict[str, Estimate | None]] = {}
    for decoding in config.eval.decoding:
        for a, b in PAIRS:
            ka, kb = eval_key(config, a, decoding), eval_key(config, b, decoding)
            if ka not in runs or kb not in runs:
                continue
            d = dict(difference_table(runs[ka], runs[kb], samples, boot, groups).overall)
            if ka == a and kb == b:
                steps = step_differences(stages, a, b, groups, boot)
                d.update({f"steps.{k}": v for k, v in steps.items()})
            said = f" ({decoding})" if len(config.eval.decoding) > 1 else ""
            differences[f"{a} − {b}{said}"] = d
    pending = [baseline_key(p) for p in config.eval.baselines if p not in baseline_runs]
    pending += [k for _, _, k in planned if k not in runs]
    return ExperimentReport(
        config=config.model_dump(mode="json"), view=config.view,
        heldout=held.model_dump(), level=boot.level, samples=samples, arms=arms,
        baselines=[_baseline(p, stages, ts, groups, boot, samples)
                   for p, ts in baseline_runs.items()],
        differences=differences, budget=_read(stages.out / "budget.json") or None,
        pending=pending, stages_s=stages.timings, stages_at=stages.finished,
    )  # fmt: skip


def _cell(e: Estimate | None, signed: bool = False) -> str:
    if e is None:
        return "–"
    f = "+.3f" if signed else ".3f"
    return f"{e.value:{f}} [{e.low:{f}}, {e.high:{f}}]"


def render_markdown(r: ExperimentReport) -> str:
    """``report.md``: the table, the differences, the held-out check and the wall times."""
    level = f"{r.level * 100:g}%"
    h = r.heldout
    first = r.arms[0].table if r.arms else r.baselines[0].table
    floors = [b.policy for b in r.baselines]
    lines = [
        "# Experiment", "",
        f"Observation view `{r.view}`; {first.tasks} held-out tasks in {first.clusters} product "
        f"groups, {r.samples} sample{'s' if r.samples != 1 else ''} a task; {level} intervals "
        "clustered by product group; differences paired over the same tasks.", "",
        f"Held-out check: {h['drawn']} held-out tasks drawn, {h['touched']} left out because a "
        f"training episode called a product of their group; {h['shared']} of the evaluated "
        f"tasks' groups are among the {h['train_groups']} groups training episodes called "
        "products of.", "",
        "Completion: ended by `terminate` after an accepted recommendation. Accepted calls: "
        "calls the environment ran. Shown ids: calls naming ids whose every id the episode had "
        "shown. Filters read: first searches with the price bound and services the request "
        "states.", "",
        "| arm | decoding | train rows (tasks) | tokens in the rows | ASR | − base | "
        + "".join(f"− {p} | " for p in floors)
        + "completion | accepted calls | shown ids | filters read |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * len(floors) + "---:|---:|---:|---:|",
    ]  # fmt: skip
    for a in r.arms:
        m = a.table.metrics
        rows = "–" if a.train_rows is None else str(a.train_rows)
        if a.sample:
            rows += f" ({a.sample.get('tasks')})"
        # The tokens of the rows the arm trains on (its sample); where there is no sample,
        # the trainer's count of what it read.
        tokens = a.sample.get("tokens") if a.sample else a.seen_tokens
        lines.append(
            f"| {a.arm} | {a.decoding} | {rows} | {f'{tokens:,}' if tokens else '–'} | "
            f"{_cell(m.get('asr'))} | "
            f"{_cell(a.minus_base.get('asr'), True) if a.minus_base else '–'} | "
            + "".join(f"{_cell(a.minus_baselines.get(p, {}).get('asr'), True)} | "
                      for p in floors)
            + f"{_cell(m.get('completion'))} | {_cell(m.get('accepted_calls'))} | "
            f"{_cell(m.get('shown_ids'))} | {_cell(m.get('filters_read'))} |"
        )  # fmt: skip
    if r.baselines:
        lines += ["", "Scripted baselines on the same tasks, limits and episode keys:", "",
                  "| policy | ASR | completion | accepted calls | shown ids | filters read |",
                  "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for floor in r.baselines:
            m = floor.table.metrics
            lines.append(f"| {floor.policy} | {_cell(m.get('asr'))} | {_cell(m.get('completion'))} "
                         f"| {_cell(m.get('accepted_calls'))} | {_cell(m.get('shown_ids'))} "
                         f"| {_cell(m.get('filters_read'))} |")  # fmt: skip
    # At the base's rate once it is evaluated; until then at the first row's, named.
    at = next((a for a in r.arms if a.arm == BASE), r.arms[0] if r.arms else None)
    mde = first.mde if at is None else at.table.mde
    whose = r.baselines[0].policy if at is None else at.key or at.arm
    rate = "the base rate" if at is not None and at.arm == BASE else f"{whose}'s rate"
    lines += [""] if r.baselines else []
    lines += ["", f"Smallest ASR difference this set detects (80% power, at {rate}): "
              f"{mde:.3f}." if mde is not None else "", ""]  # fmt: skip
    if r.pending:
        lines += [f"Not evaluated yet: {', '.join(r.pending)} (the folder resumes there).", ""]
    if r.budget:
        b = r.budget
        lines += [f"Turn budget: {b['budget']} tokens, from {b['turns']} trained assistant "
                  f"turns (median {b['median']:.0f}, p95 {b['p95']:.0f}, longest {b['max']}; "
                  f"{b['cut_share']:.1%} longer than the budget).", ""]  # fmt: skip
    stepped = [a for a in r.arms if a.step_accuracy]
    if stepped:
        names = ("parses", "right_tool", "valid_arguments", "ids_shown", "right_pick")
        lines += ["## Step accuracy (teacher-forced next action on reference episodes)", "",
                  "| arm | steps | " + " | ".join(names) + " |",
                  "|---|---:|" + "---:|" * len(names)]  # fmt: skip
        for a in stepped:
            s = a.step_accuracy or {}
            cells = []
            for n in names:
                e = s.get("metrics", {}).get(n)
                est = Estimate.model_validate(e) if e else None
                cells.append(f"{_cell(est)} (n={s.get('counts', {}).get(n, 0)})")
            lines.append(f"| {a.arm} | {s.get('steps', 0)} | " + " | ".join(cells) + " |")
        lines.append("")
        for a in stepped:
            if a.steps_minus_base:
                said = ", ".join(f"{k} {_cell(v, True)}" for k, v in a.steps_minus_base.items())
                lines.append(f"- {a.arm} − base, paired over the same steps: {said}")
        lines.append("")
    if r.differences:
        lines += ["## Between arms", "", "| difference | ASR | completion | accepted calls |",
                  "|---|---:|---:|---:|"]  # fmt: skip
        for name, d in r.differences.items():
            lines.append(
                f"| {name} | {_cell(d.get('asr'), True)} | {_cell(d.get('completion'), True)} "
                f"| {_cell(d.get('accepted_calls'), True)} |"
            )
        lines.append("")
    lines += ["## Wall time", "", "| stage | seconds | finished (UTC) |", "|---|---:|---|"]
    lines += [f"| {k} | {v:,.0f} | {r.stages_at.get(k, '')} |" for k, v in r.stages_s.items()]
    lines += ["", f"![ASR per arm and training loss]({PLOT_SVG})", ""]
    return "\n".join(lines)


def write_report(
    config: ExperimentConfig, stages: Stages, held: HeldOut, catalog: Path
) -> Path:
    """Write ``report.json``, ``report.md`` and ``plot.svg`` into the experiment folder."""
    report = build_report(config, stages, held, catalog)
    out = stages.out
    (out / REPORT_JSON).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / REPORT_MD).write_text(render_markdown(report), encoding="utf-8")
    (out / PLOT_SVG).write_text(render_plot(report), encoding="utf-8")
    return out / REPORT_JSON
