"""The `shopbench` command: the composition root.

Each command group lives in `shopbench/commands/<group>.py` and registers itself here; heavy
imports stay inside the command functions so that `shopbench --help` is instant. Errors from
the shopbench family become one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from shopbench.errors import ShopbenchError

app = typer.Typer(
    name="shopbench",
    help="A shopping-agent arena whose graded episodes become training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(help="Benchmarks; each prints one JSON object.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _register() -> None:
    from shopbench.commands import (
        arena,
        catalog,
        chain,
        curate,
        distill,
        env,
        evaluate,
        judge,
        search,
        subnet_bench,
        tasks,
        traces,
        verify,
    )

    for module in (
        arena, catalog, search, tasks, env, evaluate, judge, subnet_bench, traces, curate,
        distill, verify, chain,
    ):  # fmt: skip
        module.register(app, bench_app)


_register()


# Usage errors are click's ClickException, from click or from the copy typer carries.
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; shopbench errors become a one-line message and exit status 2, usage
    errors click's own message and status."""
    try:
        code = app(args=argv, standalone_mode=False)
    except ShopbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except typer.Exit as e:
        raise SystemExit(e.exit_code) from None
    except _USAGE_ERROR as e:
        e.show()
        raise SystemExit(e.exit_code) from None
    except (typer.Abort, KeyboardInterrupt):
        raise SystemExit(130) from None
    # Outside standalone mode an interrupted prompt comes back as its exit status, not raised.
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
