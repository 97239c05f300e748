"""A calibration layer on the final-reward draws, learned leave-source-out on backtests of real runs.

The physics model describes a run that stays in its regime; real runs also leave it (a rise that
peaks and declines or collapses, a format reward that switches on late -- physics.md section 9). No
prefix can time such an event, but a population of complete runs can price how often the model's
intervals miss, above and below, at each observed fraction. The layer is split-conformal and
asymmetric (conformalised quantiles, Romano et al. 2019, on the model's own quantiles):

    x' = median + w_up(f) (x - median)    for draws above the median
    x' = median + w_dn(f) (x - median)    below it

``f`` = observed fraction of the run; ``w`` interpolated on :attr:`fraction_grid`. ``w_up`` at a
fraction is the weighted 90% quantile of ``(y - median) / (q90 - median)`` over backtest cases of
complete runs at that fraction (and ``w_dn`` the same for the lower tail), so that on those cases
10% of the outcomes fall above the 80% interval and 10% below. Each case weighs half "per case" and
half "per source" (each source the same), so neither the large sources nor the small ones decide
alone. Benchmarks fit the layer without the source they score (leave-one-source-out); the shipped
layer (``bayesgrpo/resources/calibration_<kind>.json``) is fitted on every development run and its
identity is recorded in every saved forecast.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Calibration", "fit_calibration", "identity_calibration", "leave_anchor", "W_MIN", "W_MAX"]

W_MIN, W_MAX = 0.5, 6.0  # the layer never shrinks an interval below half or widens it beyond 6x


class Calibration(BaseModel):
    """Parameters of the layer (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction_grid: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    w_up: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    w_dn: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    p_leave: tuple[float, ...] = ()  # empty: no draw leaves the regime
    c_up: tuple[float, ...] = ()  # additive: the 90% point moves up by c_up x the run's scale (empty: none)
    c_dn: tuple[float, ...] = ()  # and the 10% point down by c_dn x scale
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _lengths(self):
        n = len(self.fraction_grid)
        for name in ("w_up", "w_dn") + tuple(f for f in ("p_leave", "c_up", "c_dn") if getattr(self, f)):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"calibration {self.name!r}: {name} has {len(getattr(self, name))} values for {n} fractions"
                )
        if any(not 0.0 <= v < 1.0 for v in self.p_leave):
            raise ValueError(f"calibration {self.name!r}: p_leave must lie in [0, 1)")
        return self

    @property
    def identity(self) -> str:
        d = self.model_dump(exclude={"provenance"})
        return f"{self.name}@sha256:{hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]}"

    def widths(self, fraction: float) -> tuple[float, float]:
        """``(w_dn, w_up)`` at an observed fraction (constant beyond the grid)."""
        return (float(np.interp(fraction, self.fraction_grid, self.w_dn)),
                float(np.interp(fraction, self.fraction_grid, self.w_up)))  # fmt: skip

    def shifts(self, fraction: float) -> tuple[float, float]:
        """``(c_dn, c_up)``: the additive widening of each tail, in units of the run's scale."""
        if not self.c_up:
            return 0.0, 0.0
        return (float(np.interp(fraction, self.fraction_grid, self.c_dn)),
                float(np.interp(fraction, self.fraction_grid, self.c_up)))  # fmt: skip

    def stretch(self, x, *, fraction: float, scale: float, go=1.0, axis=None) -> np.ndarray:
        """Draws with each tail stretched so that its 10% / 90% point moves out by ``c x scale x go``.

        ``go`` (a number, or one per column of ``x`` with ``axis=0``) is the share of the time to go:
        paths widen from nothing at the last observation to all of it at the horizon. A forecast
        whose own interval is narrow (a flat prefix) gains what the population's misses say.
        """
        c_dn, c_up = self.shifts(fraction)
        x = np.asarray(x, dtype=float)
        if (c_dn == 0.0 and c_up == 0.0) or not np.isfinite(scale) or x.size == 0:
            return x
        med = np.median(x, axis=axis, keepdims=axis is not None)
        s_up = np.maximum(np.quantile(x, 0.9, axis=axis, keepdims=axis is not None) - med, 1e-9 * scale)
        s_dn = np.maximum(med - np.quantile(x, 0.1, axis=axis, keepdims=axis is not None), 1e-9 * scale)
        d = x - med
        g = np.asarray(go, dtype=float)
        return med + np.where(d > 0, d * (1.0 + c_up * scale * g / s_up), d * (1.0 + c_dn * scale * g / s_dn))

    def leave(
        self, n: int, *, fraction: float, level: float = float("nan"), floor: float = float("nan")
    ) -> tuple[np.ndarray, np.ndarray]:
        """The draws that leave the regime: ``(indices, final values)``.

        A share ``p_leave(f)`` of the ``n`` draws (a fixed subset: the same for the final reward and
        its paths) ends anywhere between the reward's floor and the current level (evenly spread),
        the outcome of a run that peaks and declines or collapses. Nothing is left when the share
        rounds to no draw or the level is unknown.
        """
        p = float(np.interp(fraction, self.fraction_grid, self.p_leave)) if self.p_leave else 0.0
        k = int(round(p * n))
        if k == 0 or not (np.isfinite(level) and np.isfinite(floor)):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rng = np.random.default_rng(LEAVE_SEED)
        idx = np.sort(rng.choice(n, size=k, replace=False))
        lo = min(float(floor), float(level))
        return idx, lo + (float(level) - lo) * (rng.permutation(k) + 0.5) / k

    def apply(
        self,
        draws,
        *,
        fraction: float,
        level: float = float("nan"),
        floor: float = float("nan"),
        scale: float = float("nan"),
        go: float = 1.0,
    ) -> np.ndarray:
        """Calibrated draws (same number and order as ``draws``; run units).

        The widths scale each side about the median; the additive shifts (given the run's ``scale``,
        :meth:`stretch`) widen each tail; then the draws of :meth:`leave` (given the current ``level``
        and the ``floor`` of :func:`leave_anchor`) are set to where they end. ``go`` (default 1: the
        planned end, where the layer was fitted) takes that share of the widening, for a forecast to
        an earlier step.
        """
        x = np.asarray(draws, dtype=float)
        if x.size == 0:
            return x
        w_dn, w_up = self.widths(fraction)
        w_dn, w_up = 1.0 + (w_dn - 1.0) * go, 1.0 + (w_up - 1.0) * go
        med = float(np.median(x))
        d = x - med
        out = self.stretch(med + np.where(d > 0, w_up, w_dn) * d, fraction=fraction, scale=scale, go=go)
        idx, v = self.leave(out.size, fraction=fraction, level=level, floor=floor)
        out[idx] = v
        return out

    def save(self, path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path) -> Calibration:
        p = path if hasattr(path, "read_text") else Path(path)
        return cls.model_validate(json.loads(p.read_text()))

    @classmethod
    def default(cls, kind: str = "oscillator") -> Calibration:
        """The packaged layer of ``kind`` (``calibration_<kind>.json``), else the identity."""
        from importlib.resources import files

        res = files("bayesgrpo.resources").joinpath(f"calibration_{kind}.json")
        return cls.load(res) if res.is_file() else identity_calibration()


