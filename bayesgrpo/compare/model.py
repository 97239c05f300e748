"""Comparison results: :func:`compare_runs` fits the hierarchical comparison model
(:mod:`bayesgrpo.compare.graph`, whose docstring states the model) of every kind asked for to complete
runs and turns the posteriors into the tests of physics.md section 8 (:class:`CompareResult`: contrasts,
the G exponent, timescale vs model size, PSIS-LOO with Pareto k, sampler health)."""

from __future__ import annotations

import functools
import itertools
import logging
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesgrpo.compare.graph import (
    COMPARE_KINDS,
    CONTRAST_COLUMNS,
    HEALTH_VARS,
    CompareArrays,
    build_compare_model,
    pointwise_loglik,
    prepare_compare,
)
from bayesgrpo.conventions import CI_PROB, HEADLINE, interval_bounds, interval_label
from bayesgrpo.errors import SamplerWarning
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.kinds import default_prior
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.schema import RunSet

log = logging.getLogger("bayesgrpo")

__all__ = ["compare_runs", "CompareResult", "CompareArrays", "build_compare_model", "prepare_compare",
           "pointwise_loglik", "CONTRAST_COLUMNS", "COMPARE_KINDS"]  # fmt: skip


# ----------------------------------------------------------------------------------- results
@dataclass
class CompareResult:
    """Posterior comparison of families / group sizes (see :func:`compare_runs`).

    Attributes
    ----------
    contrasts : DataFrame
        Tidy table (:data:`CONTRAST_COLUMNS`) of the primary model's posterior contrasts between
        families and between factor levels (plateau, log timescale, log stiffness, log noise temperature),
        plus ``alpha`` and the G-exponent ``b``; 90% equal-tailed intervals (``ci_prob=0.9``).
    loo : DataFrame
        PSIS-LOO (leave-one-run-out) comparison of the fitted model kinds (``az.compare``) with Pareto-k counts.
    pareto_k : DataFrame
        Pareto k per run and model kind.
    tau_by_size : DataFrame
        Posterior of the run-averaged timescale per (family, model size).
    health : DataFrame
        Sampler health per model kind: max r_hat, min bulk/tail ESS, divergences, seconds.
    fits : dict
        model kind -> DataTree (posterior, sample_stats, log_likelihood with dims (chain, draw, run)).
    primary : str
        Model kind the contrasts come from.
    """

    contrasts: pd.DataFrame
    loo: pd.DataFrame
    pareto_k: pd.DataFrame
    tau_by_size: pd.DataFrame
    health: pd.DataFrame
    fits: dict
    arrays: CompareArrays
    primary: str
    by: tuple
    free_g_exponent: bool
    loo_objects: dict = field(default_factory=dict, repr=False)

    def caveats(self) -> list[str]:
        """What a reader must know before trusting the result (one sentence each)."""
        out = []
        n = len(self.arrays.run_ids)
        if n == 1:
            out.append("compare: only one run, so every contrast is its prior; compare needs several runs")
        fam_levels = self.arrays.levels[self.arrays.family_factor]
        if len(fam_levels) == 1:
            out.append(
                f"compare: every run is in {self.arrays.family_factor} {fam_levels[0]!r} "
                f"(no {self.arrays.family_factor!r} metadata?), so there are no family contrasts"
            )
        for c, lv in self.arrays.levels.items():
            if c != self.arrays.family_factor and len(lv) == 1:
                out.append(f"compare: every run has {c} = {lv[0]}, so there is no {c} contrast")
        out += self._design_caveats()
        if len(self.pareto_k):
            ks = self.pareto_k.drop(columns=["run_id"])
            bad = {m: int((ks[m] > 1).sum()) for m in ks.columns if (ks[m] > 1).any()}
            if bad:
                txt = ", ".join(f"{m}: {k} of {len(ks)} runs" for m, k in bad.items())
                what = "the LOO ranking and weights are" if len(ks.columns) > 1 else "its elpd_loo is"
                out.append(f"compare: PSIS-LOO rests on Pareto k > 1 for {txt}; {what} unreliable")
        return out

    def _design_caveats(self) -> list[str]:
        """What the runs' design lets the answer say: factors whose levels are single runs, factors that move together
        (each level of one comes with one level of the other), and factors whose levels never share a reward scale."""
        arr, out = self.arrays, []
        codes = {arr.family_factor: arr.family_idx, **arr.factor_idx}
        many = {c: k for c, k in codes.items() if len(set(k.tolist())) > 1}
        known = {c: np.array([arr.levels[c][j] != "unknown" for j in k]) for c, k in many.items()}
        single = [c for c, k in many.items() if known[c].sum() > 1 and np.bincount(k[known[c]]).max() == 1]
        if single:
            out.append(f"compare: every {' and every '.join(single)} level has one run, so its plateau and P(best) rest "
                       "on single runs (their task, source and seed go with the level)")  # fmt: skip
        n_sc = len(set(arr.scale_groups))
        apart = [c for c, k in many.items() if n_sc > 1
                 and (pd.Series(k).groupby(list(arr.scale_groups)).nunique() == 1).all()]  # fmt: skip
        if apart:
            out.append(f"compare: the runs are on {n_sc} reward scales and none holds two levels of "
                       f"{' or '.join(apart)}, so their plateaus compare gains in each scale's own units (its range), "
                       "not rewards")  # fmt: skip
        names = list(many)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                both = known[a] & known[b]
                pairs = set(zip(many[a][both].tolist(), many[b][both].tolist(), strict=True))
                if len(pairs) > 1 and len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs}):
                    out.append(f"compare: {a} and {b} move together (each known {a} comes with one {b}), so their "
                               "answers compare the same runs twice")  # fmt: skip
        return out

    def answers(self) -> list[str]:
        """One sentence per factor a user can act on: the known level most likely to have the highest plateau and its
        margin over the runner-up -- "group_size: 8 is the best bet (P(best) 0.62 of 3 levels); over 4, the next:
        its runs' mean plateau +0.06 (90% interval -0.01 to 0.12), P(8 higher) = 0.91". The same draws as :meth:`levels` (the mean
        plateau over a level's runs, in the comparison's reward units); ``unknown`` levels are never named."""
        lv, draws = self._levels()
        out = []
        for factor, g in lv.groupby("factor", sort=False):
            g = g[g["p_best"].notna()].sort_values(["p_best", "plateau"], ascending=False)
            if len(g) < 2:
                continue
            best, nxt = g.iloc[0], g.iloc[1]
            d = draws[factor][best["level"]] - draws[factor][nxt["level"]]
            lo, hi = np.quantile(d, [(1 - CI_PROB) / 2, (1 + CI_PROB) / 2])
            out.append(f"{factor}: {best['level']} is the best bet (P(best) {best['p_best']:.2f} of {len(g)} levels); "
                       f"over {nxt['level']}, the next: its runs' mean plateau {np.mean(d):+.3g} ({interval_label(CI_PROB)} interval "
                       f"{lo:.3g} to {hi:.3g}), P({best['level']} higher) = {np.mean(d > 0):.2f}")  # fmt: skip
        return out

    def levels(self) -> pd.DataFrame:
        """The short answer, per factor level (the family factor and each other factor of ``by`` with at least two
        levels): the mean over the level's runs of the run-level plateau, timescale (steps) and noise (``sigma_p``)
        of the primary fit -- posterior median and :data:`~bayesgrpo.conventions.HEADLINE` (80%) interval -- and ``p_best``, the posterior probability that this
        level's mean plateau is the highest of the factor's known levels (``unknown``: no P(best))."""
        return self._levels()[0]

    def _levels(self) -> tuple[pd.DataFrame, dict]:
        """:meth:`levels` and, per factor and level, the draws of its mean plateau."""
        post = sampling.as_dataset(self.fits[self.primary]["posterior"])
        arr = self.arrays
        per = {q: post[v].transpose("chain", "draw", "run").to_numpy().reshape(-1, post.sizes["run"])
               for q, v in (("plateau", "r_star"), ("timescale", "tau"), ("noise", "sigma_p"))}  # fmt: skip
        rows, draws = [], {}
        for c, codes in {arr.family_factor: arr.family_idx, **arr.factor_idx}.items():
            present = [k for k in range(len(arr.levels[c])) if np.any(codes == k)]
            if len(present) < 2:
                continue
            means = {k: {q: x[:, codes == k].mean(axis=1) for q, x in per.items()} for k in present}
            draws[c] = {arr.levels[c][k]: means[k]["plateau"] for k in present}
            known = [k for k in present if str(arr.levels[c][k]) != "unknown"]
            best = np.argmax(np.stack([means[k]["plateau"] for k in known]), axis=0) if len(known) > 1 else None
            for k in present:
                row = {"factor": c, "level": arr.levels[c][k], "runs": int(np.sum(codes == k))}
                for q, d in means[k].items():
                    row[q] = float(np.median(d))  # a timescale's posterior is skewed: its mean can lie past 90%
                    row[f"{q}_lo"], row[f"{q}_hi"] = (float(v) for v in np.quantile(d, interval_bounds(HEADLINE)))
                p = float(np.mean(best == known.index(k))) if best is not None and k in known else np.nan
                rows.append({**row, "p_best": p})
        return pd.DataFrame(rows), draws

    def g_exponent(self) -> dict:
        """The noise-temperature exponent b of the primary fit (mean, sd, 90% interval, P(b>0))."""
        row = self.contrasts.loc[self.contrasts["quantity"] == "g_exponent_b"]
        return row.iloc[0].to_dict() if len(row) else {}

    def summary_markdown(self) -> str:
        """Markdown report: the answers, b vs 1, the levels, contrasts, tau by size, LOO with Pareto k, health."""
        lines = [f"# bayesgrpo compare — {len(self.arrays.run_ids)} runs, by {', '.join(self.by)}", ""]
        lines += [f"- **{s}**" for s in self.answers()]
        b = self.g_exponent()
        if b:
            kind = "free (prior N(1, 1))" if self.free_g_exponent else "fixed at 1"
            lines += [
                f"- noise-temperature G-exponent b ({kind}): **{b['mean']:.2f}** (90% interval {b['ci_low']:.2f} to {b['ci_high']:.2f}); "
                f"predicted 1 -> {'covered' if b['covers_predicted'] else 'NOT covered'}",
            ]
        al = self.contrasts.loc[self.contrasts["quantity"] == "alpha"]
        if len(al):
            a = al.iloc[0]
            lines.append(
                f"- curvature-scaling exponent alpha (tau ~ N^alpha): {a['mean']:.2f} (90% {a['ci_low']:.2f} to {a['ci_high']:.2f}), P(alpha>0) = {a['p_gt_0']:.2f}"
            )
        lines.append(
            f"- reward scales: {len(set(self.arrays.scale_groups))} normalisation group(s); primary model for contrasts: `{self.primary}`"
        )
        lines += ["", f"## Per level (means over each level's runs; {interval_label(HEADLINE)} intervals; P(best) of the "
                  "plateau)", "",
                  _md(self.levels())]  # fmt: skip
        lines += ["", "## Contrasts (90% equal-tailed intervals)", "",
                  "The model's level effects (family means; factor effects with the other factors held fixed), not "
                  "the means over each level's runs above: where factors move together or a level has one run, the "
                  "two can disagree.", "", _md(self.contrasts.drop(columns=["kind"]))]  # fmt: skip
        if len(self.tau_by_size):
            lines += ["", "## Timescale vs model size", "", _md(self.tau_by_size)]
        lines += ["", "## PSIS-LOO, leave-one-run-out", "", _md(self.loo)]
        lines += ["", "## Sampler health", "", _md(self.health)]
        return "\n".join(lines) + "\n"


