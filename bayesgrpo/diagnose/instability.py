"""Dynamical instability of a run (physics.md section 7): from posterior draws (``P(c <= 0)``, spectral
radius >= 1), a growing fluctuation envelope, sustained oscillation, and a sudden collapse toward the
floor that stays (:func:`_instability`, one of the four modes of :mod:`bayesgrpo.diagnose.failure_modes`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.diagnose.collapse_band import band_collapse
from bayesgrpo.diagnose.common import (
    _RANK,
    ACF_OSC,
    ALPHA,
    COLLAPSE_DROP,
    COLLAPSE_FLOOR_SHARE,
    COLLAPSE_Z,
    SWING_SHARE,
    Finding,
    _blocks,
    _is_unit,
    _rolling_median,
    _trend,
    _window,
)
from bayesgrpo.plan import is_unit_interval, logging_interval
from bayesgrpo.series import noise_sd as _noise_sd

__all__ = ["posterior_instability"]

STABLE_P = 0.01  # P(c <= 0 or spectral radius >= 1) below which the fitted dynamics count as stable (the "watch" floor)


# ----------------------------------------------------------------------------- posterior


def _no_finding() -> dict:
    return {"severity": "none", "onset": None, "text": "", "score": 0.0}


def _rolling_level(y: np.ndarray, share: float) -> tuple[int, np.ndarray]:
    """The centred rolling mean of ``y`` over ``share`` of its points (at least 3): ``(window, level)``."""
    m = max(3, int(round(share * y.size)))
    return m, pd.Series(y).rolling(m, center=True, min_periods=1).mean().to_numpy()


def posterior_instability(draws, *, max_draws: int = 400) -> dict:
    """P(c <= 0) and P(spectral radius of recursion (1) >= 1) from :class:`~bayesgrpo.decisions.PathDraws`.

    :func:`bayesgrpo.physics.dynamics.spectral_radii` (closed form without lag; the per-step growth
    factor of the refresh pattern's monodromy matrix on up to ``max_draws`` draws otherwise).
    """
    from bayesgrpo.physics.stability import spectral_radii

    a = np.asarray(draws.a, float)
    mu = np.asarray(draws.mu, float)
    c = draws.damping
    if draws.refresh_interval in (None, 1) and draws.lag == 0:
        rho = spectral_radii(a, mu)
    else:
        idx = np.linspace(0, a.size - 1, min(a.size, max_draws)).astype(int)
        rho = spectral_radii(
            a[idx],
            mu[idx],
            lag=draws.lag if draws.refresh_interval is None else 0,
            refresh_interval=draws.refresh_interval,
        )
    return {
        "p_c_le_0": float(np.mean(c <= 0)),
        "p_rho_ge_1": float(np.mean(rho >= 1.0)),
        "rho_median": float(np.median(rho)),
        "c_median": float(np.median(c)),
    }


# ----------------------------------------------------------------------------- the four modes
def _collapse(step, y, ceiling):
    """Sudden collapse: the rolling mean drops by > COLLAPSE_DROP of its range and stays there.

    A drop counts when (i) the rolling mean (window m = 10% of the points) falls more than
    ``COLLAPSE_DROP`` x its range below its running peak, (ii) it never recovers more than half-way
    for the rest of the run (at least m points), and (iii) the points after the drop are lower than
    the points before the onset by ``z >= COLLAPSE_Z`` (z on the run's robust noise s.d., from the
    MAD of first differences) and by at least one noise s.d. It is a collapse "toward the floor" (critical) when the post-drop level keeps at most
    ``COLLAPSE_FLOOR_SHARE`` of the peak's height above the floor (0 for non-negative rewards, else
    the initial level) and the peak is clearly above the floor; otherwise a regression (warning).
    A significant drop that later recovers is reported as ``watch``.
    """
    n = y.size
    out = _no_finding()
    if n < 10:
        return out
    m, lev = _rolling_level(y, 0.1)
    rng = float(np.nanmax(lev) - np.nanmin(lev))
    noise = _noise_sd(y)
    if rng <= 0:
        return out
    hi = np.maximum.accumulate(lev)
    transient = None
    for t in range(1, n - m + 1):
        if lev[t] > hi[t] - COLLAPSE_DROP * rng:
            continue
        tp = int(np.argmax(lev[: t + 1]))
        near = np.flatnonzero(lev[: t + 1] >= hi[t] - 0.2 * rng)
        t0 = min(int(near[-1]) + 1 if near.size else t, t)
        pre = y[max(0, t0 - 2 * m) : t0]
        if pre.size < 2:
            pre = y[max(0, tp - m // 2) : tp + m // 2 + 1]
        recovered = np.max(lev[t:]) >= hi[t] - 0.5 * COLLAPSE_DROP * rng
        if recovered:
            seg_end = t + int(np.argmax(lev[t:] >= hi[t] - 0.5 * COLLAPSE_DROP * rng))
            post = y[t : max(seg_end, t + 2)]
        else:
            post = y[t:]
        if pre.size < 2 or post.size < 2:
            continue
        drop = float(np.mean(pre) - np.mean(post))
        sd = max(noise, 1e-12)
        z = drop / (sd * np.sqrt(1.0 / pre.size + 1.0 / post.size))
        if not (z >= COLLAPSE_Z and drop >= noise):
            continue
        if recovered:
            if transient is None:
                transient = (t, float(np.mean(pre)), float(np.mean(post)))
            continue
        peak = float(np.mean(pre))
        post_m = float(np.mean(post))
        floor = 0.0 if np.nanmin(y) >= -1e-9 else float(np.mean(y[:m]))
        height = peak - floor
        se = noise / np.sqrt(m) if noise > 0 else 0.0
        share = (post_m - floor) / height if height > 0 else 1.0
        # a collapse must be material: at least 0.1 for 0/1-type rewards, else a quarter of the spread
        material = 0.1 if is_unit_interval(y) else 0.25 * float(np.nanquantile(y, 0.98) - np.nanquantile(y, 0.02))
        sev = "critical" if (share <= COLLAPSE_FLOOR_SHARE and height > max(4 * se, material)) else "warning"
        if drop < material:
            sev = "watch"
        # onset = where the reward first crosses half-way between the pre- and post-drop levels
        mid = 0.5 * (peak + post_m)
        k0 = max(0, t0 - 1)
        short = pd.Series(y).rolling(max(2, m // 2), min_periods=1).mean().shift(-(max(2, m // 2) - 1)).to_numpy()
        cross = [k for k in range(k0, t + 1) if np.isfinite(short[k]) and short[k] < mid]
        t0 = cross[0] if cross else t0
        kind = "collapse toward the floor" if sev == "critical" else "lasting drop (regression)"
        out.update(
            severity=sev,
            onset=int(step[t0]),
            score=float(drop / rng),
            text=(
                f"{kind}: reward fell from {peak:.3g} (before the drop) to {post_m:.3g} (mean after "
                f"step {step[t]}), {drop / rng:.0%} of the run's range {rng:.3g}, keeping {share:.0%} of the "
                f"height above floor {floor:.3g}; z = {z:.1f}; onset step {step[t0]}; no recovery"
            ),
        )
        return out
    if transient is not None:
        t, pk, po = transient
        out.update(
            severity="watch",
            onset=int(step[t]),
            score=float((pk - po) / rng),
            text=f"significant transient drop from {pk:.3g} to {po:.3g} at step {step[t]}, later recovered",
        )
    return out


def _swings(step, y):
    """Large oscillation: reversals of the rolling mean with hysteresis SWING_SHARE x its range.

    Counts alternating peaks/troughs of the rolling mean (window 5% of the points); only reported
    when the range is far above what the noise of the rolling mean allows (>= 8 noise s.e.).
    """
    n = y.size
    out = _no_finding()
    if n < 30:
        return out
    m, lev = _rolling_level(y, 0.05)
    rng = float(np.ptp(lev))
    se = _noise_sd(y) / np.sqrt(m)
    if rng <= 0 or rng < 8 * se:
        return out
    h = SWING_SHARE * rng
    direction, hi_i, lo_i, rev = 0, 0, 0, []
    for i in range(1, n):
        v = lev[i]
        if direction == 0:
            hi_i = i if v > lev[hi_i] else hi_i
            lo_i = i if v < lev[lo_i] else lo_i
            if v <= lev[hi_i] - h:
                rev.append(hi_i)
                direction, lo_i = -1, i
            elif v >= lev[lo_i] + h:
                rev.append(lo_i)
                direction, hi_i = 1, i
        elif direction > 0:
            if v > lev[hi_i]:
                hi_i = i
            elif v <= lev[hi_i] - h:
                rev.append(hi_i)
                direction, lo_i = -1, i
        else:
            if v < lev[lo_i]:
                lo_i = i
            elif v >= lev[lo_i] + h:
                rev.append(lo_i)
                direction, hi_i = 1, i
    # the first extreme is the start of the first swing: a saturating rise gives 1, a rise then a
    # collapse 2, rise-fall-rise-fall 4
    k = len(rev)
    if k >= 4:
        sev = "critical" if k >= 6 else "warning"
        out.update(
            severity=sev,
            onset=int(step[rev[0]]),
            score=float(k),
            text=(
                f"sustained large oscillation: {k - 1} swings ({k} extremes) of the rolling mean by >= "
                f"{SWING_SHARE:.0%} of its range {rng:.3g} (noise s.e. {se:.2g}), first at step {step[rev[0]]}"
            ),
        )
    return out


def _sustained_oscillation(step, y):
    """Periodic, non-decaying oscillation in the second half of the run (after the transient).

    The second half is detrended linearly; its autocorrelation must show a trough <= -ACF_OSC
    followed by a peak >= +ACF_OSC (a period), the residual s.d. must exceed 3x the point noise
    (from first differences) and the amplitude in the last quarter must be at least 0.7x that of the
    third quarter (not decaying).
    """
    n = y.size
    out = _no_finding()
    if n < 60:
        return out
    h = n // 2
    st, v = step[h:].astype(float), y[h:]
    r = v - np.polyval(np.polyfit(st, v, 1), st)
    noise = _noise_sd(v)
    sd = float(np.std(r))
    # a flat line (or float round-off around one) never oscillates
    if sd <= 1e-9 * max(1.0, float(np.max(np.abs(v)))) or sd < 3.0 * noise:
        return out
    m = r.size
    max_lag = m // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        acf = np.array([np.corrcoef(r[:-k], r[k:])[0, 1] for k in range(1, max_lag)])
    if acf.size < 4 or not np.all(np.isfinite(acf)):
        return out
    j = int(np.argmin(acf))
    if acf[j] > -ACF_OSC or j + 1 >= acf.size:
        return out
    k = j + int(np.argmax(acf[j:]))
    if acf[k] < ACF_OSC:
        return out
    period = float(logging_interval(st)) * (k + 1)
    q = m // 2
    a3, a4 = float(np.std(r[:q])), float(np.std(r[q:]))
    if a4 < 0.7 * a3:
        return out
    out.update(
        severity="warning",
        onset=int(step[h]),
        score=float(sd / max(noise, 1e-12)),
        text=(
            f"sustained oscillation in the second half: period ~{period:.0f} steps, residual s.d. {sd:.3g} = "
            f"{sd / max(noise, 1e-12):.1f}x the point noise, ACF {acf[j]:.2f} at lag {j + 1} / {acf[k]:.2f} at lag "
            f"{k + 1}, amplitude last/third quarter {a4 / max(a3, 1e-12):.2f} (not decaying)"
        ),
    )
    return out


def _growing_oscillation(step, y, unit):
    n = y.size
    out = _no_finding()
    if n < 24:
        return out
    lev = _rolling_median(y, _window(n, 0.12, 5))
    resid = y - lev
    if unit:  # binomial scatter grows with p(1-p): compare on a variance-stabilised scale
        resid = resid / np.sqrt(np.clip(lev * (1 - lev), 0.02, None))
    k = max(4, min(10, n // 8))
    bx, by = _blocks(step, np.abs(resid), k)
    if by.size < 4:
        return out
    tau, p_up, _, _ = _trend(bx, by, k)
    first, last = float(np.mean(by[: max(1, k // 3)])), float(np.mean(by[-max(1, k // 3) :]))
    ratio = last / first if first > 0 else np.inf
    if p_up < ALPHA and ratio >= 2.0:
        sev = "warning" if ratio >= 3.0 else "watch"
        # onset: first block whose envelope exceeds 1.5x the first third
        j = np.flatnonzero(by > 1.5 * first)
        out.update(
            severity=sev,
            onset=int(bx[j[0]]) if j.size else None,
            score=float(ratio),
            text=f"fluctuation envelope of the detrended reward grows x{ratio:.2g} (Kendall tau {tau:.2f}, "
            f"p = {p_up:.2g})",
        )
    return out


def _instability(rid, df, draws, ceiling):
    f = Finding(rid, "dynamical_instability")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    ev = []
    p = None  # the posterior's P(unstable), when draws are given
    if draws is None:
        f.missing = ("posterior draws",)
    else:
        pi = posterior_instability(draws)
        f.details.update(pi)
        p = max(pi["p_c_le_0"], pi["p_rho_ge_1"])
        sev = "critical" if p >= 0.5 else "warning" if p >= 0.1 else "watch" if p >= 0.01 else "none"
        f.raise_to(sev, score=p)
        ev.append(
            f"posterior P(c <= 0) = {pi['p_c_le_0']:.3f}, P(spectral radius >= 1) = {pi['p_rho_ge_1']:.3f} "
            f"(median rho {pi['rho_median']:.4f}, median c {pi['c_median']:.3g})"
        )
    col = _collapse(step, y, ceiling)
    if col["severity"] != "none":
        f.raise_to(col["severity"], col["onset"], col["score"])
        ev.append(col["text"])
    early = band_collapse(step, y)
    if early["severity"] != "none" and _RANK[early["severity"]] >= _RANK[col["severity"]]:
        # the early check sees a fresh fall before the whole-run check can confirm that it stays
        f.raise_to(early["severity"], early["onset"], early["score"])
        ev.append(early["text"])
    _shape_checks(f, ev, df, step, y, ceiling, stable_p=p)
    if not ev:
        ev.append(
            "no lasting drop of the reward (rolling median within "
            f"{COLLAPSE_DROP:.0%} of the range of its running peak), no growing fluctuation envelope"
        )
    f.evidence = "; ".join(ev)
    return f


def _shape_checks(f: Finding, ev: list, df, step, y, ceiling, *, stable_p: float | None) -> None:
    """The oscillation checks (sustained oscillation and swings of the reward and every ``eval/*`` metric, a growing
    fluctuation envelope) raised on ``f``, their evidence appended to ``ev``.

    They read the shape alone; when the posterior of recursion (1) is confidently stable (``stable_p``, its
    P(unstable), below :data:`STABLE_P`), the swings and a growing scatter are the stationary oscillation and
    level-dependent noise of a stable run, not an instability: they stay at ``watch``. (Measured,
    bench/results/monitors.md: before this rule the flag reached warning or critical at 21 of 192 development cuts,
    all with P(unstable) = 0, and a decline followed 1.)
    """
    stable = stable_p is not None and stable_p < STABLE_P

    def raise_(chk: dict, what: str, score=None) -> None:
        sev = "watch" if stable and _RANK[chk["severity"]] > _RANK["watch"] else chk["severity"]
        f.raise_to(sev, chk["onset"], score)
        capped = sev != chk["severity"]
        why = f" (the fitted dynamics are stable: P(unstable) = {stable_p:.3f} < {STABLE_P:g}; watch)" if capped else ""
        ev.append(what + chk["text"] + why)

    series = [("reward", step, y)]
    for c in df.columns:
        if c.startswith("eval/"):
            sub = df[["step", c]].dropna()
            series.append((c, sub["step"].to_numpy(), sub[c].to_numpy(float)))
    for name, st, v in series:
        for chk in (_sustained_oscillation(st, v), _swings(st, v)):
            if chk["severity"] != "none":
                raise_(chk, f"{name}: ")
    osc = _growing_oscillation(step, y, _is_unit(y, ceiling))
    if osc["severity"] != "none":
        raise_(osc, "", osc["score"])
