"""Fleet scale: the disk cache of compiled models (a second process does not compile; corrupt entries
are rebuilt; concurrent processes compile once and never corrupt an entry) and distributed batches
(``--workers 2`` gives the serial table; a run that fails on a worker is an error row).

The processes here are real: each test that compiles pays numba's code generation once (the tiny
model ~10 s, the forecasting model ~30 s), so they are marked ``slow``.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import ForecastError
from bayesgrpo.forecast import Forecaster, SamplerConfig
from bayesgrpo.forecast.batch import forecast_batch
from bayesgrpo.inference import model_cache as mc
from bayesgrpo.io import read_runs

ROOT = Path(__file__).resolve().parents[1]
SMALL_RUNS = ROOT / "tests" / "data" / "grpo_small"
TINY = SamplerConfig(draws=40, tune=40, seed=5)
COMPILED = "compiled a model"
LOADED = "loaded a compiled model from the disk cache"

# one forecast in a fresh process: the table as JSON, and whether PyMC / PyTensor were imported
FORECAST = r"""
import json, logging, sys, warnings
warnings.simplefilter("ignore")
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
from bayesgrpo.forecast import Forecaster, SamplerConfig
from bayesgrpo.forecast.batch import forecast_batch
from bayesgrpo.io import read_runs
runs = read_runs(sys.argv[1] + "/runs.csv", meta=sys.argv[1] + "/meta.csv")
fc = Forecaster(sampler=SamplerConfig(draws=40, tune=40, seed=5))
res = forecast_batch(runs, forecaster=fc, until_fraction=0.5)
print(json.dumps({"table": res.table.drop(columns="seconds").to_dict("list"), "pymc": "pymc" in sys.modules,
                  "pytensor": "pytensor" in sys.modules, "heavy": sorted(m for m in ("arviz", "matplotlib",
                  "nutpie.sample", "scipy.stats") if m in sys.modules)}))
"""

# the tiny model: a module the compile child process can import (the build must be picklable)
TINY_MODEL = r"""
import numpy as np

def build():
    import pymc as pm
    with pm.Model() as m:
        y = pm.Data("y", np.zeros(5))
        mu = pm.Normal("mu", 0.0, 1.0)
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("obs", mu, sd, observed=y)
    return m
"""
TINY_RUN = r"""
import logging, sys
import numpy as np
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
from tiny_model import build
from bayesgrpo.inference import sampling
c = sampling.compile_model(("tiny-test-model",), build)
r = sampling.nuts(c, data={"y": np.arange(5.0)}, sampler=sampling.SamplerConfig(draws=30, tune=30), seed=1, required=("y",))
print(repr(float(r["posterior"]["mu"].mean())))
"""


def _env(cache: Path, extra_path: Path | None = None) -> dict:
    env = {**os.environ, mc.CACHE_ENV: str(cache)}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    return env


def _python(code: str, *args, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def forecast_cache(tmp_path_factory):
    """A cache folder warmed by the first test (the forecasting model), reused by the worker tests."""
    return tmp_path_factory.mktemp("bayesgrpo-cache")


@pytest.fixture(scope="module")
def serial_table(forecast_cache):
    """The serial table of the small fixture runs, from a fresh process (as a user gets it)."""
    return {}


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "tiny_model.py").write_text(TINY_MODEL)
    return tmp_path


@pytest.mark.slow
def test_second_process_loads_the_compiled_model_from_disk(forecast_cache, serial_table):
    env = _env(forecast_cache)
    first = _python(FORECAST, SMALL_RUNS, env=env)
    assert COMPILED in first.stderr
    assert list(forecast_cache.glob("*.model")), "no entry was written"
    second = _python(FORECAST, SMALL_RUNS, env=env)
    assert LOADED in second.stderr and COMPILED not in second.stderr, second.stderr[-2000:]
    a, b = json.loads(first.stdout.splitlines()[-1]), json.loads(second.stdout.splitlines()[-1])
    assert not b["pymc"] and not b["pytensor"], "the warm path imported PyMC"
    # nor what only saving, diagnosing or drawing needs (issue 20: the import budget of a warm forecast)
    assert b["heavy"] == [], f"the warm path imported {b['heavy']}"
    # the process that compiled and the one that loaded give the same numbers, to the last bit
    assert a["table"] == b["table"]
    serial_table["table"] = pd.DataFrame(a["table"])


# one oscillator fit (the Kalman likelihood kernels) in a fresh process: a hash of every posterior draw
SAME_DRAWS = r"""
import hashlib, json, logging, sys, warnings
warnings.simplefilter("ignore")
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
import numpy as np
from bayesgrpo.forecast import Forecaster, SamplerConfig
from bayesgrpo.inference import sampling
from bayesgrpo.io import read_runs
digest, nuts = hashlib.sha256(), sampling.nuts
def hashing_nuts(*args, **kw):
    out = nuts(*args, **kw)
    for name in sorted(out["posterior"].data_vars):
        digest.update(name.encode() + np.ascontiguousarray(out["posterior"][name].to_numpy()).tobytes())
    return out
