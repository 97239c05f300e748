"""An interval layer conditioned on what distinguishes runs: group-conditional conformal quantiles.

The layer moves each of the forecast's quantiles ``q_l`` (``l`` in :data:`LEVELS`) out by an amount
learned on backtests of complete runs, in units of the run's normalisation scale ``s``
(:attr:`bayesgrpo.models.arrays.RunInfo.scale`)::

    q_l'  =  q_l + delta_l(g, f) s

and maps the draws through the monotone piecewise-linear function that sends every ``q_l`` to
``q_l'`` (beyond the outer levels: their shift), so the draws keep their order and their shape
between the levels. ``delta_l(g, f)`` is the weighted ``l``-quantile of ``(y - q_l) / s`` over the
training cases of group ``g`` at observed fraction ``f`` -- conformalised quantile regression (Romano
et al. 2019) at every level at once, *Mondrian* (group-conditional; Vovk et al. 2005) over the groups
of a rule on the prefix's features (:data:`RULES`: bounded or not, the recent trend, the noise, flat
at a bound, the shape weights): runs that differ in what their prefix shows get their own
correction. Each group's value is shrunk toward the pooled one, ``(n_g delta_g + n0 delta) / (n_g + n0)``,
so a small group borrows from all cases. ``widen_only`` keeps every lower level from moving up and
every upper level from moving down (a layer learned on other sources that narrows was measured to cost
coverage on the held-out one). Cases weigh half per case, half per source.

Which rule ships is decided leave-one-source-out by ``bench/quality_study.py`` (most coverage targets,
then CRPS), with its transfer gap (in-sample against held-out-source coverage).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.conventions import content_identity

__all__ = ["IntervalLayer", "fit_layer", "RULES", "LEVELS", "GRID", "case_weights"]

LEVELS = (0.05, 0.1, 0.25, 0.75, 0.9, 0.95)
GRID = (0.1, 0.2, 0.3, 0.5)


def _recent(f: dict) -> str:
    r = float(f.get("recent", 0.0))
    return "falling" if r < -0.05 else ("rising" if r > 0.05 else "level")


#: grouping rules: name -> (description, function of the features -> group label)
RULES: dict = {
    "none": ("one group (the observed fraction only)", lambda f: "all"),
    "bounded": ("bounded 0-1 or known bounds, or not", lambda f: "bounded" if f.get("bounded") else "unbounded"),
    "recent": ("the prefix's last third falling / level / rising (over 5% of its span)", _recent),
    "noise": ("noise under 12% of the prefix's span, or not",
              lambda f: "smooth" if f.get("noise", 1) < 0.12 else "noisy"),
    "recent+noise": ("recent x noise", lambda f: _recent(f) + ("|smooth" if f.get("noise", 1) < 0.12 else "|noisy")),
    "recent+bounded": ("recent x bounded", lambda f: _recent(f) + ("|bounded" if f.get("bounded") else "|unbounded")),
    "floor": ("level at the floor, or not", lambda f: "at-floor" if f.get("at_floor") else "above"),
    "channels": ("logs a precursor channel, or the reward only",
                 lambda f: "channels" if any(f.get(k) for k in ("has_kl", "has_entropy", "has_length", "has_zero_std"))
                 else "reward-only"),
    "shape": ("the shape weights: mostly the oscillator, or not",
              lambda f: "oscillator" if f.get("w_oscillator", 1.0) >= 0.5 else "other"),
}  # fmt: skip


#: the features the rules read (a case table's other columns are not looked at)
_RULE_INPUTS = ("recent", "noise", "bounded", "at_floor", "has_kl", "has_entropy", "has_length", "has_zero_std",
                "w_oscillator")  # fmt: skip


def case_weights(source) -> np.ndarray:
    """Half per case, half per source (each source the same), normalised to sum 1."""
    import pandas as pd

    src = pd.Series(np.asarray(source)).astype(str)
    n_src = src.map(src.value_counts()).to_numpy(float)
    w = 0.5 / len(src) + 0.5 / (src.nunique() * n_src)
    return w / w.sum()


def _wquantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    o = np.argsort(x)
    cw = np.cumsum(w[o]) / np.sum(w)
    return float(x[o][min(int(np.searchsorted(cw, q)), x.size - 1)])


class IntervalLayer(BaseModel):
    """The fitted layer (module docstring): per group, one row of shifts per fraction of :attr:`grid`,
    one column per level of :attr:`levels` (units of the run's scale)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = "none"
    levels: tuple[float, ...] = LEVELS
    grid: tuple[float, ...] = GRID
    shifts: dict[str, tuple[tuple[float, ...], ...]] = Field(default_factory=dict)
    pooled: tuple[tuple[float, ...], ...] = ()
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shapes(self):
        if self.rule not in RULES:
            raise ValueError(f"interval layer {self.name!r}: unknown rule {self.rule!r}; rules: {', '.join(RULES)}")
        for g, rows in [("pooled", self.pooled), *self.shifts.items()]:
            if rows and (len(rows) != len(self.grid) or any(len(r) != len(self.levels) for r in rows)):
                raise ValueError(f"interval layer {self.name!r}: group {g!r} needs {len(self.grid)} x "
                                 f"{len(self.levels)} shifts")  # fmt: skip
        return self

    @property
    def identity(self) -> str:
        return content_identity(self.name, self.model_dump(exclude={"provenance"}))

    def group(self, feats: dict) -> str:
        return RULES[self.rule][1](feats)

    def delta(self, feats: dict, fraction: float) -> np.ndarray:
        """The shift of each level (units of the run's scale) for a run with these features at ``fraction``."""
        rows = self.shifts.get(self.group(feats), self.pooled)
        if not rows:
            return np.zeros(len(self.levels))
        a = np.asarray(rows, dtype=float)
        return np.array([np.interp(fraction, self.grid, a[:, j]) for j in range(a.shape[1])])

    def apply(self, draws, feats: dict, *, fraction: float, scale: float, go=1.0) -> np.ndarray:
        """Draws mapped through the layer (a copy; 1-d final-reward draws, or 2-d paths with one column per
        step and ``go`` the share of the time to go at each step: no shift at the last observation)."""
        x = np.array(draws, dtype=float, copy=True)
        d = self.delta(feats, fraction)
        if x.size == 0 or not np.any(d) or not np.isfinite(scale):
            return x
        if x.ndim == 1:
            return _transport(x, d * scale * float(np.asarray(go).ravel()[-1]), self.levels)
        g = np.broadcast_to(np.asarray(go, dtype=float).ravel(), (x.shape[1],))
        for t in np.flatnonzero(g > 0):
            x[:, t] = _transport(x[:, t], d * scale * g[t], self.levels)
        return x

    def save(self, path) -> None:
        from bayesgrpo.io.output import atomic_path

        with atomic_path(path) as tmp:
            Path(tmp).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path) -> IntervalLayer:
        p = path if hasattr(path, "read_text") else Path(path)
        return cls.model_validate(json.loads(p.read_text()))

    @classmethod
    def default(cls, config: str) -> IntervalLayer:
        """The packaged layer of a forecast configuration (``resources/intervals_<config>.json``), else none."""
        from importlib.resources import files

        res = files("bayesgrpo.resources").joinpath(f"intervals_{config}.json")
        return cls.load(res) if res.is_file() else cls()


