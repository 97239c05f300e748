"""NUTS through nutpie's Rust core, without nutpie's Python layer: draws as numpy arrays.

Why: ``import nutpie`` runs ``nutpie/sample.py``, which imports arviz, xarray and (through arviz)
matplotlib, scipy and dask at module level -- about 2.4-5 s of a warm forecast's start
(``bench/results/imports.md``) for a conversion of the draws to an ArviZ DataTree that a forecast
does not need. nutpie's sampler itself is the compiled extension ``nutpie._lib`` (Rust, 3 ms to
load); what nutpie's Python layer does around it for a compiled PyMC model is small and is
reproduced here call for call (``nutpie/sample.py::sample`` and
``nutpie/compile_pymc.py::CompiledPyMCModel._make_model``), so the same seed gives the same draws
bit for bit (``tests/test_nuts_core.py`` checks it against ``nutpie.sample``).

* :func:`nutpie_lib` -- the ``nutpie._lib`` extension, loaded without running ``nutpie/__init__``
  (registered as ``nutpie._lib``, so a later ``import nutpie`` reuses it);
* :func:`start` / :class:`Running` -- NUTS on a compiled model (anything with nutpie's ``CompiledPyMCModel``
  attributes: the two callback addresses, the shared-data record, the shapes and the initial-point
  function) on nutpie's threads while Python does other work (several runs may be in flight, e.g. one
  per core); ``Running.wait()`` returns :class:`Draws`.
* :class:`CompiledModel` -- those attributes and ``with_data`` without nutpie's Python layer (what the
  disk cache of compiled models loads, :mod:`bayesgrpo.inference.model_cache`).

This relies on nutpie's private extension API, so the supported nutpie versions are pinned
(:data:`NUTPIE_VERSIONS`, also in ``pyproject.toml``) and checked when the extension is loaded;
outside them :func:`nutpie_lib` raises ``ImportError`` and callers fall back to ``nutpie.sample``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["NUTPIE_VERSIONS", "nutpie_lib", "start", "Running", "Draws", "CompiledModel", "update_user_data"]

#: nutpie versions whose private ``_lib`` API this module is written against ([low, high))
NUTPIE_VERSIONS = ((0, 16, 11), (0, 17, 0))


def _version_tuple(v: str) -> tuple[int, ...]:
    import re

    return tuple(int(m.group()) if (m := re.match(r"\d+", part)) else 0 for part in v.split(".")[:3])


def available() -> bool:
    """True when nutpie's Rust core can be used directly (:func:`nutpie_lib` loads); else the callers go
    through nutpie's own Python layer (a nutpie version outside :data:`NUTPIE_VERSIONS`)."""
    try:
        nutpie_lib()
    except ImportError:
        return False
    return True


def nutpie_lib():
    """The ``nutpie._lib`` extension module (nutpie's Rust sampler), without nutpie's Python layer.

    Raises
    ------
    ImportError
        nutpie is not installed, or its version is outside :data:`NUTPIE_VERSIONS`.
    """
    lib = sys.modules.get("nutpie._lib")
    if lib is None:
        spec = importlib.util.find_spec("nutpie")  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("nutpie is not installed")
        found = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "_lib*.so")))
        found += sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "_lib*.pyd")))
        if not found:
            raise ImportError("nutpie's compiled extension nutpie._lib was not found")
        lspec = importlib.util.spec_from_file_location("nutpie._lib", found[0])
        if lspec is None or lspec.loader is None:
            raise ImportError(f"nutpie's compiled extension {found[0]} cannot be loaded")
        lib = importlib.util.module_from_spec(lspec)
        lspec.loader.exec_module(lib)
        sys.modules["nutpie._lib"] = lib  # `import nutpie` later finds it (an extension initialises once)
    lo, hi = NUTPIE_VERSIONS
    if not lo <= _version_tuple(lib.__version__) < hi:
        raise ImportError(
            f"nutpie {lib.__version__} is outside the versions bayesgrpo's direct sampler supports "
            f"({'.'.join(map(str, lo))} <= v < {'.'.join(map(str, hi))})"
        )
    return lib


