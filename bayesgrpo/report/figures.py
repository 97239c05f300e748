"""The report's figures as compact SVG documents (see :mod:`bayesgrpo.report.svg` for why not matplotlib).

* :func:`small_multiple` -- a run's observed curve and its 80% fan, no axes (the overview grid);
* :func:`fan_figure` -- the full fan chart: observed points, 50/80/90% predictive bands from the last
  observation, median latent reward, final-reward interval at the horizon, stop step, target, and
  the later logged points (truth) of a truncated log -- the content of :func:`bayesgrpo.plots.fan_chart`;
* :func:`budget_figure` -- expected latent reward with its 90% band and the recommended stop (top),
  the share of draws settled and P(target) by step (bottom) -- the content of
  :func:`bayesgrpo.plots.budget.plot_budget`;
* :func:`channels_figure` -- one panel per logged channel the diagnostics read, with the onset of
  every finding at watch or above -- the content of :func:`bayesgrpo.plots.diagnosis.plot_diagnosis`.
"""

from __future__ import annotations

import html

import numpy as np

from bayesgrpo.conventions import CI_PROB, HEADLINE, INTERVALS, interval_label
from bayesgrpo.report.svg import COLORS, Frame, band_d, dots_d, el, path_d, svg_document, thin_indices

__all__ = ["small_multiple", "fan_figure", "budget_figure", "channels_figure"]

#: thinning of the small multiples' lines (the figures' other points are thinned in bayesgrpo.report.data)
MAX_SMALL_POINTS = 90
_W, _H = 640, 300  # detail figures (pixels; they scale down on narrow screens)
_L, _R, _T, _B = 58, 14, 12, 38  # margins: left (tick labels + y label), right, top, bottom


def _band_alpha(k: int) -> float:
    return round(0.16 + 0.12 * k, 2)


def _line(f: Frame, xs, ys, color: str, width: float) -> str:
    return el("path", d=path_d(f, xs, ys), fill="none", stroke=color, stroke_width=width)


def _dots(f: Frame, xs, ys, color: str, size: float = 3.0) -> str:
    return el("path", d=dots_d(f, xs, ys), stroke=color, stroke_width=size, stroke_linecap="round")


def small_multiple(curves: dict | None, obs_step, obs, *, width: int = 180, height: int = 84) -> str:
    """Observed curve (line), 80% fan and median, later truth in grey; the y range covers all of them."""
    c = curves or {}
    obs_step, obs = np.asarray(obs_step, float), np.asarray(obs, float)
    xs, ys = [obs_step], [obs]
    band = c.get("bands", {}).get(HEADLINE)
    if band is not None:
        xs.append(c["fan_step"])
        ys += [band[0], band[1]]
    if c.get("truth") is not None:
        xs.append(c["truth_step"])
        ys.append(c["truth"])
    k = 2  # drawn on a twice larger viewBox: half-pixel steps on screen
    f = Frame.fit(3 * k, 3 * k, (width - 6) * k, (height - 6) * k, xs, ys)
    body = []
    if band is not None:
        body.append(el("path", d=band_d(f, c["fan_step"], *band), fill=COLORS["band"], fill_opacity=0.3))
        body.append(_line(f, c["fan_step"], c["median"], COLORS["band"], 1.5 * k))
    if c.get("truth") is not None:
        j = thin_indices(len(c["truth"]), MAX_SMALL_POINTS)
        body.append(_line(f, c["truth_step"][j], c["truth"][j], COLORS["truth"], 1.0 * k))
    i = thin_indices(len(obs), MAX_SMALL_POINTS)
    body.append(_line(f, obs_step[i], obs[i], COLORS["obs"], 1.1 * k))
    if c:
        body.append(f.vline(c["last_step"], color="#777", dash=f"{2 * k} {2 * k}", width=0.8 * k))
    return svg_document(width, height, "".join(body), label="observed reward and forecast fan", scale=k)


