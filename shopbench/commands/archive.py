"""`shopbench traces serve` (the trace API and browser) and `shopbench bench api`.

``--root`` is an archive folder (a store's directory or a pulled one), served as it is and
re-read as it grows; or an object-storage or HTTP URL (``s3://…``, ``file://…``,
``http(s)://`` another instance of this service), first pulled and verified against
``--validator`` into ``--cache`` by ``traces pull``'s own code, then served from there.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from shopbench.archive.annotations.model import MAX_PER_ANNOTATOR
from shopbench.archive.errors import ArchiveError
from shopbench.archive.remote import ArchiveSource
from shopbench.bench.api import ApiBenchConfig
from shopbench.commands.bench import bench_command
from shopbench.commands.blocks import archive_source_block, takes
from shopbench.commands.flags import Flags
from shopbench.traces.annotations import AnnotationSettings
from shopbench.traces.api.config import ApiConfig

archive_app = typer.Typer(help="The older name of `shopbench traces serve`.",
                          no_args_is_help=True)  # fmt: skip
_API = Flags(ApiConfig)
_ANNOTATIONS = Flags(AnnotationSettings)


def _pulled(source: ArchiveSource, cache: Path | None) -> Path:
    """The source (a URL) pulled and verified into the cache folder; BadParameter without
    ``--validator``."""
    from shopbench.archive.pull.run import pull
    from shopbench.commands.traces_pull import say_pull_problems
    from template.signing import HotkeyVerifier

    if not source.validator:
        raise typer.BadParameter(
            "serving a URL pulls it first: name the publishing validator's hotkey",
            param_hint="--validator",
        )
    folder = (
        cache
        or Path.home()
        / ".cache"
        / "shopbench"
        / "served"
        / hashlib.sha256(source.location.encode()).hexdigest()[:16]
    )
    report = pull(source.target(), folder, validator=source.validator, verifier=HotkeyVerifier())
    say_pull_problems(report, source.validator)
    typer.echo(f"pulled {len(report.fetched)} shards ({report.rows} episodes) into {folder}",
               err=True)  # fmt: skip
    return folder


_SERVED = archive_source_block(
    "--root", "archive folder, or a URL to pull and serve",
    validator_help="the publishing validator's hotkey: a URL root is pulled and verified "
    "against it, a folder is served with only that validator's verified shards",
)  # fmt: skip


@takes(_SERVED)
def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port to listen on"),
    cache: Path | None = typer.Option(None, "--cache", help="for a URL root: where to pull it"),
    rate: float = _API.option("rate_per_s", "--rate"),
    burst: int = _API.option("burst", "--burst"),
    page_size: int = _API.option("page_size", "--page-size"),
    header_timeout: float = _API.option("header_timeout_s", "--header-timeout"),
    trusted_proxies: list[str] = _API.option(
        "trusted_proxies", "--trusted-proxy", default=[],
        help="a reverse proxy's address or CIDR network whose X-Forwarded-For is read as the "
        "client (repeat for several); by default the header is ignored",
    ),
    annotators: list[str] = typer.Option(
        [], "--annotator",
        help="show only this annotator hotkey's annotations (repeat for several); by default "
        "every validly signed annotation is shown, with its hotkey",
    ),  # fmt: skip
    max_per_annotator: int = _ANNOTATIONS.option("max_per_annotator", "--max-per-annotator"),
    source: ArchiveSource | None = None,
) -> None:
    """Serve the archive: JSON at /v1 (OpenAPI at /docs), the browser at /, read-only."""
    try:
        import uvicorn

        from shopbench.traces.api.app import create_app
        from shopbench.traces.api.server import uvicorn_options
    except ImportError as e:
        raise ArchiveError(
            f"traces serve needs the api extra: pip install -e '.[api]' ({e})"
        ) from None
    from shopbench.archive.store import LIFTED_WARNING, load_embargo

    assert source is not None  # the block builds it
    validator = source.validator
    folder = _pulled(source, cache) if source.is_url else Path(source.location)
    if not folder.is_dir():
        raise typer.BadParameter(f"{folder}: no archive here (not a directory)",
                                 param_hint="--root")  # fmt: skip
    if load_embargo(folder).lifted:
        typer.echo(LIFTED_WARNING.format(root=folder), err=True)
    config = _API.build(
        root=str(folder), rate_per_s=rate, burst=burst, page_size=page_size,
        trusted_proxies=tuple(trusted_proxies), header_timeout_s=header_timeout,
    )  # fmt: skip
    app = create_app(
        config, index=_index(config, validator),
        annotations=annotation_book(folder, annotators, max_per_annotator),
    )
    typer.echo(f"serving {folder} at http://{host}:{port}/ (API: http://{host}:{port}/docs)")
    uvicorn.run(app, host=host, port=port, log_level="warning", **uvicorn_options(config))


def _index(config: ApiConfig, validator: str | None) -> Any:
    """The service's view of its folder: with `validator`, only that validator's verified
    shards (what is left out is said once on stderr)."""
    from shopbench.archive.reader import Trust
    from shopbench.traces.api.index import ArchiveIndex
    from template.signing import HotkeyVerifier

    trust = Trust(validator=validator, verifier=HotkeyVerifier()) if validator else None
    index = ArchiveIndex(config.root, refresh_s=config.refresh_s, threads=config.threads,
                         trust=trust)  # fmt: skip
    for dropped in index.dropped:
        typer.echo(f"not served {dropped.path}: {dropped.reason}", err=True)
    return index


def annotation_book(
    folder: Path, annotators: Sequence[str] = (), max_per_annotator: int = MAX_PER_ANNOTATOR
) -> Any:
    """The annotations beside the folder the service shows, each line verified by its
    annotator's hotkey (only `annotators`' when given), at most `max_per_annotator` of one
    annotator shown on an episode."""
    from shopbench.traces.annotations import AnnotationBook, AnnotationSettings
    from template.signing import HotkeyVerifier

    settings = AnnotationSettings(max_per_annotator=max_per_annotator)
    return AnnotationBook(folder, HotkeyVerifier(), annotators=annotators, settings=settings)


def shopbench_command() -> str:
    """How to run ``shopbench`` from here: the bare name when it is on the PATH as the one
    running now, else the path of the one running now (a virtual environment not activated,
    as ``scripts/arena.sh`` runs it), relative to the working directory when it lies below it."""
    here = Path(sys.executable).parent / "shopbench"
    found = shutil.which("shopbench")
    if not here.exists() or (found is not None and Path(found).resolve() == here.resolve()):
        return "shopbench"
    try:
        return str(here.relative_to(Path.cwd()))
    except ValueError:
        return str(here)


def serve_hint(archive: Path) -> str:
    """The command that browses `archive`, as ``shopbench arena`` prints it: one that runs
    from this terminal as it is."""
    return (
        f"browse it: {shopbench_command()} traces serve --root {archive}  "
        "(then open http://127.0.0.1:8000/)"
    )


def _run_api_bench(config: ApiBenchConfig) -> BaseModel:
    """Filtered list page and trajectory-by-id latency (p50, p99) and bulk JSONL streaming
    rate, over HTTP against a real server on a large archive."""
    from shopbench.bench.api import run_api_bench

    return run_api_bench(config)


def register(traces_app: typer.Typer, app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add ``serve`` to the ``traces`` group (and, hidden, the older ``traces serve``) and
    ``bench api``."""
    traces_app.command("serve")(serve_command)
    archive_app.command("serve")(serve_command)
    app.add_typer(archive_app, name="archive", hidden=True)
    bench_app.command("api")(bench_command(ApiBenchConfig, _run_api_bench))