sampling.nuts = hashing_nuts
runs = read_runs(sys.argv[1]).truncate(until_step=150)
fit = Forecaster("oscillator", sampler=SamplerConfig(draws=60, tune=60, seed=3)).fit(runs, horizon=1000)
q = fit.table()[["final_q10", "final_q50", "final_q90"]].to_numpy().ravel().tolist()
print(json.dumps({"draws": digest.hexdigest(), "quantiles": q}))
"""
EXAMPLE_RUN = ROOT / "bayesgrpo" / "resources" / "examples" / "example-grpo-run" / "trainer_state.json"


@pytest.mark.slow
def test_cache_off_gives_the_cached_draws(forecast_cache):
    """``BAYESGRPO_CACHE=off`` samples the same machine code as a cached model, so the same draws (issue 33:
    a model compiled in the sampling process has gradients that differ in the last bits, and NUTS
    amplified that into other forecasts)."""
    cached = _python(SAME_DRAWS, EXAMPLE_RUN, env=_env(forecast_cache))
    off = _python(SAME_DRAWS, EXAMPLE_RUN, env={**os.environ, mc.CACHE_ENV: "off"})
    assert COMPILED in off.stderr and LOADED not in off.stderr, off.stderr[-2000:]
    a, b = json.loads(cached.stdout.splitlines()[-1]), json.loads(off.stdout.splitlines()[-1])
    assert a["quantiles"] == b["quantiles"]
    assert a["draws"] == b["draws"], "the posterior draws differ between the cached and the uncached path"


@pytest.mark.slow
def test_corrupt_or_stale_entry_is_rebuilt_never_trusted(tiny):
    cache = tiny / "cache"
    env = _env(cache, tiny)
    first = _python(TINY_RUN, env=env)
    (entry,) = cache.glob("*.model")
    good = entry.read_bytes()
    digest = entry.stem
    _head, _, body = good[len(mc._MAGIC) :].partition(b"\n")
    desc = mc._Unpickler(__import__("io").BytesIO(body)).load()["desc"]
    store = mc.ModelCache(cache)

    entry.write_bytes(good[: len(good) // 2])  # truncated (a writer killed mid-way, a full disk)
    assert store.load(digest, desc) is None and not entry.exists()
    entry.write_bytes(good.replace(b"NumbaEnv", b"NumbaEnW", 1))  # altered bytes: the checksum catches them
    assert store.load(digest, desc) is None and not entry.exists()
    entry.write_bytes(good)
    assert store.load(digest, {**desc, "sources": "another source tree"}) is None  # stale: another key
    assert not entry.exists()

    entry.write_bytes(b"garbage")
    rebuilt = _python(TINY_RUN, env=env)
    assert "corrupt or stale" in rebuilt.stderr and COMPILED in rebuilt.stderr
    assert rebuilt.stdout.split()[-1] == first.stdout.split()[-1]
    warm = _python(TINY_RUN, env=env)
    assert LOADED in warm.stderr and warm.stdout.split()[-1] == first.stdout.split()[-1]


@pytest.mark.slow
def test_concurrent_processes_compile_once_and_share_one_entry(tiny):
    cache = tiny / "cache"
    env = _env(cache, tiny)
    procs = [subprocess.Popen([sys.executable, "-c", TINY_RUN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]  # fmt: skip
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-1500:] for _, e in outs]
    assert sum(COMPILED in err for _, err in outs) == 1  # the lock: one compiles, the others load its entry
    assert sum(LOADED in err for _, err in outs) == 2
    assert len({out.split()[-1] for out, _ in outs}) == 1
    assert len(list(cache.glob("*.model"))) == 1 and not list(cache.glob("*.tmp"))


WRITER = r"""
import os, sys
from bayesgrpo.inference.model_cache import ModelCache
store, k = ModelCache(sys.argv[1]), int(sys.argv[2])
for i in range(40):
    store._publish("race", bytes([k]) * (200_000 + 1000 * i))
