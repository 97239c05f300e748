"""Tests of bayesgrpo.compare (hierarchical family / group-size comparison).

Fast tests replace NUTS by draws from the prior (the ``prior_sampler`` fixture); the recovery test of the
G-exponent samples for real (``@pytest.mark.slow``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.compare import model as C
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.kalman import filter_numpy
from bayesgrpo.models.kalman_op import ar2_loglik_grad
from bayesgrpo.schema import RunSet
from bench.physics_reference import simulate


def _sim_runs(
    groups=(2, 8), families=("fa", "fb"), seeds=(0,), n_steps=60, temp=4e-4, sigma_m=0.02, a=0.05, sizes=None, b=1.0
):
    """Simulated complete runs with process-noise variance temp * G^-b (rewards in [0, 1])."""
    rows, meta = [], []
    k = 0
    for fi, fam in enumerate(families):
        for g in groups:
            for s in seeds:
                rid = f"{fam}-G{g}-s{s}"
                sp = np.sqrt(temp * g ** (-b))
                sim = simulate(
                    n_steps,
                    r0=0.2,
                    r_star=0.6 + 0.05 * fi,
                    a=a,
                    momentum=0.0,
                    sigma_p=sp,
                    sigma_m=sigma_m,
                    seed=1000 + k,
                )
                k += 1
                rows.append(
                    pd.DataFrame({"run_id": rid, "step": np.arange(n_steps), "reward": np.clip(sim.observed, 0, 1)})
                )
                size = (sizes or {}).get(fam, 1.0)
                meta.append(
                    {
                        "run_id": rid,
                        "family": fam,
                        "group_size": g,
                        "params_b": size,
                        "beta1": 0.0,
                        "max_steps": n_steps,
                    }
                )
    return RunSet.from_frames(pd.concat(rows, ignore_index=True), pd.DataFrame(meta))


@pytest.fixture
def runs():
    return _sim_runs()


def test_prepare_shared_scale_and_factors(runs):
    arr = C.prepare_compare(runs)
    assert arr.y.shape == (60, 4)
    assert set(arr.scale_groups) == {"all"}  # rewards in [0, 1] -> one shared scale
    assert np.allclose(arr.scale, arr.scale[0]) and np.allclose(arr.loc, arr.loc[0])
    assert arr.levels == {"family": ["fa", "fb"], "group_size": ["2", "8"]}
    assert np.isclose(arr.g_ref, 4.0)
    np.testing.assert_allclose(np.exp(arr.log_g) * arr.g_ref, [2, 8, 2, 8])
    per_run = C.prepare_compare(runs, scale="run")
    assert len(set(per_run.scale_groups)) == 4


@pytest.mark.parametrize("kind", C.COMPARE_KINDS)
def test_model_structure(runs, kind):
    arr = C.prepare_compare(runs)
    model = C.build_compare_model(arr, kind=kind)
    names = set(model.named_vars)
    for v in ("r_star", "tau", "a", "mu", "sigma_p", "sigma_m", "r0", "b", "r_star_family", "log_tau_family",
              "log_temp_family", "r_star_group_size", "log_tau_group_size"):  # fmt: skip
        assert v in names, v
    assert ("alpha" in names) == (kind == "scaling")
    dims = model.named_vars_to_dims
    for v in ("r_star", "tau", "a", "mu", "sigma_p", "sigma_m", "r0", "z_r_star"):
        assert dims[v] == ("run",)
    for v in ("r_star_family", "log_tau_family", "log_temp_family"):
        assert dims[v] == ("family",)
    assert dims["r_star_group_size"] == ("group_size_level",)
    # every non-scalar free / deterministic variable carries dims
    for rv in [*model.free_RVs, *model.deterministics]:
        if rv.ndim > 0:
            assert rv.name in dims, rv.name
    lp = model.point_logps()
    assert all(np.isfinite(v) for v in lp.values()), lp
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_fixed_g_exponent(runs):
    arr = C.prepare_compare(runs)
    model = C.build_compare_model(arr, kind="saturation", free_g_exponent=False)
    assert "b" not in [rv.name for rv in model.free_RVs]
    assert "b" in model.named_vars


def test_pointwise_loglik_equals_filter_numpy(runs, prior_sampler):
    # the default fits one kind, the one the contrasts come from: oscillator when the model sizes do not vary
    res = C.compare_runs(runs, sampler=SamplerConfig(draws=20, tune=10, chains=2), seed=1)
    assert list(res.fits) == ["oscillator"] and res.primary == "oscillator"
    assert list(res.loo["kind"]) == ["oscillator"] and list(res.health["kind"]) == ["oscillator"]
    tree = res.fits["oscillator"]
    ll = tree["log_likelihood"]["reward"]
    assert ll.dims == ("chain", "draw", "run") and ll.shape == (2, 20, 4)
    post = tree["posterior"].to_dataset()
    arr = res.arrays
    for j, rid in enumerate(arr.run_ids):
        for c, d in ((0, 0), (1, 7)):
            p = {
                k: float(post[k].sel(run=rid, chain=c).isel(draw=d))
                for k in ("r0", "r_star", "a", "mu", "sigma_p", "sigma_m")
            }
            T = int(arr.n_steps[j])
            ref, _, _ = filter_numpy(arr.y[:T, j], arr.mask[:T, j], **p)
            assert np.isclose(float(ll.sel(run=rid, chain=c).isel(draw=d)), float(ref), rtol=1e-10)
            # and the compiled Op used in the model agrees with the numpy reference
            one = lambda v: np.array([v])  # noqa: E731
            op, _ = ar2_loglik_grad(np.ascontiguousarray(arr.y[:T, j : j + 1]), np.ascontiguousarray(arr.mask[:T, j : j + 1]),
                                    one(p["r0"]), one(p["r_star"]), one(p["a"]), one(p["mu"]), one(p["sigma_p"] ** 2), one(p["sigma_m"] ** 2))  # fmt: skip
            assert np.isclose(op[0], float(ref), rtol=1e-8)


def test_contrast_table_loo_and_outputs(runs, prior_sampler, tmp_path):
    res = C.compare_runs(runs, kinds=C.COMPARE_KINDS, sampler=SamplerConfig(draws=30, tune=10, chains=2), seed=2)
    df = res.contrasts
    assert list(df.columns) == C.CONTRAST_COLUMNS
    # family pair x 3 quantities + G pair x (plateau, log_tau, log_noise_temp) + stiffness x 2 + b = 9
    assert res.primary == "oscillator"  # sizes do not vary -> no scaling primary
    q = df.groupby(["quantity", "factor"]).size().to_dict()
    assert q[("plateau", "family")] == 1 and q[("plateau", "group_size")] == 1
    assert q[("log_noise_temp", "group_size")] == 1 and q[("log_stiffness", "group_size")] == 1
    assert q[("g_exponent_b", "group_size")] == 1
    assert len(df) == 9
    assert (df["ci_low"] <= df["mean"]).all() and (df["mean"] <= df["ci_high"]).all()
    assert df["p_gt_0"].between(0, 1).all()
    # the answer first: one sentence per factor, the higher level first, its P above one half
    ans = res.answers()
    assert [a.split(":")[0] for a in ans] == ["family", "group_size"]
    for a in ans:
        p = float(a.rsplit("= ", 1)[1])
        assert 0.5 <= p <= 1.0 and " over " in a and "plateau " in a and "90% interval" in a
    assert res.summary_markdown().splitlines()[2] == f"- **{ans[0]}**"
    # the short answer per level: every run in one level per factor, P(best) a distribution over the levels
    lv = res.levels()
    assert list(lv["factor"].unique()) == ["family", "group_size"]
    for _f, g in lv.groupby("factor"):
        assert g["runs"].sum() == len(runs.run_ids) and np.isclose(g["p_best"].sum(), 1.0)
        best = g.loc[g["p_best"].idxmax()]  # the sentence names the level the table gives the largest P(best)
        sentence = next(a for a in ans if a.startswith(f"{_f}: "))
        assert sentence.startswith(f"{_f}: {best['level']} is the best bet (P(best) {best['p_best']:.2f} of 2 levels)")
        assert np.isclose(
            float(sentence.rsplit("= ", 1)[1]), best["p_best"], atol=0.006
        )  # two levels: P(higher) = P(best)
        for q in ("plateau", "timescale", "noise"):
            assert (g[f"{q}_lo"] <= g[q]).all() and (g[q] <= g[f"{q}_hi"]).all()
    g = df.loc[(df["quantity"] == "log_noise_temp") & (df["factor"] == "group_size")].iloc[0]
    assert np.isclose(g["predicted"], -np.log(2 / 8))  # -(log 2 - log 8): 1/G law
    assert set(res.loo["kind"]) == set(C.COMPARE_KINDS)
    for c in ("elpd_loo", "se", "p_loo", "k_max", "rank", "elpd_diff", "weight"):
        assert c in res.loo.columns
    assert res.pareto_k.shape == (4, 4)
    assert set(res.health["kind"]) == set(C.COMPARE_KINDS)
    assert {"r_hat_max", "ess_bulk_min", "divergences"} <= set(res.health.columns)
    from bayesgrpo.plots.forest import forest_plot

    fig = forest_plot(res)
    fig.savefig(tmp_path / "f.png")
    from bayesgrpo.plots.forest import levels_plot

    fig = levels_plot(res)  # one row per level, the levels' P(best) in their labels, b in the title
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(ticks) == len(lv) and ticks[0].startswith("family = ") and "P(best)" in ticks[0]
    assert [a.get_xscale() for a in fig.axes] == ["linear", "log", "log"]
    assert "b = " in fig._suptitle.get_text()
    fig.savefig(tmp_path / "levels.png")
    assert "G-exponent" in res.summary_markdown()


def test_cli_writes_outputs(runs, prior_sampler, tmp_path):
    runs.data.to_csv(tmp_path / "runs.csv", index=False)
    runs.meta.reset_index().to_csv(tmp_path / "meta.csv", index=False)
    from typer.testing import CliRunner

    from bayesgrpo.cli import app

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "runs.csv"), "--meta", str(tmp_path / "meta.csv"),
                                   "--by", "family,group_size", "--out-dir", str(out), "--draws", "20", "--tune", "10",
                                   "--fixed-g-exponent", "--kinds", "saturation,scaling",
                                   "--out", str(tmp_path / "contrasts.parquet")])  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()  # the answer comes first: per level, then one sentence per factor
    assert lines[0].startswith("# per level") and lines[1].split() == ["factor", "level", "runs", "plateau",
                                                                        "timescale", "noise", "P(best)"]  # fmt: skip
    assert [ln.split()[0] for ln in lines[2:6]] == ["family"] * 2 + ["group_size"] * 2
    assert lines[6].startswith("# the answer, per factor") and lines[7].startswith("family: ") and " over " in lines[7]
    assert lines[8].startswith("group_size: ")
    assert "contrasts (" not in res.stdout  # the full contrast table goes to the files only
    assert not (out / "forest.png").exists()  # the figure is the answer per level, not the 100 pairwise contrasts
    for f in ("levels.csv", "contrasts.csv", "loo.csv", "summary.md", "levels.png"):
        assert (out / f).exists(), f
    pq, csv = pd.read_parquet(tmp_path / "contrasts.parquet"), pd.read_csv(out / "contrasts.csv")
    assert pq.shape == csv.shape and list(pq["quantity"]) == list(csv["quantity"])
    np.testing.assert_allclose(pq["mean"].to_numpy(), csv["mean"].to_numpy(), rtol=1e-12)
    c = pd.read_csv(out / "contrasts.csv")
    b = c.loc[c["quantity"] == "g_exponent_b"].iloc[0]
    assert b["mean"] == 1.0 and b["sd"] == 0.0  # fixed exponent


@pytest.mark.slow
def test_recovers_g_exponent():
    """Runs simulated with sigma_p^2 = T / G: the posterior of b covers 1 and excludes 0."""
    runs = _sim_runs(groups=(2, 4, 8, 16), families=("fa",), seeds=(0, 1), n_steps=250, temp=2e-3, sigma_m=0.01, a=0.03)
    res = C.compare_runs(runs, kinds=("saturation",), sampler=SamplerConfig(draws=300, tune=400, chains=2), seed=3)
    b = res.g_exponent()
    assert b["ci_low"] <= 1.0 <= b["ci_high"], b
    assert b["ci_low"] > 0.3, b
    # G-invariant mean trajectory: the plateau contrast between G = 2 and G = 16 covers 0
    row = res.contrasts.loc[
        (res.contrasts["quantity"] == "plateau")
        & (res.contrasts["level_a"] == "2")
        & (res.contrasts["level_b"] == "16")
    ].iloc[0]
    assert row["ci_low"] <= 0.0 <= row["ci_high"]


def _caveats_of(runs, **kw) -> list[str]:
    """The caveats of a comparison of ``runs`` (no fit: they read the design, not the posterior)."""
    arr = C.prepare_compare(runs, **kw)
    empty = pd.DataFrame()
    res = C.CompareResult(contrasts=empty, loo=empty, pareto_k=empty, tau_by_size=empty, health=empty, fits={},
                          arrays=arr, primary="oscillator", by=("family", "group_size"), free_g_exponent=True)  # fmt: skip
    return res.caveats()


def test_caveats_name_single_runs_aliased_factors_and_separate_scales():
    # a 2 x 2 design with two seeds per cell: nothing to warn about
    assert _caveats_of(_sim_runs(seeds=(0, 1))) == []
    # one run per family, each family with its own group size, each run on its own reward scale
    rs = _sim_runs(groups=(2,), families=("fa", "fb", "fc"))
    rs.meta["group_size"] = [2, 4, 8]
    text = " | ".join(_caveats_of(rs, scale="run"))
    assert "every family and every group_size level has one run" in text
    assert "family and group_size move together" in text
    assert "the runs are on 3 reward scales and none holds two levels of family or group_size" in text
    # the same runs on one shared scale: no scale caveat
    assert "reward scales" not in " | ".join(_caveats_of(rs, scale="shared"))