LEAVE_SEED = 20_260_601  # the draws that leave the regime are a fixed subset (reproducible forecasts)


def leave_anchor(prefix, reward_min: float = float("nan")) -> tuple[float, float]:
    """``(level, floor)`` of a run's observed prefix: where a run that leaves its regime starts from
    and how low it can end.

    The level is the mean of the last tenth of the prefix (at least 3 points); the floor is the
    reward's lower bound (metadata or ``--reward-range``), else 0 for a reward that has stayed in
    [0, 1], else the lowest observed value; never above the level.
    """
    y = np.asarray(prefix, dtype=float)
    y = y[np.isfinite(y)]
    if y.size == 0:
        return float("nan"), float("nan")
    level = float(y[-max(3, int(np.ceil(0.1 * y.size))) :].mean())
    if np.isfinite(reward_min):
        floor = float(reward_min)
    elif y.min() >= 0.0 and y.max() <= 1.0:
        floor = 0.0
    else:
        floor = float(y.min())
    return level, min(floor, level)


def identity_calibration() -> Calibration:
    """The layer that changes nothing."""
    return Calibration()


def _wquantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    o = np.argsort(x)
    cw = np.cumsum(w[o]) / np.sum(w)
    return float(x[o][min(np.searchsorted(cw, q), x.size - 1)])


def _case_weights(source) -> np.ndarray:
    """Half per case, half per source (each source the same)."""
    import pandas as pd

    src = pd.Series(np.asarray(source)).astype(str)
    n_src = src.map(src.value_counts()).to_numpy(float)
    return 0.5 / len(src) + 0.5 / (src.nunique() * n_src)


#: shares of draws leaving the regime tried by :func:`fit_calibration` (``leave=True``)
P_LEAVE_GRID = tuple(np.round(np.arange(0.0, 0.31, 0.02), 2))


