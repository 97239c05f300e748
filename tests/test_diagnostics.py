"""Sampler diagnostics on numpy arrays (bayesgrpo.inference.diagnostics) against ArviZ on the same draws."""

from __future__ import annotations

import statistics

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
def test_rhat_and_ess_match_arviz(kind, chains):
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(abs(hash((kind, chains))) % 2**32)
    x = _chains(kind, rng, C=chains)
    r_az = float(np.asarray(az.rhat(_dt(x))["x"]))
    e_az = float(np.asarray(az.ess(_dt(x))["x"]))
    np.testing.assert_allclose(D.rhat(x[:, :, None])[0], r_az, rtol=1e-9)
    np.testing.assert_allclose(D.ess_bulk(x[:, :, None])[0], e_az, rtol=1e-9)


def _dt(x):
    import xarray as xr

    return xr.Dataset(
        {"x": (("chain", "draw"), x)}, coords={"chain": np.arange(x.shape[0]), "draw": np.arange(x.shape[1])}
    )


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


def test_norm_ppf_against_statistics():
    nd = statistics.NormalDist()
    p = np.r_[1e-300, 1e-20, 1e-8, 0.001, 0.02425, 0.1, 0.3, 0.425, 0.5, 0.575, 0.9, 0.975, 1 - 1e-9]
    np.testing.assert_allclose(D.norm_ppf(p), [nd.inv_cdf(v) for v in p], rtol=1e-14, atol=1e-15)
    assert D.norm_ppf(np.array([0.0]))[0] == -np.inf and D.norm_ppf(np.array([1.0]))[0] == np.inf


def test_run_health_matches_the_arviz_health_of_sampling():
    """The per-run health of numpy draws equals today's ArviZ-based ``sampling.health`` on the same draws."""
    import xarray as xr

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
    whole = D.run_health(post, var_names=("a", "b", "c"), divergences=0, per_run=False)
    ref_whole = sampling.health(ds, stats, var_names=("a", "b", "c"), dim=None)
    np.testing.assert_allclose(whole["r_hat_max"], ref_whole["r_hat_max"], rtol=1e-9)
    np.testing.assert_allclose(whole["ess_min"], ref_whole["ess_min"], rtol=1e-9)
    assert np.isnan(D.run_health({"c": post["c"]}, var_names=("c",))[0]["r_hat_max"])