@dataclass
class Draws:
    """What one NUTS call returns, as numpy arrays.

    ``posterior[name]`` has shape ``(chains, draws, *shape)``; ``stats[name]`` ``(chains, draws)``
    for the posterior draws and ``warmup_stats[name]`` ``(chains, tune)`` for the tuning ones
    (``n_steps``, ``diverging``, ``step_size``, ``depth``, ``logp``, ...). ``dims`` and ``coords`` (of
    the compiled model) label the axes when the draws are turned into xarray (:meth:`dataset`).
    """

    posterior: dict
    stats: dict
    warmup_stats: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)

    @property
    def n_grad(self) -> int:
        """Gradient evaluations of the whole call (tuning and draws)."""
        return int(self.stats["n_steps"].sum() + self.warmup_stats.get("n_steps", np.zeros(0)).sum())

    @property
    def divergences(self) -> int:
        """Divergent transitions among the posterior draws."""
        return int(self.stats["diverging"].sum())

    def dataset(self, group: str = "posterior"):
        """One group (``posterior``, ``sample_stats`` or ``warmup_sample_stats``) as an ``xarray.Dataset``
        with dims ``(chain, draw, *the variable's dims)`` (imports xarray: for saving and diagnosing)."""
        import xarray as xr

        src = {"posterior": self.posterior, "sample_stats": self.stats, "warmup_sample_stats": self.warmup_stats}[group]
        out = {}
        coords: dict = {}
        for name, v in src.items():
            dims = list(self.dims.get(name, ())) if group == "posterior" else []
            dims = dims if len(dims) == v.ndim - 2 else [f"{name}_dim_{i}" for i in range(v.ndim - 2)]
            out[name] = (("chain", "draw", *dims), v)
            for d, k in zip(dims, v.shape[2:], strict=True):
                c = self.coords.get(d)
                if c is not None and len(c) == k:
                    coords[d] = np.asarray(c)
        first = next(iter(src.values()))
        coords.update(chain=np.arange(first.shape[0]), draw=np.arange(first.shape[1]))
        return xr.Dataset(out, coords=coords)

    @classmethod
    def from_datatree(cls, idata) -> Draws:
        """The draws of an ArviZ DataTree / InferenceData (``nutpie.sample``'s result)."""

        def group(name):
            try:
                node = idata[name]
            except KeyError:
                return {}
            ds = node.to_dataset() if hasattr(node, "to_dataset") else node
            return {k: ds[k].to_numpy() for k in ds.data_vars}

        post = idata["posterior"]
        post = post.to_dataset() if hasattr(post, "to_dataset") else post
        dims = {k: tuple(post[k].dims[2:]) for k in post.data_vars}
        coords = {d: post[d].to_numpy() for d in post.dims if d not in ("chain", "draw")}
        return cls(posterior=group("posterior"), stats=group("sample_stats"), warmup_stats=group("warmup_sample_stats"),
                   dims=dims, coords=coords)  # fmt: skip


def update_user_data(user_data: np.ndarray, shared: dict) -> np.ndarray:
    """The record of pointers, sizes and shapes of the shared arrays the compiled callbacks read
    (``nutpie.compile_pymc.update_user_data``): a copy of ``user_data`` pointing at ``shared``."""
    rec = np.array(user_data, copy=True)
    r = rec[()]
    for key, val in shared.items():
        r["shared"]["data"][key] = val.ctypes.data
        r["shared"]["size"][key] = val.size
        r["shared"]["shape"][key] = val.shape
    return rec


@dataclass(frozen=True)
class CompiledModel:
    """A compiled model as nutpie's sampler needs it, without nutpie's Python layer.

    ``compiled_logp_func`` / ``compiled_expand_func`` expose the ``address`` of nutpie's two C callbacks;
    ``shared_data`` maps keys to the (read-only) data arrays the callbacks read through ``user_data``,
    ``shared_var_keys`` maps objects with a ``name`` (the ``pm.Data`` names) to those keys; ``shape_info``
    is ``(names, slices, shapes)`` of the expanded (traced) variables.
    """

    compiled_logp_func: object
    compiled_expand_func: object
    initial_point_func: object
    shared_data: dict
    shared_var_keys: dict
    user_data: np.ndarray
    n_dim: int
    n_expanded: int
    shape_info: tuple
    dims: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)

    def with_data(self, **updates) -> CompiledModel:
        """The same model reading other arrays for the named shared variables (same rank; copied, read-only)."""
        by_name = {var.name: key for var, key in self.shared_var_keys.items()}
        shared = dict(self.shared_data)
        for name, value in updates.items():
            if name not in by_name:
                raise KeyError(f"Unknown shared variable: {name}")
            key = by_name[name]
            new = np.array(value, dtype=shared[key].dtype, order="C", copy=True)
            if new.ndim != shared[key].ndim:
                raise ValueError(f"Shared variable {name} must have rank {shared[key].ndim}")
            new.flags.writeable = False
            shared[key] = new
        return replace(self, shared_data=shared, user_data=update_user_data(self.user_data, shared))


#: sampler statistics kept (the others -- mass matrix, positions, gradients -- are large and unused)
_STATS = ("n_steps", "diverging", "step_size", "depth", "logp", "energy", "mean_tree_accept", "tuning")


def _settings(lib, *, seed, adaptation, tune, draws, chains, **extra):
    if adaptation == "low_rank":
        s = lib.PyNutsSettings.LowRank(seed)
    elif adaptation in ("diag", "draw_diag"):
        s = lib.PyNutsSettings.Diag(seed)
        if adaptation == "draw_diag":
            s.use_grad_based_mass_matrix = False
    else:
        raise ValueError(f"unknown adaptation {adaptation!r}; choose low_rank, diag or draw_diag")
    s.update({**extra, "num_tune": int(tune), "num_draws": int(draws), "num_chains": int(chains)})
    return s


