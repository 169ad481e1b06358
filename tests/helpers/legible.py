"""Whether a figure's text can be read: every title and axis label inside the figure, no two titles over each
other, no two tick labels of one axis over each other (rendered extents, not pixels; tilted labels as the
parallel lines they are)."""
from __future__ import annotations

import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

TOLERANCE = 1.0  # pixels


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _over(a: Bbox, b: Bbox) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE) and (min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE)


def illegible(fig: Figure) -> list[str]:
    """What cannot be read in ``fig``, one line each; empty when every text can."""
    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)  # a closed figure's is bare
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    titles: list[tuple[str, Bbox]] = []
    labels: list[tuple[str, Text]] = []
    if fig._suptitle is not None and _shown(fig._suptitle):
        titles.append(("the suptitle", fig._suptitle.get_window_extent(renderer)))
        labels.append(("the suptitle", fig._suptitle))
    for i, ax in enumerate(fig.axes):
        for kind, text in (("title", ax.title), ("left title", ax._left_title), ("right title", ax._right_title)):
            if _shown(text):
                titles.append((f"axes {i}'s {kind} {text.get_text()!r}", text.get_window_extent(renderer)))
                labels.append((f"axes {i}'s {kind}", text))
        for kind, text in (("x label", ax.xaxis.label), ("y label", ax.yaxis.label)):
            if _shown(text):
                labels.append((f"axes {i}'s {kind} {text.get_text()!r}", text))
        for axis in (ax.xaxis, ax.yaxis):
            shown = [t for t in axis.get_ticklabels() if _shown(t)]
            ticks = [t for t in shown if t.get_rotation() in (0.0, 90.0)]
            extents = [t.get_window_extent(renderer) for t in ticks]
            for (t, a), b in zip(zip(ticks, extents), extents[1:]):
                if _over(a, b):
                    return [f"axes {i}: tick labels {t.get_text()!r} and its neighbour overlap"]
            tilted = [t for t in shown if t.get_rotation() not in (0.0, 90.0)]
            for t, u in zip(tilted, tilted[1:]):  # parallel lines: their distance apart against a line's height
                (x0, y0), (x1, y1) = (t.get_transform().transform(t.get_position()),
                                      u.get_transform().transform(u.get_position()))
                angle = math.radians(t.get_rotation())
                apart = abs((x1 - x0) * math.sin(angle) - (y1 - y0) * math.cos(angle))
                if apart < renderer.points_to_pixels(t.get_fontsize()) - TOLERANCE:
                    return [f"axes {i}: tilted tick labels {t.get_text()!r} and {u.get_text()!r} run together"]
    problems = []
    for name, text in labels:
        e = text.get_window_extent(renderer)
        if e.x0 < box.x0 - TOLERANCE or e.x1 > box.x1 + TOLERANCE or e.y0 < box.y0 - TOLERANCE or \
                e.y1 > box.y1 + TOLERANCE:
            problems.append(f"{name} reaches outside the figure")
    for k, (name, a) in enumerate(titles):
        for other, b in titles[k + 1:]:
            if _over(a, b):
                problems.append(f"{name} overlaps {other}")
    return problems