"""


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path):
    """Writers publish by atomic rename: a reader sees one writer's whole entry, never a mix."""
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(k)]) for k in (1, 2, 3)]
    seen = 0
    while any(p.poll() is None for p in procs):
        p = tmp_path / "race.model"
        if p.exists():
            blob = p.read_bytes()
            assert len(set(blob)) == 1 and len(blob) >= 200_000, "a reader saw a partial or mixed entry"
            seen += 1
    assert all(p.wait() == 0 for p in procs)
    assert seen > 0, "the reader never saw an entry while the writers ran"
    assert (tmp_path / "race.model").exists() and not list(tmp_path.glob("*.tmp"))


# ------------------------------------------------------------------------------------- workers
@pytest.fixture(scope="module")
def cluster(forecast_cache):
    pytest.importorskip("distributed")
    from bayesgrpo.inference.executor import DaskExecutor

    old = os.environ.get(mc.CACHE_ENV)
    os.environ[mc.CACHE_ENV] = str(forecast_cache)  # the workers inherit it
    ex = DaskExecutor(workers=2)
    yield ex
    ex.close()
    if old is None:
        os.environ.pop(mc.CACHE_ENV, None)
    else:
        os.environ[mc.CACHE_ENV] = old


@pytest.mark.slow
def test_two_workers_give_the_serial_table(cluster, serial_table, forecast_cache):
    if "table" not in serial_table:  # run alone: compute the serial reference in a fresh process
        out = _python(FORECAST, SMALL_RUNS, env=_env(forecast_cache))
        serial_table["table"] = pd.DataFrame(json.loads(out.stdout.splitlines()[-1])["table"])
    runs = read_runs(SMALL_RUNS / "runs.csv", meta=SMALL_RUNS / "meta.csv")
    res = forecast_batch(runs, forecaster=Forecaster(sampler=TINY), until_fraction=0.5, executor=cluster)
    par = res.table.drop(columns="seconds")
    pd.testing.assert_frame_equal(par.reset_index(drop=True), serial_table["table"].reset_index(drop=True),
                                  check_dtype=False, check_exact=True)  # fmt: skip
    assert set(res.fit.forecast_ids) == set(runs.run_ids) and res.fit.posterior.sizes["run"] == len(runs)


class _FailsOn(Forecaster):
    """A forecaster whose fit fails whenever a given run is among its runs (as on a broken worker)."""

    def __init__(self, bad: str, **kw):
        super().__init__(**kw)
        self.bad = bad

    def fit_plans(self, plans, **kw):  # what forecast_batch calls on a worker
        if self.bad in plans.observed.run_ids:
            raise ForecastError(f"simulated failure on run {self.bad!r}")
        return super().fit_plans(plans, **kw)


