"""The JSON API, ``/v1/...``: read-only, the store's embargo on every route.

Filters are the archive's :class:`~shopbench.archive.filters.TraceFilter`, read from the
query string by :func:`read_request` (a list filter takes a comma-separated value or the
parameter repeated); anything else in the query string but ``cursor``, ``limit`` and
``format`` is an unknown filter. The list routes take one more filter, ``label``: the
episodes a shown annotation labels so (:func:`read_listing`). Every malformed parameter is
a 422 naming it and, where they are a closed set, the allowed values. An episode or task
that does not exist and one that is embargoed get the same 404, so the embargo does not
reveal what it hides.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from shopbench.archive.errors import FilterError, NotFound
from shopbench.archive.filters import BIGINT_MAX, MAX_LIMIT, TraceFilter
from shopbench.archive.layout import from_table, record_json_sql
from shopbench.archive.manifest import ShardManifest
from shopbench.archive.query import Cursor
from shopbench.traces.annotations import AnnotationBook
from shopbench.traces.api.annotated import (
    LABEL_PARAMETER,
    EpisodeAnnotations,
    episode_annotations,
    label_rows,
    parse_labels,
    with_labels,
)
from shopbench.traces.api.index import ArchiveIndex
from shopbench.traces.api.summary import Leaderboard, Stats, leaderboard, stats
from shopbench.traces.atif import atif_file_name, atif_line
from shopbench.traces.formats import ALIASES, FORMATS, export_format
from shopbench.traces.streams import record_lines

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""What an episode or task id in a path looks like; anything else is a 422."""
PAGE_PARAMETERS = ("cursor", "limit", "format")
LIST_FORMATS = ("json", *FORMATS)
"""What ``/v1/trajectories`` answers in: ``json`` pages; every export format streams (or,
built whole, is capped) every match."""
EPISODE_FORMATS = ("json", *(f.name for f in FORMATS.values() if f.render is not None))
"""What ``/v1/trajectories/{id}`` answers in: the record, or its download per format."""
MEDIA_TYPES = {"application/json", *(f.media_type for f in FORMATS.values())}


class Page(BaseModel):
    """One page of an episode list."""

    items: list[dict[str, Any]]
    next_cursor: str | None
    embargo_lifted: bool


class TaskEpisodes(BaseModel):
    """Every miner's episode of one task."""

    task_id: str
    episodes: list[dict[str, Any]]
    embargo_lifted: bool


class Manifests(BaseModel):
    """The signed manifests of the shards a public reader may fetch."""

    manifests: list[ShardManifest]


class ListRequest(BaseModel):
    """A list request: its filters and paging."""

    filters: TraceFilter
    cursor: Cursor | None
    limit: int | None
    format: str
    labels: list[str] = []
    """The ``label`` filter's labels (only where the route reads them: :func:`read_listing`,
    which narrows :attr:`filters` to them)."""


