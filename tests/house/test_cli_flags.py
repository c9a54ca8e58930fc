"""CLI options come from the typed configs: one default, one bound, one help text each."""

from __future__ import annotations

import pytest
import typer
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from shopbench.bench.search import SearchBenchConfig
from shopbench.cli import app
from shopbench.commands.flags import Flags


class Knobs(BaseModel):
    workers: int = Field(default=3, ge=1, le=8, description="processes to run")
    rate: float = Field(default=0.5, gt=0, description="share of items")
    name: str = Field(description="what to call it")


KNOBS = Flags(Knobs)


def _app() -> typer.Typer:
    cli = typer.Typer()

    @cli.command()
    def run(
        name: str = KNOBS.option("name", "--name"),
        workers: int = KNOBS.option("workers", "--workers"),
        rate: float = KNOBS.option("rate", "--rate"),
    ) -> None:
        config = KNOBS.build(name=name, workers=workers, rate=rate)
        typer.echo(config.model_dump_json())

    return cli


def test_an_option_takes_the_fields_default_help_and_bounds() -> None:
    runner = CliRunner()
    ok = runner.invoke(_app(), ["--name", "x"])
    assert ok.exit_code == 0, ok.output
    assert Knobs.model_validate_json(ok.stdout) == Knobs(name="x")
    shown = runner.invoke(_app(), ["--help"], terminal_width=200).output
    assert "processes to run" in shown and "1<=x<=8" in shown and "default: 3" in shown
    over = runner.invoke(_app(), ["--name", "x", "--workers", "9"])
    assert over.exit_code == 2 and "--workers" in over.output


def test_a_value_the_model_refuses_is_a_usage_error_naming_the_flag() -> None:
    refused = CliRunner().invoke(_app(), ["--name", "x", "--rate", "0"])
    assert refused.exit_code == 2
    assert "--rate" in refused.output and "greater than 0" in refused.output


def test_an_unknown_field_is_named() -> None:
    with pytest.raises(KeyError, match="no field 'wrokers'"):
        KNOBS.option("wrokers", "--workers")


def test_the_search_bench_reads_its_bounds_from_its_config() -> None:
    bound = SearchBenchConfig.model_fields["queries"].metadata[0].ge
    result = CliRunner().invoke(
        app, ["bench", "search", "--catalog", "nowhere", "--queries", str(bound - 1)]
    )
    assert result.exit_code == 2
    assert "--queries" in result.output and str(bound) in result.output


def test_the_command_prints_a_usage_error_without_a_traceback() -> None:
    import subprocess
    import sys

    argv = ["bench", "search", "--catalog", "x", "--queries", "9"]
    run = subprocess.run(
        [sys.executable, "-m", "shopbench.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert "Invalid value for '--queries'" in run.stderr
    assert "Traceback" not in run.stderr


def _click_app() -> typer.core.TyperGroup:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    return root


def _commands(group: typer.core.TyperGroup, path: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for name, command in group.commands.items():
        if isinstance(command, typer.core.TyperGroup):
            out |= _commands(command, f"{path}{name} ")
        else:
            out[f"{path}{name}"] = command
    return out


def test_every_bench_command_is_made_from_its_config() -> None:
    from shopbench.commands.flags import flag_of

    bench = _click_app().commands["bench"]
    assert isinstance(bench, typer.core.TyperGroup) and len(bench.commands) >= 19
    for name, command in bench.commands.items():
        config = getattr(command.callback, "bench_config", None)
        assert config is not None, f"bench {name} is not made by bench_command"
        flags = {o for p in command.params for o in p.opts}
        fields = {flag_of(f, info) for f, info in config.model_fields.items()} | {"--json"}
        assert flags == fields, f"bench {name}: {sorted(flags ^ fields)}"


def test_json_is_one_switch_off_by_default_wherever_a_command_prints_json() -> None:
    found = 0
    for name, command in _commands(_click_app()).items():
        for p in command.params:  # type: ignore[attr-defined]
            if "--json" in p.opts:
                found += 1
                assert p.default is False and not p.secondary_opts, f"{name}: --json"
    assert found >= 25
