"""The service: one FastAPI app serving the JSON API (``/v1``, OpenAPI at ``/docs``), the
trace browser's pages and the published files, over one archive root.

Errors are answered in one place: a malformed filter or parameter (FilterError) is a 422
naming it and the allowed values, two episodes a diff will not compare (NotComparable) a 422
naming ``b``, an unpublished id a 404, an unreadable archive a 503; the pages answer the
same statuses as HTML.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from shopbench.archive.errors import FilterError, NotComparable, NotFound, SinkError
from shopbench.traces.annotations import AnnotationBook
from shopbench.traces.api import compare, mirror, pages, routes
from shopbench.traces.api.config import ApiConfig
from shopbench.traces.api.guard import Guard
from shopbench.traces.api.index import ArchiveIndex


def _wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/v1") and "text/html" in request.headers.get(
        "accept", ""
    )


def create_app(
    config: ApiConfig, index: ArchiveIndex | None = None,
    annotations: AnnotationBook | None = None,
) -> Any:  # fmt: skip
    """The ASGI app serving `config.root` (`index`: an already opened view of it; with
    `annotations`, the verified annotations beside it), wrapped in the rate limit, the
    query-string cap and the security headers."""
    index = index or ArchiveIndex(config.root, refresh_s=config.refresh_s, threads=config.threads)
    app = FastAPI(
        title="shopbench trace archive",
        description="Read-only access to archived, judged shopping-agent episodes. The "
        "store's embargo holds on every route.",
        version="1",
    )
    app.state.index = index
    app.include_router(routes.router(
        index, page_size=config.page_size, max_page_size=config.max_page_size,
        stream_batch=config.stream_batch, max_eval_samples=config.max_eval_samples,
        annotations=annotations,
    ))  # fmt: skip
    app.include_router(pages.router(index, page_size=config.page_size,
                                    max_page_size=config.max_page_size, annotations=annotations))
    app.include_router(compare.router(index))
    app.include_router(mirror.router(index))
    app.mount("/static", StaticFiles(packages=[("shopbench.traces.api", "static")]), "static")

    @app.exception_handler(FilterError)
    async def bad_filter(request: Request, e: FilterError) -> Response:
        message = f"parameter {e.filter}: {e.reason}" if e.filter and e.reason else str(e)
        allowed = e.allowed
        if e.reason == "unknown filter" and allowed is not None:
            allowed = list(dict.fromkeys([*allowed, *routes.PAGE_PARAMETERS]))
        detail = {"loc": ["query", e.filter] if e.filter else ["query"], "msg": message,
                  "type": "filter", "allowed": allowed}  # fmt: skip
        if _wants_html(request):
            return pages.error_page(index, 422, message)
        return JSONResponse({"detail": [detail]}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, e: RequestValidationError) -> Response:
        errors = [
            {"loc": list(x["loc"]), "msg": f"{x['loc'][-1]}: {x['msg']}", "type": x["type"]}
            for x in e.errors()
        ]
        if _wants_html(request):
            return pages.error_page(index, 422, "; ".join(x["msg"] for x in errors))
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(NotComparable)
    async def not_comparable(request: Request, e: NotComparable) -> Response:
        if _wants_html(request):
            return pages.error_page(index, 422, str(e))
        detail = {"loc": ["query", "b"], "msg": f"parameter b: {e}", "type": "not_comparable"}
        return JSONResponse({"detail": [detail]}, status_code=422)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, e: NotFound) -> Response:
        if _wants_html(request):
            return pages.error_page(index, 404, str(e))
        return JSONResponse({"detail": str(e)}, status_code=404)

    @app.exception_handler(SinkError)
    async def unreadable(request: Request, e: SinkError) -> Response:
        return JSONResponse({"detail": f"the archive cannot be read: {e}"}, status_code=503)

    def embargo_header() -> list[tuple[bytes, bytes]]:
        return [(b"x-archive-embargo", b"lifted" if index.embargo.lifted else b"in-force")]

    return Guard(
        app, rate_per_s=config.rate_per_s, burst=config.burst,
        max_query_chars=config.max_query_chars, extra_headers=embargo_header,
    )  # fmt: skip
