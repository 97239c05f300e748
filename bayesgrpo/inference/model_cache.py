"""A compile that outlives the process: nutpie-compiled models cached on disk.

:func:`bayesgrpo.inference.sampling.compile_model` is the only caller (compiles:
:mod:`bayesgrpo.inference.compile`). A cold start of one forecast
spends most of its time compiling (``bench/results/fleet.md``): importing PyMC, building the graph,
PyTensor's rewrites, and above all numba's code generation of nutpie's two C callbacks (the
log-density with its gradient, and the "expand" function that computes the traced deterministics),
which inline the whole PyTensor graph and are not cacheable by numba itself (nutpie compiles them
with ``numba.cfunc`` over closures, which numba's ``cache=True`` refuses; PyTensor's own numba disk
cache, ``config.numba__cache``, only covers the inner graph functions, so every process still
re-generates and re-optimises the callbacks). What nutpie's Rust sampler needs from a compiled
model is small: the *addresses* of those two C functions, a record of pointers to the shared
(``pm.Data``) arrays, an initial-point function, and the names, shapes, dims and coords of the
traced variables. So this module stores exactly that:

* the **machine code** of each callback -- the object code of its numba code library
  (``CodeLibrary.serialize_using_object_code``, what numba's own cache stores), which is
  self-contained: the library links every PyTensor kernel and the bayesgrpo Kalman kernels it calls,
  and it holds no process-specific addresses (checked: ``has_dynamic_globals`` is refused);
* the layout of the shared-data record and the compile-time values of the shared arrays;
* the model metadata (names, slices, shapes, dims, coords) and the initial point's centre (the
  initial point itself is ``centre + U(-1, 1)`` jitter drawn with numpy from the seed, the same on a
  fresh compile and on a load: :class:`JitteredPoint`);
* a self-check: the log-density and gradient at a fixed point with the compile-time data
  (reproduced to rounding by a load, else the entry is rejected).

Loading needs numba and nutpie but neither PyMC nor PyTensor (the warm path of ``bayesgrpo
forecast`` never imports them). An entry is trusted only if its checksum matches, its key matches
(everything the graph depends on: the caller's key, the backend and compile options, the versions of
bayesgrpo, PyTensor, PyMC, nutpie, numba, llvmlite and numpy, the host CPU as numba's code
generator names it, and a hash of the source of every module that defines the graph), its format
is this one, and the self-check reproduces the stored numbers (to rounding); anything else is logged,
removed and rebuilt. Writers take an exclusive lock per entry (:mod:`filelock`) and publish by
atomic rename, so concurrent processes compile an entry once and readers never see half a file.

Where: ``$BAYESGRPO_CACHE`` if set (``off``, ``0`` or ``none`` disables the disk cache: models are
then compiled into a temporary entry that is loaded and removed at once, so they run the same machine
code and give the same draws, :func:`bayesgrpo.inference.compile.compile_isolated`), else
``$XDG_CACHE_HOME/bayesgrpo/models``, else ``~/.cache/bayesgrpo/models``.

Limits (why this relies on numba internals): numba has no public API to persist a ``cfunc``'s code
under a key of our own; the calls used here (``serialize_using_object_code``,
``Codegen.unserialize_library``, ``Codegen.set_env``) are the ones numba's ``FunctionCache`` uses.
The numba and nutpie versions are part of the key, and any failure to load falls back to a compile.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import pickle
import sys
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "ModelCache", "JitteredPoint", "CACHE_ENV", "CACHE_FORMAT", "entry_digest", "graph_sources"]

log = logging.getLogger("bayesgrpo")

#: environment variable naming the cache folder (or ``off`` to disable the disk cache)
CACHE_ENV = "BAYESGRPO_CACHE"
#: version of the entry layout; a different one is rebuilt
CACHE_FORMAT = 1
_MAGIC = b"bayesgrpo-compiled-model\n"
_OFF = {"off", "0", "none", "false", "no"}
_SUFFIX = ".model"


def cache_dir() -> Path | None:
    """The folder of the disk cache, or None when it is switched off (``BAYESGRPO_CACHE=off``)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None and env.strip().lower() in _OFF:
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "bayesgrpo" / "models"


