"""The archive's published files over HTTP, laid out as object storage holds them, so that
``shopbench traces pull --from http://HOST`` reads the service as it reads a bucket.

``/_manifests/<shard path>.json`` is a shard's signed manifest,
``/_heads/validator=<hotkey>.json`` the validator's signed head, and ``/<shard path>`` the
shard (``GET`` and ``HEAD``, byte ranges for resumed downloads); a folder of either tree
answers an HTML list of links, the listing fsspec's HTTP filesystem walks. Only the shards
the store would publish are here (:meth:`~shopbench.archive.store.EmbargoState.is_public`):
a shard of the live rotation bucket is a 404 like a missing one. The client verifies what it
fetches exactly as from a bucket — every manifest's signature and every shard's sha256.
"""

from __future__ import annotations

import html
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from shopbench.archive.head import HEADS_DIR, head_path
from shopbench.archive.manifest import MANIFESTS_DIR, manifest_path
from shopbench.traces.api.index import ArchiveIndex


def _published(index: ArchiveIndex) -> set[str]:
    """Every file path a public reader may fetch: the public shards, their manifests, and the
    signed head of each validator they belong to (the store writes it over public shards)."""
    shards = [m.path for m in index.manifests()]
    heads = {head_path(m.validator) for m in index.manifests()}
    return {*shards, *(manifest_path(p) for p in shards),
            *(h for h in heads if (index.root / h).is_file())}  # fmt: skip


def _answer(index: ArchiveIndex, path: str) -> Response:
    files = _published(index)
    if path in files:
        media = "application/json" if path.endswith(".json") else "application/octet-stream"
        return FileResponse(index.root / path, media_type=media)
    prefix = path.rstrip("/") + "/"
    children = sorted({
        f[len(prefix):].split("/", 1)[0] + ("/" if "/" in f[len(prefix):] else "")
        for f in files if f.startswith(prefix)
    })  # fmt: skip
    if not children:
        return Response(status_code=404)
    links = "\n".join(
        f'<li><a href="/{quote(prefix + c, safe="/=")}">{html.escape(c)}</a></li>' for c in children
    )
    return HTMLResponse(f"<!doctype html><title>{html.escape(prefix)}</title><ul>\n{links}\n</ul>")


def router(index: ArchiveIndex) -> APIRouter:
    """The mirror's routes over `index`."""
    mirror = APIRouter(include_in_schema=False)

    @mirror.api_route(f"/{MANIFESTS_DIR}/{{rest:path}}", methods=["GET", "HEAD"])
    def manifests(rest: str) -> Response:
        return _answer(index, f"{MANIFESTS_DIR}/{rest}")

    @mirror.api_route(f"/{HEADS_DIR}/{{rest:path}}", methods=["GET", "HEAD"])
    def heads(rest: str) -> Response:
        return _answer(index, f"{HEADS_DIR}/{rest}")

    @mirror.api_route("/validator={rest:path}", methods=["GET", "HEAD"])
    def shards(rest: str) -> Response:
        return _answer(index, f"validator={rest}")

    return mirror
