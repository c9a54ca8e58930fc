"""The trace browser: server-rendered pages (Jinja2 templates shipped in the package).

Miner-written text — reasoning, content, tool arguments, the agent's name — is hostile.
Every template is autoescaped, none marks anything safe, no value is placed in a script,
a style or an event attribute, and the pages are served under a policy that runs only the
service's own script file (:mod:`shopbench.traces.api.guard`). The leaderboard's chart is
SVG drawn here from numbers alone.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from shopbench.archive.errors import NotFound
from shopbench.archive.filters import TraceFilter, allowed_values
from shopbench.packs.pack import pack_page_rows
from shopbench.records.binding import BoundCall, bind_calls
from shopbench.records.trajectory import Trajectory
from shopbench.traces.annotations import AnnotationBook
from shopbench.traces.api.annotated import by_turn, label_choices, label_rows, shown_of
from shopbench.traces.api.index import ArchiveIndex
from shopbench.traces.api.routes import ID_PATTERN, encode_cursor, read_listing
from shopbench.traces.api.summary import Leaderboard, leaderboard, stats
from shopbench.traces.api.templating import env, pretty, unreadable
from shopbench.traces.formats import FORMATS

DOWNLOADS = [(f.name, f.label) for f in FORMATS.values() if f.render is not None and f.label]
"""An episode page's download links: every export format offered per episode."""

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
FORM_FIELDS = ("intent", "success", "miner_uid", "termination", "failure", "failure_constraint",
               "tool_error", "score_min", "score_max", "text", "slow_turn_ms",
               "gate_failed", "label")  # fmt: skip


def render(index: ArchiveIndex, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Template `name` with `context` and the embargo banner's state."""
    state = index.embargo
    html = env.get_template(name).render(embargo=state, **context)
    return HTMLResponse(html, status_code=status)


def error_page(index: ArchiveIndex, status: int, message: str) -> HTMLResponse:
    """The error page (404, 422) with the reason."""
    return render(index, "error.html", status, code=status, message=message)


def chart(board: Leaderboard, width: int = 720, height: int = 260) -> dict[str, Any]:
    """The EMA-over-rounds chart as SVG coordinates: one polyline per miner (rounds are
    each miner's blocks in order, numbered from 1)."""
    pad = 56
    rounds = max((len(m.history) for m in board.miners), default=0)
    top = max((p.ema for m in board.miners for p in m.history), default=0.0) or 1.0

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / max(1, rounds - 1))

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v / top)

    lines = []
    for k, m in enumerate(board.miners):
        points = " ".join(f"{x(i):.1f},{y(p.ema):.1f}" for i, p in enumerate(m.history))
        dots = [(round(x(i), 1), round(y(p.ema), 1)) for i, p in enumerate(m.history)]
        lines.append({"uid": m.uid, "color": PALETTE[k % len(PALETTE)], "points": points,
                      "dots": dots})  # fmt: skip
    ticks = [{"y": round(y(top * f), 1), "label": f"{top * f:.3g}"} for f in (0, 0.5, 1)]
    xticks = [{"x": round(x(i), 1), "label": i + 1} for i in range(rounds)]
    return {"width": width, "height": height, "pad": pad, "lines": lines, "ticks": ticks,
            "xticks": xticks}  # fmt: skip


def turns_of(t: Trajectory) -> list[dict[str, Any]]:
    """The episode's assistant turns, each with its calls beside the observations they
    produced (bound by :func:`shopbench.records.binding.bind_calls`: a call no entry of the
    validator's tool log backs is marked unverified), its timing and the log entries of
    its calls."""
    timing = {x.turn: x for x in t.timings.turns}
    by_turn: dict[int, list[BoundCall]] = {}
    for bc in bind_calls(t.messages, t.tool_log):
        by_turn.setdefault(bc.turn, []).append(bc)
    out = []
    for index, m in enumerate(m for m in t.messages if m.role == "assistant"):
        number = index + 1
        bound = by_turn.get(index, [])
        calls = [
            {"id": c.call_id, "name": c.name, "arguments": pretty(c.arguments),
             "unreadable": unreadable(c.arguments),
             "observation": pretty(t.messages[c.answer].content if c.answer is not None
                                   else None),
             "answered": c.answer is not None, "verified": c.log is not None}
            for c in bound
        ]  # fmt: skip
        log = [t.tool_log[c.log] for c in bound if c.log is not None]
        tt = timing.get(number)
        out.append({
            "number": number, "reasoning": m.reasoning_content or "", "content": m.content or "",
            "calls": calls, "log": log,
            "policy_ms": tt.policy_ms if tt else None, "env_ms": tt.env_ms if tt else None,
            "failures": [f for f in t.failures if f.turn == number],
        })  # fmt: skip
    return out