def encode_cursor(cursor: Cursor) -> str:
    """The cursor as the opaque text a client sends back."""
    raw = json.dumps([cursor.block, cursor.episode_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> Cursor:
    """The cursor a client sent; FilterError naming ``cursor`` when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        block, episode_id = json.loads(raw)
        if block is not None and not 0 <= block <= BIGINT_MAX:  # a block the archive holds
            raise ValueError(block)
        return Cursor(block=block, episode_id=episode_id)
    except (binascii.Error, ValueError, TypeError, ValidationError):
        raise FilterError(
            f"cursor {text[:40]!r} is not a cursor this service issued (use next_cursor)",
            filter="cursor",
        ) from None


def read_request(
    request: Request,
    *,
    formats: tuple[str, ...],
    max_limit: int | None,
    default_limit: int | None,
    labels: bool = False,
) -> ListRequest:
    """The filters and paging of `request`'s query string (FilterError names what is wrong,
    before any query runs); ``limit`` is at most `max_limit`, or the filters' own
    :data:`~shopbench.archive.filters.MAX_LIMIT` when `max_limit` is None. With `labels`, the
    ``label`` parameter is read into :attr:`ListRequest.labels`; without, it is an unknown
    filter."""
    values: dict[str, Any] = {}
    page: dict[str, str] = {}
    label_values: list[str] = []
    for key, value in request.query_params.multi_items():
        if value == "":
            continue  # an empty field of the browser's form: not set
        if labels and key == LABEL_PARAMETER:
            label_values.append(value)
        elif key in PAGE_PARAMETERS:
            if key in page:
                raise FilterError(f"parameter {key} given twice", filter=key)
            page[key] = value
        elif key in values:
            values[key] = f"{values[key]},{value}"
        else:
            values[key] = value
    fmt = page.get("format", formats[0])
    fmt = ALIASES.get(fmt, fmt) if ALIASES.get(fmt) in formats else fmt  # an older name
    if fmt not in formats:
        raise FilterError(
            f"format {fmt!r} unknown (allowed: {', '.join(formats)})",
            filter="format", allowed=list(formats),
        )  # fmt: skip
    limit: int | None = default_limit
    if "limit" in page:
        top = MAX_LIMIT if max_limit is None else max_limit
        try:
            limit = int(page["limit"])
        except ValueError:
            limit = 0
        if not 1 <= limit <= top:
            reason = f"{page['limit'][:40]!r} refused: a whole number from 1 to {top}"
            raise FilterError(f"limit {reason}", filter="limit", reason=reason)
    cursor = decode_cursor(page["cursor"]) if "cursor" in page else None
    return ListRequest(filters=TraceFilter.parse(values), cursor=cursor, limit=limit, format=fmt,
                       labels=parse_labels(label_values))  # fmt: skip


def read_listing(
    request: Request,
    index: ArchiveIndex,
    annotations: AnnotationBook | None,
    *,
    formats: tuple[str, ...],
    max_limit: int | None,
    default_limit: int | None,
) -> ListRequest:
    """:func:`read_request` for a list route: its filters, narrowed to the episodes the
    ``label`` parameter asks for (:func:`~shopbench.traces.api.annotated.with_labels`: a
    shown annotation of the served record carries one of its labels)."""
    r = read_request(request, formats=formats, max_limit=max_limit,
                     default_limit=default_limit, labels=True)  # fmt: skip
    narrowed = with_labels(index, annotations, r.filters, r.labels)
    return r.model_copy(update={"filters": narrowed})


def filter_parameters() -> list[dict[str, Any]]:
    """The filters as OpenAPI query parameters (the routes read them from the raw query
    string, so FastAPI does not see them)."""
    label = {"name": LABEL_PARAMETER, "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "annotation labels: episodes a shown annotation labels so"}
    return [
        *({"name": name, "in": "query", "required": False, "description": field.description,
           "schema": {"type": "string"}}
          for name, field in TraceFilter.model_fields.items()
          if name != "limit"),
        label,
    ]  # fmt: skip


def _paging(formats: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "next_cursor of the previous page"},
        {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer"},
         "description": "episodes per page (json) or in all (the other formats)"},
        {"name": "format", "in": "query", "required": False,
         "schema": {"type": "string", "enum": list(formats)}},
    ]  # fmt: skip


def _attachment(name: str, fmt: str) -> dict[str, str]:
    return {"content-disposition": f'attachment; filename="{name}{export_format(fmt).suffix}"'}


def episode_response(episodes: list[Any], fmt: str, name: str) -> Response:
    """`episodes` (Trajectory records) in the export format `fmt` as one download."""
    spec = export_format(fmt)
    assert spec.render is not None
    return Response(spec.render(episodes), media_type=spec.media_type,
                    headers=_attachment(name, spec.name))  # fmt: skip


def router(index: ArchiveIndex, *, page_size: int, max_page_size: int, stream_batch: int,
           max_eval_samples: int,
           annotations: AnnotationBook | None = None) -> APIRouter:  # fmt: skip
    """The ``/v1`` routes over `index` (and the `annotations` beside it, when given)."""
    api = APIRouter(prefix="/v1", tags=["archive"])
    list_params = [*filter_parameters(), *_paging(LIST_FORMATS)]

    @api.get("/manifests", response_model=Manifests)
    def manifests() -> Manifests:
        """The signed manifests of every published shard (live rotation buckets left out)."""
        return Manifests(manifests=index.manifests())

    @api.get(
        "/trajectories", response_model=Page, openapi_extra={"parameters": list_params},
        responses={200: {"content": {t: {} for t in sorted(MEDIA_TYPES)}}},
    )  # fmt: skip
    def trajectories(request: Request) -> Any:
        """Matching episodes: a page of summaries (``format=json``, follow ``next_cursor``), or
        every match in an export format: streamed (JSONL records, Parquet, chat rows,
        ShoppingBench traces, ATIF documents one per line), or one Inspect ``.eval`` log (at
        most ``max_eval_samples``)."""
        r = read_listing(request, index, annotations, formats=LIST_FORMATS, max_limit=None,
                         default_limit=None)  # fmt: skip
        if r.format == "json":
            limit = r.limit or page_size
            if limit > max_page_size:
                raise FilterError(
                    f"limit {limit} refused: a page holds 1 to {max_page_size} episodes",
                    filter="limit",
                )
            rows, nxt = index.page(r.filters, limit=limit, after=r.cursor)
            label_rows(index, annotations, rows)
            return Page(items=rows, next_cursor=encode_cursor(nxt) if nxt else None,
                        embargo_lifted=index.embargo.lifted)  # fmt: skip
        spec = export_format(r.format)
        f = r.filters.model_copy(update={"limit": r.limit})
        if spec.stream is None:  # built whole: capped
            if r.limit is not None and r.limit > max_eval_samples:
                raise FilterError(
                    f"limit {r.limit} refused: an {spec.name} export holds 1 to "
                    f"{max_eval_samples}", filter="limit",
                )  # fmt: skip
            cap = r.limit or max_eval_samples
            f = f.model_copy(update={"limit": cap + 1})  # one more: was anything cut?
            episodes = [t for table in index.tables(f, batch=stream_batch)
                        for t in from_table(table)]  # fmt: skip
            response = episode_response(episodes[:cap], spec.name, "episodes")
            response.headers["x-archive-truncated"] = "true" if len(episodes) > cap else "false"
            return response
        if spec.name == "jsonl":  # the records' JSON made by DuckDB: the fastest bulk path
            line = f"{record_json_sql()} || chr(10) AS line"
            chunks = record_lines(index.tables(f, batch=stream_batch, select=line))
        else:
            chunks = spec.stream(index.tables(f, batch=stream_batch))
        return StreamingResponse(
            chunks, media_type=spec.media_type, headers=_attachment("episodes", spec.name)
        )

    @api.get("/trajectories/{episode_id}", responses={404: {"description": "unknown"}})
    def trajectory(
        request: Request,
        episode_id: str = Path(pattern=ID_PATTERN, max_length=128),
    ) -> Any:
        """One episode: the record (``format=json``), or its download in an export format
        (its ATIF document is one JSON file)."""
        extra = [k for k in request.query_params if k != "format"]
        if extra:
            why = "refused: one episode takes only format"
            raise FilterError(
                f"parameter {extra[0]} {why}", filter=extra[0], allowed=["format"], reason=why
            )
        r = read_request(request, formats=EPISODE_FORMATS, max_limit=None, default_limit=None)
        t = index.trajectory(episode_id)
        if t is None:
            raise NotFound(f"no episode {episode_id}")
        if r.format == "json":
            return Response(t.model_dump_json(), media_type="application/json")
        if r.format == "atif":
            name = atif_file_name(episode_id)
            return Response(atif_line(t), media_type="application/json",
                            headers={"content-disposition": f'attachment; filename="{name}"'})
        return episode_response([t], r.format, episode_id)

    @api.get("/episodes/{episode_id}/annotations", response_model=EpisodeAnnotations,
             responses={404: {"description": "unknown"}})  # fmt: skip
    def annotations_of(
        episode_id: str = Path(pattern=ID_PATTERN, max_length=128),
    ) -> EpisodeAnnotations:
        """The people's signed annotations of one episode: each verified, not retracted,
        and made on exactly the record served (an embargoed episode is a 404)."""
        t = index.trajectory(episode_id)
        if t is None:
            raise NotFound(f"no episode {episode_id}")
        return episode_annotations(annotations, t)

    @api.get("/tasks/{task_id}", response_model=TaskEpisodes)
    def task(task_id: str = Path(pattern=ID_PATTERN, max_length=128)) -> TaskEpisodes:
        """Every miner's episode of one task (a round gives every miner the same tasks)."""
        episodes = index.task(task_id)
        if not episodes:
            raise NotFound(f"no task {task_id}")
        return TaskEpisodes(
            task_id=task_id, episodes=[t.model_dump(mode="json") for t in episodes],
            embargo_lifted=index.embargo.lifted,
        )  # fmt: skip

    @api.get("/leaderboard", response_model=Leaderboard,
             openapi_extra={"parameters": filter_parameters()})  # fmt: skip
    def board(request: Request) -> Leaderboard:
        """Per miner: episodes, ASR, mean process score, and the EMA over rounds."""
        r = read_listing(request, index, annotations, formats=("json",), max_limit=1,
                         default_limit=None)  # fmt: skip
        return leaderboard(index, r.filters)

    @api.get("/stats", response_model=Stats, openapi_extra={"parameters": filter_parameters()})
    def counts(request: Request) -> Stats:
        """Counts by intent, split, termination and failed judge gate."""
        r = read_listing(request, index, annotations, formats=("json",), max_limit=1,
                         default_limit=None)  # fmt: skip
        return stats(index, r.filters)

    return api
