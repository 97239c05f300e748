"""Shared test fixtures: mocked sampling for the forecasting and comparison paths.

The package samples through :mod:`bayesgrpo.inference.sampling` only, so tests replace its two entry
points: ``compile_model`` (no numba compile) and ``nuts`` (draws without MCMC).
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bayesgrpo.inference import sampling


@pytest.fixture
def mock_sampler(monkeypatch):
    """Forecasting path: draws around fixed normalised parameters (no compile, no MCMC).

    ``state["params"]`` holds the normalised parameter values, ``state["spread"]`` an sd added to
    ``r_star`` across draws, ``state["chain_shift"]`` a shift of ``r_star`` per chain (chains that
    disagree: r_hat far above 1, a tiny ESS); ``state["calls"]`` records the data of each sampled batch.
    """
    state = {
        "params": dict(r0=0.0, r_star=1.0, tau=60.0, mu=0.9, sigma_p=1e-6, sigma_m=0.01, L=-0.5, lam=0.5),
        "spread": 0.0,
        "chain_shift": 0.0,
        "calls": [],
    }

    def fake_nuts(compiled, *, data=None, sampler, seed, **extra):
        rng = np.random.default_rng(seed)
        C, D = sampler.chains, sampler.draws
        R = data["y"].shape[1]
        state["calls"].append({k: np.array(v) for k, v in data.items()})
        p = state["params"]
        post = {}
        for k, v in p.items():
            vals = np.full((C, D, R), float(v))
            if state["spread"] and k in ("r_star",):
                vals = vals + state["spread"] * rng.standard_normal((C, D, R))
            if state["chain_shift"] and k in ("r_star",):
                vals = vals + state["chain_shift"] * np.arange(C)[:, None, None]
            post[k] = (("chain", "draw", "run"), vals)
        post["a"] = (("chain", "draw", "run"), (1 - post["mu"][1]) / post["tau"][1])
        post["wander"] = (("chain", "draw", "run"), np.full((C, D, R), 0.01) + 1e-3 * rng.standard_normal((C, D, R)))
        for k in ("r0", "r_star", "tau", "sigma_m"):
            post[k] = (post[k][0], post[k][1] + 1e-9 * rng.standard_normal((C, D, R)))
        ds = xr.Dataset(post, coords={"chain": np.arange(C), "draw": np.arange(D), "run": np.arange(R)})
        stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((C, D), bool))})
        return {"posterior": ds, "sample_stats": stats}

    monkeypatch.setattr(sampling, "compile_model", lambda key, build, **kw: None)
    monkeypatch.setattr(sampling, "nuts", fake_nuts)
    # kind 'auto' (the default) weighs its kinds by block evidence on the compiled models: here the evidence
    # gives the oscillator all the weight, so the default forecast is the oscillator's mocked draws (the
    # outlook layer on top, as shipped); state["evidence"] sets other evidence per kind
    from bayesgrpo.forecast import forecaster

    state["evidence"] = {"oscillator": 0.0}
    monkeypatch.setattr(
        forecaster, "run_evidence", lambda kind, *a, **kw: state["evidence"].get(kind.name, float("-inf"))
    )
    return state


@pytest.fixture
def prior_sampler(monkeypatch):
    """Comparison path: NUTS replaced by prior draws of the real model arranged as 2 chains."""
    import pymc as pm

    def compile_model(key, build, **kw):
        return build()

    def nuts(model, *, data=None, sampler, seed, **extra):
        n = 2 * sampler.draws
        with model:
            pri = pm.sample_prior_predictive(draws=n, random_seed=seed)
        ds = pri["prior"].to_dataset() if hasattr(pri["prior"], "to_dataset") else pri["prior"]
        ds = ds.drop_vars([v for v in ("y", "mask") if v in ds])
        ds = xr.concat(
            [
                ds.isel(draw=slice(0, sampler.draws)),
                ds.isel(draw=slice(sampler.draws, n)).assign_coords(draw=np.arange(sampler.draws)),
            ],
            dim="chain",
        )
        ds = ds.assign_coords(chain=[0, 1], draw=np.arange(sampler.draws))
        stats = xr.Dataset(
            {"diverging": (("chain", "draw"), np.zeros((2, sampler.draws), dtype=bool))},
            coords={"chain": [0, 1], "draw": np.arange(sampler.draws)},
        )
        return xr.DataTree.from_dict({"posterior": ds, "sample_stats": stats})

    monkeypatch.setattr(sampling, "compile_model", compile_model)
    monkeypatch.setattr(sampling, "nuts", nuts)
