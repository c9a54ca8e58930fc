"""Blocks of options declared once and shared by every command that takes them.

A :class:`Block` is a set of typer options and the function that builds one value from
them (a typed config, or a resolved object). :func:`takes` adds each block's options to a
command's signature, after the command's own, and calls the command with each block's
built value as one keyword argument instead of the loose option values::

    @app.command("eval")
    @takes(policy_block(turn_timeout_default=60.0))
    def eval_command(catalog: Path = ..., policy_options: PolicyOptions | None = None) -> None:
        ...

So a block's flags, help texts and bounds — the policy options, the trace filters, an
archive source with its validator key — exist in one place, and every command that takes
the block spells them the same way. :func:`model_options` derives a block's options from a
pydantic model's fields (help from each field's description).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

from shopbench.settings import settings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Block:
    """Options (keyword-only parameters with typer defaults) and what they build.

    `build` receives the parsed values by parameter name and returns the value the command
    receives as keyword `name`."""

    name: str
    parameters: Sequence[inspect.Parameter]
    build: Callable[..., Any]


def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    """One keyword-only parameter for a block (`default` is a ``typer.Option``)."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def takes(*blocks: Block) -> Callable[[F], F]:
    """Give the decorated command each block's options; it receives each block's built
    value under the block's name (see the module doc)."""

    def wrap(command: F) -> F:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)  # the command's own names
        names = {b.name for b in blocks}
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values() if p.name not in names
        ]  # fmt: skip
        extra = [p for b in blocks for p in b.parameters]
        clash = {p.name for p in own} & {p.name for p in extra}
        if clash:
            raise ValueError(f"{command.__name__}: options declared twice: {sorted(clash)}")

        @functools.wraps(command)
        def with_blocks(**values: Any) -> Any:
            for b in blocks:
                mine = {p.name: values.pop(p.name) for p in b.parameters}
                values[b.name] = b.build(**mine)
            return command(**values)

        del with_blocks.__wrapped__  # typer must read the signature below, not the wrapped one
        parameters = [*own, *extra]
        with_blocks.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=parameters, return_annotation=hints.get("return", None)
        )
        with_blocks.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_blocks  # type: ignore[return-value]

    return wrap


def model_options(
    model: type[BaseModel],
    *,
    exclude: Sequence[str] = (),
    annotation: Any = str | None,
    suffix: Callable[[str], str] | None = None,
) -> list[inspect.Parameter]:
    """One ``--field-name`` option per field of `model` (but `exclude`), defaulting to None
    and helped by the field's description (plus ``suffix(field)``); values arrive as
    `annotation` (text, by default, for the model to validate)."""
    out = []
    for setting in settings(model):
        name, info = setting.path[-1], setting.info
        if len(setting.path) > 1 or name in exclude:
            continue
        text = (info.description or name.replace("_", " ")) + (suffix(name) if suffix else "")
        out.append(option(name, annotation, typer.Option(None, help=text)))
    return out


def json_option(what: str = "the result") -> Any:
    """``--json``, off by default: print `what` as JSON instead of text. The one output
    switch of every command that can print JSON."""
    return typer.Option(False, "--json", help=f"print {what} as JSON")


def quiet_option() -> Any:
    """``--quiet``: no progress bar."""
    return typer.Option(False, "--quiet", help="no progress bar")


def catalog_option(help: str = "catalog directory") -> Any:
    """``--catalog DIR``, required."""
    return typer.Option(..., "--catalog", help=help)


def limit_option() -> Any:
    """``--limit N``: only the first N tasks of a task file."""
    return typer.Option(None, "--limit", min=1, help="only the first N tasks")


ENDPOINT_HELP = "S3-compatible endpoint (R2, MinIO, a local server) for s3:// URLs"
STORAGE_OPTION_HELP = "fsspec storage option KEY=VALUE (repeatable), e.g. key=…, secret=…"


def archive_source_block(
    flag: str, help: str, *, validator_required: bool = False, validator_help: str | None = None
) -> Block:
    """An archive source and its validator key as one block, built into ``source``
    (:class:`~shopbench.archive.remote.ArchiveSource`): the location under `flag`, then
    ``--validator``, ``--endpoint-url`` and ``--storage-option``, the same on every command
    that reads an archive."""
    from shopbench.archive.remote import ArchiveSource, parse_storage_options

    vhelp = validator_help or ArchiveSource.model_fields["validator"].description
    parameters = [
        option("location", str, typer.Option(..., flag, help=help)),
        option("validator", str if validator_required else str | None,
               typer.Option(... if validator_required else None, "--validator", help=vhelp)),
        option("endpoint_url", str | None, typer.Option(None, "--endpoint-url",
                                                        help=ENDPOINT_HELP)),
        option("storage_option", list[str], typer.Option([], "--storage-option",
                                                         help=STORAGE_OPTION_HELP)),
    ]  # fmt: skip

    def build(
        location: str, validator: str | None, endpoint_url: str | None, storage_option: list[str]
    ) -> ArchiveSource:
        return ArchiveSource(
            location=location, validator=validator,
            storage_options=parse_storage_options(storage_option, endpoint_url),
        )  # fmt: skip

    return Block("source", parameters, build)