def _transport(x: np.ndarray, shift: np.ndarray, levels) -> np.ndarray:
    """The monotone piecewise-linear map sending each quantile of ``x`` at ``levels`` to itself plus ``shift``."""
    q = np.quantile(x, levels)
    t = np.maximum.accumulate(q + shift)
    if np.all(np.diff(q) > 0):
        out = np.interp(x, q, t)
        out = np.where(x < q[0], x + (t[0] - q[0]), out)
        return np.where(x > q[-1], x + (t[-1] - q[-1]), out)
    return x + np.interp(np.argsort(np.argsort(x)) / max(1, x.size - 1), levels, shift)  # ties: shift by rank


def fit_layer(
    cases,
    *,
    rule: str = "none",
    n0: float = 10.0,
    widen_only: bool = True,
    levels=LEVELS,
    grid=GRID,
    name: str = "intervals",
    provenance=None,
) -> IntervalLayer:
    """Fit the layer to backtest cases of complete runs.

    Parameters
    ----------
    cases : DataFrame
        One row per case: ``source``, ``cutoff``, ``truth``, ``scale`` (the run's normalisation scale at
        the cutoff), the forecast's quantiles ``qNN`` at every level (``q05``, ``q10``, ``q25``,
        ``q75``, ``q90``, ``q95``) and the features the rule reads.
    rule : str
        A key of :data:`RULES`.
    n0 : float
        Pseudo-cases of the pooled value each group is shrunk toward.
    widen_only : bool
        Lower levels never move up, upper levels never down.
    """
    import pandas as pd

    df = pd.DataFrame(cases).reset_index(drop=True)
    fn = RULES[rule][1]
    grp = np.array([fn(f) for f in df[[c for c in df.columns if c in _RULE_INPUTS]].to_dict("records")])
    w = case_weights(df["source"])
    cut = df["cutoff"].to_numpy(float)
    y, sc = df["truth"].to_numpy(float), df["scale"].to_numpy(float)
    A = np.column_stack([(y - df[f"q{round(lv * 100):02d}"].to_numpy(float)) / sc for lv in levels])

    def table(sel) -> np.ndarray:
        out = np.zeros((len(grid), len(levels)))
        for i, f in enumerate(grid):
            m = sel & np.isclose(cut, f)
            if m.sum() >= 3:
                out[i] = [_wquantile(A[m, j], w[m], lv) for j, lv in enumerate(levels)]
        return out

    def clamp(a: np.ndarray) -> np.ndarray:
        if widen_only:
            lo = np.asarray(levels) < 0.5
            a = a.copy()
            a[:, lo] = np.minimum(a[:, lo], 0.0)
            a[:, ~lo] = np.maximum(a[:, ~lo], 0.0)
        return np.round(a, 5)

    everything = np.ones(len(df), dtype=bool)
    pooled = table(everything)
    shifts = {}
    for g in sorted(set(grp)):
        sel = grp == g
        n_g = np.array([(sel & np.isclose(cut, f)).sum() for f in grid], dtype=float)[:, None]
        raw = np.where(n_g >= 3, table(sel), pooled)
        shifts[str(g)] = clamp((n_g * raw + n0 * pooled) / (n_g + n0))
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), rule=rule, n0=n0, widen_only=widen_only,
                groups={str(g): int((grp == g).sum()) for g in sorted(set(grp))})  # fmt: skip
    return IntervalLayer(rule=rule, levels=tuple(levels), grid=tuple(grid),
                         shifts={g: tuple(map(tuple, a.tolist())) for g, a in shifts.items()},
                         pooled=tuple(map(tuple, clamp(pooled).tolist())), name=name, provenance=prov)  # fmt: skip