# ---------------------------------------------------------------------------------------------- keys
def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def _host() -> tuple:
    """Target triple, CPU name and CPU features of numba's code generator (object code is CPU-specific)."""
    from numba.core.registry import cpu_target

    return tuple(cpu_target.target_context.codegen().magic_tuple())


_PKG = Path(__file__).resolve().parents[1]
#: modules whose source defines the forecasting graphs (with the kernels of the likelihood Ops)
_GRAPH_MODULES = ("models", "inference/sampling.py", "inference/compile.py")


def graph_sources(build=None) -> list[Path]:
    """Source files hashed into every key: ``bayesgrpo/models/*.py``, ``inference/sampling.py``,
    ``inference/compile.py`` and the file that defines ``build`` (e.g. the forecaster or the Domhan peer)."""
    files = []
    for rel in _GRAPH_MODULES:
        p = _PKG / rel
        files += sorted(p.glob("*.py")) if p.is_dir() else [p]
    while hasattr(build, "func"):  # functools.partial
        build = build.func
    code = getattr(build, "__code__", None) or getattr(getattr(build, "__func__", None), "__code__", None)
    if code is not None and code.co_filename and Path(code.co_filename).is_file():
        f = Path(code.co_filename).resolve()
        if f not in files:
            files.append(f)
    return files


def entry_digest(key, *, backend: str, options: dict, build=None) -> tuple[str, dict]:
    """``(hex digest, description)`` of a cache entry: the caller's ``key`` plus everything else the
    compiled code depends on (module docstring)."""
    from bayesgrpo._version import __version__

    src = hashlib.sha256()
    for f in graph_sources(build):
        src.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    desc = {
        "key": repr(key),
        "backend": backend,
        "options": repr(sorted(options.items())),
        "versions": {
            "bayesgrpo": __version__,
            **{n: _dist_version(n) for n in ("pytensor", "pymc", "nutpie", "numba", "llvmlite", "numpy")},
            "python": sys.version.split()[0],
        },
        "host": repr(_host()),
        "sources": src.hexdigest(),
        "format": CACHE_FORMAT,
    }
    return hashlib.sha256(repr(sorted(desc.items())).encode()).hexdigest()[:32], desc


# ------------------------------------------------------------------------------------ initial point
class JitteredPoint:
    """The initial point of every chain: ``centre + U(-1, 1)`` per coordinate (unconstrained space).

    ``centre`` is the model's support point (PyMC's default initialisation) computed once when the
    model is compiled; the jitter is drawn with numpy from the seed nutpie passes, so a model loaded
    from disk starts its chains exactly where a freshly compiled one does.
    """

    def __init__(self, centre):
        self.centre = np.asarray(centre, dtype=np.float64).copy()

    def __call__(self, seed=None):
        rng = np.random.default_rng(seed)
        return self.centre + rng.uniform(-1.0, 1.0, size=self.centre.shape)


# ------------------------------------------------------------------------------------ (de)serialise
class _Callback:
    """What nutpie reads of a compiled C callback (``.address``), keeping its code library alive."""

    def __init__(self, address: int, keep):
        self.address = int(address)
        self._keep = keep


class _SharedName:
    """Stands in for a PyTensor shared variable as a key of ``CompiledPyMCModel.shared_var_keys``."""

    def __init__(self, name: str, ndim: int):
        self.name = name
        self.ndim = ndim

    def __repr__(self):
        return f"<shared {self.name}>"


