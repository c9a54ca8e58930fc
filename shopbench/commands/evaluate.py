"""`shopbench eval` (a policy on a task file: ASR, pass@k, reports), `shopbench bench eval`
and `shopbench bench hf-policy`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import policy_choices
from shopbench.bench.eval import EvalBenchConfig
from shopbench.bench.hf_policy import HFBenchConfig
from shopbench.commands import policy_flags
from shopbench.commands.blocks import takes
from shopbench.commands.flags import Flags
from shopbench.evaluate.runner import EvalConfig
from shopbench.trajectory.loop import RunLimits

_EVAL = Flags(EvalConfig)
_LIMITS = Flags(RunLimits)
_BENCH = Flags(EvalBenchConfig)
_HF_BENCH = Flags(HFBenchConfig)


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
        catalog: Path = typer.Option(..., "--catalog", help="catalog directory"),
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
        limit: int | None = typer.Option(None, "--limit", min=1, help="only the first N tasks"),
        quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
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

    @bench_app.command("eval")
    def bench_eval(
        catalog: Path = _BENCH.option("catalog", "--catalog"),
        tasks: Path = _BENCH.option("tasks", "--tasks"),
        policy: str = _BENCH.option("policy", "--policy"),
        episodes: int = _BENCH.option("episodes", "--episodes"),
        concurrency: int = _BENCH.option("concurrency", "--concurrency"),
        seed: int = _BENCH.option("seed", "--seed"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Episodes per second of the episode loop with a local policy (env + policy + grade)."""
        from shopbench.bench.eval import run

        result = run(
            _BENCH.build(
                catalog=catalog, tasks=tasks, policy=policy, episodes=episodes,
                concurrency=concurrency, seed=seed,
            )
        )
        data = result.model_dump()
        typer.echo(json.dumps(data, sort_keys=True) if as_json else json.dumps(data, indent=2))

    @bench_app.command("hf-episodes")
    def bench_hf_episodes(
        model: Path = typer.Option(..., "--model", help="model directory to play"),
        catalog: Path = typer.Option(..., "--catalog", help="catalog the tasks are played on"),
        tasks: Path = typer.Option(..., "--tasks", help="task file (its product tasks)"),
        episodes: int = typer.Option(16, "--episodes", min=1, help="episodes per setting"),
        views: list[str] = typer.Option(
            ["compact/h1/brief", "compact/tools"], "--view", help="views to play in (repeat)"
        ),
        max_turns: int = typer.Option(6, "--max-turns", min=1, help="turns an episode"),
        max_tokens: int = typer.Option(128, "--max-tokens", min=1, help="tokens a turn"),
        max_idle_turns: int = typer.Option(
            2, "--max-idle-turns", min=1, help="turns in a row without a call that ran"
        ),
        concurrency: int = typer.Option(8, "--concurrency", min=1, help="episodes at once"),
        threads: int | None = typer.Option(None, "--threads", min=1, help="torch threads"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Episodes/s of an hf: model, each view with and without kept keys and values."""
        from shopbench.bench.hf_episodes import EpisodesBenchConfig
        from shopbench.bench.hf_episodes import run as run_episodes

        result = run_episodes(EpisodesBenchConfig(
            model=model, catalog=catalog, tasks=tasks, episodes=episodes, views=views,
            max_turns=max_turns, max_tokens=max_tokens, max_idle_turns=max_idle_turns,
            concurrency=concurrency,
            threads=threads,
        ))  # fmt: skip
        data = result.model_dump(mode="json")
        typer.echo(json.dumps(data, sort_keys=True) if as_json else json.dumps(data, indent=2))

    @bench_app.command("hf-engines")
    def bench_hf_engines(
        model: Path = typer.Option(..., "--model", help="model directory to play"),
        catalog: Path = typer.Option(..., "--catalog", help="catalog the tasks are played on"),
        tasks: Path = typer.Option(..., "--tasks", help="task file (its product tasks)"),
        settings: list[str] = typer.Option(
            ["float32:2", "float32:1", "int8:2"], "--setting",
            help="DTYPE:THREADS[:buffered], or onnx:THREADS for the onnxruntime-genai engine, "
            "to play with (repeat); the first is the reference",
        ),
        onnx_dir: Path | None = typer.Option(
            None, "--onnx-dir", help="onnxruntime-genai folder of the onnx settings (default: "
            "the model's onnx folder, as distill export-onnx writes it)",
        ),
        view: str | None = typer.Option(None, "--view", help="view (default: the model's)"),
        episodes: int = typer.Option(8, "--episodes", min=1, help="episodes per setting"),
        max_turns: int = typer.Option(8, "--max-turns", min=1, help="turns an episode"),
        max_tokens: int = typer.Option(312, "--max-tokens", min=1, help="tokens a turn"),
        max_idle_turns: int = typer.Option(
            2, "--max-idle-turns", min=1, help="turns in a row without a call that ran"
        ),
        concurrency: int = typer.Option(8, "--concurrency", min=1, help="episodes at once"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Episodes/s of an hf: model per engine, dtype and thread count, each against the
        first."""
        from shopbench.bench.hf_engines import EnginesBenchConfig, EngineSetting
        from shopbench.bench.hf_engines import run as run_engines

        result = run_engines(EnginesBenchConfig(
            model=model, catalog=catalog, tasks=tasks,
            settings=[EngineSetting.parse(s) for s in settings], view=view,
            episodes=episodes, max_turns=max_turns, max_tokens=max_tokens,
            max_idle_turns=max_idle_turns, concurrency=concurrency, onnx_dir=onnx_dir,
        ))  # fmt: skip
        data = result.model_dump(mode="json")
        typer.echo(json.dumps(data, sort_keys=True) if as_json else json.dumps(data, indent=2))

    @bench_app.command("layouts")
    def bench_layouts(
        curated: Path = typer.Option(..., "--curated", help="a curated set (curate's --out)"),
        model: Path = typer.Option(..., "--model", help="model directory: its tokenizer counts"),
        settings: list[str] = typer.Option(
            ["step:compact/h1/brief", "episode:compact/tools"], "--setting",
            help="LAYOUT:VIEW to build (repeat), layout step or episode",
        ),
        intents: list[str] = typer.Option(
            ["product"], "--intent", help="intents built (repeat; default product)"
        ),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Tokens per curated episode in each row layout and view, as the trainer sees them."""
        from shopbench.bench.layouts import LayoutsBenchConfig
        from shopbench.bench.layouts import run as run_layouts

        result = run_layouts(LayoutsBenchConfig.model_validate({
            "curated": curated, "model": model, "settings": settings,
            "intents": intents or None,
        }))  # fmt: skip
        data = result.model_dump(mode="json")
        typer.echo(json.dumps(data, sort_keys=True) if as_json else json.dumps(data, indent=2))

    @bench_app.command("hf-policy")
    def bench_hf_policy(
        model: Path | None = _HF_BENCH.option("model", "--model"),
        smollm2: bool = _HF_BENCH.option("smollm2", "--smollm2/--no-smollm2"),
        smollm2_dir: Path | None = _HF_BENCH.option("smollm2_dir", "--smollm2-dir"),
        prompts: str = _HF_BENCH.option("prompts", "--prompts"),
        batch: int = _HF_BENCH.option("batch", "--batch"),
        new_tokens: int = _HF_BENCH.option("new_tokens", "--new-tokens"),
        threads: int = _HF_BENCH.option("threads", "--threads"),
        as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
    ) -> None:
        """Tokens/s of hf: policies on this CPU, one turn at a time and batched."""
        from shopbench.bench.hf_policy import run as run_hf

        result = run_hf(
            _HF_BENCH.build(
                model=model, smollm2=smollm2, smollm2_dir=smollm2_dir, prompts=prompts,
                batch=batch,
                new_tokens=new_tokens, threads=threads,
            )
        )
        data = result.model_dump(mode="json")
        typer.echo(json.dumps(data, sort_keys=True) if as_json else json.dumps(data, indent=2))