def _md(df: pd.DataFrame) -> str:
    def f(v):
        if v is None or v is pd.NA:  # no prediction to cover: an empty cell, not "None"
            return ""
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v):
                return ""
            return f"{v:.3g}"
        return str(v)

    cols = list(df.columns)
    out = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        out.append("| " + " | ".join(f(v) for v in r) + " |")
    return "\n".join(out)


def _summ(draws: dict, *, predicted: dict | None = None) -> pd.DataFrame:
    """Summarise named draw arrays (chain, draw) with az.summary(ci_prob=0.9)."""
    import arviz as az
    import xarray as xr

    names = list(draws)
    stack = np.stack([draws[k] for k in names], axis=-1)
    ds = xr.Dataset({"c": (("chain", "draw", "contrast"), stack)}, coords={"contrast": np.arange(len(names))})
    s = az.summary(ds, ci_prob=CI_PROB, ci_kind="eti", round_to="none", kind="stats")
    lo = next(c for c in s.columns if c.endswith("_lb"))
    hi = next(c for c in s.columns if c.endswith("_ub"))
    res = pd.DataFrame({
        "mean": s["mean"].to_numpy(dtype=float), "sd": s["sd"].to_numpy(dtype=float),
        "ci_low": s[lo].to_numpy(dtype=float), "ci_high": s[hi].to_numpy(dtype=float),
        "p_gt_0": [float(np.mean(draws[k] > 0)) for k in names],
    })  # fmt: skip
    res.index = names
    return res


