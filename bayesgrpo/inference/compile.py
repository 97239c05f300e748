"""Compiling a model with nutpie: in this process, or in a child process that stores it in the disk cache.

:func:`bayesgrpo.inference.sampling.compile_model` decides where a model comes from (this process's
cache, the disk cache of :mod:`bayesgrpo.inference.model_cache`, or a compile); this module compiles:

* :func:`compile_here` -- ``nutpie.compile_pymc_model`` in this process;
* :func:`compile_to_cache` -- compile in a child process (``python -m bayesgrpo.inference.compile JOB``,
  :func:`_child`) that stores the entry, then load it (fallback: compile here and store);
* :func:`compile_isolated` -- the same through a temporary folder removed at once (the disk cache
  switched off, ``BAYESGRPO_CACHE=off``): the same machine code, so the same draws, as a cached model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bayesgrpo.inference import model_cache as mc
from bayesgrpo.inference.model_cache import JitteredPoint

__all__ = ["compile_here", "compile_to_cache", "compile_isolated"]

log = logging.getLogger("bayesgrpo")


def compile_to_cache(cache, digest: str, desc: dict, key, build, *, backend: str, store: bool = True, **kwargs):
    """Compile in a child process that stores the entry, then load it (fallback: compile here, and
    store the entry unless ``store`` is False).

    Why a child: a process that compiled a model also holds PyTensor's own copies of the kernels the
    model's code calls, and numba's JIT resolves the model's calls to those copies; their machine
    code may differ from the stored one in the last bits (fastmath), and MCMC amplifies that. Every
    process that samples from an entry it loaded runs the same machine code, so a forecast is the
    same number whether its process compiled the model or found it on disk (and whichever worker of
    a cluster compiled it). The child also keeps PyMC out of this process.
    """
    t0 = time.perf_counter()
    try:
        job = pickle.dumps({"key": key, "build": build, "backend": backend, "kwargs": kwargs, "digest": digest,
                            "desc": desc, "root": str(cache.root)})  # fmt: skip
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        log.info("compiling in this process (the build function cannot be sent to a child process: %s)", e)
        job = None
    if job is not None:
        try:
            cache.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=cache.root, prefix=".job-", suffix=".pkl", delete=False) as f:
                f.write(job)
        except OSError as e:
            log.info("compiling in this process (cannot write to the cache folder: %s)", e)
            job = None
    if job is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}
        try:
            proc = subprocess.run([sys.executable, "-m", "bayesgrpo.inference.compile", f.name], env=env,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
        finally:
            Path(f.name).unlink(missing_ok=True)
        for line in proc.stderr.splitlines():
            log.debug("compile process: %s", line)
        if proc.returncode == 0:
            compiled = cache.load(digest, desc)
            if compiled is not None:
                log.info("compiled a model in %.1f s (%s backend, child process; disk cache entry %s)",
                         time.perf_counter() - t0, backend, digest)  # fmt: skip
                return compiled
        if proc.returncode == 3:
            log.info("the compiled model cannot be stored on disk; compiling it in this process")
        else:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            what = (
                "wrote no usable entry" if proc.returncode == 0 else f"failed (exit {proc.returncode}: {tail[-500:]})"
            )
            log.warning("the compile process %s; compiling in this process", what)
    compiled = compile_here(key, build, backend=backend, **kwargs)
    if store:
        cache.store(digest, desc, compiled)
    return compiled


def compile_isolated(key, build, *, backend: str, **kwargs):
    """The disk cache switched off (``BAYESGRPO_CACHE=off``): :func:`compile_to_cache` through a
    temporary folder that is removed as soon as the model is loaded (nothing outlives the process).

    Why not :func:`compile_here`: a model compiled in this process runs other machine code than a
    loaded entry (its gradient differs in the last bits at some points, see :func:`compile_to_cache`),
    and NUTS amplifies that into other draws; loaded from a child's entry, the draws are the cached
    path's to the last bit (``tests/test_fleet.py``). Fallback (no temporary folder, a failed child):
    compile here.
    """
    try:
        tmp = tempfile.TemporaryDirectory(prefix="bayesgrpo-compile-", ignore_cleanup_errors=True)
    except OSError as e:
        log.info("compiling in this process (no temporary folder: %s)", e)
        return compile_here(key, build, backend=backend, **kwargs)
    with tmp as root:
        digest, desc = mc.entry_digest(key, backend=backend, options=kwargs, build=build)
        return compile_to_cache(mc.ModelCache(root), digest, desc, key, build, backend=backend, store=False,
                                **kwargs)  # fmt: skip


def compile_here(key, build, *, backend: str, **kwargs):
    """nutpie's compilation of ``build()`` in this process; with a key and the numba backend its chains
    start at the support point plus numpy jitter (:class:`~bayesgrpo.inference.model_cache.JitteredPoint`)."""
    import nutpie

    t0 = time.perf_counter()
    if key is None or backend != "numba":
        compiled = nutpie.compile_pymc_model(build(), backend=backend, **kwargs)
    else:
        # no PyMC jitter: the centre (support point) is computed once, the jitter drawn with numpy
        compiled = nutpie.compile_pymc_model(build(), backend=backend, jitter_rvs=set(), **kwargs)
        centre = np.asarray(compiled.initial_point_func(0), dtype=np.float64)
        compiled = dataclasses.replace(compiled, initial_point_func=JitteredPoint(centre))
    log.info("compiled a model in %.1f s (%s backend)", time.perf_counter() - t0, backend)
    return compiled


def _child(job_path: str) -> int:
    """``python -m bayesgrpo.inference.compile JOB``: compile one model and store it (see
    :func:`compile_to_cache`); exit 0 when stored, 3 when the model cannot be stored."""
    import warnings

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for name in ("numba", "pytensor", "pymc", "arviz"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with open(job_path, "rb") as f:
        job = pickle.load(f)  # written by the parent process a moment ago, in the cache folder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the parent reports what matters; this process only compiles
        compiled = compile_here(job["key"], job["build"], backend=job["backend"], **job["kwargs"])
    return 0 if mc.ModelCache(job["root"]).store(job["digest"], job["desc"], compiled) else 3


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
