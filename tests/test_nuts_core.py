"""NUTS through nutpie's Rust core (bayesgrpo.inference.nuts_core): same draws as nutpie.sample, no heavy imports."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

from bayesgrpo.inference import nuts_core


def test_loading_the_core_imports_no_python_layer():
    code = (
        "import sys; from bayesgrpo.inference.nuts_core import nutpie_lib; lib = nutpie_lib(); "
        "assert hasattr(lib, 'PySampler'); "
        "bad = [m for m in ('nutpie.sample', 'nutpie.compile_pymc', 'arviz', 'xarray', 'matplotlib', 'pymc') "
        "if m in sys.modules]; assert not bad, bad; "
        "import nutpie; assert nutpie._lib is lib"  # nutpie's own import reuses the loaded extension
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_versions_outside_the_pinned_range_are_refused(monkeypatch):
    fake = types.ModuleType("nutpie._lib")
    fake.__version__ = "0.17.0"
    monkeypatch.setitem(sys.modules, "nutpie._lib", fake)
    with pytest.raises(ImportError, match=r"0\.17\.0 is outside"):
        nuts_core.nutpie_lib()
    assert not nuts_core.available()  # sampling and the disk cache then go through nutpie's Python layer
    fake.__version__ = "0.16.10"
    with pytest.raises(ImportError, match="outside"):
        nuts_core.nutpie_lib()


def test_available_with_the_installed_nutpie():
    assert nuts_core.available()


def test_version_tuple():
    assert nuts_core._version_tuple("0.16.11") == (0, 16, 11)
    assert nuts_core._version_tuple("0.17.0rc1") == (0, 17, 0)


@pytest.mark.slow
def test_same_draws_as_nutpie_sample():
    pm = pytest.importorskip("pymc")
    nutpie = pytest.importorskip("nutpie")
    with pm.Model(coords={"k": range(3)}) as model:
        obs = pm.Data("obs", np.array([0.3, -1.0, 2.0]), dims="k")
        mu = pm.Normal("mu", 0.0, 1.0, dims="k")
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("y", mu, sd, observed=obs, dims="k")
    compiled = nutpie.compile_pymc_model(model, backend="numba")
    compiled = compiled.with_data(obs=np.array([1.0, 0.5, -0.2]))
    kw = dict(draws=120, tune=100, chains=2, cores=2, seed=7, target_accept=0.9)
    ours = nuts_core.start(compiled, adaptation="low_rank", **kw).wait()
    ref = nutpie.sample(compiled, adaptation="low_rank", progress_bar=False, **kw)
    for name in ("mu", "sd"):
        np.testing.assert_array_equal(ours.posterior[name], ref["posterior"][name].to_numpy())
    np.testing.assert_array_equal(ours.stats["n_steps"], ref["sample_stats"]["n_steps"].to_numpy())
    np.testing.assert_array_equal(ours.stats["diverging"], ref["sample_stats"]["diverging"].to_numpy())
    assert ours.posterior["mu"].shape == (2, 120, 3) and ours.warmup_stats["n_steps"].shape == (2, 100)
    assert ours.n_grad == int(ref["sample_stats"]["n_steps"].sum() + ref["warmup_sample_stats"]["n_steps"].sum())
    # xarray views (for saving / diagnosing) and the conversion of nutpie's own result
    ds = ours.dataset()
    assert ds["mu"].dims == ("chain", "draw", "k") and list(ds["k"].values) == [0, 1, 2]
    np.testing.assert_array_equal(ds["sd"].to_numpy(), ours.posterior["sd"])
    assert ours.dataset("sample_stats")["diverging"].dims == ("chain", "draw")
    back = nuts_core.Draws.from_datatree(ref)
    np.testing.assert_array_equal(back.posterior["mu"], ours.posterior["mu"])
    np.testing.assert_array_equal(back.warmup_stats["n_steps"], ours.warmup_stats["n_steps"])
    assert back.dims["mu"] == ("k",)
    diag = nuts_core.start(compiled, adaptation="diag", var_names=("sd",), **kw).wait()
    ref = nutpie.sample(compiled, adaptation="diag", progress_bar=False, **kw)
    assert set(diag.posterior) == {"sd"}
    np.testing.assert_array_equal(diag.posterior["sd"], ref["posterior"]["sd"].to_numpy())
    with pytest.raises(ValueError, match="unknown adaptation"):
        nuts_core.start(compiled, adaptation="flow", **kw).wait()
    # the light model (what the disk cache loads) samples exactly like nutpie's own
    light = nuts_core.CompiledModel(
        compiled_logp_func=compiled.compiled_logp_func, compiled_expand_func=compiled.compiled_expand_func,
        initial_point_func=compiled.initial_point_func, shared_data=compiled.shared_data,
        shared_var_keys=compiled.shared_var_keys, user_data=compiled.user_data, n_dim=compiled.n_dim,
        n_expanded=compiled.n_expanded, shape_info=compiled.shape_info,
    )  # fmt: skip
    new = np.array([-0.4, 0.1, 0.9])
    a, b = light.with_data(obs=new), compiled.with_data(obs=new)
    assert a.user_data.tobytes() != light.user_data.tobytes()  # points at the new array
    da, db = nuts_core.start(a, **kw).wait(), nuts_core.start(b, **kw).wait()
    np.testing.assert_array_equal(da.posterior["mu"], db.posterior["mu"])
    assert not np.array_equal(da.posterior["mu"], ours.posterior["mu"])  # the data did change
    # two runs in flight, one thread each: the same draws as one at a time on two threads
    kw1 = {**kw, "cores": 1}
    ra, rb = nuts_core.start(a, **kw1), nuts_core.start(b, **{**kw1, "seed": 8})
    fa, fb = ra.wait(), rb.wait()
    np.testing.assert_array_equal(fa.posterior["mu"], da.posterior["mu"])
    np.testing.assert_array_equal(fb.posterior["mu"], nuts_core.start(b, **{**kw, "seed": 8}).wait().posterior["mu"])
    with pytest.raises(KeyError, match="Unknown shared variable"):
        light.with_data(nope=new)
    with pytest.raises(ValueError, match="rank"):
        light.with_data(obs=new[:, None])