def _contrasts(arr: CompareArrays, post, kind: str) -> pd.DataFrame:
    """Tidy contrast table of one fit."""
    post = sampling.as_dataset(post)
    rows, draws = [], {}
    fam = arr.family_factor
    fam_levels = arr.levels[fam]
    run_fac = {fam: arr.family_idx, **arr.factor_idx}

    def add(quantity, factor, la, lb, d, pred):
        key = f"{quantity}|{factor}|{la}|{lb}"
        draws[key] = d
        rows.append((key, quantity, factor, la, lb, pred))

    # family-level parameter contrasts
    pars = {"plateau": "r_star_family", "log_tau": "log_tau_family", "log_noise_temp": "log_temp_family"}
    for i, j in itertools.combinations(range(len(fam_levels)), 2):
        for q, v in pars.items():
            d = post[v].isel(family=i).to_numpy() - post[v].isel(family=j).to_numpy()
            add(q, fam, fam_levels[i], fam_levels[j], d, np.nan)
    # factor-level effect contrasts (G: predicted 0 for plateau / timescale, -(log Ga - log Gb) for noise)
    b = post["b"].to_numpy()
    b = np.broadcast_to(b, post["r_star"].isel(run=0).shape)
    for c, levels in ((c, arr.levels[c]) for c in arr.factor_idx):
        if len(levels) < 2:
            continue
        is_g = c == "group_size"
        for i, j in itertools.combinations(range(len(levels)), 2):
            for q, v in (("plateau", f"r_star_{c}"), ("log_tau", f"log_tau_{c}")):
                d = post[v].isel({f"{c}_level": i}).to_numpy() - post[v].isel({f"{c}_level": j}).to_numpy()
                add(q, c, levels[i], levels[j], d, 0.0 if is_g else np.nan)
            if is_g:
                try:
                    lg = math.log(float(levels[i])) - math.log(float(levels[j]))
                except ValueError:
                    continue
                add("log_noise_temp", c, levels[i], levels[j], -b * lg, -lg)
    # stiffness a = (1 - mu)/tau: run-averaged log a per level (includes per-run effects)
    log_a = np.log(post["a"].to_numpy())  # (chain, draw, run)
    for c, codes in run_fac.items():
        levels = arr.levels[c]
        present = [k for k in range(len(levels)) if np.any(codes == k)]
        for i, j in itertools.combinations(present, 2):
            d = log_a[..., codes == i].mean(-1) - log_a[..., codes == j].mean(-1)
            add("log_stiffness", c, levels[i], levels[j], d, 0.0 if c == "group_size" else np.nan)
    if "alpha" in post:
        add("alpha", "log_size", "slope", "", post["alpha"].to_numpy(), np.nan)
    add("g_exponent_b", "group_size", "b", "", np.asarray(b, dtype=float).copy(), 1.0)
    s = _summ(draws)
    out = []
    for key, q, fct, la, lb, pred in rows:
        r = s.loc[key]
        cov = bool(r["ci_low"] <= pred <= r["ci_high"]) if np.isfinite(pred) else None
        out.append([q, fct, la, lb, r["mean"], r["sd"], r["ci_low"], r["ci_high"], r["p_gt_0"], pred, cov, kind])
    df = pd.DataFrame(out, columns=CONTRAST_COLUMNS)
    if (
        not np.isfinite(df.loc[df["quantity"] == "g_exponent_b", "sd"]).all()
        or float(df.loc[df["quantity"] == "g_exponent_b", "sd"].iloc[0]) == 0.0
    ):
        df.loc[df["quantity"] == "g_exponent_b", ["p_gt_0"]] = 1.0
    return df


