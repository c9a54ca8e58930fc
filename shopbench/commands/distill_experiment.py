"""`shopbench distill experiment`: the arena's traces made into trained arms, each evaluated
against the base model on the same held-out tasks (:mod:`shopbench.experiment`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def _arena_config(options: dict[str, Any], out: Path) -> Any:
    """The arena's config from the experiment's options; ExperimentError naming the key."""
    from pydantic import ValidationError

    from shopbench.experiment.errors import ExperimentError
    from template.arena.config import ArenaConfig

    try:
        return ArenaConfig.model_validate({**options, "out": out})
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        key = ".".join(str(x) for x in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ExperimentError(f"arena.{key}: {message}") from None


def _play(options: dict[str, Any], out: Path) -> None:
    """Play the arena (the subnet layer, imported only when one is played)."""
    from template.arena.run import run_arena
    from template.arena.view import QuietView

    run_arena(_arena_config(options, out), QuietView())


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
        if loaded.arena is not None:
            _arena_config(loaded.arena, out / "arena")  # refused before any stage runs
        report = run_experiment(
            loaded, out, verifier=HotkeyVerifier(), play_arena=_play, log=typer.echo
        )
        typer.echo(f"wrote {report} and {report.with_name('report.md')}")
