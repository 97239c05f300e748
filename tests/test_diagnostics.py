"""Sampler diagnostics on numpy arrays (bayesgrpo.inference.diagnostics): pinned numbers, and arviz_stats's array
functions on the same draws."""

from __future__ import annotations

import numpy as np
import pytest

from bayesgrpo.inference import diagnostics as D


def _chains(kind: str, rng, C=2, N=500):
    if kind == "iid":
        return rng.standard_normal((C, N))
    if kind == "ar1":  # strongly autocorrelated: ESS far below C * N
        x = np.zeros((C, N))
        e = rng.standard_normal((C, N))
        for t in range(1, N):
            x[:, t] = 0.95 * x[:, t - 1] + e[:, t]
        return x
    if kind == "shifted":  # chains disagree: R-hat well above 1
        return rng.standard_normal((C, N)) + np.arange(C)[:, None] * 1.5
    if kind == "ties":  # a discrete variable: average ranks
        return rng.integers(0, 4, (C, N)).astype(float)
    if kind == "heavy":  # the folded (tail) R-hat is the larger one
        x = rng.standard_t(2, (C, N))
        x[0] *= 3.0
        return x
    if kind == "odd":  # an odd number of draws (split drops the middle one)
        return rng.standard_normal((C, N + 1))
    raise ValueError(kind)


KINDS = ("iid", "ar1", "shifted", "ties", "heavy", "odd")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chains", [2, 4])
def test_rhat_and_ess_match_arviz_stats(kind, chains):
    array_stats = pytest.importorskip("arviz_stats.base").array_stats
    rng = np.random.default_rng(10 * KINDS.index(kind) + chains)
    x = _chains(kind, rng, C=chains)
    r_az = float(array_stats.rhat(x, chain_axis=0, draw_axis=1, method="rank"))
    e_az = float(array_stats.ess(x, chain_axis=0, draw_axis=1, method="bulk"))
    np.testing.assert_allclose(D.rhat(x[:, :, None])[0], r_az, rtol=1e-12)
    np.testing.assert_allclose(D.ess_bulk(x[:, :, None])[0], e_az, rtol=1e-12)


def test_pinned_values():
    """Draws without a random generator, and the numbers arviz_stats 1.3 gives for them (rank R-hat, bulk ESS)."""
    k = np.arange(3 * 12)
    x = (((k * 7919) % 37) / 37.0).reshape(3, 12)  # three chains of 12 draws
    x[2] += 0.4  # the third chain sits higher: chains disagree
    y = np.cumsum(np.sin(k * 1.3)).reshape(3, 12)  # autocorrelated
    np.testing.assert_allclose(D.rhat(x[:, :, None])[0], 3.9823962586391897, rtol=1e-12)
    np.testing.assert_allclose(D.ess_bulk(x[:, :, None])[0], 9.326161296840436, rtol=1e-12)
    np.testing.assert_allclose(D.rhat(y[:, :, None])[0], 0.9218853127813302, rtol=1e-12)
    np.testing.assert_allclose(D.ess_bulk(y[:, :, None])[0], 36.24681499464989, rtol=1e-12)


def test_known_values():
    rng = np.random.default_rng(1)
    iid = rng.standard_normal((4, 1000, 3))
    assert np.all(np.abs(D.rhat(iid) - 1.0) < 0.01)
    assert np.all(np.abs(D.ess_bulk(iid) / 4000 - 1.0) < 0.15)  # iid draws: ESS ~ the number of draws
    ar = _chains("ar1", rng, C=4, N=2000)
    # AR(1) with phi = 0.95: integrated autocorrelation time (1 + phi) / (1 - phi) = 39
    assert 0.6 < D.ess_bulk(ar[:, :, None])[0] / (8000 / 39) < 1.6
    assert D.rhat(_chains("shifted", rng)[:, :, None])[0] > 1.2


def test_shapes_and_degenerate_input():
    x = np.random.default_rng(2).standard_normal((2, 50, 3, 2))
    assert D.rhat(x).shape == (3, 2) and D.ess_bulk(x).shape == (3, 2)
    assert np.isnan(D.rhat(x[:1])).all()  # one chain: no R-hat
    assert np.isfinite(D.ess_bulk(x[:1])).all()  # ... but an ESS
    assert np.isnan(D.rhat(x[:, :3])).all()  # fewer than 4 draws
    y = x.copy()
    y[0, 5, 0, 0] = np.nan
    assert np.isnan(D.rhat(y)[0, 0]) and np.isfinite(D.rhat(y)[1, 1])
    assert D.ess_bulk(np.ones((2, 10, 1)))[0] == 20.0  # constant: ESS = number of draws
    with pytest.raises(ValueError, match="chain, draw"):
        D.rhat(np.ones(5))


def test_run_health_is_arviz_stats_per_run_and_what_sampling_health_reports():
    """The per-run health of numpy draws: the largest arviz_stats R-hat and the smallest bulk ESS over the
    non-constant variables of each run; ``sampling.health`` reports the same on the xarray posterior."""
    import xarray as xr

    array_stats = pytest.importorskip("arviz_stats.base").array_stats

    from bayesgrpo.inference import sampling

    rng = np.random.default_rng(5)
    C, N, R = 2, 300, 3
    b = rng.standard_normal((C, N, R))
    for t in range(1, N):  # autocorrelated (AR(1), phi = 0.5)
        b[:, t] += 0.5 * b[:, t - 1]
    post = {"a": rng.standard_normal((C, N, R)), "b": b, "c": np.ones((C, N, R))}
    post["a"][1, :, 2] += 0.8  # run 2's chains disagree
    ours = D.run_health(post, var_names=("a", "b", "c", "missing"), divergences=3)
    ds = xr.Dataset({k: (("chain", "draw", "run"), v) for k, v in post.items()}, coords={"run": ["x", "y", "z"]})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.r_[np.ones(3), np.zeros(C * N - 3)].reshape(C, N) > 0)})
    ref = sampling.health(ds, stats, var_names=("a", "b", "c", "missing"))
    for j, rid in enumerate(["x", "y", "z"]):
        np.testing.assert_allclose(ours[j]["r_hat_max"], ref[rid]["r_hat_max"], rtol=1e-9)
        np.testing.assert_allclose(ours[j]["ess_min"], ref[rid]["ess_min"], rtol=1e-9)
        assert ours[j]["divergences"] == ref[rid]["divergences"] == 3
    assert ours[2]["r_hat_max"] > 1.05 and ours[0]["r_hat_max"] < 1.05
    for j in range(R):  # "c" is constant: only "a" and "b" count
        r_az = [float(array_stats.rhat(post[v][:, :, j], chain_axis=0, draw_axis=1)) for v in ("a", "b")]
        e_az = [float(array_stats.ess(post[v][:, :, j], chain_axis=0, draw_axis=1)) for v in ("a", "b")]
        np.testing.assert_allclose(ours[j]["r_hat_max"], max(r_az), rtol=1e-12)
        np.testing.assert_allclose(ours[j]["ess_min"], min(e_az), rtol=1e-12)
    whole = D.run_health(post, var_names=("a", "b", "c"), divergences=0, per_run=False)
    ref_whole = sampling.health(ds, stats, var_names=("a", "b", "c"), dim=None)
    np.testing.assert_allclose(whole["r_hat_max"], ref_whole["r_hat_max"], rtol=1e-9)
    np.testing.assert_allclose(whole["ess_min"], ref_whole["ess_min"], rtol=1e-9)
    assert np.isnan(D.run_health({"c": post["c"]}, var_names=("c",))[0]["r_hat_max"])