def _library_state(cfunc) -> dict:
    """The machine code of a numba ``CFunc`` and the environments its code refers to."""
    from numba.core.environment import lookup_environment

    lib = cfunc._library
    if lib.has_dynamic_globals:
        raise _NotPersistable("its code refers to process-specific addresses (numba dynamic globals)")
    envs = []
    for gv in lib._final_module.global_variables:
        if gv.name.startswith("_ZN08NumbaEnv"):
            env = lookup_environment(gv.name)
            consts = list(env.consts) if env is not None else []
            bad = [c for c in consts if not _plain(c)]
            if bad:
                raise _NotPersistable(f"its environment {gv.name[:40]}... holds a {type(bad[0]).__name__}")
            envs.append((gv.name, consts))
    return {"library": lib.serialize_using_object_code(), "wrapper": cfunc._wrapper_name, "envs": envs}


def _plain(c) -> bool:
    """Constants an environment may hold in a stored entry (numba keeps e.g. the dtypes it boxes arrays with)."""
    if isinstance(c, tuple):
        return all(_plain(x) for x in c)
    return c is None or isinstance(c, (bool, int, float, str, bytes, np.dtype, np.generic))


def _load_library(state: dict, keep: list) -> int:
    """Load serialised machine code into numba's JIT engine; return the callback's address."""
    from numba.core.environment import Environment
    from numba.core.registry import cpu_target
    from numba.core.runtime import nrt

    ctx = cpu_target.target_context
    nrt.rtsys.initialize(ctx)  # the code allocates through numba's runtime (NRT_Allocate, ...)
    codegen = ctx.codegen()
    lib = codegen.unserialize_library(state["library"])
    for name, consts in state["envs"]:
        # an environment holds the Python constants the code boxes values with (dtypes); the globals
        # of the defining module are only read in object mode, which this code never enters
        env = Environment({"__name__": __name__})
        env.consts[:] = consts
        env.env_name = name
        codegen.set_env(name, env)
        keep.append(env)
    address = lib.get_pointer_to_function(state["wrapper"])
    if not address:
        raise _Corrupt(f"no function {state['wrapper']!r} in the stored code")
    keep.append(lib)
    return address


class _NotPersistable(Exception):
    """A compiled model whose code cannot be stored (it stays cached in this process only)."""


class _Corrupt(Exception):
    """A stored entry that cannot be trusted."""


class _Unpickler(pickle.Unpickler):
    """Only builtins containers and numpy arrays: loading an entry imports and runs nothing else."""

    _ALLOWED = frozenset(
        ("builtins", n) for n in ("slice", "tuple", "list", "dict", "set", "frozenset", "complex", "bytearray")
    )

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED or module.split(".")[0] == "numpy":
            return super().find_class(module, name)
        raise _Corrupt(f"unexpected object {module}.{name} in the entry")


def _logp_at(address: int, n_dim: int, user_data, x) -> tuple[int, float, np.ndarray]:
    import ctypes

    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)(address)  # fmt: skip
    x = np.ascontiguousarray(x, dtype=np.float64)
    grad = np.zeros(n_dim)
    lp = np.zeros(())
    rc = fn(n_dim, x.ctypes.data, grad.ctypes.data, lp.ctypes.data, user_data.ctypes.data)
    return int(rc), float(lp), grad


