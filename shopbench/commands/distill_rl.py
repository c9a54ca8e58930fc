"""`shopbench distill rl`: GRPO from a checkpoint in the arena's own environment.

Registered on the `distill` group by :func:`register_rl`. The run is
:func:`shopbench.distill.rl.trainer.train_rl`; with ``--eval-tasks`` the trained model is then
measured against its starting checkpoint on held-out tasks by ``distill eval``'s harness
(:mod:`shopbench.evaluate.trained.run`), the same table and files.
"""

from __future__ import annotations

from pathlib import Path

import typer

from shopbench.commands.blocks import catalog_option
from shopbench.commands.flags import Flags
from shopbench.distill.rl.config import SHIPPED, RLConfig

_RL = Flags(RLConfig)


def register_rl(distill_app: typer.Typer) -> None:
    """Add `rl` to the `distill` group."""

    @distill_app.command("rl")
    def rl_command(
        model: str = typer.Option(..., "--model", help="model folder to start from (an SFT "
                                  "checkpoint, e.g. distill train's OUT/model)"),
        tasks: Path = typer.Option(..., "--tasks", help="task file of live tasks (or JSONL "
                                   "rows with a 'task' field)"),
        catalog: Path = catalog_option("catalog directory of the tasks"),
        out: Path = typer.Option(..., "--out", help="folder for checkpoints, model, report"),
        config: str | None = typer.Option(
            None, "--config", help=f"YAML/TOML config, or a shipped one: {', '.join(SHIPPED)}"
        ),
        max_steps: int | None = _RL.override("max_steps", "--max-steps"),
        num_generations: int | None = _RL.override("num_generations", "--num-generations"),
        learning_rate: float | None = _RL.override("learning_rate", "--lr"),
        eval_tasks: Path | None = typer.Option(
            None, "--eval-tasks", help="held-out task file: evaluate the trained model against "
            "the starting one afterwards (distill eval's table, in OUT/eval)",
        ),  # fmt: skip
        eval_samples: int = typer.Option(4, "--eval-samples", min=1, help="K of pass@K"),
    ) -> None:
        """GRPO with TRL in ShoppingEnv: rollouts play the arena's tools, the validator's
        grader gives the reward (plus optional dense and judge terms)."""
        from shopbench.distill.rl.config import load_rl_config
        from shopbench.distill.rl.trainer import REPORT, train_rl

        cfg = load_rl_config(
            config, max_steps=max_steps, num_generations=num_generations,
            learning_rate=learning_rate,
        )  # fmt: skip
        if eval_tasks is not None and not eval_tasks.is_file():
            raise typer.BadParameter(f"{eval_tasks}: no such task file", param_hint="--eval-tasks")
        report = train_rl(model, tasks, catalog, out, cfg)
        first = report.log[0].reward if report.log else None
        last = report.log[-1].reward if report.log else None
        curve = f"{first:.3f} → {last:.3f}" if first is not None and last is not None else "n/a"
        typer.echo(
            f"{report.steps} GRPO steps on {report.device} ({report.rollouts} rollouts over "
            f"{report.tasks} tasks): reward {curve}; {report.masked_tool_tokens} tool-result "
            f"tokens masked from the loss; model in {report.model_dir}; report in {out / REPORT}"
        )
        if eval_tasks is not None:
            _evaluate(report.model_dir, model, eval_tasks, catalog, out / "eval", eval_samples)


def _evaluate(trained: str, base: str, tasks: Path, catalog: Path, out: Path, k: int) -> None:
    from shopbench.commands.evaluate import load_tasks
    from shopbench.evaluate.trained.report import write_model_eval
    from shopbench.evaluate.trained.run import ModelEvalConfig, evaluate_model

    config = ModelEvalConfig(model=f"hf:{trained}", baseline=f"hf:{base}", samples=k)
    env, chosen = load_tasks(catalog, tasks, None)
    report, ts, baseline = evaluate_model(env, chosen, config, tasks_file=str(tasks))
    write_model_eval(out, report, ts, baseline)
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    asr = report.model.overall.metrics["asr"].text()
    typer.echo(f"held-out evaluation: ASR {asr}; table in {out}")
