"""Failure-mode diagnostics of GRPO runs (physics.md section 7).

Four modes, each reported per run with ``severity`` in ``none < watch < warning < critical``, an
``onset_step`` (or None), ``evidence`` (text with the numbers) and ``missing`` (metrics the log
lacked, so the verdict rests on fewer signals):

* ``reward_hacking``: rolling coupling ``C_w = Δeval/Δtrain`` over windows of evaluation points
  falling toward 0 (or negative) while training reward rises; reward beyond a verifiable ceiling;
  completion-length runaway (robust Theil-Sen / Kendall trend on block means).
* ``advantage_degeneracy``: share of zero-variance groups ``frac_reward_zero_std`` high and rising,
  against the prediction ``p^G + (1-p)^G`` from the batch-mean reward (0/1 rewards; a lower bound of
  ``E_q[p_q^G + (1-p_q)^G]`` by Jensen); ``reward_std -> 0``; a plateau below the ceiling while most
  groups are degenerate (degeneracy, not convergence).
* ``policy_concentration``: entropy / within-group spread falling with no reward gain; KL growth.
* ``dynamical_instability``: from posterior draws (``P(c <= 0)``, ``P(spectral radius >= 1)``),
  growing fluctuation envelope of the detrended reward, sudden collapse of the reward toward its
  floor (rolling median falls by more than ``collapse_drop`` of the run's range and stays).

All statistics are computed on block means / rolling medians so that one noisy point never decides.
Thresholds are module constants (documented defaults, not fitted to any one data set).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.stats

from bayesgrpo.series import noise_sd as _noise_sd

__all__ = [
    "MODES",
    "SEVERITIES",
    "Finding",
    "degenerate_share",
    "expected_group_std",
    "diagnose_run",
    "diagnose_runs",
    "resolve_ceilings",
    "posterior_instability",
]

MODES = ("reward_hacking", "advantage_degeneracy", "policy_concentration", "dynamical_instability")
SEVERITIES = ("none", "watch", "warning", "critical")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

#: collapse: the rolling median falls by more than this share of the run's range and stays there.
COLLAPSE_DROP = 0.5
#: collapse is "toward the floor" (critical) when the post-collapse level keeps <= this share of the
#: pre-collapse height above the floor.
COLLAPSE_FLOOR_SHARE = 0.25
#: collapse significance: drop / (noise sd * sqrt(1/n_pre + 1/n_post)) must reach this.
COLLAPSE_Z = 5.0
#: oscillation: a reversal needs a swing of at least this share of the rolling mean's range.
SWING_SHARE = 0.5
#: sustained oscillation: autocorrelation trough / peak magnitude.
ACF_OSC = 0.3
#: runs with fewer finite reward points are not assessed.
MIN_POINTS = 8
#: trend tests: one-sided significance level on block means.
ALPHA = 0.01
#: degeneracy thresholds on the late share of zero-variance groups.
DEGEN_WARN, DEGEN_CRIT = 0.5, 0.8
#: coupling: C_w / C_ref below these -> watch / warning (critical if eval falls while train rises).
COUPLING_WATCH, COUPLING_WARN = 0.5, 0.25


@dataclass
class Finding:
    """One run x failure mode verdict."""

    run_id: str
    mode: str
    severity: str = "none"
    onset_step: int | None = None
    evidence: str = ""
    missing: tuple[str, ...] = ()
    assessed: bool = True
    score: float = float("nan")
    details: dict = field(default_factory=dict)

    def raise_to(self, severity: str, onset=None, score=None):
        if _RANK[severity] > _RANK[self.severity]:
            self.severity = severity
            if onset is not None:
                self.onset_step = int(onset)
        elif onset is not None and self.onset_step is None and severity != "none":
            self.onset_step = int(onset)
        if score is not None and (np.isnan(self.score) or score > self.score):
            self.score = float(score)

    def to_row(self) -> dict:
        return {
            "run_id": self.run_id,
            "mode": self.mode,
            "severity": self.severity,
            "onset_step": self.onset_step,
            "evidence": self.evidence,
            "missing": ", ".join(self.missing),
            "assessed": self.assessed,
            "score": self.score,
        }


# ----------------------------------------------------------------------------- helpers
def degenerate_share(p, group_size):
    """Predicted share of groups whose ``G`` 0/1 rewards are all equal: ``p^G + (1-p)^G``.

    ``p`` (array) is the per-prompt success probability; passing the batch-mean reward gives a lower
    bound on ``E_q[p_q^G + (1-p_q)^G]`` (the function is convex in ``p``).
    """
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    g = np.asarray(group_size, dtype=float)
    return p**g + (1.0 - p) ** g


def expected_group_std(p, group_size, *, given_nondegenerate: bool = False) -> float:
    """Expected within-group s.d. (unbiased, as ``torch.std``) of ``G`` Bernoulli(p) rewards.

    ``sum_k Binom(k; G, p) sqrt(k (G - k) / (G (G - 1)))``; with ``given_nondegenerate`` the
    expectation over groups that are not all-equal (divides by ``1 - p^G - (1-p)^G``).
    """
    g = int(round(float(group_size)))
    p = float(np.clip(p, 0.0, 1.0))
    k = np.arange(g + 1)
    w = scipy.stats.binom.pmf(k, g, p)
    e = float(np.sum(w * np.sqrt(k * (g - k) / (g * (g - 1.0)))))
    if given_nondegenerate:
        nd = 1.0 - float(degenerate_share(p, g))
        if nd <= 1e-12:
            # limit p -> 0 or 1: a non-degenerate group has exactly one odd reward
            return float(np.sqrt((g - 1.0) / (g * (g - 1.0))))
        return e / nd
    return e


def _sustained_onset(mask) -> int | None:
    """Start of the final run of True that lasts to the end (else the first True; None if none)."""
    mask = np.asarray(mask, bool)
    if not mask.any():
        return None
    if mask[-1]:
        f = np.flatnonzero(~mask)
        return int(f[-1] + 1) if f.size else 0
    return int(np.flatnonzero(mask)[0])


def _rolling_median(y, w):
    return pd.Series(y).rolling(w, center=True, min_periods=1).median().to_numpy()


def _window(n, frac=0.08, lo=3):
    w = max(lo, int(round(frac * n)))
    return w + (1 - w % 2)  # odd


def _blocks(x, y, n_blocks):
    """Block means of (x, y) over ``n_blocks`` consecutive chunks of the finite points."""
    m = np.isfinite(y)
    x, y = np.asarray(x, float)[m], np.asarray(y, float)[m]
    if y.size == 0:
        return x, y
    k = int(max(2, min(n_blocks, y.size)))
    xs = [c.mean() for c in np.array_split(x, k)]
    ys = [c.mean() for c in np.array_split(y, k)]
    return np.array(xs), np.array(ys)


def _trend(x, y, n_blocks=10):
    """(Kendall tau, one-sided p for increase, one-sided p for decrease, Theil-Sen slope) on block means."""
    bx, by = _blocks(x, y, n_blocks)
    if by.size < 4 or np.ptp(by) == 0:
        return 0.0, 1.0, 1.0, 0.0
    tau, p = scipy.stats.kendalltau(bx, by)
    slope = scipy.stats.theilslopes(by, bx)[0]
    if not np.isfinite(tau):
        return 0.0, 1.0, 1.0, 0.0
    p_up = p / 2 if tau > 0 else 1 - p / 2
    p_dn = p / 2 if tau < 0 else 1 - p / 2
    return float(tau), float(p_up), float(p_dn), float(slope)


def _present(df, col):
    return col in df.columns and df[col].notna().sum() >= 3


def _head_tail(y, frac=0.2):
    y = y[np.isfinite(y)]
    k = max(2, int(round(frac * y.size)))
    return float(np.mean(y[:k])), float(np.mean(y[-k:]))


def _is_unit(y, ceiling):
    y = y[np.isfinite(y)]
    return (ceiling is not None and float(ceiling) == 1.0 and y.min() >= -1e-9) or (
        y.min() >= -1e-9 and y.max() <= 1 + 1e-9
    )


# ----------------------------------------------------------------------------- posterior
def posterior_instability(draws, *, max_draws: int = 400) -> dict:
    """P(c <= 0) and P(spectral radius of recursion (1) >= 1) from :class:`~bayesgrpo.decisions.PathDraws`.

    :func:`bayesgrpo.physics.dynamics.spectral_radii` (closed form without lag; the per-step growth
    factor of the refresh pattern's monodromy matrix on up to ``max_draws`` draws otherwise).
    """
    from bayesgrpo.physics.dynamics import spectral_radii

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
    out = {"severity": "none", "onset": None, "text": "", "score": 0.0}
    if n < 10:
        return out
    m = max(3, int(round(0.1 * n)))
    lev = pd.Series(y).rolling(m, center=True, min_periods=1).mean().to_numpy()
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
        material = (
            0.1
            if (np.nanmin(y) >= -1e-9 and np.nanmax(y) <= 1 + 1e-9)
            else 0.25 * float(np.nanquantile(y, 0.98) - np.nanquantile(y, 0.02))
        )
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
    out = {"severity": "none", "onset": None, "text": "", "score": 0.0}
    if n < 30:
        return out
    m = max(3, int(round(0.05 * n)))
    lev = pd.Series(y).rolling(m, center=True, min_periods=1).mean().to_numpy()
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
    out = {"severity": "none", "onset": None, "text": "", "score": 0.0}
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
    period = float(np.median(np.diff(st))) * (k + 1)
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
    out = {"severity": "none", "onset": None, "text": "", "score": 0.0}
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
    series = [("reward", step, y)]
    for c in df.columns:
        if c.startswith("eval/"):
            sub = df[["step", c]].dropna()
            series.append((c, sub["step"].to_numpy(), sub[c].to_numpy(float)))
    for name, st, v in series:
        so = _sustained_oscillation(st, v)
        if so["severity"] != "none":
            f.raise_to(so["severity"], so["onset"], None)
            ev.append(f"{name}: " + so["text"])
        sw = _swings(st, v)
        if sw["severity"] != "none":
            f.raise_to(sw["severity"], sw["onset"], None)
            ev.append(f"{name}: " + sw["text"])
    osc = _growing_oscillation(step, y, _is_unit(y, ceiling))
    if osc["severity"] != "none":
        f.raise_to(osc["severity"], osc["onset"], osc["score"])
        ev.append(osc["text"])
    if not ev:
        ev.append(
            "no lasting drop of the reward (rolling median within "
            f"{COLLAPSE_DROP:.0%} of the range of its running peak), no growing fluctuation envelope"
        )
    f.evidence = "; ".join(ev)
    return f


def _share_severity(late, early, p_up):
    """High and rising -> escalate; high but flat (a static prompt mix) -> one level lower."""
    rising = p_up < 0.05 and late > early + 0.05 or late > early + 0.1
    if late >= DEGEN_CRIT:
        return "critical" if rising else "warning"
    if late >= DEGEN_WARN:
        return "warning" if rising else "watch"
    if p_up < ALPHA and late > early + 0.15:
        return "watch"
    return "none"


def _degeneracy(rid, df, group_size, ceiling):
    f = Finding(rid, "advantage_degeneracy")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    unit = _is_unit(y, ceiling)
    has_g = group_size is not None and np.isfinite(group_size) and group_size >= 2
    missing = [c for c in ("frac_reward_zero_std", "reward_std") if not _present(df, c)]
    if not has_g:
        missing.append("group_size (meta)")
    f.missing = tuple(missing)
    ev = []
    n = y.size
    _, ylate = _head_tail(y)
    pred = float(degenerate_share(ylate, group_size)) if (unit and has_g) else None
    if pred is not None:
        f.details["predicted_late"] = pred
    if _present(df, "frac_reward_zero_std"):
        fz = df["frac_reward_zero_std"].to_numpy(float)
        early, late = _head_tail(fz)
        tau, p_up, _, _ = _trend(step, fz)
        txt = f"zero-variance-group share {early:.2f} -> {late:.2f} (first/last 20%; Kendall tau {tau:.2f}, p_up {p_up:.2g})"
        if pred is not None:
            txt += f"; predicted p^G+(1-p)^G at mean reward {ylate:.2f}, G={int(group_size)}: {pred:.2f}"
            if late > pred + 0.15:
                txt += " (observed exceeds it: prompts split into all-solved / all-failed)"
        ev.append(txt)
        f.details["observed_late"] = late
        sev = _share_severity(late, early, p_up)
        lev = _rolling_median(fz, _window(n))
        j = _sustained_onset(lev >= DEGEN_WARN)
        f.raise_to(sev, step[j] if j is not None and sev != "none" else None, late)
    if _present(df, "reward_std"):
        sd = df["reward_std"].to_numpy(float)
        lev = _rolling_median(sd, _window(n))
        peak = float(np.nanmax(lev))
        early_sd, late = _head_tail(sd)
        ratio = late / peak if peak > 0 else 1.0
        txt = f"reward_std {early_sd:.3g} -> {late:.3g} (= {ratio:.0%} of its peak {peak:.3g})"
        if unit and has_g:
            # implied zero-variance share: 1 - std / E[std | group not degenerate] at the late mean reward
            e_nd = expected_group_std(ylate, group_size, given_nondegenerate=True)
            implied = float(np.clip(1.0 - late / e_nd, 0.0, 1.0)) if e_nd > 0 else 1.0
            ey = float(np.mean(y[: max(2, n // 5)]))
            e_nd0 = expected_group_std(ey, group_size, given_nondegenerate=True)
            implied0 = float(np.clip(1.0 - early_sd / e_nd0, 0.0, 1.0)) if e_nd0 > 0 else 1.0
            f.details["implied_share_late"] = implied
            txt += (
                f"; implied zero-variance share {implied0:.2f} -> {implied:.2f} (predicted p^G+(1-p)^G "
                f"{pred:.2f} at mean reward {ylate:.2f}, G={int(group_size)})"
            )
            if not _present(df, "frac_reward_zero_std"):
                sev = _share_severity(implied, implied0, 0.0 if implied > implied0 + 0.1 else 1.0)
                lv = 1.0 - np.clip(lev / max(e_nd, 1e-12), 0, 1)
                j = _sustained_onset(lv >= DEGEN_WARN)
                f.raise_to(sev, step[j] if j is not None and sev != "none" else None, implied)
        else:
            sev = "warning" if ratio < 0.25 else "watch" if ratio < 0.4 else "none"
            cross = np.flatnonzero((lev < 0.25 * peak) & (np.arange(n) > np.argmax(lev)))
            f.raise_to(sev, step[cross[0]] if cross.size and sev != "none" else None, 1 - ratio)
        ev.append(txt + " (reward_std -> 0)" if ratio < 0.25 else txt)
    share_late = max(
        [v for v in (f.details.get("observed_late"), f.details.get("implied_share_late")) if v is not None], default=0.0
    )
    if f.severity != "none":
        top = ceiling if ceiling is not None else (1.0 if unit else None)
        if top is not None and ylate >= 0.9 * top:
            ev.append(
                f"reward is near the ceiling {top:g} ({ylate:.3g}): groups are all-solved, i.e. convergence; "
                "severity lowered"
            )
            f.severity = SEVERITIES[min(_RANK[f.severity] - 1, _RANK["watch"])]
            if f.severity == "none":
                f.onset_step = None
        elif top is not None and ylate < 0.8 * top and share_late >= 0.65:
            _, p_up_r, _, _ = _trend(step[n // 2 :], y[n // 2 :])
            if p_up_r > 0.05:
                ev.append(
                    f"reward has plateaued at {ylate:.3g} < 0.8 x ceiling {top:g} while groups degenerate: "
                    "an early plateau from degeneracy, not convergence"
                )
                if f.severity == "watch":
                    f.raise_to("warning")
    if not ev:
        f.assessed = False
        ev.append("not assessable: neither frac_reward_zero_std nor reward_std logged")
    f.evidence = "; ".join(ev)
    return f


def _concentration(rid, df, ceiling):
    """Entropy / within-group spread falling (and KL growing) while the reward does not improve.

    Checked over two windows, the whole run and its second half: within a window the reward is
    "flat" when its gain (last vs first 20% of the window) is below max(10% of the run's range,
    2 noise s.e.). Entropy drop >= 60% -> critical, >= 30% -> warning, significant -> watch (spread
    alone at most warning, KL growth alone at most watch). Near the ceiling concentration is
    expected (convergence): one level lower.
    """
    f = Finding(rid, "policy_concentration")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    n = y.size
    f.missing = tuple(c for c in ("entropy", "reward_std", "kl") if not _present(df, c))
    if n < 8:
        f.assessed, f.evidence = False, "too few points"
        return f
    lev = _rolling_median(y, _window(n))
    rng = float(np.ptp(lev)) or 1.0
    unit = _is_unit(y, ceiling)
    top = ceiling if ceiling is not None else (1.0 if unit else None)
    near_top = top is not None and float(np.mean(y[-max(2, n // 5) :])) >= 0.9 * top
    ev = []
    for wname, i0 in (("whole run", 0), ("second half", n // 2)):
        yy, ss = y[i0:], step[i0:]
        q = max(2, yy.size // 5)
        gain = float(np.mean(yy[-q:]) - np.mean(yy[:q]))
        noise = _noise_sd(yy) / np.sqrt(q)
        flat = gain <= max(0.1 * rng, 2 * noise)
        ev.append(f"{wname}: reward gain {gain:+.3g} ({'no gain' if flat else 'rising'}; range {rng:.3g})")
        if not flat:
            continue
        for col, label in (("entropy", "entropy"), ("reward_std", "within-group spread")):
            if not _present(df, col):
                continue
            v = df[col].to_numpy(float)[i0:]
            a, b = _head_tail(v, 0.2)
            _, _, p_dn, _ = _trend(ss, v)
            drop = 1 - b / a if a > 0 else 0.0
            if p_dn < ALPHA and drop > 0.05:
                sev = "critical" if drop >= 0.6 else "warning" if drop >= 0.3 else "watch"
                if col == "reward_std" and sev == "critical":
                    sev = "warning"  # spread alone is shared with degeneracy
                lv = _rolling_median(v, _window(v.size))
                j = np.flatnonzero(lv < a * (1 - 0.5 * drop))
                f.raise_to(sev, ss[j[0]] if j.size else ss[0], drop)
                ev.append(f"{label} {a:.3g} -> {b:.3g} ({drop:.0%} drop, p_down {p_dn:.2g}) with no reward gain")
        if _present(df, "kl"):
            v = df["kl"].to_numpy(float)[i0:]
            a, b = _head_tail(v, 0.2)
            _, p_up, _, _ = _trend(ss, v)
            if p_up < ALPHA and b >= 0.01 and (a <= 0 or b / a >= 2):
                f.raise_to("watch", ss[0], b / a if a > 0 else 10.0)
                ev.append(f"KL {a:.3g} -> {b:.3g} (p_up {p_up:.2g}) with no reward gain")
    if near_top and f.severity != "none":
        ev.append(f"reward is near the ceiling ({top:g}): concentration expected at convergence, severity lowered")
        f.severity = SEVERITIES[_RANK[f.severity] - 1]
        if f.severity == "none":
            f.onset_step = None
    if not any(_present(df, c) for c in ("entropy", "reward_std", "kl")):
        f.assessed = False
        ev.append("not assessable: no entropy, reward_std or kl logged")
    f.evidence = "; ".join(ev)
    return f


def _coupling(step, y, es, ev_vals):
    """Rolling coupling C_w = Δeval / Δtrain over windows of evaluation points."""
    lev = _rolling_median(y, _window(y.size))
    tr = np.interp(es, step, lev)
    m = es.size
    k = max(3, m // 3)
    rows = []
    for i in range(0, m - k + 1):
        dtr = tr[i + k - 1] - tr[i]
        dev = np.mean(ev_vals[i + k - 1 - 1 : i + k]) - np.mean(ev_vals[i : i + 2])
        rows.append((es[i], es[i + k - 1], dtr, dev))
    return np.array(rows), float(np.ptp(lev))


def _hacking(rid, df, ceiling):
    f = Finding(rid, "reward_hacking")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    n = y.size
    evcols = [c for c in df.columns if c.startswith("eval/") and df[c].notna().sum() >= 6]
    missing = []
    if not evcols:
        missing.append("eval/*")
    if not _present(df, "completion_length"):
        missing.append("completion_length")
    if ceiling is None:
        missing.append("ceiling (not given)")
    f.missing = tuple(missing)
    ev = []
    w = _window(n)
    se_tr = _noise_sd(y) / np.sqrt(w)
    for col in evcols:
        sub = df[["step", col]].dropna()
        es, vals = sub["step"].to_numpy(), sub[col].to_numpy(float)
        rows, rng = _coupling(step, y, es, vals)
        if rows.size == 0:
            continue
        q = max(2, es.size // 4)
        tr_e = np.interp(es, step, _rolling_median(y, w))
        dtr_all = float(np.mean(tr_e[-q:]) - np.mean(tr_e[:q]))
        dev_all = float(np.mean(vals[-q:]) - np.mean(vals[:q]))
        ev_range = float(np.ptp(vals))
        se_ev = _noise_sd(vals) * np.sqrt(2.0 / q)
        thr_tr = max(0.2 * rng, 4 * se_tr, 1e-12)
        train_rose = dtr_all > thr_tr
        if train_rose and dev_all < -max(3 * se_ev, 0.1 * ev_range):
            ev_lev = _rolling_median(vals, max(3, (es.size // 10) | 1))
            onset = es[int(np.argmax(ev_lev))]
            f.raise_to("critical", onset, 1.0)
            ev.append(
                f"{col}: eval fell {dev_all:+.3g} while train reward rose {dtr_all:+.3g} (first vs last quarter "
                f"of eval points; eval noise s.e. {se_ev:.2g}): coupling C = {dev_all / dtr_all:.2g} < 0; "
                f"eval peaked at step {onset}"
            )
            continue
        dtr, dev = rows[:, 2], rows[:, 3]
        material = dtr > thr_tr
        if material.sum() < 2:
            ev.append(
                f"{col}: train reward did not rise materially (> {thr_tr:.2g}) over enough eval windows; "
                f"overall Δtrain {dtr_all:+.3g}, Δeval {dev_all:+.3g}"
            )
            continue
        c_all = dev[material] / dtr[material]
        c_ref = float(np.median(c_all[: max(1, c_all.size // 2)]))
        c_late = float(c_all[-1])
        txt = (
            f"{col}: coupling C_w = Δeval/Δtrain early {c_ref:.3g}, latest {c_late:.3g} "
            f"over steps {int(rows[material][-1, 0])}-{int(rows[material][-1, 1])}"
        )
        if c_ref > 0:
            r = c_late / c_ref
            # the shortfall of eval against the early coupling must beat the eval noise
            shortfall = c_ref * float(dtr[material][-1]) - float(dev[material][-1])
            se_pair = _noise_sd(vals)
            signif = shortfall > 3.0 * se_pair
            txt += f", shortfall {shortfall:.3g} vs eval noise {se_pair:.2g}"
            # C_w -> 0 alone may be eval saturation / overfitting: watch; eval falling (C_w < 0) while
            # the train reward rises: warning; overall fall of eval: critical (above)
            sev = (
                "warning"
                if (c_late < 0 and -float(dev[material][-1]) > 3.0 * se_pair)
                else "watch"
                if r < COUPLING_WATCH
                else "none"
            )
            if not signif:
                sev = "none"
            if sev != "none":
                idx = np.flatnonzero(c_all / c_ref < COUPLING_WATCH)
                f.raise_to(sev, rows[material][idx[0], 0] if idx.size else None, 1 - r)
                txt += f" (ratio {r:.2f}: eval decoupling from train reward)"
        else:
            txt += " (eval did not track train reward where it rose)"
            f.raise_to("watch", None, 1.0)
        ev.append(txt)
    if ceiling is not None:
        lev = _rolling_median(y, _window(n))
        over = y > ceiling + 1e-9
        lvl_over = lev > ceiling + 1e-9
        if over.any():
            sev = "critical" if lvl_over.any() else "warning" if over.mean() > 0.05 else "watch"
            j = np.flatnonzero(lvl_over if lvl_over.any() else over)[0]
            f.raise_to(sev, step[j], float(over.mean()))
            ev.append(
                f"reward exceeds the verifiable ceiling {ceiling:g} at {over.sum()} of {n} points "
                f"(max {np.nanmax(y):.3g}, rolling median max {np.nanmax(lev):.3g})"
            )
        else:
            ev.append(f"reward within the ceiling {ceiling:g} (max {np.nanmax(y):.3g})")
    if _present(df, "completion_length"):
        cl = df["completion_length"].to_numpy(float)
        a, b = _head_tail(cl)
        tau, p_up, _, _ = _trend(step, cl)
        _, p_up_late, _, _ = _trend(step[n // 2 :], cl[n // 2 :])
        ratio = b / a if a > 0 else np.inf
        txt = f"completion length {a:.4g} -> {b:.4g} (x{ratio:.2g}; Kendall tau {tau:.2f}, p_up {p_up:.2g}; second half p_up {p_up_late:.2g})"
        if p_up < ALPHA and ratio >= 1.5:
            sev = "warning" if (ratio >= 2.5 and p_up_late < 0.05) else "watch"
            lv = _rolling_median(cl, _window(n))
            j = np.flatnonzero(lv > a * (1 + 0.5 * (ratio - 1)))
            f.raise_to(sev, step[j[0]] if j.size else None, ratio)
            txt += " (runaway)" if sev == "warning" else " (growing)"
        ev.append(txt)
    if not evcols and not _present(df, "completion_length") and ceiling is None:
        f.assessed = False
        ev.append("not assessable: no eval metrics, completion length or ceiling")
    f.evidence = "; ".join(ev)
    return f


# ----------------------------------------------------------------------------- API
def diagnose_run(
    df: pd.DataFrame, *, run_id: str | None = None, group_size=None, draws=None, ceiling: float | None = None
) -> list[Finding]:
    """The four :class:`Finding` objects for one run's long table (``step``, ``reward``, metrics)."""
    df = df.sort_values("step").reset_index(drop=True)
    df = df[np.isfinite(df["reward"].to_numpy(float))]
    rid = run_id if run_id is not None else str(df["run_id"].iloc[0]) if "run_id" in df.columns else "run"
    g = None if group_size is None or pd.isna(group_size) else float(group_size)
    if len(df) < MIN_POINTS:
        return [
            Finding(rid, m, assessed=False, evidence=f"not assessable: {len(df)} finite reward points (< {MIN_POINTS})")
            for m in MODES
        ]
    return [
        _hacking(rid, df, ceiling),
        _degeneracy(rid, df, g, ceiling),
        _concentration(rid, df, ceiling),
        _instability(rid, df, draws, ceiling),
    ]


def _ceiling_for(ceiling, meta, rid):
    if isinstance(ceiling, dict):
        v = ceiling.get(rid)
    elif ceiling is not None:
        v = ceiling
    elif meta is not None and "reward_max" in meta.columns and rid in meta.index:
        v = meta.loc[rid, "reward_max"]
    else:
        v = None
    return None if v is None or pd.isna(v) else float(v)


def resolve_ceilings(runs, ceiling: float | None = None) -> dict:
    """Per-run verifiable ceilings: metadata ``reward_max``, else ``--ceiling``.

    A run whose reward level (its rolling median) exceeds ``--ceiling`` anywhere -- at its start or
    later -- is not on the ceiling's scale (e.g. a sum of reward functions that starts below 1 and
    climbs to 3): a verifiable reward cannot pass its ceiling, so that is not reward hacking; the run
    gets no ceiling, with a warning naming the step. Single points above it (noise) keep the ceiling.
    """
    import warnings

    from bayesgrpo.errors import DataWarning
    from bayesgrpo.series import start_level

    out = {}
    for rid in runs.run_ids:
        m = runs.meta.loc[rid].get("reward_max")
        if m is not None and pd.notna(m):
            out[rid] = float(m)
            continue
        if ceiling is None:
            out[rid] = None
            continue
        g = runs.run(rid)
        r, step = g["reward"].to_numpy(dtype=float), g["step"].to_numpy()
        start = start_level(r)
        lev = _rolling_median(r, _window(r.size))
        over = np.flatnonzero(lev > ceiling + 1e-9 * max(1.0, abs(ceiling)))
        why = None
        if start > ceiling + 1e-9:
            why = f"run {rid!r} starts at {start:.3g}, above --ceiling {ceiling:g}"
        elif over.size:
            j = over[0]
            why = (f"run {rid!r} reaches a reward level (rolling median) of {lev[j]:.3g} at step {int(step[j])}, above "
                   f"--ceiling {ceiling:g}")  # fmt: skip
        if why:
            warnings.warn(f"{why}: its reward is not on that scale (a sum of reward functions?), so the ceiling is not "
                          "applied to it; set reward_max in --meta", DataWarning, stacklevel=2)  # fmt: skip
            out[rid] = None
        else:
            out[rid] = float(ceiling)
    return out


def diagnose_runs(runs, *, posteriors: dict | None = None, ceiling=None) -> pd.DataFrame:
    """Diagnose every run of a :class:`~bayesgrpo.schema.RunSet`.

    Parameters
    ----------
    runs : RunSet
    posteriors : dict run_id -> PathDraws, optional
        Posterior draws; enable the ``P(c <= 0)`` / spectral-radius check.
    ceiling : float or dict run_id -> float, optional
        Verifiable reward ceiling (e.g. 1.0 for 0/1 rewards). Default: the ``reward_max`` metadata
        column when present, else none (see :func:`resolve_ceilings` for a default with a check).

    Returns
    -------
    pandas.DataFrame
        One row per run x mode: ``run_id, mode, severity, onset_step, evidence, missing, assessed, score``
        (``onset_step`` nullable Int64; ``missing`` comma-separated).
    """
    posteriors = posteriors or {}
    rows = []
    meta = runs.meta
    for rid, df in runs.data.groupby("run_id", sort=False):
        g = (
            meta.loc[rid, "group_size"]
            if (meta is not None and "group_size" in meta.columns and rid in meta.index)
            else None
        )
        for f in diagnose_run(
            df, run_id=rid, group_size=g, draws=posteriors.get(rid), ceiling=_ceiling_for(ceiling, meta, rid)
        ):
            rows.append(f.to_row())
    out = pd.DataFrame(
        rows, columns=["run_id", "mode", "severity", "onset_step", "evidence", "missing", "assessed", "score"]
    )
    out["onset_step"] = out["onset_step"].astype("Int64")
    out["severity"] = pd.Categorical(out["severity"], categories=list(SEVERITIES), ordered=True)
    return out
