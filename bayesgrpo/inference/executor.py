"""Where the forecasts of a batch run: in this process, or on the workers of a cluster.

One seam, :class:`Executor`: ``map(fn, items, progress=...)`` calls ``fn(item)`` for every item and
returns, in item order, ``(True, result)`` or ``(False, "Type: message")`` -- an item that fails
(an exception, a worker that died) is an error entry, never a lost batch; a Ctrl-C raises
:class:`~bayesgrpo.errors.Interrupted` whose ``partial`` holds the outcomes that finished (None for
the others). Implementations:

* :class:`SerialExecutor` -- this process, one item after the other (the default; no dependency).
* :class:`DaskExecutor` -- an embedded ``dask.distributed.LocalCluster`` of N worker processes
  (``--workers N``) or an existing Dask cluster (``--scheduler ADDRESS``); the optional extra
  ``bayesgrpo[dask]``.
* :class:`FuturesExecutor` -- any :class:`concurrent.futures.Executor` (a ``ProcessPoolExecutor``,
  or an adapter onto another engine).

Callers partition the work (:func:`partition`): :func:`bayesgrpo.forecast.batch.forecast_batch`
sends each worker groups of runs (runs are independent given the population prior), the backtest
harness groups of cases. Each worker process compiles the model once, or loads it from the disk
cache (:mod:`bayesgrpo.inference.model_cache`), and keeps it for every later item it gets; the
numbers do not depend on the partition (per-run seeds depend on the sampler seed and the run id
only, and every process runs the same stored machine code), so a parallel table equals the serial
one.

Why Dask: it is pure Python and pip-installable; the same client API drives a LocalCluster on a
laptop and a cluster of many machines (``dask-scheduler`` / ``dask-worker``, or dask-jobqueue on
Slurm, dask-kubernetes), results stream back as they complete (progress bars), workers that die are
restarted and their tasks retried, and it pickles closures (cloudpickle). It needs no daemon when
embedded.

A Ray cluster (which verl and OpenRLHF users already run): either run Dask's scheduler and workers
as Ray tasks/actors and pass the scheduler's address with ``--scheduler`` (e.g. with a Dask-on-Ray
or Ray-launched Dask deployment), or implement this module's three-member protocol (``n_workers``,
``map``, ``close``) in a few lines: ``ray.remote(fn)`` per item and ``ray.wait`` to collect them as
they finish -- or hand :class:`FuturesExecutor` any object with a ``concurrent.futures``-style
``submit`` returning futures. (Ray is not installed here; that path is not tested.)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from bayesgrpo.errors import Interrupted, OptionError

__all__ = ["Executor", "SerialExecutor", "DaskExecutor", "FuturesExecutor", "make_executor", "check_options",
           "partition"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

Outcome = tuple[bool, Any]


@runtime_checkable
class Executor(Protocol):
    """What forecasting needs from an execution engine."""

    #: worker processes that run items concurrently (1 for the serial executor)
    n_workers: int

    def map(self, fn: Callable, items: Sequence, *, progress: Callable | None = None) -> list[Outcome]:
        """``[(True, fn(item)) or (False, "Type: message") for item in items]``, in item order;
        ``progress(i)`` is called with the item's index as each item finishes."""
        ...

    def close(self) -> None:
        """Release the workers (an embedded cluster is shut down; a remote one is left running)."""
        ...


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Closing:
    """``with executor:`` closes it (what every executor here shares)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SerialExecutor(_Closing):
    """Every item in this process, in order (the default)."""

    n_workers = 1

    def map(self, fn, items, *, progress=None) -> list[Outcome]:
        out = []
        for i, item in enumerate(items):
            try:
                out.append((True, fn(item)))
            except KeyboardInterrupt as exc:  # the outcomes so far (and the item's own share) go with it
                part = getattr(exc, "partial", None)
                raise Interrupted(partial=out + ([(True, part)] if part is not None else [])) from exc
            except Exception as exc:
                log.debug("item %d failed", i, exc_info=True)
                out.append((False, _failure(exc)))
            if progress is not None:
                progress(i)
        return out

    def close(self) -> None:
        pass


class FuturesExecutor(_Closing):
    """Any ``concurrent.futures``-style executor (``submit(fn, item) -> Future``).

    Parameters
    ----------
    pool : concurrent.futures.Executor
        E.g. ``ProcessPoolExecutor(max_workers=4)``; closed by :meth:`close` when ``own=True``. Prefer
        processes: the warnings a fit raises are recorded with ``warnings.catch_warnings``, which is
        process-global, so threads running fits at the same time would mix their records.
    n_workers : int
    own : bool
    """

    def __init__(self, pool, *, n_workers: int, own: bool = False):
        self.pool = pool
        self.n_workers = int(n_workers)
        self._own = own

    def map(self, fn, items, *, progress=None) -> list[Outcome]:
        from concurrent.futures import as_completed

        futs = {self.pool.submit(fn, item): i for i, item in enumerate(items)}
        out: list = [None] * len(futs)
        try:
            for fut in as_completed(futs):
                i = futs[fut]
                try:
                    out[i] = (True, fut.result())
                except Exception as exc:  # noqa: BLE001 - one failed item is an error entry
                    out[i] = (False, _failure(exc))
                if progress is not None:
                    progress(i)
        except KeyboardInterrupt as exc:  # the finished items go with it (None for the others)
            for f in futs:
                f.cancel()
            raise Interrupted(partial=out) from exc
        return out

    def close(self) -> None:
        if self._own:
            self.pool.shutdown()


class DaskExecutor(_Closing):
    """Items as tasks of a Dask cluster: an embedded ``LocalCluster`` or an existing scheduler.

    Parameters
    ----------
    workers : int, optional
        Start a ``LocalCluster`` of this many single-threaded worker processes (closed by :meth:`close`).
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``); the cluster is left running.
    timeout : float
        Seconds to wait for the scheduler (and, for a remote one, for at least one worker).

    Raises
    ------
    OptionError
        Neither or both of ``workers`` and ``scheduler``; the dask extra is missing; the scheduler
        cannot be reached.
    """

    def __init__(self, *, workers: int | None = None, scheduler: str | None = None, timeout: float = 30.0):
        if (workers is None) == (scheduler is None):
            raise OptionError("give --workers N or --scheduler ADDRESS, not both")
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise OptionError("--workers / --scheduler need Dask: pip install 'bayesgrpo[dask]'") from None
        self._cluster = None
        t0 = time.perf_counter()
        if scheduler is not None:
            try:
                self.client = Client(scheduler, timeout=timeout)
                self.client.wait_for_workers(1, timeout=timeout)
            except (OSError, TimeoutError) as e:
                raise OptionError(
                    f"--scheduler {scheduler}: cannot use that Dask cluster ({type(e).__name__}: {e})"
                ) from None
        else:
            if workers is None or int(workers) < 1:
                raise OptionError(f"--workers must be at least 1, got {workers}")
            # one thread per worker: nutpie runs its chains on threads of its own
            self._cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=logging.WARNING)  # fmt: skip
            self.client = Client(self._cluster)
        info = self.client.scheduler_info()
        self.n_workers = max(1, len(info.get("workers", {})))
        log.info("dask: %d worker(s) at %s (%.1f s to start)", self.n_workers, info.get("address"),
                 time.perf_counter() - t0)  # fmt: skip

    def map(self, fn, items, *, progress=None) -> list[Outcome]:
        from distributed import as_completed

        futs = self.client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        out: list = [None] * len(futs)
        try:
            for fut in as_completed(futs):
                i = index[fut.key]
                try:
                    out[i] = (True, fut.result())
                except Exception as exc:  # noqa: BLE001 - a failed task (or a dead worker) is an error entry
                    out[i] = (False, _failure(exc))
                fut.release()
                if progress is not None:
                    progress(i)
        except KeyboardInterrupt as exc:  # the finished items go with it (None for the others)
            self.client.cancel(futs)
            raise Interrupted(partial=out) from exc
        return out

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def check_options(*, workers: int | None = None, scheduler: str | None = None) -> None:
    """Validate ``--workers`` / ``--scheduler`` before anything is read or started (:class:`OptionError`)."""
    if workers is not None and scheduler is not None:
        raise OptionError("give --workers N or --scheduler ADDRESS, not both")
    if workers is not None and int(workers) < 0:
        raise OptionError(f"--workers must be at least 1 (0: this process), got {workers}")
    if scheduler is not None and not scheduler.strip():
        raise OptionError("--scheduler needs an address, e.g. tcp://host:8786")
    if scheduler is not None or (workers or 0) > 0:
        from importlib.util import find_spec

        if find_spec("distributed") is None:
            raise OptionError("--workers / --scheduler need Dask: pip install 'bayesgrpo[dask]'")


def make_executor(*, workers: int | None = None, scheduler: str | None = None) -> SerialExecutor | DaskExecutor:
    """The executor of the ``--workers`` / ``--scheduler`` options (neither, or ``--workers 0``:
    :class:`SerialExecutor`)."""
    check_options(workers=workers, scheduler=scheduler)
    if scheduler is not None:
        return DaskExecutor(scheduler=scheduler)
    if not workers:
        return SerialExecutor()
    return DaskExecutor(workers=int(workers))


def partition(items: Sequence, n_workers: int, *, per_worker: int = 4, max_size: int = 25) -> list[list]:
    """Split ``items`` into contiguous groups: about ``per_worker`` groups per worker (so a slow group
    does not leave the others idle and progress is reported often), none larger than ``max_size``."""
    items = list(items)
    if not items:
        return []
    size = max(1, min(max_size, math.ceil(len(items) / max(1, n_workers * per_worker))))
    return [items[k : k + size] for k in range(0, len(items), size)]
