"""The forecaster protocol of backtests, and the registry of every method that implements it.

A **method** forecasts the final reward of truncated runs::

    method.name: str
    method.forecast_many(cases: list[Case], *, final_window, n_draws, seed) -> list[PeerForecast]

:class:`Case` is one truncated run (its observed prefix, the steps it will log up to the horizon,
its metadata, optional context runs). Peers (:mod:`bayesgrpo.evaluation.peers`) forecast each case
alone; :class:`BayesGRPOMethod` -- bayesgrpo itself as one more entry of the registry -- fits all
cases of a call through one compiled model (``Forecaster.fit``), or each case with its context runs
in one hierarchical graph.

Adding a method is one edit: a factory in :data:`METHODS` (see :func:`get_method`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, DEFAULT_KIND
from bayesgrpo.errors import Interrupted
from bayesgrpo.evaluation.peers import PEER_ALIASES, PEERS, PeerForecast, get_peer
from bayesgrpo.schema import RUN, RunSet

__all__ = ["Case", "BayesGRPOMethod", "METHODS", "BAYES", "BAYES_CTX", "DEFAULT_METHODS", "get_method",
           "resolve_methods"]  # fmt: skip

BAYES = "bayesgrpo"
BAYES_CTX = "bayesgrpo_ctx"
#: the peers of the default benchmark (bayesgrpo is always scored as well)
DEFAULT_PEERS = ("last_value", "exponential", "scalerl", "pow3", "domhan")
DEFAULT_METHODS = (BAYES, *DEFAULT_PEERS)


@dataclass
class Case:
    """One truncated run to forecast.

    Attributes
    ----------
    run_id : str
    prefix : DataFrame
        The observed rows (``step``, ``reward``, other metrics).
    future_steps : ndarray
        Steps the run logs after the prefix, up to and including the horizon.
    horizon : int
    meta : Series
        The run's metadata row.
    context : RunSet or None
        Complete related runs to pool with (methods that can use them).
    """

    run_id: str
    prefix: pd.DataFrame
    future_steps: np.ndarray
    horizon: int
    meta: pd.Series
    context: RunSet | None = None
    info: dict = field(default_factory=dict)


class BayesGRPOMethod:
    """bayesgrpo as a backtest method: ``Forecaster(kind).fit`` on the prefixes of the cases.

    Parameters
    ----------
    name : str
        ``"bayesgrpo"`` (population prior only) or ``"bayesgrpo_ctx"`` (pooled with ``case.context``).
    forecaster : callable, optional
        ``forecaster(hierarchical: bool) -> object with .fit(runs, horizon=..., context=...)`` returning
        an object with ``table()``, ``final_draws(run_id)`` (and optionally ``paths``); default builds
        :class:`bayesgrpo.forecast.Forecaster` from ``kind``, ``sampler`` and ``prior``.
    chunk : int
        Cases per ``fit`` call without context (the compiled model is reused across calls).
    executor : Executor, optional
        Where the fits run (:mod:`bayesgrpo.inference.executor`): groups of ``chunk`` cases (each case
        alone with its context) are spread over its workers; the harness then hands this method
        ``chunk x workers`` cases at a time. Default: this process.
    """

    def __init__(self, name: str = BAYES, *, kind: str = DEFAULT_KIND, sampler=None, prior=None, calibration=True,
                 forecaster: Callable | None = None, chunk: int = 20, final_window: float = DEFAULT_FINAL_WINDOW, executor=None):  # fmt: skip
        self.name = name
        self.executor = executor
        self._group = int(chunk)
        if executor is not None and executor.n_workers > 1:
            chunk = int(chunk) * executor.n_workers
        self.kind = kind
        self.sampler = sampler
        self.prior = prior
        self.calibration = calibration
        self.chunk = int(chunk)
        self._factory = forecaster
        self.final_window = final_window
        self.uses_context = name == BAYES_CTX

    def _forecaster(self, hierarchical: bool, final_window: float):
        if self._factory is not None:
            return self._factory(hierarchical)
        from bayesgrpo.forecast import Forecaster

        return Forecaster(self.kind, final_window=final_window, hierarchical=hierarchical, sampler=self.sampler,
                          prior=self.prior, calibration=self.calibration)  # fmt: skip

    def __getstate__(self):
        state = dict(self.__dict__)
        state["executor"] = None  # a worker runs its cases itself
        return state

    def forecast_many(
        self, cases: list[Case], *, final_window: float = DEFAULT_FINAL_WINDOW, n_draws: int = 1000, seed=0
    ) -> list[PeerForecast]:
        """Forecast every case; a failing fit becomes ``ok=False`` results (never an exception)."""
        if self.executor is not None and self.executor.n_workers > 1 and len(cases) > 1:
            return self._forecast_on(self.executor, cases, final_window)
        out: list = []
        try:
            if self.uses_context:
                for c in cases:
                    out += self._fit([c], final_window, context=c.context)
                return out
            for k in range(0, len(cases), self.chunk):
                part = cases[k : k + self.chunk]
                res = self._fit(part, final_window, context=None)
                if len(part) > 1 and not any(r.ok for r in res):  # the joint call failed: one at a time
                    res = [r for c in part for r in self._fit([c], final_window, context=None)]
                out += res
        except KeyboardInterrupt as e:  # the cases that finished (in order) go with the interrupt
            raise Interrupted(partial=out + list(getattr(e, "partial", None) or [])) from e
        return out

    def _forecast_on(self, executor, cases: list[Case], final_window: float) -> list[PeerForecast]:
        import warnings

        from bayesgrpo.errors import warning_type
        from bayesgrpo.inference.executor import partition

        if self.uses_context:
            groups = [[c] for c in cases]
        else:
            groups = partition(cases, executor.n_workers, per_worker=2, max_size=self._group)
        out = []
        stopped: Interrupted | None = None
        try:
            outcomes = executor.map(_CasesJob(self, final_window), groups)
        except Interrupted as e:  # the groups that finished before the first unfinished one
            done = list(e.partial or [])
            first_gap = next((k for k, o in enumerate(done) if o is None), len(done))
            outcomes, stopped = done[:first_gap], e
        for g, (ok, value) in zip(groups[: len(outcomes)], outcomes, strict=True):
            if ok:
                res, caught = value
                for category, message in dict.fromkeys(caught):  # the harness records them per case
                    warnings.warn(message, warning_type(category), stacklevel=2)
                out += res
            else:
                out += [PeerForecast(name=self.name, final_draws=np.empty(0), seconds=float("nan"), ok=False,
                                     message=value) for _ in g]  # fmt: skip
        if stopped is not None:
            raise Interrupted(partial=out) from stopped
        return out

    def _fit(self, cases: list[Case], final_window: float, *, context) -> list[PeerForecast]:
        t0 = time.perf_counter()
        data = pd.concat([c.prefix.assign(**{RUN: c.run_id}) for c in cases], ignore_index=True)
        meta = pd.DataFrame([c.meta for c in cases], index=pd.Index([c.run_id for c in cases], name=RUN)).reset_index()
        stopped = None
        try:
            runs = RunSet.from_frames(data, meta)
            fit = self._forecaster(False, final_window).fit(
                runs, horizon={c.run_id: int(c.horizon) for c in cases}, context=context
            )
            table = fit.table().set_index("run_id")
        except Interrupted as e:  # Ctrl-C: the cases whose runs finished, then the interrupt
            if e.partial is None:
                raise
            fit, stopped = e.partial, e
            table = fit.table().set_index("run_id")
            done = set(fit.forecast_ids)  # runs are sampled in order: the finished cases are a prefix
            cases = cases[: next((k for k, c in enumerate(cases) if c.run_id not in done), len(cases))]
        except Exception as exc:  # noqa: BLE001 - a failed fit is an error row per case, not a lost batch
            msg = f"{type(exc).__name__}: {exc}"
            return [PeerForecast(name=self.name, final_draws=np.empty(0), seconds=time.perf_counter() - t0, ok=False,
                                 message=msg) for _ in cases]  # fmt: skip
        wall = (time.perf_counter() - t0) / len(cases)
        from bayesgrpo.forecast.decision import p_plateaued

        out = []
        for c in cases:
            try:
                t = table.loc[c.run_id]
                draws = np.asarray(fit.final_draws(c.run_id), dtype=float)
                info = {k: float(t[k]) for k in ("r_hat_max", "ess_min", "divergences", "p_stop_before_horizon",
                                                   "stop_q50") if k in t.index}  # fmt: skip
                info["n_context"] = 0 if context is None else len(context)
                info["fit"] = fit
                if hasattr(fit, "infos") and c.run_id in getattr(fit, "infos", {}):
                    info["scale"] = float(fit.infos[c.run_id].scale)
                    info["level"] = float(np.median(fit.paths(c.run_id).latent_now))
                    info["p_plateaued"] = p_plateaued(fit.paths(c.run_id), fit.config.stop_fraction)
                out.append(PeerForecast(name=self.name, final_draws=draws, seconds=wall, ok=True, info=info))
            except Exception as exc:  # noqa: BLE001 - one bad run is an error row
                out.append(PeerForecast(name=self.name, final_draws=np.empty(0), seconds=wall, ok=False,
                                        message=f"{type(exc).__name__}: {exc}"))  # fmt: skip
        if stopped is not None:
            raise Interrupted(partial=out) from stopped
        return out


@dataclass
class _CasesJob:
    """A group of cases forecast on a worker: ``(results, [(warning category, message)])``."""

    method: BayesGRPOMethod
    final_window: float

    def __call__(self, cases: list[Case]):
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = self.method.forecast_many(cases, final_window=self.final_window)
        return res, [(w.category.__name__, str(w.message)) for w in caught]


def _bayes(name: str) -> Callable[..., BayesGRPOMethod]:
    return lambda **kw: BayesGRPOMethod(name, **kw)


#: name -> factory of every method a backtest can score (bayesgrpo and the peers)
METHODS: dict[str, Callable[..., Any]] = {BAYES: _bayes(BAYES), BAYES_CTX: _bayes(BAYES_CTX), **PEERS}


def get_method(name: str, **kwargs):
    """A method by name or alias (:data:`METHODS`, :data:`~bayesgrpo.evaluation.peers.PEER_ALIASES`)."""
    if name in (BAYES, BAYES_CTX):
        return METHODS[name](**kwargs)
    return get_peer(name, **kwargs)


def resolve_methods(spec) -> tuple[str, ...]:
    """``"all"`` / ``"none"`` / a comma list / an iterable of peer names -> validated names.

    Raises ``ValueError`` naming an unknown peer and the choices.
    """
    if spec is None:
        return ()
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s in ("none", ""):
            return ()
        if s == "all":
            return tuple(p for p in PEERS if p != "domhan_fast")
        spec = [p.strip() for p in spec.split(",") if p.strip()]
    names = tuple(spec)
    known = set(METHODS) | set(PEER_ALIASES)
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"unknown peer(s) {bad}; choose from {', '.join(sorted(set(PEERS) | set(PEER_ALIASES)))}, "
                         "'all' or 'none'")  # fmt: skip
    return names