@pytest.mark.slow
def test_a_run_that_fails_on_a_worker_is_an_error_row(cluster):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    runs = read_runs(SMALL_RUNS / "runs.csv", meta=SMALL_RUNS / "meta.csv")
    ids = runs.run_ids[:3]
    try:
        with pytest.warns(UserWarning, match="could not be forecast"):
            res = forecast_batch(runs.select(ids), forecaster=_FailsOn(ids[1], sampler=TINY), until_fraction=0.5,
                                 executor=cluster)  # fmt: skip
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    tab = res.table.set_index("run_id")
    assert list(tab.index) == list(ids)
    assert tab.loc[ids[1], "status"] == "error" and "simulated failure" in tab.loc[ids[1], "error"]
    # forecast: "ok", or "warning" exactly where the run's sampler health says so (issue 19: 40 draws often do)
    assert [tab.loc[r, "status"] for r in (ids[0], ids[2])] == [res.fit.health_status(r)[0] for r in (ids[0], ids[2])]
    assert np.isfinite(tab.loc[[ids[0], ids[2]], "final_q50"]).all()


def test_executor_options_are_checked_before_anything_starts():
    from bayesgrpo.errors import OptionError
    from bayesgrpo.inference.executor import SerialExecutor, check_options, make_executor, partition

    with pytest.raises(OptionError, match="not both"):
        check_options(workers=2, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(OptionError, match="at least 1"):
        check_options(workers=-1)
    assert isinstance(make_executor(), SerialExecutor) and isinstance(make_executor(workers=0), SerialExecutor)
    groups = partition(list(range(103)), 2)
    assert functools.reduce(operator.iadd, groups, []) == list(range(103)) and max(map(len, groups)) <= 25


def test_backtest_spreads_case_groups_over_an_executor():
    """The backtest harness hands bayesgrpo's method groups of cases for the executor's workers; results,
    failures and warnings come back per case, as in the serial run (a thread pool: no pickling, no MCMC)."""
    import warnings as _w
    from concurrent.futures import ThreadPoolExecutor

    from bayesgrpo.evaluation.backtest import backtest
    from bayesgrpo.evaluation.methods import BAYES, BayesGRPOMethod
    from bayesgrpo.inference.executor import FuturesExecutor
    from bayesgrpo.schema import RunSet

    class Fit:
        def __init__(self, runs):
            self.runs = runs

        def table(self):
            return pd.DataFrame(
                [dict(run_id=r, r_hat_max=1.0, ess_min=400.0, divergences=0) for r in self.runs.run_ids]
            )

        def final_draws(self, r):
            return float(self.runs.run(r)["reward"].iloc[-1]) + np.linspace(-1, 1, 101)

    class Fc:
        def fit(self, runs, *, horizon=None, context=None):
            _w.warn("sampler health is poor", UserWarning, stacklevel=2)
            if "r3" in runs.run_ids:
                raise RuntimeError("sampling exploded")
            return Fit(runs)

    rows = [dict(run_id=f"r{k}", step=1 + i, reward=float(i + k)) for k in range(6) for i in range(60)]
    rs = RunSet.from_frames(
        pd.DataFrame(rows), pd.DataFrame({"run_id": [f"r{k}" for k in range(6)], "source_repo": "A"})
    )
    serial = backtest(
        rs, cutoffs=(0.5,), peers=(), methods={BAYES: BayesGRPOMethod(BAYES, forecaster=lambda h: Fc(), chunk=2)}
    )
    # one pool thread posing as two workers: warnings.catch_warnings is process-global, so concurrent
    # threads would mix their records (Dask workers are processes of one thread each)
    with FuturesExecutor(ThreadPoolExecutor(1), n_workers=2, own=True) as ex:
        method = BayesGRPOMethod(BAYES, forecaster=lambda h: Fc(), chunk=2, executor=ex)
        assert method.chunk == 4  # the harness hands it a group per worker at a time
        par = backtest(rs, cutoffs=(0.5,), peers=(), methods={BAYES: method})
    cols = ["run_id", "ok", "message", "crps", "warnings"]
    a, b = (r.cases.set_index("run_id").sort_index().reset_index() for r in (serial, par))
    pd.testing.assert_frame_equal(a[[c for c in cols if c in a]], b[[c for c in cols if c in b]])
    c = b.set_index("run_id")
    assert not bool(c.loc["r3", "ok"]) and "sampling exploded" in c.loc["r3", "message"]
    assert c.drop(index="r3")["ok"].astype(bool).all() and "sampler health is poor" in c.loc["r0", "warnings"]
