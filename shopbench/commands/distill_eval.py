"""`shopbench distill eval`: a trained model against a baseline on held-out tasks.

Registered on the `distill` group by :func:`register_eval`. The options come from
:class:`~shopbench.evaluate.trained.run.ModelEvalConfig` and the configs it holds; the
runs, the table and the files are :mod:`shopbench.evaluate`'s.
"""

from __future__ import annotations

from pathlib import Path

import typer

from shopbench.agents.options import PolicyOptions
from shopbench.chat import MAX_TURNS
from shopbench.commands import policy_flags
from shopbench.commands.blocks import catalog_option, limit_option, quiet_option, takes
from shopbench.commands.flags import Flags
from shopbench.evaluate.intervals import BootstrapConfig
from shopbench.evaluate.trained.run import ModelEvalConfig
from shopbench.trajectory.loop import RunLimits

_EVAL = Flags(ModelEvalConfig)
_LIMITS = Flags(RunLimits)
_BOOT = Flags(BootstrapConfig)
JOURNAL_KEY = ("model", "baseline", "samples", "seed", "policy_options", "limits")
"""What an evaluation's episodes depend on: a journal made under other values is refused."""


def register_eval(distill_app: typer.Typer) -> None:
    """Add `eval` to the `distill` group."""

    @distill_app.command("eval")
    @takes(policy_flags.policy_block(RunLimits.model_fields["turn_timeout_s"].default))
    def eval_command(
        model: str = typer.Option(..., "--model", help="hf:PATH or openai:MODEL@URL"),
        tasks: Path = typer.Option(..., "--tasks", help="task file, e.g. the held-out split"),
        catalog: Path = catalog_option("catalog directory of the tasks"),
        out: Path = typer.Option(
            ..., "--out", help="directory for report.json/.md; the same command resumes an "
            "interrupted evaluation there (its journal, played.jsonl)",
        ),  # fmt: skip
        baseline: str | None = _EVAL.option("baseline", "--baseline"),
        samples: int = _EVAL.option("samples", "--samples"),
        concurrency: int = _EVAL.option("concurrency", "--concurrency"),
        seed: int = _EVAL.option("seed", "--seed"),
        limit: int | None = limit_option(),
        max_idle_turns: int | None = _LIMITS.option("max_idle_turns", "--max-idle-turns"),
        max_turns: int | None = typer.Option(
            None, "--max-turns", min=1,
            help=f"assistant turns per episode (default {MAX_TURNS}, the environment's)",
        ),  # fmt: skip
        train: Path | None = _EVAL.option(
            "training_set", "--train",
            help="the model's training data (task file, JSONL, Parquet or a folder of them) "
            "for the contamination line",
        ),  # fmt: skip
        expect_split: str = _EVAL.option("expect_split", "--expect-split"),
        resamples: int = _BOOT.option("resamples", "--resamples"),
        quiet: bool = quiet_option(),
        policy_options: PolicyOptions | None = None,
    ) -> None:
        """Evaluate a model (and a baseline): ASR, pass@1/pass@K, pass^K, completion, accepted
        calls and shown ids, per intent, with bootstrap intervals; report.json and report.md."""
        from shopbench.agents.local.grammar import GRAMMAR_VERSION
        from shopbench.agents.options import check_applies
        from shopbench.agents.registry import check_spec
        from shopbench.commands.evaluate import load_tasks
        from shopbench.evaluate.trained.journal import (
            appender,
            by_agent,
            close_journal,
            open_journal,
        )
        from shopbench.evaluate.trained.report import write_model_eval
        from shopbench.evaluate.trained.run import evaluate_model
        from shopbench.records.trajectory import Trajectory

        options = policy_options or PolicyOptions()
        for spec in (model, baseline):
            if spec is not None:
                check_spec(spec)  # a bad policy fails before the catalog is opened
        check_applies(options, [model, baseline or ""])
        config = _EVAL.build(
            model=model, baseline=baseline, samples=samples, concurrency=concurrency,
            seed=seed, expect_split=expect_split, training_set=train, policy_options=options,
            limits=_LIMITS.build(max_idle_turns=max_idle_turns),
            bootstrap=_BOOT.build(resamples=resamples, seed=seed),
        )  # fmt: skip
        env, chosen = load_tasks(catalog, tasks, limit, max_turns)
        runs = [model] + ([baseline] if baseline else [])
        # Every finished episode goes to a journal in --out: the same command resumes there.
        asked = config.model_dump(mode="json", include=set(JOURNAL_KEY))
        earlier, journal = open_journal(out, {
            **asked, "tasks": [t.id for t in chosen], "max_turns": env.limits.max_turns,
            "grammar": GRAMMAR_VERSION,
        })  # fmt: skip
        played = by_agent(earlier)
        if earlier:
            typer.echo(f"resuming: {len(earlier)} episodes played before ({journal})", err=True)
        with journal.open("a", encoding="utf-8") as keep:
            add = appender(keep)
            if quiet:
                report, ts, base = evaluate_model(
                    env, chosen, config, tasks_file=str(tasks), on_done=add, played=played
                )
            else:
                from shopbench.commands.progress import progress_bar

                with progress_bar() as bar:
                    jobs = {
                        s: bar.add_task(s, total=len(chosen) * samples,
                                        completed=len(played.get(s, [])))
                        for s in runs
                    }  # fmt: skip

                    def done(spec: str, t: Trajectory) -> None:
                        add(spec, t)
                        bar.update(jobs[spec], advance=1)

                    report, ts, base = evaluate_model(
                        env, chosen, config, tasks_file=str(tasks), on_done=done, played=played
                    )
        write_model_eval(out, report, ts, base)
        close_journal(journal)
        for warning in report.warnings:
            typer.echo(f"warning: {warning}", err=True)
        overall = report.model.overall.metrics
        asr = overall["asr"]
        said = f"{model}: ASR {asr.text() if asr else '–'}"
        d = report.difference.overall["asr"] if report.difference is not None else None
        if d is not None:
            said += f"; minus {baseline}'s: {d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        typer.echo(f"{said}; wrote {out}")
