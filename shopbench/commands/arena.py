"""`shopbench arena` (a whole subnet on this machine) and `shopbench bench validator`.

The arena's options come from its typed config (``shopbench.arena.config``, plain pydantic);
the subnet plumbing (the rest of ``template``, and through it bittensor) is imported only
inside the commands, so the rest of the CLI never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import SERVABLE_POLICIES, kinds_in_turn
from shopbench.arena.config import ArenaConfig, parse_added
from shopbench.commands import policy_flags
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import takes
from shopbench.commands.flags import Flags
from shopbench.errors import first_problem
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.weights import WeightCurve
from template.bench.config import ValidatorBenchConfig

_ARENA = Flags(ArenaConfig)
_CONSENSUS = Flags(ConsensusConfig)
_CURVE = Flags(WeightCurve)
_RELEASE = "the release's consensus"


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add `arena` to the root app and `validator` to the bench group."""

    @app.command("arena")
    @takes(policy_flags.policy_block(ArenaConfig.model_fields["turn_timeout_s"].default,
                                     request_timeout_flag=False))  # fmt: skip
    def arena_command(
        miners: int = _ARENA.option("miners", "--miners"),
        rounds: int = _ARENA.option("rounds", "--rounds"),
        products: int = _ARENA.option("products", "--products"),
        add_miner: list[str] = typer.Option(
            [],
            "--add-miner",
            help="URL=HOTKEY of a miner you run yourself, e.g. a local-mode "
            "miner in front of your model (repeatable); it must allow the arena validator's "
            "hotkey (--print-hotkey)",
        ),  # fmt: skip
        out: Path = _ARENA.option("out", "--out"),
        catalog: Path | None = _ARENA.option("catalog", "--catalog"),
        seed: int = _ARENA.option("seed", "--seed"),
        policies: str | None = typer.Option(
            None,
            "--policies",
            help="comma-separated reference policies or local models (hf:PATH), cycled over "
            f"the miners (default: {','.join(kinds_in_turn(SERVABLE_POLICIES))})",
        ),  # fmt: skip
        tasks_per_round: int = _ARENA.option("tasks_per_round", "--tasks"),
        concurrency: int = _ARENA.option("concurrency", "--concurrency"),
        round_timeout: float = _ARENA.option("round_timeout_s", "--round-timeout"),
        exponent: float | None = _CURVE.override("exponent", "--weight-exponent", of=_RELEASE),
        burn: float | None = _CURVE.override("burn", "--burn", of=_RELEASE),
        ema_alpha: float | None = _CONSENSUS.override("ema_alpha", "--ema-alpha", of=_RELEASE),
        print_hotkey: bool = typer.Option(
            False, "--print-hotkey", help="print the arena validator's hotkey and exit"
        ),
        quiet: bool = typer.Option(False, "--quiet", help="no progress or leaderboard"),
        force: bool = _ARENA.option("force", "--force"),
        judge: str | None = _ARENA.option("judge", "--judge"),
        judge_rate: float = _ARENA.option("judge_rate", "--judge-rate"),
        judge_budget: int | None = _ARENA.option("judge_budget", "--judge-budget"),
        policy_options: PolicyOptions | None = None,
    ) -> None:
        """Run a whole subnet here: a local chain, miner processes, the real validator.

        The model options (flags, --policy-config) reach every hf: miner; reference miners
        take none."""
        from shopbench.commands.archive import serve_hint
        from shopbench.scoring.consensus import ConsensusConfig
        from template.arena.run import ARCHIVE_DIR, run_arena, validator_hotkey
        from template.arena.view import QuietView, RichView

        if print_hotkey:
            typer.echo(validator_hotkey())
            return
        chosen = policy_options or PolicyOptions()
        consensus = _consensus(ConsensusConfig(), exponent, burn, ema_alpha)
        options: dict[str, Any] = {
            "miners": miners, "rounds": rounds, "products": products, "out": out,
            "catalog": catalog, "seed": seed, "add_miners": parse_added(add_miner),
            "tasks_per_round": tasks_per_round, "concurrency": concurrency,
            "round_timeout_s": round_timeout, "consensus": consensus,
            "policy_options": chosen.without("turn_timeout_s"),
            "judge": judge, "judge_rate": judge_rate, "judge_budget": judge_budget,
            "force": force,
        }  # fmt: skip
        if policies:
            options["policies"] = [p.strip() for p in policies.split(",") if p.strip()]
        if chosen.turn_timeout_s is not None:
            options["turn_timeout_s"] = chosen.turn_timeout_s
        config = _ARENA.build(**options)
        report = run_arena(config, QuietView() if quiet else RichView())
        typer.echo(f"wrote {out / 'arena.json'} and {report['trajectories']}")
        typer.echo(serve_hint(out / ARCHIVE_DIR))

    bench_app.command("validator")(bench_command(ValidatorBenchConfig, _run_validator_bench))


def _run_validator_bench(config: ValidatorBenchConfig) -> dict[str, Any]:
    """Validator turns per second and per-turn overhead against instant loopback miners."""
    from template.bench.validator import run

    return run(**config.model_dump())


def _consensus(base: Any, exponent: float | None, burn: float | None, alpha: float | None) -> Any:
    """The release's consensus parameters with the arena's overrides (ArenaError if refused)."""
    from pydantic import ValidationError

    from shopbench.arena.errors import ArenaError

    curve = {k: v for k, v in (("exponent", exponent), ("burn", burn)) if v is not None}
    data = base.model_dump()
    data["curve"] = {**data["curve"], **curve}
    if alpha is not None:
        data["ema_alpha"] = alpha
    try:
        return type(base).model_validate(data)
    except ValidationError as e:
        raise ArenaError(f"consensus override {first_problem(e)}") from None
