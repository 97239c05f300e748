"""Scores of forecasts on the yardstick's cases: source-weighted first, per case beside, with 90%
source-bootstrap intervals; and the looks at the locked test.

Per case: CRPS of the final-reward draws divided by the run's 5-95% reward range (``range``), coverage of the
central 50 / 80 / 90% intervals, which side the truth falls on when it is outside the 80% interval.
Per cutoff and method:

* ``crps_sw`` -- the mean over sources of each source's mean (every source counts the same; the headline);
  ``crps_pc`` the mean over cases;
* ``ratio_sw`` / ``ratio_pc`` -- against the best peer at that cutoff (the lowest mean among the peers), with
  the 90% source-bootstrap interval of the source-weighted ratio (``ratio_lo``, ``ratio_hi``; the best peer
  chosen again in every replicate, the stricter reading);
* ``cov80_sw`` (``cov80_lo``, ``cov80_hi``), ``cov50_sw``, ``cov80_pc``, ``cov50_pc``;
* ``low_sources`` -- the share of sources whose cases are covered (80%) less than half the time.

The locked test is read only through :func:`look`, which appends to ``bench/results/yardstick/looks.json``
what was looked at, when, and on which commit.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Iterable

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.metrics import crps_sample
from bench.yardstick.store import LEDGERS

LOOKS = LEDGERS.parent / "looks.json"
B = 2000
LEVEL = 0.9


def case_scores(draws: np.ndarray, truth: float, rng_: float) -> dict:
    x = np.asarray(draws, float)
    x = x[np.isfinite(x)]
    q = np.quantile(x, [0.05, 0.1, 0.25, 0.75, 0.9, 0.95])
    return dict(
        ncrps=float(crps_sample(x, truth)) / rng_,
        cover50=float(q[2] <= truth <= q[3]),
        cover80=float(q[1] <= truth <= q[4]),
        cover90=float(q[0] <= truth <= q[5]),
        below80=float(truth < q[1]),
        above80=float(truth > q[4]),
        nwidth80=float(q[4] - q[1]) / rng_,
        pit=float(np.mean(x < truth) + 0.5 * np.mean(x == truth)),
        nerr=float(np.median(x) - truth) / rng_,
    )


def score(methods: dict[str, dict[str, np.ndarray]], cases: pd.DataFrame) -> pd.DataFrame:
    """One row per case x method with a forecast (cases without one are left out of that method)."""
    rows = []
    for name, d in methods.items():
        for c in cases.itertuples():
            x = d.get(c.key)
            if x is None or len(x) == 0:
                continue
            rows.append(dict(key=c.key, source=c.source, split=c.split, cutoff=c.cutoff, method=name,
                             **case_scores(x, c.truth, c.range)))  # fmt: skip
    return pd.DataFrame(rows)


def _sw(g: pd.DataFrame, col: str) -> float:
    return float(g.groupby("source")[col].mean().mean())


def summarize(
    S: pd.DataFrame, ours: Iterable[str], peers: Iterable[str], *, seed: int = 0, common: bool = True
) -> pd.DataFrame:
    """Per cutoff and method of ``ours``: the scores of the module docstring. ``common``: only the cases every
    method forecast (so that the ratios compare like with like)."""
    ours, peers = list(ours), list(peers)
    names = ours + peers
    S = S[S["method"].isin(names)]
    if common:
        n = S.groupby("key")["method"].nunique()
        S = S[S["key"].isin(n.index[n == len(names)])]
    out = []
    rng = np.random.default_rng(seed)
    for c, g in S.groupby("cutoff"):
        srcs = np.array(sorted(g["source"].unique()))
        # per-source means of every method, one matrix per metric: (source, method)
        piv = {m: g.pivot_table(index="source", columns="method", values=m, aggfunc="mean").reindex(srcs)
               for m in ("ncrps", "cover80", "cover50")}  # fmt: skip
        boot = rng.integers(0, len(srcs), size=(B, len(srcs)))
        pc_peer = {p: g.loc[g["method"] == p, "ncrps"].mean() for p in peers}
        sw_peer = {p: float(piv["ncrps"][p].mean()) for p in peers}
        best_sw = min(sw_peer, key=sw_peer.get)
        best_pc = min(pc_peer, key=pc_peer.get)
        P = piv["ncrps"][peers].to_numpy()
        best_boot = np.nanmin(np.nanmean(P[boot], axis=1), axis=1)
        for m in ours:
            gm = g[g["method"] == m]
            sw = float(piv["ncrps"][m].mean())
            rb = np.nanmean(piv["ncrps"][m].to_numpy()[boot], axis=1) / best_boot
            cb = np.nanmean(piv["cover80"][m].to_numpy()[boot], axis=1)
            lo_q, hi_q = (1 - LEVEL) / 2, (1 + LEVEL) / 2
            out.append(dict(
                cutoff=c, method=m, sources=len(srcs), cases=len(gm),
                crps_sw=sw, crps_pc=float(gm["ncrps"].mean()),
                best_peer_sw=best_sw, ratio_sw=sw / sw_peer[best_sw],
                ratio_lo=float(np.quantile(rb, lo_q)), ratio_hi=float(np.quantile(rb, hi_q)),
                best_peer_pc=best_pc, ratio_pc=float(gm["ncrps"].mean()) / pc_peer[best_pc],
                cov80_sw=float(piv["cover80"][m].mean()), cov80_lo=float(np.quantile(cb, lo_q)),
                cov80_hi=float(np.quantile(cb, hi_q)), cov50_sw=float(piv["cover50"][m].mean()),
                cov80_pc=float(gm["cover80"].mean()), cov50_pc=float(gm["cover50"].mean()),
                below80_sw=_sw(gm, "below80"), above80_sw=_sw(gm, "above80"),
                low_sources=float((piv["cover80"][m] < 0.5).mean()),
            ))  # fmt: skip
    return pd.DataFrame(out)


def targets(row) -> dict:
    """Issue 29's targets for one summary row."""
    c = row["cutoff"]
    crps_cap = 0.85 if c <= 0.3 else 0.95
    return dict(
        cov80=0.72 <= row["cov80_sw"] <= 0.88 and row["cov80_lo"] <= 0.8 <= row["cov80_hi"],
        cov80_pc=0.70 <= row["cov80_pc"] <= 0.90,
        cov50=0.40 <= row["cov50_sw"] <= 0.60,
        crps=row["ratio_sw"] <= crps_cap and row["ratio_hi"] < 1.0,
    )


