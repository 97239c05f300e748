"""Fitting the post-hoc maps the package ships (research: no command of the package fits them, it only
applies them), for the studies that write them.

* :func:`fit_calibration` -- the interval calibration layer,
  :class:`~bayesgrpo.forecast.calibration.Calibration` (split-conformal additive tails per observed
  fraction; ``bench/calibration_study.py`` writes ``bayesgrpo/resources/calibration_<kind>.json``);
* :func:`fit_decision_calibration` -- the decision map,
  :class:`~bayesgrpo.forecast.decision.DecisionCalibration` (platt / beta / isotonic;
  ``bench/stop_report.py`` writes ``bayesgrpo/resources/decision_<kind>.json``);
* what the studies share: :func:`case_weights` (cases weigh half per case, half per source),
  :func:`weighted_quantile`, :func:`leave_anchor` (where a run that leaves its regime starts from and how
  low it can end).
"""

from __future__ import annotations

import numpy as np

from bayesgrpo.conventions import HEADLINE
from bayesgrpo.forecast.calibration import Calibration
from bayesgrpo.forecast.decision import _EPS, CALIBRATION_METHODS, DecisionCalibration, _design, _sigmoid
from bayesgrpo.series import current_level

__all__ = [
    "fit_calibration",
    "fit_decision_calibration",
    "case_weights",
    "weighted_quantile",
    "leave_anchor",
    "MIN_CASES",
]


# ============================================================================ the interval calibration layer
def leave_anchor(prefix, reward_min: float = float("nan")) -> tuple[float, float]:
    """``(level, floor)`` of a run's observed prefix: where a run that leaves its regime starts from
    and how low it can end.

    The level is the current level (:func:`bayesgrpo.series.current_level`: the mean of the last tenth
    of the prefix, at least 3 points); the floor is the
    reward's lower bound (metadata or ``--reward-range``), else 0 for a reward that has stayed in
    [0, 1], else the lowest observed value; never above the level.
    """
    y = np.asarray(prefix, dtype=float)
    y = y[np.isfinite(y)]
    if y.size == 0:
        return float("nan"), float("nan")
    level = current_level(y)
    if np.isfinite(reward_min):
        floor = float(reward_min)
    elif y.min() >= 0.0 and y.max() <= 1.0:
        floor = 0.0
    else:
        floor = float(y.min())
    return level, min(floor, level)


def weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``x`` under weights ``w`` (the smallest value whose weight share reaches ``q``)."""
    o = np.argsort(x)
    cw = np.cumsum(w[o]) / np.sum(w)
    return float(x[o][min(int(np.searchsorted(cw, q)), x.size - 1)])


def case_weights(source) -> np.ndarray:
    """Half per case, half per source (each source the same)."""
    src = np.asarray(source).astype(str)
    if src.size == 0:
        return np.zeros(0)
    _, inv, cnt = np.unique(src, return_inverse=True, return_counts=True)
    return 0.5 / src.size + 0.5 / (cnt.size * cnt[inv])


#: cases per observed fraction below which the layer keeps no shift there
MIN_CASES = 5


def fit_calibration(
    cases, *, grid=(0.1, 0.2, 0.3, 0.5), level: float = HEADLINE, name: str = "calibration", provenance=None
) -> Calibration:
    """Fit the layer to backtest cases of complete runs (split-conformal, asymmetric, additive).

    Parameters
    ----------
    cases : DataFrame
        One row per case with ``source``, ``cutoff``, ``truth``, ``scale`` (the run's normalisation
        scale at the cutoff) and the model's quantiles ``q10``, ``q90`` of the final reward (a
        backtest's ``cases.csv`` with the scale added).
    grid : floats
        The observed fractions the shifts are fitted at (cases at other cutoffs are not used).
    level : float
        The central interval the tails are fitted for (0.8: 10% above, 10% below).
    """
    import pandas as pd

    df = pd.DataFrame(cases).reset_index(drop=True)
    w_case = case_weights(df["source"])
    cut = df["cutoff"].to_numpy(float)
    tail = (1.0 + level) / 2.0
    y = df["truth"].to_numpy(float)
    sc = df["scale"].to_numpy(float)
    a_up, a_dn = (y - df["q90"].to_numpy(float)) / sc, (df["q10"].to_numpy(float) - y) / sc
    cs_up, cs_dn = [], []
    for c in grid:
        m = np.isclose(cut, c)
        few = m.sum() < MIN_CASES
        cs_up.append(0.0 if few else float(max(0.0, weighted_quantile(a_up[m], w_case[m], tail))))
        cs_dn.append(0.0 if few else float(max(0.0, weighted_quantile(a_dn[m], w_case[m], tail))))
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), level=level, additive=True,
                method="split-conformal additive tails per observed fraction; cases weigh half per case, half per source")  # fmt: skip
    return Calibration(fraction_grid=tuple(float(g) for g in grid), c_up=tuple(round(v, 4) for v in cs_up),
                       c_dn=tuple(round(v, 4) for v in cs_dn), name=name, provenance=prov)  # fmt: skip


# ============================================================================ the decision map
def _fit_logistic(X: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float) -> np.ndarray:
    """Weighted logistic regression (L2 on every coefficient but the intercept), BFGS with the exact gradient."""
    from scipy.optimize import minimize

    w = w / w.sum()
    pen = np.r_[0.0, np.full(X.shape[1] - 1, ridge)]

    def f(b):
        z = X @ b
        nll = np.sum(w * (np.logaddexp(0.0, z) - y * z))
        return nll + 0.5 * np.sum(pen * b * b), X.T @ (w * (_sigmoid(z) - y)) + pen * b

    b0 = np.zeros(X.shape[1])
    b0[1] = 1.0  # start from the identity (platt: b = 1; beta: b1 = 1 is near it)
    res = minimize(f, b0, jac=True, method="BFGS")
    return res.x


def _isotonic_knots(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    from scipy.optimize import isotonic_regression

    o = np.argsort(p, kind="stable")
    fit = isotonic_regression(y[o], weights=w[o], increasing=True)
    vals, blocks = fit.x, fit.blocks
    xs, ys = [], []
    for k in range(len(blocks) - 1):
        sl = o[blocks[k] : blocks[k + 1]]
        xs.append(float(np.average(p[sl], weights=w[sl])))
        ys.append(float(vals[blocks[k]]))
    yc = np.clip(ys, _EPS, 1.0 - _EPS)
    return tuple(round(v, 6) for v in xs), tuple(round(float(v), 6) for v in yc)


def fit_decision_calibration(
    p,
    outcome,
    *,
    fraction,
    method: str = "platt",
    covariates: dict | None = None,
    source=None,
    weights=None,
    bands=(0.0, 0.25, 0.5, 1.0),
    ridge: float = 1e-3,
    name: str = "decision-calibration",
    provenance: dict | None = None,
) -> DecisionCalibration:
    """Fit a :class:`DecisionCalibration` to model probabilities ``p`` of events and their ``outcome``
    (1 = the event happened), at observed ``fraction``.

    Parameters
    ----------
    p, outcome, fraction : array-like, one entry per case
    method : {"identity", "platt", "beta", "isotonic"}
    covariates : dict, optional
        ``{name: values}`` of extra covariates (``platt`` and ``beta``), one value per case.
    source : array-like, optional
        Each case's source: cases weigh half per case, half per source
        (:func:`case_weights`); without it every case weighs the same.
    weights : array-like, optional
        Explicit case weights (instead of ``source``).
    bands : edges of the observed-fraction bands of ``isotonic``
    ridge : float
        L2 penalty of the logistic fits (keeps them finite on separable data).

    Raises
    ------
    ValueError
        Unknown method, mismatched lengths, or no finite case.
    """
    if method not in CALIBRATION_METHODS:
        raise ValueError(f"unknown decision calibration {method!r}; choose from {', '.join(CALIBRATION_METHODS)}")
    p = np.asarray(p, dtype=float)
    y = np.asarray(outcome, dtype=float)
    f = np.broadcast_to(np.asarray(fraction, dtype=float), p.shape).astype(float)
    if y.shape != p.shape:
        raise ValueError(f"p has {p.size} cases, outcome {y.size}")
    if p.size == 0:
        raise ValueError("no finite case to fit a decision calibration to")
    if weights is not None:
        w = np.asarray(weights, dtype=float)
    elif source is not None:
        w = case_weights(source)
    else:
        w = np.ones(p.shape)
    cov = {k: np.broadcast_to(np.asarray(v, dtype=float), p.shape) for k, v in (covariates or {}).items()}
    if cov and method not in ("platt", "beta"):
        raise ValueError(f"{method} takes no extra covariates (platt and beta do)")
    ok = np.isfinite(p) & np.isfinite(y) & np.isfinite(f) & (w > 0)
    for v in cov.values():
        ok &= np.isfinite(v)
    if not ok.any():
        raise ValueError("no finite case to fit a decision calibration to")
    p, y, f, w = p[ok], y[ok], f[ok], w[ok]
    cov = {k: v[ok] for k, v in cov.items()}
    prov = dict(provenance or {})
    prov.update(cases=int(ok.sum()), method=method, base_rate=round(float(np.average(y, weights=w)), 4))
    if method == "identity":
        return DecisionCalibration(name=name, provenance=prov)
    if method == "isotonic":
        kp, ky = [], []
        edges = tuple(float(b) for b in bands)
        for b in range(len(edges) - 1):
            m = (f >= edges[b]) & ((f < edges[b + 1]) | (b == len(edges) - 2))
            if m.sum() < 2:  # an empty band borrows every case
                m = np.ones_like(m)
            a, c = _isotonic_knots(p[m], y[m], w[m])
            kp.append(a)
            ky.append(c)
        return DecisionCalibration(method="isotonic", bands=edges, knots_p=tuple(kp), knots_y=tuple(ky), name=name,
                                   provenance=prov)  # fmt: skip
    coef = _fit_logistic(_design(method, p, f, list(cov.values())), y, w, ridge)
    return DecisionCalibration(method=method, coef=tuple(round(float(c), 6) for c in coef), covariates=tuple(cov),
                               name=name, provenance=prov)  # fmt: skip
