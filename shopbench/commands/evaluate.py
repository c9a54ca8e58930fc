"""`shopbench eval` (a policy on a task file: ASR, pass@k, reports), `shopbench bench eval`
and `shopbench bench hf-policy`."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import BaseModel

from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import policy_choices
from shopbench.bench.eval import EvalBenchConfig
from shopbench.bench.hf_engines import DEFAULT_SETTINGS, EnginesBenchConfig, EngineSetting
from shopbench.bench.hf_episodes import EpisodesBenchConfig
from shopbench.bench.hf_policy import HFBenchConfig
from shopbench.bench.layouts import LayoutsBenchConfig
from shopbench.commands import policy_flags
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import catalog_option, limit_option, quiet_option, takes
from shopbench.commands.flags import Flags, Spell
from shopbench.evaluate.runner import EvalConfig
from shopbench.trajectory.loop import RunLimits

_EVAL = Flags(EvalConfig)
_LIMITS = Flags(RunLimits)


def load_tasks(  # type: ignore[no-untyped-def]
    catalog: Path, tasks: Path, limit: int | None, max_turns: int | None = None
):
    """The environment (`max_turns` assistant turns per episode, default the environment's)
    and the tasks; rejected task lines are reported, none loaded is fatal."""
    from shopbench.chat import EpisodeLimits
    from shopbench.env.env import ShoppingEnv
    from shopbench.evaluate.errors import EvalError
    from shopbench.tasks.io import read_tasks

    env = ShoppingEnv.open(catalog, EpisodeLimits(max_turns=max_turns) if max_turns else None)
    load = read_tasks(tasks)
    for line in load.rejected[:10]:
        typer.echo(f"skipped {line}", err=True)
    if len(load.rejected) > 10:
        typer.echo(f"... and {len(load.rejected) - 10} more rejected lines", err=True)
    chosen = load.tasks[:limit] if limit else load.tasks
    if not chosen:
        raise EvalError(f"{tasks}: no valid tasks to evaluate")
    return env, chosen


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `eval` to the root app and `eval` to the bench group."""

    @app.command("eval")
    @takes(policy_flags.policy_block(RunLimits.model_fields["turn_timeout_s"].default))
    def eval_command(
        catalog: Path = catalog_option(),
        tasks: Path = typer.Option(
            ..., "--tasks", help="task file (JSONL, ours or ShoppingBench's)"
        ),
        policy: str = typer.Option(
            ..., "--policy",
            help=policy_choices(),
        ),
        out: Path = typer.Option(..., "--out", help="directory for trajectories and reports"),
        samples: int = _EVAL.option("samples", "--samples"),
        concurrency: int = _EVAL.option("concurrency", "--concurrency"),
        seed: int = _EVAL.option("seed", "--seed"),
        limit: int | None = limit_option(),
        quiet: bool = quiet_option(),
        shopper: str | None = typer.Option(
            None, "--shopper",
            help="openai:MODEL@URL: a model rewords the clarify shopper's answers (kept only "
            "when faithful; default: the rules' words)",
        ),
        policy_options: PolicyOptions | None = None,
    ) -> None:
        """Run a policy on every task K times; write trajectories.jsonl, report.json/.md.

        A model policy (hf:, openai:) keeps its own defaults for the options not given, by
        flag or in --policy-config; a reference policy takes none."""
        from shopbench.agents.options import check_applies
        from shopbench.agents.registry import check_spec, make_policy
        from shopbench.evaluate.report import build_report, write_outputs
        from shopbench.evaluate.runner import run_evaluation
        from shopbench.evaluate.trained.run import check_endpoint

        chosen_options = policy_options or PolicyOptions()
        check_spec(policy)  # a bad --policy fails before the catalog is opened
        check_applies(chosen_options, [policy])
        for warning in check_endpoint(policy):  # an endpoint serving another model: refused
            typer.echo(f"warning: {warning}", err=True)
        limits = (
            _LIMITS.build(turn_timeout_s=chosen_options.turn_timeout_s)
            if chosen_options.turn_timeout_s is not None else RunLimits()
        )  # fmt: skip
        config = _EVAL.build(samples=samples, concurrency=concurrency, seed=seed, limits=limits)
        env, chosen = load_tasks(catalog, tasks, limit)
        if shopper is not None:
            from shopbench.env.shopper.rephrase import rephraser_from_spec

            env.rephraser = rephraser_from_spec(shopper)

        def make(k: int):  # type: ignore[no-untyped-def]
            options = chosen_options.options(policy, samples, defaults=False, sample=k - seed)
            return make_policy(policy, catalog=env.catalog, seed=k, **options)

        total = len(chosen) * samples
        if quiet:
            trajectories, seconds = run_evaluation(env, chosen, make, config)
        else:
            from rich.progress import TextColumn

            from shopbench.commands.progress import progress_bar

            with progress_bar(TextColumn("ASR {task.fields[asr]:.3f}")) as bar:
                job = bar.add_task(policy, total=total, asr=0.0)
                wins = [0, 0]

                def done(t):  # type: ignore[no-untyped-def]
                    wins[0] += int(t.success)
                    wins[1] += 1
                    bar.update(job, advance=1, asr=wins[0] / wins[1])

                trajectories, seconds = run_evaluation(env, chosen, make, config, on_done=done)
        report = build_report(trajectories, policy=policy, samples=samples, seconds=seconds)
        write_outputs(out, trajectories, report)
        by_intent = ", ".join(f"{k} {v:.3f}" for k, v in report.asr_by_intent.items())
        typer.echo(
            f"{policy}: ASR {report.asr:.3f} ({by_intent}); pass@{samples} "
            f"{report.pass_at_k[str(samples)]:.3f}; {report.episodes} episodes, "
            f"{report.errors['episodes_ended_by_policy']} ended by the policy; wrote {out}"
        )

    bench_app.command("eval")(bench_command(EvalBenchConfig, _run_eval))
    bench_app.command("hf-episodes")(bench_command(EpisodesBenchConfig, _run_episodes))
    settings = Spell(
        default=list(DEFAULT_SETTINGS), parse=lambda given: [EngineSetting.parse(s) for s in given],
        help="DTYPE:THREADS[:buffered], or onnx:THREADS for the onnxruntime-genai engine "
        "(onnx-int8:THREADS, onnx-int4:THREADS its quantized exports), to play with (repeat); "
        "the first is the reference",
    )  # fmt: skip
    bench_app.command("hf-engines")(
        bench_command(EnginesBenchConfig, _run_engines, spell={"settings": settings})
    )
    intents = Spell(default=["product"], help="intents built (repeat; default product)")
    bench_app.command("layouts")(
        bench_command(LayoutsBenchConfig, _run_layouts, spell={"intents": intents})
    )
    bench_app.command("hf-policy")(bench_command(HFBenchConfig, _run_hf_policy))


def _run_eval(config: EvalBenchConfig) -> BaseModel:
    """Episodes per second of the episode loop with a local policy (env + policy + grade)."""
    from shopbench.bench.eval import run

    return run(config)


def _run_episodes(config: EpisodesBenchConfig) -> BaseModel:
    """Episodes/s of an hf: model, each view with and without kept keys and values."""
    from shopbench.bench.hf_episodes import run

    return run(config)


def _run_engines(config: EnginesBenchConfig) -> BaseModel:
    """Episodes/s of an hf: model per engine, dtype and thread count, each against the
    first."""
    from shopbench.bench.hf_engines import run

    return run(config)


def _run_layouts(config: LayoutsBenchConfig) -> BaseModel:
    """Tokens per curated episode in each row layout and view, as the trainer sees them."""
    from shopbench.bench.layouts import run

    return run(config)


def _run_hf_policy(config: HFBenchConfig) -> BaseModel:
    """Tokens/s of hf: policies on this CPU, one turn at a time and batched."""
    from shopbench.bench.hf_policy import run

    return run(config)