def fan_figure(curves: dict, *, target: float | None = None, ylabel: str = "reward") -> str:
    """The full fan chart of one run (module docstring)."""
    c = curves
    xs = [c["obs_step"], c["fan_step"], [c["horizon"]]]
    ys = [c["obs"], *c["bands"][max(INTERVALS)], c["final"]]
    if c.get("truth") is not None:
        xs.append(c["truth_step"])
        ys.append(c["truth"])
    if target is not None:
        ys.append([target])
    f = Frame.fit(_L, _T, _W - _L - _R, _H - _T - _B, xs, ys, xpad=0.02)
    x0, x1 = float(f.x(c["window_start"])), float(f.x(c["horizon"]))
    body = [f.axes(xlabel="step", ylabel=ylabel)]
    body.append(el("rect", x=x0, y=f.top, width=max(0.0, x1 - x0), height=f.height, fill=COLORS["final"],
                   fill_opacity=0.07))  # fmt: skip
    for k, mass in enumerate(sorted(INTERVALS, reverse=True)):
        lo, hi = c["bands"][mass]
        body.append(el("path", d=band_d(f, c["fan_step"], lo, hi), fill=COLORS["band"], fill_opacity=_band_alpha(k)))
    body.append(_line(f, c["fan_step"], c["median"], COLORS["band"], 2.0))
    if c.get("truth") is not None:
        body.append(_dots(f, c["truth_step"], c["truth"], COLORS["truth"]))
    body.append(_dots(f, c["obs_step"], c["obs"], COLORS["obs"]))
    body.append(f.vline(c["last_step"], color="#555", dash="2 3", width=1.0))
    body.append(f.text(c["last_step"], f.ylim[1] - 0.04 * (f.ylim[1] - f.ylim[0]), " forecast from here"))
    if c.get("stop") is not None and c["stop"] > c["last_step"]:
        body.append(f.vline(c["stop"], color=COLORS["stop"], dash="6 3"))
    if target is not None:
        body.append(f.hline(target, color=COLORS["target"], dash="4 3"))
    lo, mid, hi = c["final"]
    ym = float(f.y(mid))
    body.append(el("line", x1=x1, x2=x1, y1=float(f.y(lo)), y2=float(f.y(hi)), stroke=COLORS["final"], stroke_width=2))
    body.append(el("path", d=f"M{x1:.1f} {ym - 5:.1f}l5 5-5 5-5-5z", fill=COLORS["final"]))
    return svg_document(_W, _H, "".join(body), label="fan chart of the forecast")


def budget_figure(budget: dict, *, history_step=None, history=None, target: float | None = None) -> str:
    """Expected latent reward (90% band) with the recommended stop; share settled and P(target) by step."""
    t, rec = budget["table"], budget["rec"]
    h1, gap, h2 = 150, 44, 80
    height = _T + h1 + gap + h2 + _B
    xs = [t["step"]] + ([history_step] if history_step is not None else [])
    ys = [t["reward_q05"], t["reward_q95"]] + ([history] if history is not None else [])
    if target is not None:
        ys.append([target])
    top = Frame.fit(_L, _T, _W - _L - _R, h1, xs, ys)
    body = [top.axes(ylabel="reward")]
    body.append(el("path", d=band_d(top, t["step"], t["reward_q05"], t["reward_q95"]), fill=COLORS["band"],
                   fill_opacity=0.22))  # fmt: skip
    body.append(_line(top, t["step"], t["expected_reward"], COLORS["band"], 2.0))
    if history is not None:
        i = thin_indices(len(history), MAX_SMALL_POINTS * 3)
        body.append(_dots(top, np.asarray(history_step)[i], np.asarray(history)[i], COLORS["obs"], 2.6))
    if target is not None:
        body.append(top.hline(target, color=COLORS["target"], dash="4 3"))
    body.append(top.vline(rec.step, color=COLORS["final"], width=1.6))
    bottom = Frame(_L, _T + h1 + gap, _W - _L - _R, h2, top.xlim, (0.0, 1.0))
    body.append(bottom.axes(xlabel="step", ylabel="probability", yfmt="{:.1f}", ny=2))
    if "p_settled" in t:
        body.append(_line(bottom, t["step"], t["p_settled"], COLORS["stop"], 1.8))
    if "p_target" in t:
        body.append(_line(bottom, t["step"], t["p_target"], COLORS["target"], 1.8))
    body.append(bottom.vline(rec.step, color=COLORS["final"], width=1.6))
    label = f"budget: expected reward with its {interval_label(CI_PROB)} band"
    return svg_document(_W, height, "".join(body), label=label)


def channels_figure(channels: dict, findings: list) -> str:
    """One panel per logged channel (reward first); the onset of each finding at watch or above as a line."""
    names = list(channels)
    ph, gap = 64, 20
    height = _T + gap + len(names) * (ph + gap) + _B - gap
    x_all = [channels[n][0] for n in names]
    onsets = [
        (f["onset_step"], f["severity"]) for f in findings if f["severity"] != "none" and f["onset_step"] is not None
    ]
    body = []
    for k, name in enumerate(names):
        s, v = channels[name]
        last = k == len(names) - 1
        top = _T + gap + k * (ph + gap)
        f = Frame.fit(_L, top, _W - _L - _R, ph, x_all, [v])
        body.append(f.axes(xlabel="step" if last else "", ny=3, xticks=last))
        body.append(_line(f, s, v, COLORS["band"], 1.3))
        for step, sev in onsets:
            body.append(f.vline(float(step), color=COLORS[sev], dash="5 3", width=1.4))
        body.append(el("text", html.escape(name.replace("_", " ")), x=_L, y=top - 5, style="font-weight:600"))
    return svg_document(_W, height, "".join(body), label="logged channels with the onset of each finding")
