"""Model structure: named variables, dims, finite log-density and gradient at the initial point (no MCMC)."""

import numpy as np
import pandas as pd
import pytensor
import pytest

from bayesgrpo.models.arrays import prepare_arrays
from bayesgrpo.models.kinds import build_model
from bayesgrpo.schema import RunSet

FAST = "FAST_COMPILE"  # python linker: structure tests must not pay numba compiles


def evaluate(model, names, point):
    outs = model.replace_rvs_by_values([model[n] for n in names])
    f = pytensor.function(model.value_vars, outs, mode=FAST, on_unused_input="ignore")
    return f(**{v.name: point[v.name] for v in model.value_vars})


def runset(n_runs=3, K=None):
    rng = np.random.default_rng(0)
    rows, meta = [], []
    for j in range(n_runs):
        steps = np.arange(1, 61 + 10 * j)
        r = 0.2 + 0.5 * (1 - np.exp(-steps / 30)) + 0.05 * rng.standard_normal(len(steps))
        rows.append(pd.DataFrame({"run_id": f"r{j}", "step": steps, "reward": r}))
        meta.append(
            {
                "run_id": f"r{j}",
                "family": "A" if j % 2 == 0 else "B",
                "params_b": 3.0 * (j + 1),
                "group_size": 4 * (j + 1),
                "max_steps": 200,
                "refresh_interval": K[j] if isinstance(K, list) else K,
            }
        )
    return RunSet.from_frames(pd.concat(rows), pd.DataFrame(meta))


@pytest.mark.parametrize("kind", ["oscillator", "saturation", "scaling", "degeneracy", "logistic"])
@pytest.mark.parametrize("hierarchical", [False, True])
def test_structure_and_finite_logp(kind, hierarchical):
    arr, _infos = prepare_arrays(runset())
    model = build_model(arr, kind=kind, hierarchical=hierarchical)
    names = set(model.named_vars)
    assert {"r0", "r_star", "tau", "a", "mu", "sigma_p", "sigma_m", "reward"} <= names
    for v in ("r0", "r_star", "tau", "a"):
        assert model.named_vars_to_dims[v] == ("run",)
    if hierarchical:
        assert model.named_vars_to_dims["z_gain_family"] == ("family",)
        assert list(model.coords["family"]) == ["A", "B"]
    # the population prior enters as per-run data (one compile serves every prior and observed fraction)
    assert {f"prior_{k}" for k in ("gain_mu", "gain_sd", "log_tau_mu", "r0_sd")} <= names
    if kind == "scaling":
        assert "alpha" in names
    ip = model.initial_point()
    logp = model.compile_logp(mode=FAST)(ip)
    grad = model.compile_dlogp(mode=FAST)(ip)
    assert np.isfinite(logp) and np.all(np.isfinite(grad))
    if kind == "saturation":
        (mu,) = evaluate(model, ["mu"], ip)
        assert np.all(mu == 0)
    assert ("lam" in names) == (kind == "logistic")
    if kind == "logistic":  # lam within (0, LAM_MAX), centred on the prior's logit mean
        from bayesgrpo.models.degeneracy import LAM_MAX

        (lam,) = evaluate(model, ["lam"], ip)
        prior_mu = model["prior_lam_logit_mu"].get_value()
        np.testing.assert_allclose(lam, LAM_MAX / (1 + np.exp(-prior_mu)))


def test_lagged_model_uses_general_filter_and_matches_numpy():
    """With refresh intervals the likelihood is the compiled refresh Op (K per run, as data); the model's
    log-density term equals the numpy filter's with each run's lag pattern d_n = n mod K."""
    from pytensor.graph.traversal import ancestors

    from bayesgrpo.models.arrays import lag_sequence
    from bayesgrpo.models.kalman import filter_numpy
    from bayesgrpo.models.kalman_op import KalmanRefresh

    rs = runset(n_runs=3, K=[4, 1, 32])  # lag-free and lagged runs in one graph
    arr, infos = prepare_arrays(rs)
    np.testing.assert_array_equal(arr.refresh, [4, 1, 32])
    assert arr.refresh.dtype == np.int64
    model = build_model(arr)
    nodes = list(ancestors([model["reward"]]))
    assert any(isinstance(getattr(v.owner, "op", None), KalmanRefresh) for v in nodes)
    assert not any(type(getattr(v.owner, "op", None)).__name__ == "Scan" for v in nodes)
    ip = model.initial_point()
    ip["z_tau"] = np.array([-1.0, 0.5, 1.5])  # distinct per-run parameters
    r0, rs_, a, mu, sp, sm, ll = evaluate(model, ["r0", "r_star", "a", "mu", "sigma_p", "sigma_m", "reward"], ip)
    ref = 0.0
    for j, info in enumerate(infos):
        T = info.last_step - info.s0 + 1
        ref += filter_numpy(
            arr.y[:T, j], arr.mask[:T, j].astype(bool), r0=r0[j], r_star=rs_[j], a=a[j], mu=mu[j], sigma_p=sp[j],
            sigma_m=sm[j], lag=lag_sequence(info, np.arange(T)), D=max(2, info.refresh_interval),
        )[0]  # fmt: skip
    assert float(ll) == pytest.approx(float(ref), rel=1e-9)
    # the gradient goes through the Op's pullback
    grad = model.compile_dlogp(mode=FAST)(ip)
    assert np.all(np.isfinite(grad))


def test_prepare_normalises_and_reports_back():
    rs = runset()
    arr, infos = prepare_arrays(rs)
    for j, info in enumerate(infos):
        T = info.last_step - info.s0 + 1
        z = arr.y[:T, j][arr.mask[:T, j] > 0]
        back = z * info.scale + info.loc
        np.testing.assert_allclose(back, rs.run(info.run_id)["reward"].to_numpy(), rtol=0, atol=1e-12)
    assert arr.mask[:, 0].sum() == 60 and arr.mask[60:, 0].sum() == 0
    np.testing.assert_allclose(arr.span, [199, 199, 199])
