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

from shopbench.evaluate.intervals import BootstrapConfig, Estimate
from shopbench.evaluate.trained.table import difference_table
from shopbench.experiment.arms import BASE, Arm
from shopbench.experiment.config import ExperimentConfig
from shopbench.experiment.folder import HeldOut, Stages, model_dir
from shopbench.experiment.plot import render_plot
from shopbench.experiment.results import ArmResult, ExperimentReport
from shopbench.records.trajectory import Trajectory

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
PLOT_SVG = "plot.svg"
PAIRS: tuple[tuple[Arm, Arm], ...] = (
    ("curated", "unfiltered"), ("curated", "successes"), ("recovery", "curated"),
)  # fmt: skip
"""The differences between trained arms the report gives, when both arms ran."""
PAIRED_STEP_METRICS = ("parses", "right_tool", "right_pick")
"""Step metrics the reference decides where they apply: paired over the same steps."""


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _trajectories(path: Path) -> list[Trajectory]:
    with path.open(encoding="utf-8") as f:
        return [Trajectory.model_validate_json(line) for line in f if line.strip()]


def _arm(
    arm: Arm, stages: Stages, config: ExperimentConfig, played: list[Trajectory],
    base: list[Trajectory] | None, groups: dict[str, str], boot: BootstrapConfig,
) -> ArmResult:
    folder = stages.arm(arm)
    evaluation = stages.out / "eval" / arm
    report = _read(evaluation / "report.json")
    def named(path: Path) -> str:  # inside the folder: relative to it, so the report travels
        return str(path.relative_to(stages.out)) if path.is_relative_to(stages.out) else str(path)

    files = {"eval": named(evaluation / "report.json"),
             "trajectories": named(evaluation / "trajectories.jsonl")}  # fmt: skip
    seconds = float(next(iter(report.get("seconds", {}).values()), 0.0))
    resumed = int(next(iter(report.get("resumed", {}).values()), 0))
    result: dict[str, Any] = {
        "arm": arm, "model": named(model_dir(stages, arm, config)),
        "table": report["model"]["overall"], "by_intent": report["model"]["by_intent"],
        "eval_s": seconds,
        "eval_resumed": resumed,
        "eval_episodes_per_s": round((len(played) - resumed) / seconds, 4) if seconds > 0 else 0.0,
    }  # fmt: skip
    steps = _read(stages.out / "steps" / arm / "steps.json")
    if steps:
        result["step_accuracy"] = steps
        files["steps"] = named(stages.out / "steps" / arm / "steps.json")
        if arm != BASE:
            result["steps_minus_base"] = step_differences(stages, arm, BASE, groups, boot)
    if arm != BASE:
        curated = _read(folder / "curated" / "report.json")
        build = _read(folder / "sft" / "build.json")
        train = _read(folder / "train" / "train_report.json")
        files.update(curated=named(folder / "curated" / "report.json"),
                     build=named(folder / "sft" / "build.json"),
                     train=named(folder / "train" / "train_report.json"))  # fmt: skip
        result.update(
            curated_episodes=curated.get("kept"), train_rows=build.get("rows", {}).get("train"),
            steps=train.get("steps"), seen_tokens=train.get("seen_tokens"),
            trained_tokens=train.get("trained_tokens"),
            train_tokens_per_s=train.get("tokens_per_s"), train_s=train.get("train_s"),
            train_loss=[(p["step"], p["loss"]) for p in train.get("train_loss", [])],
            eval_loss=[(p["step"], p["loss"]) for p in train.get("eval_loss", [])],
            minus_base=(
                difference_table(played, base, config.eval.samples, boot, groups).overall
                if base is not None else {}
            ),
        )  # fmt: skip
    result["files"] = files
    return ArmResult.model_validate(result)


def step_differences(
    stages: Stages, a: Arm, b: Arm, groups: dict[str, str], boot: BootstrapConfig
) -> dict[str, Estimate]:
    """Step metric → `a` − `b`, paired over the reference steps both took (the metrics the
    reference decides where they apply: parses, right_tool, right_pick)."""
    from shopbench.evaluate.intervals import paired_difference
    from shopbench.evaluate.trained.steps import Step

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
    """The report of the experiment folder as it stands: every arm evaluated so far
    (`catalog`: the tasks' catalog); the arms still to run are listed as pending."""
    from shopbench.catalog.store import Catalog
    from shopbench.tasks.io import read_tasks
    from shopbench.tasks.split import task_groups

    evaluated = [a for a in config.arms if stages.done(stages.out / "eval" / a)]
    runs = {a: _trajectories(stages.out / "eval" / a / "trajectories.jsonl") for a in evaluated}
    tasks = read_tasks(stages.out / "heldout.jsonl").tasks
    groups = task_groups(tasks, Catalog.open(catalog))
    boot = BootstrapConfig(seed=config.seed)
    base = runs.get(BASE)
    arms = [_arm(a, stages, config, runs[a], base, groups, boot) for a in evaluated]
    differences: dict[str, dict[str, Estimate | None]] = {}
    for a, b in PAIRS:
        if a in runs and b in runs:
            d = dict(difference_table(runs[a], runs[b], config.eval.samples, boot, groups).overall)
            steps = step_differences(stages, a, b, groups, boot)
            d.update({f"steps.{k}": v for k, v in steps.items()})
            differences[f"{a} − {b}"] = d
    return ExperimentReport(
        config=config.model_dump(mode="json"), view=config.view,
        heldout=held.model_dump(), level=boot.level, samples=config.eval.samples, arms=arms,
        differences=differences, budget=_read(stages.out / "budget.json") or None,
        pending=[a for a in config.arms if a not in runs], stages_s=stages.timings,
        stages_at=stages.finished,
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
    first = r.arms[0].table
    lines = [
        "# Experiment", "",
        f"Observation view `{r.view}`; {first.tasks} held-out tasks in {first.clusters} product "
        f"groups, {r.samples} sample{'s' if r.samples != 1 else ''} a task; {level} intervals "
        "clustered by product group; differences paired over the same tasks.", "",
        f"Held-out check: {h['drawn']} held-out tasks drawn, {h['touched']} left out because a "
        f"training episode called a product of their group; {h['shared']} of the evaluated "
        f"tasks' groups are among the {h['train_groups']} groups training episodes called "
        "products of.", "",
        "| arm | curated episodes | train rows | steps | tokens seen | ASR | − base | "
        "completion | valid tool calls | valid turns |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for a in r.arms:
        m = a.table.metrics
        lines.append(
            f"| {a.arm} | {a.curated_episodes if a.curated_episodes is not None else '–'} | "
            f"{a.train_rows if a.train_rows is not None else '–'} | {a.steps or '–'} | "
            f"{a.seen_tokens or '–'} | {_cell(m.get('asr'))} | "
            f"{_cell(a.minus_base.get('asr'), True) if a.minus_base else '–'} | "
            f"{_cell(m.get('completion'))} | {_cell(m.get('valid_tool_calls'))} | "
            f"{_cell(m.get('valid_turns'))} |"
        )
    mde = next((a.table for a in r.arms if a.arm == BASE), first).mde  # at the base's rate
    lines += ["", f"Smallest ASR difference this set detects (80% power, at the base rate): "
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
        lines += ["## Between arms", "", "| difference | ASR | completion | valid turns |",
                  "|---|---:|---:|---:|"]  # fmt: skip
        for name, d in r.differences.items():
            lines.append(
                f"| {name} | {_cell(d.get('asr'), True)} | {_cell(d.get('completion'), True)} "
                f"| {_cell(d.get('valid_turns'), True)} |"
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