def markdown(T: pd.DataFrame) -> str:
    head = ("| cutoff | method | sources / cases | nCRPS sw (pc) | best peer | ratio sw [90%] | ratio pc | cov80 sw "
            "[90%] | cov80 pc | cov50 sw (pc) | below / above 80% | sources cov80 < 0.5 | targets |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in T.itertuples():
        t = targets(r._asdict())
        tt = " ".join(f"{k}{'✓' if v else '✗'}" for k, v in t.items())
        lines.append(
            f"| {r.cutoff:g} | {r.method} | {r.sources} / {r.cases} | {r.crps_sw:.3f} ({r.crps_pc:.3f}) | "
            f"{r.best_peer_sw} | {r.ratio_sw:.2f} [{r.ratio_lo:.2f}, {r.ratio_hi:.2f}] | {r.ratio_pc:.2f} | "
            f"{r.cov80_sw:.2f} [{r.cov80_lo:.2f}, {r.cov80_hi:.2f}] | {r.cov80_pc:.2f} | {r.cov50_sw:.2f} "
            f"({r.cov50_pc:.2f}) | {r.below80_sw:.2f} / {r.above80_sw:.2f} | {r.low_sources:.2f} | {tt} |"
        )
    return "\n".join(lines)


def looks() -> list[dict]:
    return json.loads(LOOKS.read_text()) if LOOKS.exists() else []


def look(what: str) -> int:
    """Record one look at the locked test (what is reported, the commit); returns the count so far."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=LEDGERS.parent, check=False).stdout.strip()  # fmt: skip
    except OSError:
        commit = ""
    L = looks()
    L.append(dict(n=len(L) + 1, when=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), commit=commit, what=what))
    LOOKS.parent.mkdir(parents=True, exist_ok=True)
    LOOKS.write_text(json.dumps(L, indent=1) + "\n")
    return len(L)
