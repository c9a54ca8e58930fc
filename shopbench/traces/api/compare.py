"""Two episodes of one task compared: ``/v1/diff?a=…&b=…`` (JSON) and ``/diff?a=…&b=…``
(the page), both from :func:`shopbench.traces.diff.diff`.

Each id is looked up as the episode route looks it up, so an unknown and an embargoed
episode get the same 404; two episodes of different tasks (or one twice) are a 422 naming
``b``; a malformed or missing id is a 422 naming it.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from shopbench.archive.errors import FilterError, NotFound
from shopbench.traces.api.index import ArchiveIndex
from shopbench.traces.api.pages import render
from shopbench.traces.api.routes import ID_PATTERN
from shopbench.traces.diff import EpisodeDiff, diff

PARAMETERS = ("a", "b")


def episode_diff(index: ArchiveIndex, request: Request, a: str, b: str) -> EpisodeDiff:
    """The diff of episodes `a` and `b` of `index` (FilterError for a parameter other than
    ``a`` and ``b``, NotFound for an id not published, NotComparable for two tasks)."""
    extra = [k for k in request.query_params if k not in PARAMETERS]
    if extra:
        why = "refused: a diff takes only a and b"
        raise FilterError(
            f"parameter {extra[0]} {why}", filter=extra[0], allowed=list(PARAMETERS), reason=why
        )
    ta = index.trajectory(a)
    if ta is None:
        raise NotFound(f"no episode {a}")
    tb = index.trajectory(b)
    if tb is None:
        raise NotFound(f"no episode {b}")
    return diff(ta, tb)


def router(index: ArchiveIndex) -> APIRouter:
    """The diff's JSON route and its page over `index`."""
    routes = APIRouter()

    @routes.get("/v1/diff", response_model=EpisodeDiff, tags=["archive"],
                responses={404: {"description": "unknown"}})  # fmt: skip
    def diff_json(
        request: Request,
        a: str = Query(pattern=ID_PATTERN, max_length=128, description="an episode id"),
        b: str = Query(pattern=ID_PATTERN, max_length=128,
                       description="another episode of the same task"),  # fmt: skip
    ) -> EpisodeDiff:
        """Two episodes of one task aligned turn by turn (reasoning, calls with their
        arguments as written and as compared, a summary of each observation), each one's
        outcome, score and diagnosis, and the first turn where their calls diverge."""
        return episode_diff(index, request, a, b)

    @routes.get("/diff", response_class=HTMLResponse, include_in_schema=False)
    def diff_page(
        request: Request,
        a: str = Query(pattern=ID_PATTERN, max_length=128),
        b: str = Query(pattern=ID_PATTERN, max_length=128),
    ) -> HTMLResponse:
        return render(index, "diff.html", d=episode_diff(index, request, a, b))

    return routes