def fit_calibration(
    cases,
    *,
    draws=None,
    grid=(0.1, 0.2, 0.3, 0.5),
    level: float = 0.8,
    w_min: float = 1.0,
    leave: bool = False,
    additive: bool = False,
    name: str = "calibration",
    provenance=None,
) -> Calibration:
    """Fit the layer to backtest cases of complete runs (split-conformal, asymmetric).

    Parameters
    ----------
    cases : DataFrame
        One row per case with ``source``, ``cutoff``, ``truth`` and the model's quantiles ``q10``,
        ``q50``, ``q90`` of the final reward (a backtest's ``cases.csv``). With ``leave``: also
        ``range``, ``level`` and ``floor`` (:func:`leave_anchor` of the case's prefix).
    draws : sequence of arrays, optional
        The final-reward draws of each case (needed for ``leave``).
    level : float
        The central interval the tails are fitted for (0.8: 10% above, 10% below).
    w_min : float
        The smallest width ratio. The default 1 only ever widens: a layer learned on other sources
        that narrows an interval was measured to cost coverage on the held-out source
        (``bench/results/calibration_study.md``).
    additive : bool
        Fit additive shifts instead of width ratios (conformalised quantile regression, Romano et al.
        2019): ``c_up`` is the weighted 90% quantile of ``(y - q90) / scale`` (at least 0), ``c_dn``
        that of ``(q10 - y) / scale``; needs ``scale``, the run's normalisation scale at the cutoff.
        A ratio cannot widen an interval of (almost) no width; a shift can.
    leave : bool
        Also fit ``p_leave`` per fraction: the share (on :data:`P_LEAVE_GRID`) minimising the
        weighted mean CRPS (divided by the case's ``range``); the widths are then fitted to the
        quantiles of the draws with that share left.
    """
    import pandas as pd

    from bayesgrpo.evaluation.metrics import crps_sample

    df = pd.DataFrame(cases).reset_index(drop=True)
    w_case = _case_weights(df["source"])
    cut = df["cutoff"].to_numpy(float)
    p_leave = ()
    if leave:
        if draws is None or len(draws) != len(df):
            raise ValueError("fit_calibration(leave=True) needs the draws of every case")
        ps = []
        for c in grid:
            m = np.where(np.isclose(cut, c))[0]
            if m.size < 5:
                ps.append(0.0)
                continue
            cost = []
            for p in P_LEAVE_GRID:
                one = Calibration(fraction_grid=(c,), w_up=(1.0,), w_dn=(1.0,), p_leave=(p,), name="fit")
                cost.append(sum(w_case[i] * crps_sample(one.apply(draws[i], fraction=c, level=df["level"][i],
                                                                  floor=df["floor"][i]), df["truth"][i]) / df["range"][i]
                                for i in m))  # fmt: skip
            ps.append(float(P_LEAVE_GRID[int(np.argmin(cost))]))
        p_leave = tuple(ps)
        lv = Calibration(fraction_grid=tuple(grid), w_up=(1.0,) * len(grid), w_dn=(1.0,) * len(grid), p_leave=p_leave,
                         name="fit")  # fmt: skip
        q = np.array([np.quantile(lv.apply(draws[i], fraction=cut[i], level=df["level"][i], floor=df["floor"][i]),
                                  (0.1, 0.5, 0.9)) for i in range(len(df))])  # fmt: skip
        df = df.assign(q10=q[:, 0], q50=q[:, 1], q90=q[:, 2])
    tail = (1.0 + level) / 2.0
    med = df["q50"].to_numpy(float)
    up = np.maximum(df["q90"].to_numpy(float) - med, 1e-12)
    dn = np.maximum(med - df["q10"].to_numpy(float), 1e-12)
    y = df["truth"].to_numpy(float)
    r_up, r_dn = (y - med) / up, (med - y) / dn
    ws_up, ws_dn, cs_up, cs_dn = [], [], [], []
    if additive:
        sc = df["scale"].to_numpy(float)
        a_up, a_dn = (y - df["q90"].to_numpy(float)) / sc, (df["q10"].to_numpy(float) - y) / sc
    for c in grid:
        m = np.isclose(cut, c)
        if m.sum() < 5:
            ws_up.append(1.0)
            ws_dn.append(1.0)
            cs_up.append(0.0)
            cs_dn.append(0.0)
            continue
        if additive:
            ws_up.append(1.0)
            ws_dn.append(1.0)
            cs_up.append(float(max(0.0, _wquantile(a_up[m], w_case[m], tail))))
            cs_dn.append(float(max(0.0, _wquantile(a_dn[m], w_case[m], tail))))
            continue
        ws_up.append(float(np.clip(_wquantile(r_up[m], w_case[m], tail), w_min, W_MAX)))
        ws_dn.append(float(np.clip(_wquantile(r_dn[m], w_case[m], tail), w_min, W_MAX)))
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), level=level, w_min=w_min, leave=bool(leave),
                additive=bool(additive),
                method="split-conformal width of each tail per observed fraction; cases weigh half per case, half per source")  # fmt: skip
    return Calibration(fraction_grid=tuple(float(g) for g in grid), w_up=tuple(round(v, 4) for v in ws_up),
                       w_dn=tuple(round(v, 4) for v in ws_dn), p_leave=p_leave,
                       c_up=tuple(round(v, 4) for v in cs_up) if additive else (),
                       c_dn=tuple(round(v, 4) for v in cs_dn) if additive else (), name=name, provenance=prov)  # fmt: skip