def _tau_by_size(arr: CompareArrays, post, runs_meta: pd.DataFrame) -> pd.DataFrame:
    post = sampling.as_dataset(post)
    size = pd.to_numeric(
        runs_meta.reindex(list(arr.run_ids)).get("params_b", pd.Series(np.nan, index=list(arr.run_ids))),
        errors="coerce",
    ).to_numpy()
    log_tau = np.log(post["tau"].to_numpy())
    rows = []
    fam_levels = arr.levels[arr.family_factor]
    for f in range(len(fam_levels)):
        for sz in sorted({s for s in size[arr.family_idx == f] if np.isfinite(s)}):
            sel = (arr.family_idx == f) & (size == sz)
            d = np.exp(log_tau[..., sel].mean(-1)).reshape(-1)
            lo, hi = interval_bounds(CI_PROB)
            q = np.quantile(d, [lo, 0.5, hi])
            rows.append([fam_levels[f], float(sz), int(sel.sum()), float(d.mean()), *map(float, q)])
    return pd.DataFrame(rows, columns=["family", "params_b", "n_runs", "tau_mean", "tau_q05", "tau_q50", "tau_q95"])


def _health(idata, kind: str, seconds: float) -> dict:
    import arviz as az

    post = sampling.posterior_dataset(idata)
    names = [
        v
        for v in (*HEALTH_VARS, "b", "alpha", "r_star_family", "log_tau_family", "log_temp_family")
        if v in post and post[v].std() > 0
    ]
    h = sampling.health(post, sampling.posterior_dataset(idata, "sample_stats"), var_names=names, dim=None)
    et = az.ess(post[names], method="tail")
    return {
        "kind": kind,
        "r_hat_max": h["r_hat_max"],
        "ess_bulk_min": h["ess_min"],
        "ess_tail_min": float(min(float(et[v].min()) for v in names)),
        "divergences": h["divergences"],
        "draws": int(post.sizes["draw"]),
        "chains": int(post.sizes["chain"]),
        "seconds": round(seconds, 1),
    }


