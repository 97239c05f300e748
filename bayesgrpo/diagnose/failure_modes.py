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
  growing fluctuation envelope of the detrended reward and sustained swings (both at most ``watch`` when the
  posterior is given and confidently stable, P(unstable) < 0.01), sudden collapse of the reward toward its
  floor (rolling median falls by more than ``collapse_drop`` of the run's range and stays), and, live, as
  soon as the 50-point mean leaves the band of its plateau and the latest points sit near the floor
  (:mod:`bayesgrpo.diagnose.collapse_band`).

All statistics are computed on block means / rolling medians so that one noisy point never decides.
Thresholds are module constants (documented defaults, not fitted to any one data set).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.diagnose.common import (
    _RANK,
    ALPHA,
    COUPLING_WATCH,
    DEGEN_CRIT,
    DEGEN_WARN,
    MIN_POINTS,
    MODES,
    SEVERITIES,
    Finding,
    _head_tail,
    _is_unit,
    _present,
    _rolling_median,
    _sustained_onset,
    _trend,
    _window,
    degenerate_share,
    expected_group_std,
)
from bayesgrpo.diagnose.instability import _instability, posterior_instability
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


def _share_severity(late, early, p_up):
    """High and rising -> escalate; high but flat (a static prompt mix) -> one level lower."""
    rising = (p_up < 0.05 and late > early + 0.05) or late > early + 0.1
    if late >= DEGEN_CRIT:
        return "critical" if rising else "warning"
    if late >= DEGEN_WARN:
        return "warning" if rising else "watch"
    if p_up < ALPHA and late > early + 0.15:
        return "watch"
    return "none"


def _zero_std_share(f: Finding, df, step, *, pred, ylate, group_size) -> str:
    """The evidence of the logged share of zero-variance groups (against ``p^G + (1-p)^G``); raises ``f``."""
    fz = df["frac_reward_zero_std"].to_numpy(float)
    early, late = _head_tail(fz)
    tau, p_up, _, _ = _trend(step, fz)
    txt = (
        f"zero-variance-group share {early:.2f} -> {late:.2f} (first/last 20%; Kendall tau {tau:.2f}, p_up {p_up:.2g})"
    )
    if pred is not None:
        txt += f"; predicted p^G+(1-p)^G at mean reward {ylate:.2f}, G={int(group_size)}: {pred:.2f}"
        if late > pred + 0.15:
            txt += " (observed exceeds it: prompts split into all-solved / all-failed)"
    f.details["observed_late"] = late
    sev = _share_severity(late, early, p_up)
    j = _sustained_onset(_rolling_median(fz, _window(step.size)) >= DEGEN_WARN)
    f.raise_to(sev, step[j] if j is not None and sev != "none" else None, late)
    return txt


def _spread_share(f: Finding, df, step, y, *, unit, has_g, pred, ylate, group_size) -> str:
    """The evidence of the within-group spread: for 0/1 rewards the zero-variance share it implies,
    else its fall toward 0; raises ``f`` (the implied share only when the share itself is not logged)."""
    n = y.size
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
        e_nd0 = expected_group_std(float(np.mean(y[: max(2, n // 5)])), group_size, given_nondegenerate=True)
        implied0 = float(np.clip(1.0 - early_sd / e_nd0, 0.0, 1.0)) if e_nd0 > 0 else 1.0
        f.details["implied_share_late"] = implied
        txt += (f"; implied zero-variance share {implied0:.2f} -> {implied:.2f} (predicted p^G+(1-p)^G "
                f"{pred:.2f} at mean reward {ylate:.2f}, G={int(group_size)})")  # fmt: skip
        if not _present(df, "frac_reward_zero_std"):
            sev = _share_severity(implied, implied0, 0.0 if implied > implied0 + 0.1 else 1.0)
            j = _sustained_onset(1.0 - np.clip(lev / max(e_nd, 1e-12), 0, 1) >= DEGEN_WARN)
            f.raise_to(sev, step[j] if j is not None and sev != "none" else None, implied)
    else:
        sev = "warning" if ratio < 0.25 else "watch" if ratio < 0.4 else "none"
        cross = np.flatnonzero((lev < 0.25 * peak) & (np.arange(n) > np.argmax(lev)))
        f.raise_to(sev, step[cross[0]] if cross.size and sev != "none" else None, 1 - ratio)
    return txt + " (reward_std -> 0)" if ratio < 0.25 else txt


def _near_ceiling(f: Finding, ev: list, step, y, *, top, ylate) -> None:
    """Degenerate groups near the ceiling are convergence (severity lowered); far below it with a flat
    reward they are an early plateau (watch raised to warning)."""
    share_late = max([v for v in (f.details.get("observed_late"), f.details.get("implied_share_late"))
                      if v is not None], default=0.0)  # fmt: skip
    if top is not None and ylate >= 0.9 * top:
        ev.append(f"reward is near the ceiling {top:g} ({ylate:.3g}): groups are all-solved, i.e. convergence; "
                  "severity lowered")  # fmt: skip
        f.severity = SEVERITIES[min(_RANK[f.severity] - 1, _RANK["watch"])]
        if f.severity == "none":
            f.onset_step = None
    elif top is not None and ylate < 0.8 * top and share_late >= 0.65:
        n = y.size
        _, p_up_r, _, _ = _trend(step[n // 2 :], y[n // 2 :])
        if p_up_r > 0.05:
            ev.append(f"reward has plateaued at {ylate:.3g} < 0.8 x ceiling {top:g} while groups degenerate: "
                      "an early plateau from degeneracy, not convergence")  # fmt: skip
            if f.severity == "watch":
                f.raise_to("warning")


def _degeneracy(rid, df, group_size, ceiling):
    f = Finding(rid, "advantage_degeneracy")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    unit = _is_unit(y, ceiling)
    has_g = group_size is not None and np.isfinite(group_size) and group_size >= 2
    missing = [c for c in ("frac_reward_zero_std", "reward_std") if not _present(df, c)]
    f.missing = tuple(missing + ([] if has_g else ["group_size (meta)"]))
    _, ylate = _head_tail(y)
    pred = float(degenerate_share(ylate, group_size)) if (unit and has_g) else None
    if pred is not None:
        f.details["predicted_late"] = pred
    ev = []
    if _present(df, "frac_reward_zero_std"):
        ev.append(_zero_std_share(f, df, step, pred=pred, ylate=ylate, group_size=group_size))
    if _present(df, "reward_std"):
        ev.append(_spread_share(f, df, step, y, unit=unit, has_g=has_g, pred=pred, ylate=ylate, group_size=group_size))
    if f.severity != "none":
        _near_ceiling(f, ev, step, y, top=ceiling if ceiling is not None else (1.0 if unit else None), ylate=ylate)
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
    for i in range(m - k + 1):
        dtr = tr[i + k - 1] - tr[i]
        dev = np.mean(ev_vals[i + k - 1 - 1 : i + k]) - np.mean(ev_vals[i : i + 2])
        rows.append((es[i], es[i + k - 1], dtr, dev))
    return np.array(rows), float(np.ptp(lev))


def _eval_coupling(f: Finding, df, col: str, step, y, w: int, se_tr: float) -> str | None:
    """The evidence of one eval metric: eval falling while train rises (critical), or its coupling
    ``C_w = Δeval/Δtrain`` decaying against the early coupling (watch / warning); raises ``f``."""
    sub = df[["step", col]].dropna()
    es, vals = sub["step"].to_numpy(), sub[col].to_numpy(float)
    rows, rng = _coupling(step, y, es, vals)
    if rows.size == 0:
        return None
    q = max(2, es.size // 4)
    tr_e = np.interp(es, step, _rolling_median(y, w))
    dtr_all = float(np.mean(tr_e[-q:]) - np.mean(tr_e[:q]))
    dev_all = float(np.mean(vals[-q:]) - np.mean(vals[:q]))
    se_ev = _noise_sd(vals) * np.sqrt(2.0 / q)
    thr_tr = max(0.2 * rng, 4 * se_tr, 1e-12)
    if dtr_all > thr_tr and dev_all < -max(3 * se_ev, 0.1 * float(np.ptp(vals))):
        onset = es[int(np.argmax(_rolling_median(vals, max(3, (es.size // 10) | 1))))]
        f.raise_to("critical", onset, 1.0)
        return (f"{col}: eval fell {dev_all:+.3g} while train reward rose {dtr_all:+.3g} (first vs last quarter "
                f"of eval points; eval noise s.e. {se_ev:.2g}): coupling C = {dev_all / dtr_all:.2g} < 0; "
                f"eval peaked at step {onset}")  # fmt: skip
    dtr, dev = rows[:, 2], rows[:, 3]
    material = dtr > thr_tr
    if material.sum() < 2:
        return (f"{col}: train reward did not rise materially (> {thr_tr:.2g}) over enough eval windows; "
                f"overall Δtrain {dtr_all:+.3g}, Δeval {dev_all:+.3g}")  # fmt: skip
    c_all = dev[material] / dtr[material]
    c_ref = float(np.median(c_all[: max(1, c_all.size // 2)]))
    c_late = float(c_all[-1])
    txt = (f"{col}: coupling C_w = Δeval/Δtrain early {c_ref:.3g}, latest {c_late:.3g} "
           f"over steps {int(rows[material][-1, 0])}-{int(rows[material][-1, 1])}")  # fmt: skip
    if c_ref <= 0:
        f.raise_to("watch", None, 1.0)
        return txt + " (eval did not track train reward where it rose)"
    r = c_late / c_ref
    # the shortfall of eval against the early coupling must beat the eval noise
    shortfall = c_ref * float(dtr[material][-1]) - float(dev[material][-1])
    se_pair = _noise_sd(vals)
    txt += f", shortfall {shortfall:.3g} vs eval noise {se_pair:.2g}"
    # C_w -> 0 alone may be eval saturation / overfitting: watch; eval falling (C_w < 0) while the train
    # reward rises: warning; overall fall of eval: critical (above)
    sev = (
        "warning"
        if (c_late < 0 and -float(dev[material][-1]) > 3.0 * se_pair)
        else "watch"
        if r < COUPLING_WATCH
        else "none"
    )
    if shortfall > 3.0 * se_pair and sev != "none":
        idx = np.flatnonzero(c_all / c_ref < COUPLING_WATCH)
        f.raise_to(sev, rows[material][idx[0], 0] if idx.size else None, 1 - r)
        txt += f" (ratio {r:.2f}: eval decoupling from train reward)"
    return txt


def _over_ceiling(f: Finding, step, y, ceiling: float) -> str:
    """The evidence of a reward beyond its verifiable ceiling; raises ``f``."""
    lev = _rolling_median(y, _window(y.size))
    over = y > ceiling + 1e-9
    lvl_over = lev > ceiling + 1e-9
    if not over.any():
        return f"reward within the ceiling {ceiling:g} (max {np.nanmax(y):.3g})"
    sev = "critical" if lvl_over.any() else "warning" if over.mean() > 0.05 else "watch"
    j = np.flatnonzero(lvl_over if lvl_over.any() else over)[0]
    f.raise_to(sev, step[j], float(over.mean()))
    return (f"reward exceeds the verifiable ceiling {ceiling:g} at {over.sum()} of {y.size} points "
            f"(max {np.nanmax(y):.3g}, rolling median max {np.nanmax(lev):.3g})")  # fmt: skip


def _length_runaway(f: Finding, df, step) -> str:
    """The evidence of a growing completion length (robust trend on block means); raises ``f``."""
    n = step.size
    cl = df["completion_length"].to_numpy(float)
    a, b = _head_tail(cl)
    tau, p_up, _, _ = _trend(step, cl)
    _, p_up_late, _, _ = _trend(step[n // 2 :], cl[n // 2 :])
    ratio = b / a if a > 0 else np.inf
    txt = (f"completion length {a:.4g} -> {b:.4g} (x{ratio:.2g}; Kendall tau {tau:.2f}, p_up {p_up:.2g}; "
           f"second half p_up {p_up_late:.2g})")  # fmt: skip
    if p_up < ALPHA and ratio >= 1.5:
        sev = "warning" if (ratio >= 2.5 and p_up_late < 0.05) else "watch"
        j = np.flatnonzero(_rolling_median(cl, _window(n)) > a * (1 + 0.5 * (ratio - 1)))
        f.raise_to(sev, step[j[0]] if j.size else None, ratio)
        txt += " (runaway)" if sev == "warning" else " (growing)"
    return txt


def _hacking(rid, df, ceiling):
    f = Finding(rid, "reward_hacking")
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    evcols = [c for c in df.columns if c.startswith("eval/") and df[c].notna().sum() >= 6]
    has_len = _present(df, "completion_length")
    f.missing = tuple(m for m, absent in (("eval/*", not evcols), ("completion_length", not has_len),
                                          ("ceiling (not given)", ceiling is None)) if absent)  # fmt: skip
    w = _window(y.size)
    se_tr = _noise_sd(y) / np.sqrt(w)
    ev = [t for col in evcols if (t := _eval_coupling(f, df, col, step, y, w, se_tr)) is not None]
    if ceiling is not None:
        ev.append(_over_ceiling(f, step, y, ceiling))
    if has_len:
        ev.append(_length_runaway(f, df, step))
    if not evcols and not has_len and ceiling is None:
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

    out: dict[str, float | None] = {}
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
