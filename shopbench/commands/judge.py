"""`shopbench judge ...` (calibrate, show) and `shopbench bench judge`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import POLICY_NAMES
from shopbench.bench.judge import JudgeBenchConfig
from shopbench.calibration.run import CalibrationConfig
from shopbench.commands import policy_flags
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import catalog_option, json_option, takes
from shopbench.commands.flags import Flags
from shopbench.trajectory.loop import RunLimits

_CALIBRATION = Flags(CalibrationConfig)

judge_app = typer.Typer(help="Process judges: calibrate, show verdicts.", no_args_is_help=True)

_SHOWN_CHARS = 160  # a rationale is cut to this in the one-line listing



def _rubric() -> Any:
    """``--rubric FILE``."""
    return typer.Option(None, "--rubric", help="rubric file (default: the release's)")


@judge_app.command("calibrate")
@takes(policy_flags.policy_block(RunLimits.model_fields["turn_timeout_s"].default))
def calibrate_command(
    catalog: Path = catalog_option(),
    tasks: Path = typer.Option(..., "--tasks", help="task file (JSONL)"),
    out: Path = typer.Option(..., "--out", help="directory for report.json, report.md, "
                             "verdicts.jsonl"),
    judge: str = typer.Option(
        "rubric", "--judge", help="rubric, or openai:MODEL@URL: an LLM judge read on every "
        "episode and combined with the rubric as validators combine them",
    ),  # fmt: skip
    rubric: Path | None = _rubric(),
    policies: str | None = typer.Option(
        None, "--policies", help=f"comma-separated policies: reference ones (default: all: "
        f"{', '.join(POLICY_NAMES)}) and model ones (hf:PATH, openai:MODEL@URL) beside them",
    ),  # fmt: skip
    seed: int = _CALIBRATION.option("seed", "--seed"),
    concurrency: int = _CALIBRATION.option("concurrency", "--concurrency"),
    round_size: int = _CALIBRATION.option("round_size", "--round-size"),
    injection_sample: int = _CALIBRATION.option("injection_sample", "--injection-sample"),
    template_penalty: bool = typer.Option(
        True, "--template-penalty/--no-template-penalty",
        help="apply the template penalty (off: measure what the other checks catch alone)",
    ),
    policy_options: PolicyOptions | None = None,
) -> None:
    """Play every reference policy (and any model policy named) on the tasks, judge and score
    each episode as validators do, write the report."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from shopbench.agents.options import check_applies
    from shopbench.agents.registry import check_spec
    from shopbench.calibration.report import write_report
    from shopbench.calibration.run import run_calibration
    from shopbench.env.env import ShoppingEnv
    from shopbench.judging.errors import JudgeError
    from shopbench.judging.registry import JUDGES
    from shopbench.scoring.consensus import ConsensusConfig
    from shopbench.tasks.io import read_tasks

    if judge not in JUDGES and not judge.startswith("openai:"):
        raise JudgeError(
            f"--judge {judge!r} is not a judge (allowed: {', '.join(JUDGES)}, or "
            "openai:MODEL@URL)"
        )
    policy_options = policy_options or PolicyOptions()
    llm = judge.startswith("openai:")
    options: dict[str, object] = {
        "policy_options": policy_options,
        "llm_judge": judge if llm else None,
        "consensus": ConsensusConfig(
            judge="rubric" if llm else judge, rubric=str(rubric) if rubric else None
        ),
        "seed": seed, "concurrency": concurrency, "round_size": round_size,
        "injection_sample": injection_sample, "template_penalty": template_penalty,
    }
    if policies is not None:
        options["policies"] = [p.strip() for p in policies.split(",") if p.strip()]
    cfg = _CALIBRATION.build(**options)
    for name in cfg.policies:  # a bad policy or misplaced options fail before any episode
        check_spec(name)
    check_applies(cfg.policy_options, cfg.policies)
    load = read_tasks(tasks)
    for line in load.rejected[:5]:
        typer.echo(f"rejected {line}", err=True)
    env = ShoppingEnv.open(catalog)
    out.mkdir(parents=True, exist_ok=True)
    verdicts = (out / "verdicts.jsonl").open("w", encoding="utf-8")
    with verdicts, Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), transient=True,
    ) as bar:
        bars = {p: bar.add_task(p, total=len(load.tasks)) for p in cfg.policies}

        def write(policy: str, t: object, v: object) -> None:
            from shopbench.records.trajectory import Trajectory
            from shopbench.records.verdict import Verdict

            assert isinstance(t, Trajectory) and isinstance(v, Verdict)
            row = {
                "policy": policy, "task_id": t.task_id, "intent": t.intent,
                "success": t.success, "score": v.score, "unpenalised": v.unpenalised_score,
                "stopped_at": v.stopped_at, "gates": v.gates, "notes": v.notes,
            }
            verdicts.write(json.dumps(row) + "\n")

        report = run_calibration(
            env, load.tasks, cfg,
            progress=lambda p, done, total: bar.update(bars[p], completed=done),
            on_verdict=write,
        )
    json_path, md_path = write_report(report, out)
    if report.agreement_with_rubric is not None or report.llm_fallbacks:
        typer.echo(
            f"agreement with the rubric (Spearman) {report.agreement_with_rubric}; "
            f"LLM fallbacks {report.llm_fallbacks}"
        )
    typer.echo(
        f"AUC {report.auc_honest_vs_dishonest:.3f}; injection delta "
        f"{report.injection_delta:+.3f}; mean process score: "
        + ", ".join(f"{k} {v:.2f}" for k, v in report.mean_score_by_policy.items())
    )
    typer.echo(f"wrote {json_path} and {md_path}")


