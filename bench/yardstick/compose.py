"""The methods of the yardstick read back from the ledgers, and compositions of them (mixtures, layers).

:func:`load` gives the cases (one split or both) and a dict ``method -> {case key: draws}``:

* ``peer:<name>`` -- the package's peers (``run_peers``): last value, exponential, ScaleRL sigmoid, pow3;
* ``fam:<name>`` -- each curve family (``run_curves``), ``bic_ensemble`` their BIC mixture;
* ``<kind>`` -- bayesgrpo's kinds (``run_kinds``), priors fitted on the selection sources other than the case's.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from bench.yardstick import cases as C
from bench.yardstick import curves, data, store

PEER_NAMES = ("last_value", "exponential", "scalerl", "pow3")


def load(split: str | None = "selection", kinds=("oscillator", "degeneracy")):
    rs = data.load(split=split)
    cs = C.build(rs)
    cf = C.frame(cs)
    keys = set(cf["key"])
    M: dict[str, dict[str, np.ndarray]] = {}
    d, _ = store.read("peers")
    for k, v in d.items():
        p, key = k.split("|", 1)
        if key in keys:
            M.setdefault(f"peer:{p}", {})[key] = v
    d, f = store.read("curves")
    fam_draws: dict[str, dict[str, np.ndarray]] = {}
    for k, v in d.items():
        fam, key = k.split("|", 1)
        if key in keys:
            fam_draws.setdefault(fam, {})[key] = v
            M.setdefault(f"fam:{fam}", {})[key] = v
    ev = f[f["key"].isin(keys) & (f["family"] != "*")] if len(f) else f
    M["bic_ensemble"] = bic_mix(fam_draws, ev)
    for k in kinds:
        d, _ = store.read(k)
        M[k] = {key: v for key, v in d.items() if key in keys}
    return cf, cs, M, ev


def bic_mix(fam_draws, ev: pd.DataFrame, n: int = store.N_DRAWS) -> dict[str, np.ndarray]:
    out = {}
    for key, g in ev.groupby("key"):
        ff = {r.family: curves.FamilyForecast(r.family, fam_draws.get(r.family, {}).get(key, np.empty(0)), r.bic,
                                              r.block, bool(r.ok) and key in fam_draws.get(r.family, {}))
              for r in g.itertuples()}  # fmt: skip
        w = curves.bic_weights(ff)
        if w:
            out[key] = curves.mix(ff, w, n, np.random.default_rng(zlib.crc32(key.encode())))
    return out


def linear_pool(parts: list[dict[str, np.ndarray]], weights, n: int = store.N_DRAWS, seed: int = 0):
    """Mixture of methods with fixed weights (cases every part forecast)."""
    keys = set.intersection(*(set(p) for p in parts))
    w = np.asarray(weights, float) / np.sum(weights)
    out = {}
    rng = np.random.default_rng(seed)
    for k in keys:
        cnt = rng.multinomial(n, w)
        out[k] = np.concatenate([rng.choice(p[k], size=c) for p, c in zip(parts, cnt, strict=True) if c])
    return out


def evidence_table(keys, kinds=("oscillator", "degeneracy")) -> pd.DataFrame:
    """Block evidence (raw reward units) per case key and component: the ``kinds``' Laplace block evidence and the
    curve families' block score, columns ``key``, ``component`` (``oscillator``, ``fam:<name>``), ``ev``."""
    rows = []
    for k in kinds:
        _, f = store.read(f"{k}_evidence")
        if len(f):
            rows.append(pd.DataFrame(dict(key=f["key"], component=k, ev=f["evidence_raw"])))
    _, f = store.read("curves")
    f = f[f["family"] != "*"]
    rows.append(pd.DataFrame(dict(key=f["key"], component="fam:" + f["family"], ev=f["block"])))
    E = pd.concat(rows, ignore_index=True)
    return E[E["key"].isin(set(keys))]


def bma(
    M: dict,
    E: pd.DataFrame,
    components,
    *,
    beta: float = 1.0,
    prior: dict | None = None,
    fallback: str = "oscillator",
    n: int = store.N_DRAWS,
) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Per case, the mixture of ``components`` weighted by ``prior[c] exp(beta ev_c)`` (components without a
    finite evidence or draws left out; none left: ``fallback``'s draws). Returns the draws and the weights."""
    P = E[E["component"].isin(components)].pivot_table(index="key", columns="component", values="ev", aggfunc="first")
    out, W = {}, []
    for key in M[fallback]:
        ev = P.loc[key] if key in P.index else pd.Series(dtype=float)
        names = [c for c in components if c in ev.index and np.isfinite(ev[c]) and key in M.get(c, {})]
        if not names:
            out[key] = M[fallback][key]
            continue
        lw = np.array([beta * ev[c] + np.log((prior or {}).get(c, 1.0)) for c in names])
        w = np.exp(lw - lw.max())
        w /= w.sum()
        W.append(dict(key=key, **dict(zip(names, w, strict=True))))
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        cnt = rng.multinomial(n, w)
        out[key] = np.concatenate([rng.choice(M[c][key], size=k) for c, k in zip(names, cnt, strict=True) if k])
    return out, pd.DataFrame(W)
