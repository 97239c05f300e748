"""Compact vector figures of the report, written as SVG text (small multiples and per-run details).

Why not matplotlib here: a matplotlib fan chart of one run is 73 KB as SVG and 36 KB as a 72-dpi PNG
(measured on a grpo_small run), so the three detail figures of 100 runs would be 11-22 MB, beyond
the report's ~5 MB budget; the figures below carry the same content in 3-12 KB each. Tick positions
come from matplotlib's :class:`~matplotlib.ticker.MaxNLocator` (the library's rule, not a new one).

Every figure is a standalone SVG document shown through ``<img src="data:image/svg+xml,...">``: an
image never runs script, so nothing in a figure can execute, and a malformed figure fails to load
(the browser test checks that every image loaded). Figures hold numbers and fixed labels only, never
a run id (those are in the escaped HTML around them).
"""

from __future__ import annotations

import html
import math
import urllib.parse
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Frame",
    "el",
    "svg_document",
    "data_uri",
    "path_d",
    "band_d",
    "dots_d",
    "thin_indices",
    "finite_range",
    "COLORS",
]

#: the report's palette (the fan chart's band colour is plots.fan.BAND_COLOR)
COLORS = {
    "band": "#1f6fb4",
    "obs": "#111111",
    "truth": "#9a9a9a",
    "final": "#c0392b",
    "stop": "#27ae60",
    "target": "#8e44ad",
    "watch": "#d4a017",
    "warning": "#e66100",
    "critical": "#c00000",
    "grid": "#e3e3e3",
    "axis": "#555555",
}

_STYLE = (
    "text{font:13px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:#333}"
    ".t{font-size:12px;fill:#555}.g{stroke:#e3e3e3;stroke-width:1}.a{stroke:#555;stroke-width:1;fill:none}"
)


def thin_indices(n: int, limit: int) -> np.ndarray:
    """At most ``limit`` evenly spread indices of ``n`` points, first and last always kept."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max(2, limit))).astype(int))


def _num(v: float) -> str:
    """A pixel coordinate with one decimal, no trailing zeros (compact path data)."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