@judge_app.command("show")
def show_command(
    file: Path = typer.Argument(..., help="trajectories: a JSON record or JSONL lines"),
    judge: str = typer.Option("rubric", "--judge", help="judge name (rubric)"),
    rubric: Path | None = _rubric(),
    as_json: bool = json_option("each verdict, one a line,"),
) -> None:
    """Judge the trajectories of a file and print each verdict (line, score, rationale)."""
    from shopbench.datafiles import read_text
    from shopbench.judging.errors import JudgeError
    from shopbench.judging.registry import make_judge

    j = make_judge(judge, str(rubric) if rubric else None)
    text = read_text(file, what="trajectories", error=JudgeError)
    records: list[tuple[int, object]] = []
    try:
        whole = json.loads(text)  # one record, possibly pretty-printed, or a list of them
        records = [(i, r) for i, r in enumerate(whole if isinstance(whole, list) else [whole], 1)]
    except json.JSONDecodeError:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((lineno, json.loads(line)))
            except json.JSONDecodeError as e:
                typer.echo(f"{file}:{lineno}: not JSON ({e.msg} at column {e.colno}); skipped",
                           err=True)
    for lineno, record in records:
        verdict = j.judge(record)  # type: ignore[arg-type]  # any shape is judged, never raises
        if as_json:
            typer.echo(verdict.model_dump_json())
            continue
        task = record.get("task_id", "?") if isinstance(record, dict) else "?"
        rationale = verdict.rationale
        if len(rationale) > _SHOWN_CHARS:
            rationale = rationale[: _SHOWN_CHARS - 3] + "..."
        typer.echo(f"{file}:{lineno} {task}: {verdict.score:.2f} {rationale}")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the `judge` group to the root app and `judge` to the bench group."""
    app.add_typer(judge_app, name="judge")

    bench_app.command("judge")(bench_command(JudgeBenchConfig, _run_bench))


def _run_bench(config: JudgeBenchConfig) -> dict[str, Any]:
    """Rubric-judge throughput (trajectories per second on one core) on real episodes."""
    from shopbench.bench.judge import run

    return run(config.catalog, tasks=config.tasks, episodes=config.episodes,
               seconds=config.seconds, seed=config.seed)  # fmt: skip
