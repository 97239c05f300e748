"""One sampling module for every PyMC model of the package (forecast, compare, the Domhan peer).

* :class:`SamplerConfig` -- NUTS settings, kept apart from any model configuration.
* :func:`compile_model` -- nutpie compilation, cached per process and on disk
  (:mod:`bayesgrpo.inference.model_cache`): a graph is compiled once per machine and reused by every later
  process (a new process's first forecast, imports and compile included: ``bench/results/speed.md``); data enter as ``pm.Data`` and are swapped per call.
* :func:`nuts` -- swap data into a compiled model and run nutpie's NUTS; returns the DataTree.
* :func:`log_density` -- the compiled model's log posterior density and gradient with data swapped in
  (what the evidence of :mod:`bayesgrpo.inference.evidence` is computed on);
* :func:`nuts` -- swap data into a compiled model and run nutpie's NUTS; returns the DataTree
  (a Ctrl-C stops the chains and raises ``KeyboardInterrupt``, never a short trace).
* :func:`batch_seed` -- a seed that depends on the sampler seed and the run ids only.
* :func:`health` -- r_hat, ESS and divergences per run (or over all variables); :func:`needs_retry` --
  whether a run is sampled again (:attr:`SamplerConfig.retry`), :func:`thinned` -- its draws cut back;
  :func:`health_problems` -- what is wrong with them against thresholds (:data:`STATUS_HEALTH`: the
  status ``warning`` of a forecast).

Why nutpie directly rather than ``pm.sample``: ``pm.sample`` compiles the model anew on every call;
nutpie's compiled model can be reused with ``with_data`` (a forecast of 100 runs then costs one
compile). Tests replace :func:`compile_model` and :func:`nuts` (see ``tests/conftest.py``).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bayesgrpo.inference.compile import compile_here, compile_isolated, compile_to_cache

__all__ = [
    "SamplerConfig",
    "compile_model",
    "nuts",
    "batch_seed",
    "posterior_dataset",
    "as_dataset",
    "health",
    "is_cached",
    "log_density",
    "LogDensity",
    "health_problems",
    "needs_retry",
    "retry_seed",
    "thinned",
    "STATUS_HEALTH",
    "status_thresholds",
]

log = logging.getLogger("bayesgrpo")


class SamplerConfig(BaseModel):
    """NUTS settings (nutpie); the same defaults for every command.

    Parameters
    ----------
    draws, tune : int
        Posterior draws and tuning steps per chain.
    chains : int
    target_accept : float
        Target acceptance rate of the step-size adaptation. 0.99: measured on 24 development runs x 2
        cutoffs, 0.95 left a divergent transition in 38% of forecasts, 0.97 in 17%, 0.99 in none, for
        1.7x the leapfrog steps (the posteriors have a short-timescale corner where the plateau is
        pinned to the current level).
    low_rank_mass_matrix : bool
        Adapt a low-rank mass matrix (captures the plateau-timescale correlation).
    backend : {"numba"}
        What nutpie compiles the model to (the likelihood Ops have no JAX implementation).
    seed : int
    retry : bool
        Sample a run a second time, once, when its chains disagree or diverged (:func:`needs_retry`:
        r_hat above 1.01 or any divergent transition, with at least :data:`RETRY_MIN_DRAWS` draws per
        chain), with :meth:`retried` settings and another seed; the first chains are dropped, the second
        thinned to ``draws`` per chain, and the health a fit reports is that of the draws it keeps.
        Per-run forecaster fits only: a joint (hierarchical) fit, ``compare`` and the context runs' own
        fits are sampled once. Measured on the 290 cases of the development benchmark
        (``bench/results/sampling.md``, rows ``kernel_ab`` and ``retry``): without it r_hat > 1.01 in 9.7% of
        forecasts and a divergence in 3.4%; with it 1.4% and 1.0%, for 29% more CPU per forecast on average
        and the same scores (all 30 development sources, 407 cases: 8.4% / 4.2% without, 1.0% / 1.5% with it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    draws: int = Field(1000, ge=10, description="posterior draws per chain")
    tune: int = Field(800, ge=10, description="tuning steps per chain")
    chains: int = Field(2, ge=1, le=64)
    target_accept: float = Field(0.99, gt=0.5, lt=1.0)
    low_rank_mass_matrix: bool = Field(True, description="adapt a low-rank mass matrix")
    backend: str = Field(
        "numba",
        pattern="^numba$",
        description="backend nutpie compiles the model to (the Kalman Ops are numba kernels)",
    )
    seed: int = Field(0, ge=0, lt=2**32, description="random seed (an integer in [0, 2**32))")
    retry: bool = Field(True, description="sample a run again, once, when its chains disagree or diverged")

    def retried(self) -> SamplerConfig:
        """The settings of a run's second sampling: twice the draws (a fit keeps every second one, so every
        run of a fit has ``draws`` draws), 1.25x the tuning and ``target_accept`` 0.995 (a smaller step,
        fewer divergent transitions per draw); never retried again."""
        return self.model_copy(update=dict(draws=2 * self.draws, tune=int(round(1.25 * self.tune)),
                                           target_accept=max(self.target_accept, 0.995), retry=False))  # fmt: skip


_CACHE: dict = {}
_LOADED: dict = {}  # disk-cache digest -> model loaded or compiled by this process (code stays loaded)


def is_cached(key: Hashable) -> bool:
    """True when :func:`compile_model` holds a compiled model for ``key`` in this process."""
    return key in _CACHE


def compile_model(key: Hashable | None, build: Callable[[], object], *, backend: str = "numba", **kwargs):
    """nutpie-compiled model for ``key``: compiled once per machine, kept per process.

    Parameters
    ----------
    key : hashable or None
        Everything the graph's structure depends on (model kind, prior constants, shapes that are
        not data). Two calls with the same key must build the same graph. ``None``: compiled afresh,
        never cached (nutpie's own initialisation).
    build : callable
        Returns the ``pymc.Model``; only called when neither this process nor the disk cache holds
        the model (so a warm start never imports PyMC).
    backend : {"numba", "jax"}
    **kwargs
        Forwarded to ``nutpie.compile_pymc_model``.

    Notes
    -----
    With a key and the numba backend the model is looked up in the disk cache
    (:mod:`bayesgrpo.inference.model_cache`; ``BAYESGRPO_CACHE=off`` disables it), and compiled under
    a per-entry lock on a miss (in a child process whose stored entry is then loaded). With the disk
    cache off the model is compiled the same way through a temporary entry removed at once, so both
    modes run the same machine code and give the same draws for a seed. Its chains start at the
    support point plus ``U(-1, 1)`` jitter drawn with numpy from nutpie's seed
    (:class:`~bayesgrpo.inference.model_cache.JitteredPoint`), whether it was compiled or loaded.
    Log lines (``-v``): ``compiled a model in ... s`` or ``loaded a compiled model from the disk cache
    in ... s``.
    """
    if key is not None and key in _CACHE:
        return _CACHE[key]
    if key is None or backend != "numba":
        return _compile(key, build, backend=backend, **kwargs)
    from bayesgrpo.inference import model_cache as mc

    root = mc.cache_dir()
    if root is None:  # no disk cache: compiled through a temporary entry (the cached path's machine code)
        compiled = compile_isolated(key, build, backend=backend, **kwargs)
        _CACHE[key] = compiled
        return compiled
    t0 = time.perf_counter()
    digest, desc = mc.entry_digest(key, backend=backend, options=kwargs, build=build)
    compiled = _LOADED.get(digest)
    if compiled is None:
        cache = mc.ModelCache(root)
        compiled = cache.load(digest, desc)
        fresh = False
        if compiled is None:
            with cache.lock(digest):
                compiled = cache.load(digest, desc)  # another process may have written it while we waited
                if compiled is None:
                    compiled = compile_to_cache(cache, digest, desc, key, build, backend=backend, **kwargs)
                    fresh = True
        if not fresh:
            log.info(
                "loaded a compiled model from the disk cache in %.2f s (entry %s)", time.perf_counter() - t0, digest
            )
        _LOADED[digest] = compiled
    _CACHE[key] = compiled
    return compiled


def _compile(key, build, *, backend: str, **kwargs):
    """Compile in this process (kept in this process's cache when ``key`` is given)."""
    compiled = compile_here(key, build, backend=backend, **kwargs)
    if key is not None:
        _CACHE[key] = compiled
    return compiled


def nuts(compiled, *, data: dict | None = None, sampler: SamplerConfig, seed: int, required=("y", "mask"), **extra):
    """Swap ``data`` into the compiled model (by ``pm.Data`` name) and run NUTS.

    Data variables the graph does not use are pruned by the compiler and skipped here; the
    ``required`` ones must exist (``RuntimeError`` otherwise: a run would silently be sampled with
    another run's data). ``extra`` is forwarded to the sampler (e.g. ``maxdepth``). Returns
    ``{"posterior": Dataset, "sample_stats": Dataset}``.

    NUTS runs on nutpie's Rust core without nutpie's Python layer (:mod:`bayesgrpo.inference.nuts_core`:
    the same draws bit for bit, without importing ArviZ, scipy and matplotlib on every forecast); with
    a nutpie version outside the pinned range, through ``nutpie.sample``. A Ctrl-C stops the chains and
    raises ``KeyboardInterrupt`` (never a short trace a forecast could be made from).
    """
    from bayesgrpo.inference import nuts_core

    cm = _with_data(compiled, data, required)
    adaptation = "low_rank" if sampler.low_rank_mass_matrix else "diag"
    kw = dict(draws=sampler.draws, tune=sampler.tune, chains=sampler.chains, cores=min(sampler.chains, 2),
              target_accept=sampler.target_accept, seed=int(seed), **extra)  # fmt: skip
    if not nuts_core.available():
        return _nuts_nutpie(cm, adaptation=adaptation, **kw)
    draws = nuts_core.start(cm, adaptation=adaptation, **kw).wait()  # aborts the chains on any exception
    return {"posterior": draws.dataset("posterior"), "sample_stats": draws.dataset("sample_stats")}


def _nuts_nutpie(cm, *, adaptation: str, **kw):
    """:func:`nuts` through ``nutpie.sample`` (its Python layer; a nutpie outside ``nuts_core``'s range)."""
    import nutpie

    run = nutpie.sample(cm, progress_bar=False, blocking=False, adaptation=adaptation, **kw)
    try:
        return run.wait()
    except KeyboardInterrupt:
        # nutpie's blocking sample() would swallow a Ctrl-C and return the draws so far as a finished
        # (short or empty) trace; a forecast must never be made from that: stop the chains and pass it on
        run.cancel()
        raise


def _with_data(compiled, data: dict | None, required):
    """The compiled model with ``data`` swapped in (by ``pm.Data`` name; names the graph pruned are skipped)."""
    if not data:
        return compiled
    known = {v.name for v in compiled.shared_var_keys} if hasattr(compiled, "shared_var_keys") else set(data)
    missing = sorted(set(required) & set(data) - known)
    if missing:
        raise RuntimeError(f"compiled model has no data variable(s) {missing} (has {sorted(known)})")
    return compiled.with_data(**{k: v for k, v in data.items() if k in known})


class LogDensity:
    """The log posterior density (up to nothing: every normalising constant included) of a compiled
    model with ``data`` swapped in, and its gradient, on the sampler's unconstrained space.

    ``logp(x) -> (value, gradient)``; ``(-inf, zeros)`` where the density is not finite. Calls the
    compiled C callback nutpie samples with (no PyMC), so it costs what one leapfrog step costs.
    """

    def __init__(self, compiled, data: dict | None = None, *, required=("y", "mask")):
        import ctypes

        self.compiled = _with_data(compiled, data, required)
        self.n_dim = int(self.compiled.n_dim)
        sig = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, *(ctypes.c_void_p,) * 4)
        self._fn = sig(self.compiled.compiled_logp_func.address)
        self._user = self.compiled.user_data
        self.n_calls = 0

    def __call__(self, x) -> tuple[float, np.ndarray]:
        x = np.ascontiguousarray(x, dtype=np.float64)
        grad = np.zeros(self.n_dim)
        lp = np.zeros(())
        rc = self._fn(self.n_dim, x.ctypes.data, grad.ctypes.data, lp.ctypes.data, self._user.ctypes.data)
        self.n_calls += 1
        if rc != 0 or not np.isfinite(lp) or not np.all(np.isfinite(grad)):
            return -np.inf, np.zeros(self.n_dim)
        return float(lp), grad

    def initial_point(self, seed: int = 0) -> np.ndarray:
        """Where the sampler's chains start (the support point plus its jitter for ``seed``)."""
        return np.asarray(self.compiled.initial_point_func(seed), dtype=np.float64)