def _core_model(lib, compiled):
    """nutpie's ``PyMcModel`` of a compiled model (as ``CompiledPyMCModel._make_model``).

    Dims are one per axis of each variable (``<name>_dim_<i>``, with its size) and there are no coords:
    they only label the sampler's arrow output, which :meth:`Running.wait` reads by name and shape (the draws
    are the same, checked in ``tests/test_nuts_core.py``)."""
    expand = lib.ExpandFunc(compiled.n_dim, compiled.n_expanded, compiled.compiled_expand_func.address,
                            compiled.user_data.ctypes.data, compiled)  # fmt: skip
    logp = lib.LogpFunc(compiled.compiled_logp_func.address, compiled.user_data.ctypes.data, compiled)
    names, _, shapes = compiled.shape_info
    shapes = [tuple(int(d) for d in s) for s in shapes]
    dims = {n: tuple(f"{n}_dim_{i}" for i in range(len(s))) for n, s in zip(names, shapes, strict=True)}
    sizes = {d: k for n, s in zip(names, shapes, strict=True) for d, k in zip(dims[n], s, strict=True)}
    variables = lib.PyVariable.new_variables(list(names), ["float64"] * len(names), shapes, sizes, dims)

    def make_adapter(*args, **kwargs):  # only called with adaptation="flow", which start() refuses
        raise RuntimeError("the normalising-flow adaptation needs nutpie's Python layer")

    return lib.PyMcModel(logp, expand, variables, compiled.n_dim, sizes, {}, compiled.initial_point_func, make_adapter)


def _column(batch, name: str, shape: tuple) -> np.ndarray:
    col = batch.column(name)
    try:
        values = col.to_numpy()
    except (TypeError, ValueError, NotImplementedError):  # list columns (one vector per draw): flatten through pyarrow
        import pyarrow as pa

        values = pa.array(col).flatten().to_numpy(zero_copy_only=False)
    return np.asarray(values).reshape((batch.num_rows, *shape))


class Running:
    """A NUTS run in progress on nutpie's threads (:func:`start`); :meth:`wait` returns its :class:`Draws`."""

    def __init__(self, sampler, compiled, var_names):
        self._sampler, self._compiled, self._var_names = sampler, compiled, var_names

    def wait(self) -> Draws:
        """Block until the run is done; its draws as numpy arrays."""
        try:
            self._sampler.wait(None)
            trace = self._sampler.take_results()
        except BaseException:
            self._sampler.abort()
            raise
        return _draws(trace, self._compiled, self._var_names)

    def abort(self) -> None:
        self._sampler.abort()


def start(compiled, *, draws: int, tune: int, chains: int, cores: int, seed: int, target_accept: float,
          adaptation: str = "low_rank", var_names=None, **extra) -> Running:  # fmt: skip
    """Start NUTS on ``compiled`` in the background (nutpie's threads; the GIL is free meanwhile).

    Several runs may be in flight at once (e.g. one per core with ``cores=1``): the draws of a run
    depend on its seed only, not on ``cores`` or on what else runs. ``start(...).wait()`` gives the same
    draws as ``nutpie.sample(compiled, ..., progress_bar=False)`` with the same arguments.

    Parameters
    ----------
    compiled
        A nutpie ``CompiledPyMCModel`` or a :class:`CompiledModel`.
    var_names : sequence of str, optional
        Posterior variables to return (default: all).
    **extra
        Further nutpie sampler settings (e.g. ``maxdepth``).
    """
    lib = nutpie_lib()
    settings = _settings(lib, seed=seed, adaptation=adaptation, tune=tune, draws=draws, chains=chains,
                         target_accept=target_accept, **extra)  # fmt: skip
    model = _core_model(lib, compiled)
    sampler = lib.PySampler.from_pymc(settings, int(cores), model, lib.ProgressType.none(), None, 100,
                                      lib.PyStorage.arrow())  # fmt: skip
    return Running(sampler, compiled, var_names)


def _draws(trace, compiled, var_names) -> Draws:
    draw_batches, stat_batches = trace.get_arrow_trace()
    names, _, shapes = compiled.shape_info
    keep = [(n, tuple(s)) for n, s in zip(names, shapes, strict=True) if var_names is None or n in var_names]
    post: dict[str, list] = {n: [] for n, _ in keep}
    stats: dict[str, list] = {n: [] for n in _STATS if n != "tuning"}
    warm: dict[str, list] = {n: [] for n in stats}
    for db, sb in zip(draw_batches, stat_batches, strict=True):
        tuning = _column(sb, "tuning", ()).astype(bool)
        for n, shape in keep:
            post[n].append(_column(db, n, shape)[~tuning])
        for n in stats:
            v = _column(sb, n, ())
            stats[n].append(v[~tuning])
            warm[n].append(v[tuning])
    return Draws(
        posterior={n: np.stack(v) for n, v in post.items()},
        stats={n: np.stack(v) for n, v in stats.items()},
        warmup_stats={n: np.stack(v) for n, v in warm.items()},
        dims=dict(getattr(compiled, "dims", None) or {}),
        coords=dict(getattr(compiled, "coords", None) or {}),
    )