# ---------------------------------------------------------------------------------------- the cache
class ModelCache:
    """Compiled models in one folder, one file per entry (``<digest>.model``), written atomically.

    Parameters
    ----------
    root : path
        The folder (created on the first write).
    """

    def __init__(self, root):
        self.root = Path(root)

    def path(self, digest: str) -> Path:
        return self.root / f"{digest}{_SUFFIX}"

    @contextlib.contextmanager
    def lock(self, digest: str, *, timeout: float = 900.0):
        """Exclusive per-entry lock across processes (:mod:`filelock`: ``flock`` on POSIX, ``msvcrt`` on
        Windows; released if the holder dies).

        Where no lock can be had (a read-only or missing cache folder, a file system without locks) or
        the holder keeps it past ``timeout``, the caller goes on unlocked: writers publish by atomic
        rename, so two processes may then both compile but neither can corrupt the entry. (No soft
        fallback: a lock file left by a dead process would make every later compile wait ``timeout``.)
        """
        import filelock

        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # compile without the lock (and the store fails softly)
            log.warning("disk cache: cannot use %s (%s); compiled models are kept in this process only", self.root, e)
            yield
            return
        lock = filelock.FileLock(self.root / f"{digest}.lock", timeout=timeout, fallback_to_soft=False)
        try:
            lock.acquire(poll_interval=0.1)
        except filelock.Timeout:  # before OSError: Timeout is a TimeoutError
            log.warning("disk cache: waited %.0f s for the lock of entry %s; compiling anyway", timeout, digest)
        except (OSError, NotImplementedError) as e:  # e.g. a read-only folder, a network file system without locks
            log.info("disk cache: no lock on %s (%s); relying on atomic writes", self.root, e)
        try:
            yield
        finally:
            if lock.is_locked:
                lock.release()

    # -------------------------------------------------------------------------------------- write
    def store(self, digest: str, desc: dict, compiled) -> bool:
        """Write ``compiled`` (a nutpie ``CompiledPyMCModel``) as entry ``digest``; False if it cannot
        be stored (logged; the model stays usable in this process)."""
        try:
            body = self._serialise(digest, desc, compiled)
        except _NotPersistable as e:
            log.info("disk cache: the compiled model is not stored (%s)", e)
            return False
        blob = _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
        try:
            self._publish(digest, blob)
        except OSError as e:
            log.warning("disk cache: could not write %s (%s); compiled models are kept in this process only",
                        self.path(digest), e)  # fmt: skip
            return False
        log.info("disk cache: stored compiled model %s (%.1f MB) in %s", digest, len(blob) / 1e6, self.root)
        return True

    def _publish(self, digest: str, blob: bytes) -> None:
        """Write ``blob`` as entry ``digest`` atomically: a temporary file in the same folder, flushed
        to disk, then renamed over the entry (readers see the old entry or the new one, never a part)."""
        from bayesgrpo.io.output import atomic_path

        with atomic_path(self.path(digest), durable=True) as tmp:
            tmp.write_bytes(blob)

    @staticmethod
    def _serialise(digest: str, desc: dict, compiled) -> bytes:
        names, slices, shapes = compiled.shape_info
        init = compiled.initial_point_func
        if not isinstance(init, JitteredPoint):
            raise _NotPersistable("its initial point is not a JitteredPoint")
        x0 = init.centre.copy()
        rc, lp, grad = _logp_at(compiled.compiled_logp_func.address, compiled.n_dim, compiled.user_data, x0)
        state = {
            "format": CACHE_FORMAT,
            "digest": digest,
            "desc": desc,
            "n_dim": int(compiled.n_dim),
            "n_expanded": int(compiled.n_expanded),
            "names": list(names),
            "slices": [(s.start, s.stop) for s in slices],
            "shapes": [tuple(int(d) for d in s) for s in shapes],
            "dims": {k: tuple(v) for k, v in (compiled.dims or {}).items()},
            "coords": {k: np.asarray(v).tolist() for k, v in (compiled.coords or {}).items()},
            "reparameterized": list(compiled.reparameterized_names or []),
            "shared": [
                (var.name, key, np.asarray(compiled.shared_data[key])) for var, key in compiled.shared_var_keys.items()
            ],
            "record_dtype": compiled.user_data.dtype.descr,
            "centre": x0,
            "logp": _library_state(compiled.compiled_logp_func),
            "expand": _library_state(compiled.compiled_expand_func),
            "check": (rc, lp, grad),
        }
        return pickle.dumps(state, protocol=5)

    # --------------------------------------------------------------------------------------- read
    def load(self, digest: str, desc: dict):
        """The compiled model of entry ``digest``, or None when there is none or it cannot be
        trusted (then it is removed, so the caller rebuilds it)."""
        p = self.path(digest)
        try:
            blob = p.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("disk cache: cannot read %s (%s); compiling instead", p, e)
            return None
        try:
            return self._deserialise(blob, digest, desc)
        except (_Corrupt, pickle.UnpicklingError, EOFError, ValueError, KeyError, TypeError, IndexError) as e:
            log.warning("disk cache: entry %s is corrupt or stale (%s: %s); rebuilding it", p.name, type(e).__name__, e)
            with contextlib.suppress(OSError):
                p.unlink()
            return None

    @staticmethod
    def _deserialise(blob: bytes, digest: str, desc: dict):
        from bayesgrpo.inference import nuts_core

        # the direct sampler's model (no nutpie Python layer: no ArviZ, scipy or matplotlib); with a nutpie
        # outside nuts_core's range, nutpie's own model class
        direct = nuts_core.available()
        if direct:
            update_user_data = nuts_core.update_user_data
        else:
            from nutpie import compile_pymc

            update_user_data = compile_pymc.update_user_data

        if not blob.startswith(_MAGIC):
            raise _Corrupt("not a bayesgrpo cache entry")
        head, _, body = blob[len(_MAGIC) :].partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() != head:
            raise _Corrupt("checksum mismatch (truncated or altered file)")
        st = _Unpickler(io.BytesIO(body)).load()
        if st.get("format") != CACHE_FORMAT or st.get("digest") != digest or st.get("desc") != desc:
            raise _Corrupt("written for another key, version or format")
        keep: list = []
        logp_addr = _load_library(st["logp"], keep)
        expand_addr = _load_library(st["expand"], keep)
        shared_data, keys = {}, {}
        for name, key, arr in st["shared"]:
            arr = np.array(arr, order="C", copy=True)
            arr.flags.writeable = False
            shared_data[key] = arr
            keys[_SharedName(name, arr.ndim)] = key
        user_data = update_user_data(np.zeros((), dtype=np.dtype(st["record_dtype"])), shared_data)
        rc, lp, grad = _logp_at(logp_addr, st["n_dim"], user_data, st["centre"])
        rc0, lp0, grad0 = st["check"]
        # to rounding: the compiling process may run its own copies of shared kernels (numba resolves
        # them to the ones it loaded first), whose fastmath code can differ from the stored one in
        # the last bits; every process that loads the entry runs exactly the stored code
        if rc != rc0 or not np.allclose([lp, *grad], [lp0, *grad0], rtol=1e-9, atol=1e-12, equal_nan=True):
            raise _Corrupt("the stored code does not reproduce its own log-density")
        shape_info = (st["names"], [slice(a, b) for a, b in st["slices"]], [tuple(s) for s in st["shapes"]])
        if direct:
            return nuts_core.CompiledModel(
                compiled_logp_func=_Callback(logp_addr, keep), compiled_expand_func=_Callback(expand_addr, keep),
                initial_point_func=JitteredPoint(st["centre"]), shared_data=shared_data, shared_var_keys=keys,
                user_data=user_data, n_dim=st["n_dim"], n_expanded=st["n_expanded"], shape_info=shape_info,
                dims=dict(st["dims"]), coords={k: list(v) for k, v in st["coords"].items()},
            )  # fmt: skip
        import pandas as pd
        from nutpie.compile_pymc import CompiledPyMCModel

        return CompiledPyMCModel(
            _n_dim=st["n_dim"],
            dims=dict(st["dims"]),
            _coords={k: pd.Index(v) for k, v in st["coords"].items()},
            _shapes={n: tuple(s) for n, s in zip(st["names"], shape_info[2], strict=True)},
            compiled_logp_func=_Callback(logp_addr, keep),
            compiled_expand_func=_Callback(expand_addr, keep),
            initial_point_func=JitteredPoint(st["centre"]),
            shared_data=shared_data,
            shared_var_keys=keys,
            user_data=user_data,
            n_expanded=st["n_expanded"],
            shape_info=shape_info,
            logp_func=None,
            expand_func=None,
            reparameterized_names=list(st["reparameterized"]),
        )

    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""
        n = 0
        for p in self.root.glob(f"*{_SUFFIX}"):
            with contextlib.suppress(OSError):
                p.unlink()
                n += 1
        return n