def log_density(compiled, data: dict | None = None, *, required=("y", "mask")) -> LogDensity:
    """:class:`LogDensity` of ``compiled`` with ``data`` swapped in (what :func:`nuts` would sample)."""
    return LogDensity(compiled, data, required=required)


def batch_seed(seed: int, run_ids: Sequence[str]) -> int:
    """Seed for one batch: depends on ``seed`` and the run ids only (not on other runs of the call)."""
    return int(np.random.default_rng([int(seed), zlib.crc32("\x1f".join(run_ids).encode())]).integers(2**31))


def as_dataset(node):
    """The ``xarray.Dataset`` of a DataTree node (a Dataset is returned as it is)."""
    return node.to_dataset() if hasattr(node, "to_dataset") else node


def posterior_dataset(idata, group: str = "posterior"):
    """The ``xarray.Dataset`` of one group of a sampler result (DataTree or dict of Datasets)."""
    return as_dataset(idata[group])


def health(posterior, sample_stats=None, *, var_names: Sequence[str], dim: str | None = "run") -> dict:
    """Sampler health: max r_hat, min bulk ESS and the number of divergent transitions.

    With ``dim`` (default ``"run"``) a dict ``{run_id: {"r_hat_max", "ess_min", "divergences"}}``
    (divergences are per sampled batch); with ``dim=None`` one dict over all variables.
    Constant variables (zero posterior sd) are ignored. Rank-normalised split R-hat and bulk ESS are
    ArviZ's definitions computed on numpy (:mod:`bayesgrpo.inference.diagnostics`, equal to
    ``arviz.rhat`` / ``arviz.ess`` on the same draws): a forecast never imports ArviZ (and with it
    scipy and matplotlib) to report two numbers.
    """
    from bayesgrpo.inference.diagnostics import run_health

    names = [v for v in var_names if v in posterior and float(posterior[v].std()) > 0]
    div = int(sample_stats["diverging"].sum()) if sample_stats is not None and "diverging" in sample_stats else 0
    if not names:
        base = {"r_hat_max": float("nan"), "ess_min": float("nan"), "divergences": div}
        return {str(r): dict(base) for r in posterior[dim].to_numpy()} if dim else base
    if dim is None:
        draws = {v: posterior[v].transpose("chain", "draw", ...).to_numpy() for v in names}
        return run_health(draws, var_names=names, divergences=div, per_run=False)
    rn = [v for v in names if dim in posterior[v].dims]
    draws = {v: posterior[v].transpose("chain", "draw", ..., dim).to_numpy() for v in rn}
    draws = {v: x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1]) for v, x in draws.items()}
    out = {}
    for j, rid in enumerate(posterior[dim].to_numpy()):
        per = {v: x[..., j] for v, x in draws.items()}  # (chain, draw, elements) of this run
        out[str(rid)] = run_health(per, var_names=rn, divergences=div, per_run=False)
    return out


