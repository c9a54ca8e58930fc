"""``plot.svg``: ASR per arm with its interval (left) and each arm's training loss (right).

Plain SVG written here, no plotting library: every number drawn is one of report.json's.
"""

from __future__ import annotations

from html import escape

from shopbench.experiment.results import ExperimentReport

WIDTH, HEIGHT = 880, 360
PANEL = 360
MARGIN = 50
COLOURS = {
    "base": "#777777", "curated": "#1f77b4", "unfiltered": "#d62728",
    "successes": "#2ca02c", "recovery": "#9467bd", "curated-2": "#17becf",
    "prompted": "#bcbd22",
}  # fmt: skip
CHAR_WIDTH = 5.5
"""About how wide a character of the 10-point labels is drawn, to see when labels meet."""


def _y(value: float, low: float, high: float) -> float:
    span = (high - low) or 1.0
    return MARGIN + (1.0 - (value - low) / span) * (HEIGHT - 2 * MARGIN)


def _axes(x0: float, title: str, y_label: str, ticks: list[tuple[float, str]]) -> list[str]:
    bottom = HEIGHT - MARGIN
    out = [
        f'<text x="{x0 + PANEL / 2}" y="24" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{x0}" y1="{MARGIN}" x2="{x0}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{x0}" y1="{bottom}" x2="{x0 + PANEL}" y2="{bottom}" stroke="black"/>',
        f'<text x="{x0 - 36}" y="{HEIGHT / 2}" font-size="11" transform="rotate(-90 '
        f'{x0 - 36} {HEIGHT / 2})" text-anchor="middle">{y_label}</text>',
    ]
    for y, label in ticks:
        out.append(f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0}" y2="{y:.1f}" stroke="black"/>')
        out.append(
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{label}</text>'
        )
    return out


def _asr_panel(r: ExperimentReport, x0: float) -> list[str]:
    ticks = [(_y(v, 0, 1), f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    out = _axes(x0, "ASR on the held-out tasks", f"ASR ({r.level * 100:g}% interval)", ticks)
    bars = [(a.key or a.arm, COLOURS.get(a.arm, "black"), a.table) for a in r.arms]
    bars += [(b.policy, "grey", b.table) for b in r.baselines]
    step = PANEL / (len(bars) + 1)
    names = [label for label, _, _ in bars]
    # Labels that would meet their neighbour's go on two lines, every second one lower.
    crowded = any((len(a) + len(b)) * CHAR_WIDTH / 2 > step - 4
                  for a, b in zip(names, names[1:], strict=False))  # fmt: skip
    for i, (label, colour, table) in enumerate(bars, start=1):
        asr = table.metrics.get("asr")
        x = x0 + i * step
        y = HEIGHT - MARGIN + 16 + (12 if i % 2 == 0 and crowded else 0)
        out.append(f'<text x="{x:.1f}" y="{y}" font-size="10" '
                   f'text-anchor="middle">{escape(label)}</text>')  # fmt: skip
        if asr is None:
            continue
        lo, hi, v = (_y(e, 0, 1) for e in (asr.low, asr.high, asr.value))
        out += [
            f'<line x1="{x:.1f}" y1="{lo:.1f}" x2="{x:.1f}" y2="{hi:.1f}" stroke="{colour}" '
            'stroke-width="2"/>',
            f'<rect x="{x - 9:.1f}" y="{v - 2:.1f}" width="18" height="4" fill="{colour}"/>',
            f'<text x="{x + 12:.1f}" y="{v + 4:.1f}" font-size="10">{asr.value:.3f}</text>',
        ]
    return out


def _loss_panel(r: ExperimentReport, x0: float) -> list[str]:
    curves = {a.arm: a.train_loss for a in r.arms if a.train_loss}
    values = [loss for c in curves.values() for _, loss in c]
    steps = [s for c in curves.values() for s, _ in c]
    top = max(values, default=1.0)
    last = max(steps, default=1)
    ticks = [(_y(v, 0, top), f"{v:.2f}") for v in (0.0, top / 2, top)]
    out = _axes(x0, "training loss", "loss", ticks)
    out.append(f'<text x="{x0 + PANEL / 2}" y="{HEIGHT - MARGIN + 30}" font-size="11" '
               f'text-anchor="middle">step (0–{last})</text>')  # fmt: skip
    for n, (arm, curve) in enumerate(curves.items()):
        colour = COLOURS.get(arm, "black")
        points = " ".join(
            f"{x0 + PANEL * s / last:.1f},{_y(loss, 0, top):.1f}" for s, loss in curve
        )
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   'stroke-width="1.5"/>')  # fmt: skip
        out.append(f'<text x="{x0 + PANEL - 4}" y="{MARGIN + 14 * (n + 1)}" font-size="11" '
                   f'text-anchor="end" fill="{colour}">{escape(arm)}</text>')  # fmt: skip
    return out


def render_plot(r: ExperimentReport) -> str:
    """The report's two panels as one SVG document."""
    body = [*_asr_panel(r, 70.0), *_loss_panel(r, 70.0 + PANEL + 90.0)]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif">\n'
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>\n'
        + "\n".join(body) + "\n</svg>\n"
    )