@dataclass(frozen=True)
class Frame:
    """A rectangle of the SVG (pixels) showing the data box ``xlim`` x ``ylim``."""

    left: float
    top: float
    width: float
    height: float
    xlim: tuple[float, float]
    ylim: tuple[float, float]

    @classmethod
    def fit(cls, left, top, width, height, xs, ys, *, pad: float = 0.05, xpad: float = 0.0) -> Frame:
        """A frame whose limits cover the finite values of ``xs`` and ``ys`` (``pad`` / ``xpad`` of the range added)."""
        x0, x1 = finite_range(*xs)
        y0, y1 = finite_range(*ys)
        if not math.isfinite(x0):
            x0, x1 = 0.0, 1.0
        if not math.isfinite(y0):
            y0, y1 = 0.0, 1.0
        if x1 <= x0:
            x0, x1 = x0 - 0.5, x0 + 0.5
        if y1 <= y0:
            d = max(abs(y0) * 0.05, 1e-3)
            y0, y1 = y0 - d, y1 + d
        dy, dx = (y1 - y0) * pad, (x1 - x0) * xpad
        return cls(left, top, width, height, (x0 - dx, x1 + dx), (y0 - dy, y1 + dy))

    def x(self, v):
        x0, x1 = self.xlim
        return self.left + (np.asarray(v, float) - x0) / (x1 - x0) * self.width

    def y(self, v):
        y0, y1 = self.ylim
        return self.top + self.height - (np.asarray(v, float) - y0) / (y1 - y0) * self.height

    def axes(self, *, xlabel="", ylabel="", yfmt="{:.3g}", nx: int = 6, ny: int = 5, xticks: bool = True) -> str:
        """Grid lines, tick labels, the frame and axis labels."""
        from matplotlib.ticker import MaxNLocator

        left, right, top, bottom = self.left, self.left + self.width, self.top, self.top + self.height
        out = []
        for v in MaxNLocator(nbins=ny).tick_values(*self.ylim):
            if self.ylim[0] <= v <= self.ylim[1]:
                py = float(self.y(v))
                out.append(el("line", class_="g", x1=left, x2=right, y1=py, y2=py))
                out.append(el("text", yfmt.format(v), class_="t", x=left - 4, y=py, text_anchor="end", dy=4))
        for v in MaxNLocator(nbins=nx, integer=True).tick_values(*self.xlim):
            if self.xlim[0] <= v <= self.xlim[1]:
                px = float(self.x(v))
                out.append(el("line", class_="g", x1=px, x2=px, y1=top, y2=bottom))
                if xticks:
                    out.append(el("text", f"{v:.0f}", class_="t", x=px, y=bottom + 14, text_anchor="middle"))
        out.append(el("rect", class_="a", x=left, y=top, width=self.width, height=self.height))
        if xlabel:
            out.append(el("text", html.escape(xlabel), x=left + self.width / 2, y=bottom + 30, text_anchor="middle"))
        if ylabel:
            cx, cy = _num(left - 42), _num(top + self.height / 2)
            out.append(
                el("text", html.escape(ylabel), x=cx, y=cy, text_anchor="middle", transform=f"rotate(-90 {cx} {cy})")
            )
        return "".join(out)

    def vline(self, x: float, *, color: str, dash: str | None = None, width: float = 1.2) -> str:
        """A vertical line at data ``x`` across the frame (nothing when ``x`` is outside it)."""
        if not (np.isfinite(x) and self.xlim[0] <= x <= self.xlim[1]):
            return ""
        px = float(self.x(x))
        return el("line", x1=px, x2=px, y1=self.top, y2=self.top + self.height, stroke=color, stroke_width=width,
                  stroke_dasharray=dash)  # fmt: skip

    def hline(self, y: float, *, color: str, dash: str | None = None, width: float = 1.2) -> str:
        """A horizontal line at data ``y`` across the frame (nothing when ``y`` is outside it)."""
        if not (np.isfinite(y) and self.ylim[0] <= y <= self.ylim[1]):
            return ""
        py = float(self.y(y))
        return el("line", y1=py, y2=py, x1=self.left, x2=self.left + self.width, stroke=color, stroke_width=width,
                  stroke_dasharray=dash)  # fmt: skip

    def text(self, x: float, y: float, s: str, *, anchor: str = "start") -> str:
        """Small text at data coordinates."""
        return el("text", html.escape(s), class_="t", x=float(self.x(x)), y=float(self.y(y)), text_anchor=anchor)


def el(name: str, text: str | None = None, **attrs) -> str:
    """An SVG element: ``el("line", x1=0.5, stroke_width=2)`` -> ``<line x1="0.5" stroke-width="2"/>``.

    Keyword names map to attributes (a trailing ``_`` dropped, ``_`` -> ``-``); None values are left out;
    floats get one decimal. ``text`` is the element's content, inserted as given (escape data first).
    """
    parts = []
    for k, v in attrs.items():
        if v is None:
            continue
        val = _num(v) if isinstance(v, float) else str(v)
        parts.append(f' {k.rstrip("_").replace("_", "-")}="{html.escape(val)}"')
    a = "".join(parts)
    return f"<{name}{a}/>" if text is None else f"<{name}{a}>{text}</{name}>"


def _segments(px, py):
    """Runs of consecutive finite points (a NaN breaks a line)."""
    ok = np.isfinite(px) & np.isfinite(py)
    start = None
    for i, good in enumerate(ok):
        if good and start is None:
            start = i
        elif not good and start is not None:
            yield start, i
            start = None
    if start is not None:
        yield start, len(ok)


def _ints(v) -> np.ndarray:
    return np.rint(np.asarray(v, float)).astype(np.int64)