def compare_runs(
    runs: RunSet,
    *,
    by=("family", "group_size"),
    kinds=None,
    free_g_exponent: bool = True,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
    scale: str = "auto",
    max_steps: int | None = None,
    primary: str | None = None,
    prior: PopulationPrior | None = None,
) -> CompareResult:
    """Fit the hierarchical comparison model(s) to complete runs and tabulate the physics tests.

    Parameters
    ----------
    runs : RunSet
        Complete runs (every logged point is used; no forecasting).
    by : tuple of str
        Metadata columns: ``by[0]`` is the family (family-level means of plateau, timescale and noise
        temperature), the others get categorical effects on plateau and log timescale
        (``group_size`` additionally enters the noise temperature through ``G^-b``).
    kinds : tuple of {"oscillator", "saturation", "scaling"}, optional
        Model kinds to fit; two or more are ranked by PSIS-LOO. Default: the one the contrasts come from,
        ``scaling`` when the runs' model sizes vary, else ``oscillator`` (each kind is a compile and a fit of its
        own, ~20-30 s on 2 cores: the answer first, the comparison of kinds on request).
    free_g_exponent : bool
        ``b`` free with prior N(1, 1) (test the 1/G law) or fixed at 1.
    sampler : SamplerConfig, optional
        NUTS settings (nutpie, numba backend); ``seed`` overrides ``sampler.seed``.
    scale : str
        ``"auto"``, ``"run"``, ``"shared"`` or a metadata column naming runs that share a reward scale.
    max_steps : int, optional
        Use only steps <= max_steps of each run (speed).
    primary : str, optional
        Model kind the contrast table comes from; default ``scaling`` if fitted and sizes vary, else the first.
    prior : PopulationPrior, optional
        Scales of the per-run building blocks (default: the packaged prior).

    Returns
    -------
    CompareResult
    """
    import arviz as az
    import xarray as xr

    sampler = sampler or SamplerConfig()
    prior = prior or default_prior()
    by = tuple(by)
    arr = prepare_compare(runs, by=by, scale=scale, max_steps=max_steps)
    sizes_vary = len(set(np.round(arr.log_size, 6))) > 1
    kinds = tuple(kinds) if kinds is not None else (primary or ("scaling" if sizes_vary else "oscillator"),)
    for k in kinds:
        if k not in COMPARE_KINDS:
            raise ValueError(f"unknown model kind {k!r}; choose from {', '.join(COMPARE_KINDS)}")
    fits, health, loos = {}, [], {}
    for i, kind in enumerate(kinds):
        t0 = time.perf_counter()
        # the comparison graph folds the runs into its structure (factor codes), so it is not cached
        compiled = sampling.compile_model(
            None,
            functools.partial(build_compare_model, arr, kind=kind, free_g_exponent=free_g_exponent, prior=prior),
            backend=sampler.backend,
        )
        idata = sampling.nuts(compiled, sampler=sampler, seed=seed + 1000 * i)
        dt = time.perf_counter() - t0
        post = sampling.posterior_dataset(idata).assign_coords(run=list(arr.run_ids))
        ll = pointwise_loglik(arr, post)
        ll_ds = xr.Dataset(
            {"reward": (("chain", "draw", "run"), ll)},
            coords={"chain": post["chain"], "draw": post["draw"], "run": list(arr.run_ids)},
        )
        tree = _tree(post, sampling.posterior_dataset(idata, "sample_stats"), ll_ds)
        fits[kind] = tree
        h = _health(idata, kind, dt)
        health.append(h)
        if h["divergences"] > 0 or h["r_hat_max"] > 1.05:
            warnings.warn(
                f"compare [{kind}]: {h['divergences']} divergences, max r_hat {h['r_hat_max']:.3f}",
                SamplerWarning,
                stacklevel=2,
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loos[kind] = az.loo(tree, pointwise=True, var_name="reward")
    if primary is None:
        primary = "scaling" if ("scaling" in kinds and sizes_vary) else kinds[0]
    contrasts = _contrasts(arr, fits[primary]["posterior"], primary)
    loo_df, k_df = _loo_table(loos, arr)
    tau_size = _tau_by_size(arr, fits[primary]["posterior"], runs.meta)
    return CompareResult(
        contrasts=contrasts, loo=loo_df, pareto_k=k_df, tau_by_size=tau_size, health=pd.DataFrame(health),
        fits=fits, arrays=arr, primary=primary, by=by, free_g_exponent=free_g_exponent, loo_objects=loos,
    )  # fmt: skip


def _tree(post, stats, ll):
    import xarray as xr

    return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats, "log_likelihood": ll})