#: sampler health past which a forecast's status is ``warning`` instead of ``ok``: split r_hat above
#: 1.05 (chains that disagree; plus 2 / draws per chain, the spread of r_hat itself for short chains:
#: 1.07 is common for 20 well-mixed draws), bulk ESS below 50 (too few effective draws for a 90%
#: interval; below a quarter of the draws when fewer than 200 were asked for), or divergent
#: transitions in more than 1% of the draws. Milder problems (r_hat > 1.01, ESS < 200, any divergence)
#: stay an ``ok`` status with a sampler warning.
STATUS_HEALTH = {"r_hat": 1.05, "r_hat_per_draw": 2.0, "ess": 50.0, "ess_share": 0.25, "divergent_share": 0.01}


def status_thresholds(sampler: SamplerConfig) -> dict[str, float]:
    """:data:`STATUS_HEALTH` for ``sampler``'s draws and chains: ``r_hat``, ``ess`` and ``max_divergences`` (the
    keywords of :func:`health_problems`) -- the one reading of the rule the status and the report state."""
    t, n = STATUS_HEALTH, sampler.draws * sampler.chains
    return {"r_hat": t["r_hat"] + t["r_hat_per_draw"] / sampler.draws, "ess": min(t["ess"], t["ess_share"] * n),
            "max_divergences": t["divergent_share"] * n}  # fmt: skip