def _nums(values) -> str:
    """Integers joined the SVG way: a space between them, none before a minus sign (``3-2 4``)."""
    out: list[str] = []
    for v in values:
        t = str(int(v))
        out.append(t if (not out or t[0] == "-") else " " + t)
    return "".join(out)


def _rel(px: np.ndarray, py: np.ndarray) -> str:
    """Relative moves between consecutive integer points: ``dx dy dx dy ...``."""
    d = np.empty(2 * (px.size - 1), dtype=np.int64)
    d[0::2], d[1::2] = np.diff(px), np.diff(py)
    return _nums(d)


# Path data are written in whole pixels with relative moves (a 400-point line is ~2 KB instead of ~4.4 KB
# with one decimal and absolute coordinates); a figure that needs finer steps is drawn on a larger
# viewBox (``svg_document(scale=...)``).
def path_d(frame: Frame, xs, ys) -> str:
    """Path data of a polyline through the finite points (one subpath per finite run)."""
    px, py = frame.x(xs), frame.y(ys)
    parts = []
    for a, b in _segments(px, py):
        x, y = _ints(px[a:b]), _ints(py[a:b])
        parts.append(f"M{_nums([x[0], y[0]])}" + (f"l{_rel(x, y)}" if b - a > 1 else ""))
    return "".join(parts)


def band_d(frame: Frame, xs, lo, hi) -> str:
    """Path data of the closed region between ``lo`` and ``hi`` (finite points only)."""
    xs, lo, hi = (np.asarray(v, float) for v in (xs, lo, hi))
    ok = np.isfinite(xs) & np.isfinite(lo) & np.isfinite(hi)
    if ok.sum() < 2:
        return ""
    x, top, bot = _ints(frame.x(xs[ok])), _ints(frame.y(hi[ok])), _ints(frame.y(lo[ok]))[::-1]
    xr = x[::-1]
    return f"M{_nums([x[0], top[0]])}l{_rel(x, top)}L{_nums([xr[0], bot[0]])}l{_rel(xr, bot)}Z"


def dots_d(frame: Frame, xs, ys) -> str:
    """Path data drawing one dot per finite point: zero-length segments (``m dx dy h0``) with round caps."""
    px, py = frame.x(xs), frame.y(ys)
    ok = np.isfinite(px) & np.isfinite(py)
    x, y = _ints(px[ok]), _ints(py[ok])
    if not x.size:
        return ""
    dx, dy = np.diff(x, prepend=0), np.diff(y, prepend=0)
    return "".join(f"{'M' if i == 0 else 'm'}{_nums([a, b])}h0" for i, (a, b) in enumerate(zip(dx, dy, strict=True)))


def svg_document(width: int, height: int, body: str, *, label: str, scale: int = 1) -> str:
    """A standalone SVG document (own style sheet; ``label`` is its accessible name) shown at ``width`` x
    ``height`` pixels; ``body`` is drawn on a ``scale`` times larger viewBox (finer whole-pixel steps)."""
    vw, vh = width * scale, height * scale
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {vw} {vh}" '
        f'role="img" aria-label="{html.escape(label)}"><style>{_STYLE}</style>'
        f'<rect width="{vw}" height="{vh}" fill="#fff"/>{body}</svg>'
    )


def data_uri(svg: str) -> str:
    """``data:image/svg+xml,...`` with the SVG percent-encoded (smaller than base64 for SVG text)."""
    # '#' would start a URL fragment and '%' an escape: both (and quotes, '<', '>') are percent-encoded
    return "data:image/svg+xml," + urllib.parse.quote(svg, safe=" ,.:;=/()-_!*")


def finite_range(*arrays) -> tuple[float, float]:
    """(min, max) of the finite values of the arrays (``(nan, nan)`` when none)."""
    vals = [np.asarray(a, float).ravel() for a in arrays if a is not None]
    v = np.concatenate(vals) if vals else np.array([])
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else (math.nan, math.nan)