def _loo_table(loos: dict, arr: CompareArrays) -> tuple[pd.DataFrame, pd.DataFrame]:
    import arviz as az

    kcols = {}
    rows = []
    for kind, lo in loos.items():
        k = np.asarray(lo.pareto_k).reshape(-1)
        kcols[kind] = k
        rows.append({
            "kind": kind, "elpd_loo": float(lo.elpd), "se": float(lo.se), "p_loo": float(lo.p),
            "k_good(<=0.7)": int(np.sum(k <= 0.7)), "k_bad(0.7-1]": int(np.sum((k > 0.7) & (k <= 1))),
            "k_very_bad(>1)": int(np.sum(k > 1)), "k_max": float(np.max(k)) if np.isfinite(k).any() else float("nan"),
        })  # fmt: skip
    df = pd.DataFrame(rows).set_index("kind")
    if len(loos) > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmp = az.compare(loos, round_to="none")
        for c in ("rank", "dse", "weight"):
            if c in cmp.columns:
                df[c] = pd.to_numeric(cmp[c].reindex(df.index), errors="coerce")
        df["elpd_diff"] = df["elpd_loo"] - df["elpd_loo"].max()
        df = df.sort_values("elpd_loo", ascending=False)
        df["rank"] = np.arange(len(df))
    else:
        df["rank"] = 0
    df = df.reset_index()
    k_df = pd.DataFrame(kcols, index=list(arr.run_ids))
    k_df.index.name = "run_id"
    return df, k_df.reset_index()
