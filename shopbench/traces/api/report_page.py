"""A miner's report as one self-contained HTML file, for reading offline.

The page is the browser's kind of page with nothing to fetch: rendered in the browser's
Jinja environment (:mod:`shopbench.traces.api.templating`: autoescaped, nothing marked
safe), its stylesheet inline, no script, no image, no font, no link off the page. It carries
its own Content-Security-Policy, stricter than the service's (:data:`~shopbench.traces.api.
guard.CSP`): nothing may load from anywhere, and the only style that applies is the page's
own stylesheet, named by its sha256 — so a ``<style>``, a ``style=`` attribute or a
stylesheet link that escaping missed would do nothing either.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

from shopbench.archive.errors import ArchiveError
from shopbench.traces.api.templating import env
from shopbench.traces.report import MinerReport

TEMPLATE = "miner_report.html"
STYLE = "_report_style.html"


def report_csp() -> str:
    """The report's policy: nothing loads, only the report's own stylesheet applies."""
    css = env.get_template(STYLE).render()
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode()
    return (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )


def ema_chart(report: MinerReport, width: int = 420, height: int = 180) -> dict[str, Any]:
    """The EMA after each round as SVG coordinates (from numbers alone)."""
    pad = 56
    emas = [r.ema for r in report.rounds]
    top = max(emas, default=0.0) or 1.0

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / max(1, len(emas) - 1))

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v / top)

    dots = [(round(x(i), 1), round(y(v), 1)) for i, v in enumerate(emas)]
    return {
        "width": width, "height": height, "pad": pad,
        "points": " ".join(f"{a},{b}" for a, b in dots), "dots": dots,
        "ticks": [{"y": round(y(top * f), 1), "label": f"{top * f:.3g}"} for f in (0, 0.5, 1)],
    }  # fmt: skip


def render_report(report: MinerReport) -> str:
    """The report as one HTML document that needs nothing beside it."""
    return env.get_template(TEMPLATE).render(r=report, csp=report_csp(), chart=ema_chart(report))


def write_report(report: MinerReport, out: Path) -> Path:
    """The rendered report written to `out` whole or not at all (a temporary file beside it,
    renamed over it); ArchiveError names the file when it cannot be written."""
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(render_report(report), encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ArchiveError(f"{out}: cannot write the report ({e.strerror or e})") from None
    return out