def criteria_of(t: Trajectory) -> list[dict[str, Any]]:
    """The judge's gates and criteria in order, each with its evidence where the judge
    recorded one (the rubric judge does, in its ``criteria``)."""
    if t.judge is None:
        return []
    if t.judge.criteria:
        return [{"name": c.name, "kind": c.kind, "passed": c.passed, "evidence": c.evidence}
                for c in t.judge.criteria]  # fmt: skip
    return [{"name": k, "kind": "gate", "passed": v, "evidence": ""}
            for k, v in t.judge.gates.items()]  # fmt: skip


def filter_choices(index: ArchiveIndex, annotations: AnnotationBook | None) -> dict[str, list[str]]:
    """The list form's choices: the closed sets of the intent, termination, diagnosis and
    tool-error filters (the intents a record may carry: the intent registry's built-in ones),
    the failing constraints the public archive holds, and the labels of the served episodes'
    annotations."""
    closed = {
        name: allowed_values(name) or []
        for name in ("intent", "termination", "failure", "tool_error")
    }
    return {**closed, "failure_constraint": index.failure_constraints(),
            "label": label_choices(index, annotations)}  # fmt: skip


def _query_string(values: dict[str, Any], **extra: Any) -> str:
    items = {k: v for k, v in {**values, **extra}.items() if v not in (None, "")}
    return urlencode(items)


def router(index: ArchiveIndex, *, page_size: int, max_page_size: int,
           annotations: AnnotationBook | None = None) -> APIRouter:  # fmt: skip
    """The browser's routes over `index` (and the `annotations` beside it, when given)."""
    pages = APIRouter(include_in_schema=False)

    @pages.get("/", response_class=HTMLResponse)
    def board_page() -> HTMLResponse:
        board = leaderboard(index, TraceFilter())
        return render(index, "leaderboard.html", board=board, chart=chart(board),
                      counts=stats(index, TraceFilter()))  # fmt: skip

    @pages.get("/episodes", response_class=HTMLResponse)
    def list_page(request: Request) -> HTMLResponse:
        r = read_listing(request, index, annotations, formats=("json",),
                         max_limit=max_page_size, default_limit=page_size)  # fmt: skip
        values = {k: request.query_params.get(k) for k in FORM_FIELDS}
        rows, nxt = index.page(r.filters, limit=r.limit or page_size, after=r.cursor)
        label_rows(index, annotations, rows)
        filters_qs = _query_string(values)
        next_qs = _query_string(values, cursor=encode_cursor(nxt), limit=r.limit) if nxt else None
        gates = index.gate_names()
        return render(index, "episodes.html", rows=rows, values=values, next_qs=next_qs,
                      filters_qs=filters_qs, gates=gates,
                      choices=filter_choices(index, annotations))  # fmt: skip

    @pages.get("/episodes/{episode_id}", response_class=HTMLResponse)
    def episode_page(episode_id: str = Path(pattern=ID_PATTERN, max_length=128)) -> HTMLResponse:
        t = index.trajectory(episode_id)
        if t is None:
            raise NotFound(f"no episode {episode_id}")
        shown = shown_of(annotations, t)
        notes = by_turn(shown.annotations)
        turns = [{**turn, "annotations": notes.get(turn["number"], [])} for turn in turns_of(t)]
        others = [m for m in index.task_members(t.task_id) if m[0] != t.episode_id]
        return render(index, "episode.html", t=t, turns=turns, criteria=criteria_of(t),
                      dialogue=pack_page_rows(t),
                      outcome=t.outcome, annotations=notes.get(None, []),
                      withheld=shown.withheld, max_per_annotator=shown.max_per_annotator,
                      diagnosis=t.diagnosis, others=others, downloads=DOWNLOADS)  # fmt: skip

    @pages.get("/tasks/{task_id}", response_class=HTMLResponse)
    def task_page(task_id: str = Path(pattern=ID_PATTERN, max_length=128)) -> HTMLResponse:
        episodes = index.task(task_id)
        if not episodes:
            raise NotFound(f"no task {task_id}")
        columns = [{"t": t, "turns": turns_of(t)} for t in episodes]
        return render(index, "task.html", task_id=task_id, first=episodes[0], columns=columns)

    return pages
