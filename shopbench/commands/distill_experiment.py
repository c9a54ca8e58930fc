"""`shopbench distill experiment`: the arena's traces made into trained arms, each evaluated
against the base model on the same held-out tasks (:mod:`shopbench.experiment`)."""

from __future__ import annotations

from pathlib import Path

import typer

from shopbench.arena.config import ArenaConfig


def _play(arena: ArenaConfig, out: Path) -> None:
    """Play the experiment's arena into `out` (the subnet layer, imported only when one is
    played)."""
    from template.arena.run import run_arena
    from template.arena.view import QuietView

    run_arena(arena.model_copy(update={"out": out}), QuietView())


def register_experiment(distill_app: typer.Typer) -> None:
    """Add `experiment` to the `distill` group."""

    @distill_app.command("experiment")
    def experiment_command(
        config: Path = typer.Option(..., "--config", help="the experiment's YAML (or TOML, "
                                    "JSON) file, e.g. experiments/smollm2-cpu.yaml"),
        out: Path = typer.Option(..., "--out", help="the experiment's folder (a rerun "
                                 "resumes it: a stage already done is not redone)"),
        model: Path | None = typer.Option(None, "--model", help="the base model's directory "
                                          "(default: the config's model)"),
    ) -> None:  # fmt: skip
        """Arena (or an archive) → curate each arm → build → train → evaluate every arm and
        the base on the same held-out tasks → report.md, report.json and plot.svg."""
        from shopbench.experiment.config import load_experiment
        from shopbench.experiment.run import run_experiment
        from template.signing import HotkeyVerifier

        loaded = load_experiment(config, **({"model": model} if model is not None else {}))
        report = run_experiment(
            loaded, out, verifier=HotkeyVerifier(), play_arena=_play, log=typer.echo
        )
        typer.echo(f"wrote {report} and {report.with_name('report.md')}")
