"""`shopbench bench ...` commands, each made from its benchmark's config.

A benchmark declares what it measures as a pydantic config (every field with a
description); :func:`bench_command` makes the typer command whose flags are that config's
fields (:meth:`~shopbench.commands.flags.Flags.block`), validates the values through the
model, runs the benchmark and prints its result as JSON: one line with ``--json``, indented
without. A command module registers its benchmarks with it::

    bench_app.command("search")(bench_command(SearchBenchConfig, _run_search))

`run` imports the benchmark inside itself, so ``shopbench --help`` never loads one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

from shopbench.commands.blocks import Block, json_option, option, takes
from shopbench.commands.flags import Flags, Spell

ConfigT = TypeVar("ConfigT", bound=BaseModel)
_OUTPUT = Block(
    "as_json",
    [option("as_json", bool, json_option("the figures on one line"))],
    lambda as_json: as_json,
)


def print_result(result: BaseModel | Mapping[str, Any], as_json: bool) -> None:
    """A benchmark's result as JSON, keys sorted: one line (`as_json`) or indented."""
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    typer.echo(json.dumps(data, sort_keys=True, indent=None if as_json else 2))


def bench_command(
    config: type[ConfigT],
    run: Callable[[ConfigT], BaseModel | Mapping[str, Any]],
    *,
    spell: Mapping[str, Spell] | None = None,
    exclude: Sequence[str] = (),
    help: str | None = None,
) -> Callable[..., None]:
    """The command that runs `run` on the `config` its flags build and prints the result;
    its help is `help`, else `run`'s docstring. `spell` and `exclude` as
    :meth:`Flags.block`."""
    block = Flags(config).block("config", spell=spell, exclude=exclude)

    def command(config: Any = None, as_json: bool = False) -> None:
        print_result(run(config), as_json)

    command.__doc__ = help or run.__doc__
    command.__name__ = command.__qualname__ = f"bench_{config.__name__}"
    made = takes(block, _OUTPUT)(command)
    made.bench_config = config  # type: ignore[attr-defined]  # read by the house test
    return made