#: the chain length from which :func:`needs_retry` reads r_hat: with fewer draws per chain r_hat exceeds 1.01
#: by its own noise in most healthy runs (``sampling.md``: half of them at 2 x 500 draws of ESS/draws 1/3),
#: and a user who asked for short chains asked for speed
RETRY_MIN_DRAWS = 500
#: r_hat above which a run is sampled again (:attr:`SamplerConfig.retry`); any divergence is too
RETRY_R_HAT = 1.01


def needs_retry(h: dict, sampler: SamplerConfig) -> bool:
    """Whether a run of sampler health ``h`` (:func:`health`) is sampled again under ``sampler``."""
    if not sampler.retry or sampler.draws < RETRY_MIN_DRAWS:
        return False
    return bool(health_problems(h, r_hat=RETRY_R_HAT, ess=0.0))


def retry_seed(seed: int) -> int:
    """The seed of a run's second sampling (:attr:`SamplerConfig.retry`): deterministic, and another
    stream and other starting points than ``seed``'s (chains that disagreed may have started badly)."""
    return int(np.random.default_rng([int(seed), 1]).integers(2**31))


def thinned(ds, draws: int):
    """``ds`` (a posterior or sample-stats dataset with a ``draw`` dimension) cut to ``draws`` draws per
    chain by keeping every k-th (k = its draws // ``draws``), the draw coordinate renumbered. A
    ``diverging`` flag is kept for a window of k draws when any of them diverged (a divergent transition
    is never thinned away)."""
    n = ds.sizes["draw"]
    if n <= draws:
        return ds
    k = n // draws
    out = ds.isel(draw=slice(None, None, k)).isel(draw=slice(0, draws))
    if "diverging" in ds:
        flags = ds["diverging"].isel(draw=slice(0, k * draws)).coarsen(draw=k).any()
        out = out.assign(diverging=(flags.dims, flags.to_numpy()))
    return out.assign_coords(draw=np.arange(draws))


def health_problems(h: dict, *, r_hat: float, ess: float, max_divergences: float = 0.0) -> list[str]:
    """The problems of one run's sampler health ``h`` (:func:`health`): r_hat above ``r_hat``, ESS
    below ``ess``, more than ``max_divergences`` divergent transitions. Empty when healthy."""
    bad = []
    if np.isfinite(h.get("r_hat_max", np.nan)) and h["r_hat_max"] > r_hat:
        bad.append(f"r_hat {h['r_hat_max']:.3f} > {r_hat:g}")
    if np.isfinite(h.get("ess_min", np.nan)) and h["ess_min"] < ess:
        bad.append(f"ESS {h['ess_min']:.0f} < {ess:.0f}")
    if h.get("divergences", 0) > max_divergences:
        bad.append(f"{h['divergences']} divergent transitions in its batch")
    return bad
