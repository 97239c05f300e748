"""Model kinds: the registry (one entry per kind) and the PyMC graph each builds.

All kinds work in per-run normalised units (:mod:`bayesgrpo.models.arrays`) and share the building
blocks of :mod:`bayesgrpo.models.components` and one likelihood: the exact Kalman filter of
recursion (1) (physics.md section 2) with each run's refresh-interval lag pattern, a compiled Op with
an exact gradient whose cost does not grow with K; the refresh interval is data, so one compiled
model serves every run.

``oscillator``
    The mean-field damped oscillator: per run a plateau ``r_star``, an initial reward ``r0``, a
    timescale ``tau`` (the overdamped-limit time c/k), a momentum ``mu`` (Beta prior centred on the
    logged ``beta1``, else on Adam's 0.9) and stiffness ``a = (1 - mu) / tau``. Process noise
    ``sigma_p`` is parameterised through the stationary sd of the latent around the plateau;
    measurement noise ``sigma_m`` is centred on a robust estimate.
``stationary``
    The oscillator at its fixed point with no momentum: the reward wanders (AR(1)) around a level estimated
    from the whole prefix, nothing left to gain. Its posterior is closed-form (:mod:`bayesgrpo.models.stationary`);
    kind ``auto`` weighs it against the oscillator and the degeneracy kind by evidence.
``saturation``
    The overdamped limit (paper B's single exponential): the same model with ``mu = 0``.
``scaling``
    The oscillator with the timescale's curvature-scaling exponent over model size,
    ``log tau += alpha log(N / N_ref)`` (runs of unknown size get no size effect).
``degeneracy``
    The oscillator with advantage degeneracy: the stiffness vanishes as the reward approaches its
    floor (:mod:`bayesgrpo.models.degeneracy`; extended Kalman filter). Slow starts and S-curves.
``logistic``
    The degeneracy kind with heterogeneous prompt difficulty: the stiffness is up to ``e^lam`` times
    the plateau's early in the rise and falls to it as the easy prompts are learned (a per-run
    ``lam``): the generalised logistic of physics.md section 9 between floor and plateau -- slow starts,
    fast rises that turn into slow climbs.

Adding a kind is one edit: a :class:`ModelKind` entry in :data:`MODEL_KINDS` (with its graph in
:meth:`ModelKind.build` or a subclass); the forecaster, the CLI choices and the docs read the registry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bayesgrpo.conventions import AUTO_KIND
from bayesgrpo.models.arrays import LOG_SIZE_SD, ModelArrays
from bayesgrpo.models.prior import PopulationPrior, prior_resource

__all__ = [
    "MODEL_KINDS",
    "ModelKind",
    "build_model",
    "get_kind",
    "prior_kind",
    "default_prior",
    "default_prior_path",
    "kind_option",
    "MODEL_ALIAS_WARNING",
]


@dataclass(frozen=True)
class ModelKind:
    """One model kind of the registry: its PyMC graph and the numpy side of a forecast.

    Attributes
    ----------
    name : str
    summary : str
        One line for ``--help`` and the docs.
    free_momentum : bool
        ``mu`` has a Beta prior (else 0: the overdamped limit).
    size_scaling : bool
        The timescale scales with model size (``alpha``).
    degeneracy : bool
        State-dependent stiffness near the reward floor (:mod:`bayesgrpo.models.degeneracy`).
    heterogeneity : bool
        The stiffness also falls with the share of the rise done (a per-run ``lam``; needs ``degeneracy``).
    closed_form : bool
        The posterior is known in closed form (:mod:`bayesgrpo.models.stationary`): no graph, no sampler; the
        numpy side of a forecast is the oscillator's.
    """

    name: str
    summary: str
    free_momentum: bool = True
    size_scaling: bool = False
    degeneracy: bool = False
    heterogeneity: bool = False
    closed_form: bool = False

    #: per-run parameters a forecast needs from the posterior
    @property
    def param_names(self) -> tuple[str, ...]:
        base = ("r0", "r_star", "a", "mu", "sigma_p", "sigma_m", "tau")
        return base + (("L",) if self.degeneracy else ()) + (("lam",) if self.heterogeneity else ())

    @property
    def required_data(self) -> tuple[str, ...]:
        """Data variables a compiled graph of this kind must have (a batch's data must really be swapped;
        the spread graph also needs ``channels``)."""
        return ("y", "mask") if self.degeneracy else ("y", "mask", "refresh")

    def graph_key(self, arr: ModelArrays, prior, hierarchical: bool, *, spread: bool = False) -> tuple:
        """Everything the graph's structure depends on besides the swappable data (the prior's per-run
        hyperparameters are data; its scalar constants, e.g. alpha's, are structure). ``spread``: the graph
        with the spread channels (degeneracy kinds; the reward-only graph's key is unchanged)."""
        if spread and not self.degeneracy:
            raise ValueError(f"the {self.name} kind has no degeneracy state: the spread channels need one")
        key: tuple = (self.name, hierarchical) + (("spread",) if spread else ())
        if self.size_scaling:
            key += (prior.alpha_mu, prior.alpha_sd)
        if hierarchical:
            key += (arr.y.shape[1], len(arr.families), prior.gain_sd, prior.log_tau_sd, prior.log_wander_sd)
        return key

    def build(self, arr: ModelArrays, *, prior, hierarchical: bool = False, spread: bool = False):
        """The ``pymc.Model`` of this kind for the runs of ``arr`` (``spread``: with the spread channels)."""
        if self.closed_form:
            raise ValueError(f"the {self.name} kind has its posterior in closed form: it builds no PyMC model")
        import pymc as pm
        import pytensor.tensor as pt

        from bayesgrpo.models import components as C

        T, _R = arr.y.shape
        coords = {"run": list(arr.run_ids), "family": list(arr.families), "step_grid": np.arange(T)}
        if spread:
            from bayesgrpo.models.channels import CH_ROWS

            coords["channel_row"] = list(CH_ROWS)
        with pm.Model(coords=coords) as model:
            y = pm.Data("y", arr.y, dims=("step_grid", "run"), shape=(None, None))
            mask = pm.Data("mask", arr.mask, dims=("step_grid", "run"), shape=(None, None))
            refresh = pm.Data("refresh", np.asarray(arr.refresh, dtype="int64"), dims="run", shape=(None,))
            vec = {n: pm.Data(n, getattr(arr, n), dims="run", shape=(None,))
                   for n in ("span", "noise", "r0_obs", "log_size", "size_known", "mu_mean", "mu_known", "floor",
                             "floor_known", "ceil", "ceil_known")}  # fmt: skip
            fam = pm.Data("family_idx", arr.family_idx.astype("int64"), dims="run", shape=(None,))
            span = vec["span"]
            # the population prior enters as per-run data: one compile serves every prior and fraction
            hp = {
                k: pm.Data(f"prior_{k}", v, dims="run", shape=(None,)) for k, v in prior.values_at(arr.fraction).items()
            }

            g_mu, g_sd = hp["gain_mu"], hp["gain_sd"]
            t_mu, t_sd = hp["log_tau_mu"], hp["log_tau_sd"]
            w_mu, w_sd = hp["log_wander_mu"], hp["log_wander_sd"]
            if hierarchical:
                # family offsets of the population means, and learned scatter around them (partial pooling)
                g_mu = g_mu + (prior.gain_sd / 2) * pm.Normal("z_gain_family", 0.0, 1.0, dims="family")[fam]
                t_mu = t_mu + (prior.log_tau_sd / 2) * pm.Normal("z_log_tau_family", 0.0, 1.0, dims="family")[fam]
                w_mu = w_mu + (prior.log_wander_sd / 2) * pm.Normal("z_log_wander_family", 0.0, 1.0, dims="family")[fam]
                g_sd = g_sd * pm.LogNormal("gain_sd_ratio", 0.0, 0.5)
                t_sd = t_sd * pm.LogNormal("log_tau_sd_ratio", 0.0, 0.5)
                w_sd = w_sd * pm.LogNormal("log_wander_sd_ratio", 0.0, 0.5)
            if self.size_scaling:
                alpha = pm.Normal("alpha", prior.alpha_mu, prior.alpha_sd)  # curvature-scaling exponent
                # runs of unknown size: no size effect, the population's size spread added to the prior
                t_mu = t_mu + alpha * vec["log_size"] * vec["size_known"]
                t_sd = pt.sqrt(t_sd**2 + (1.0 - vec["size_known"]) * (alpha * LOG_SIZE_SD) ** 2)

            r0 = C.start_level(vec["r0_obs"], hp["r0_sd"])
            r_star = C.plateau(r0 + C.run_effect("gain", g_mu, g_sd), floor=vec["floor"], floor_known=vec["floor_known"],
                               ceil=vec["ceil"], ceil_known=vec["ceil_known"])  # fmt: skip
            tau = pm.Deterministic("tau", 1.0 + pt.exp(C.run_effect("tau", t_mu, t_sd)), dims="run")  # steps, >= 1
            mu = C.momentum(vec["mu_mean"], vec["mu_known"], free=self.free_momentum, like=span,
                            conc_unknown=hp["mu_conc"], conc_known=hp["mu_conc_known"])  # fmt: skip
            a = C.stiffness(mu, tau)
            sigma_m = C.measurement_noise(vec["noise"], hp["log_noise_sd"])
            wander = pm.Deterministic("wander", sigma_m * pt.exp(C.run_effect("wander", w_mu, w_sd)), dims="run")
            sigma_p = C.process_noise(wander, a, mu)
            if self.degeneracy:
                L = C.reward_floor(vec["floor"], vec["floor_known"], r0, hp["log_delta_mu"], hp["log_delta_sd"])
                lam = C.heterogeneity(hp["lam_logit_mu"], hp["lam_logit_sd"]) if self.heterogeneity else None
                chan = self._spread(arr, hp, r_star=r_star, L=L) if spread else None
                C.degenerate_likelihood(y, mask, r0=r0, r_star=r_star, a=a, mu=mu, sigma_p=sigma_p, sigma_m=sigma_m,
                                        L=L, lam=lam, spread=chan)  # fmt: skip
            else:
                C.reward_likelihood(y, mask, refresh=refresh, r0=r0, r_star=r_star, a=a, mu=mu, sigma_p=sigma_p,
                                    sigma_m=sigma_m)  # fmt: skip
        return model

    @staticmethod
    def _spread(arr: ModelArrays, hp: dict, *, r_star, L) -> dict:
        """The spread channels' data and per-run parameters (inside the model context)."""
        import pymc as pm

        from bayesgrpo.models import components as C

        ch = pm.Data("channels", arr.channels, dims=("channel_row", "step_grid", "run"), shape=(None, None, None))
        d = {n: pm.Data(n, getattr(arr, n), dims="run", shape=(None,)) for n in ("group_size", "width", "width_known")}
        nu, W = C.spread_parameters(hp, r_star=r_star, L=L, width=d["width"], width_known=d["width_known"])
        return {"channels": ch, "group_size": d["group_size"], "nu": nu, "W": W}

    # ------------------------------------------------------------------ numpy side of a forecast
    def filter_last(self, y, mask, p: dict, K: int, channels: dict | None = None):
        """Filtered state ``(m, P)`` at the last grid step, per posterior draw (normalised units).

        ``channels``: the run's spread channels (``ch`` (C, T) and ``G``) when its posterior came from the
        spread graph (``p`` then has ``nu`` and ``W``)."""
        from bayesgrpo.models.kalman import filter_numpy, filter_refresh_numpy

        pars = {k: p[k] for k in ("r0", "r_star", "a", "mu", "sigma_p", "sigma_m")}
        if self.degeneracy:
            from bayesgrpo.models.degeneracy_law import ekf_filter_numpy

            chan = None if channels is None else {**channels, "nu": p["nu"], "W": p["W"]}
            _, m, P = ekf_filter_numpy(y[:, None], mask[:, None], L=p["L"], lam=p.get("lam", 0.0), channels=chan,
                                       **pars)  # fmt: skip
        elif K > 1:
            # the 3-state (x_n, x_{n-1}, period anchor) filter: exact, cost independent of K
            _, m, P = filter_refresh_numpy(y[:, None], mask[:, None], K=K, **pars)
        else:
            _, m, P = filter_numpy(y[:, None], mask[:, None], **pars)
        return m, P

    def propagate(self, m, P, n_steps: int, p: dict, *, K: int, n_last: int, rng, store, accumulate):
        """Latent paths forward from the filtered state: ``(stored x, sums of x over accumulate)``."""
        from bayesgrpo.models.kalman import propagate_numpy, propagate_refresh_numpy

        kw = dict(a=p["a"], mu=p["mu"], sigma_p=p["sigma_p"], rng=rng, store=store, accumulate=accumulate)
        if self.degeneracy:
            from bayesgrpo.models.degeneracy_law import propagate_degenerate_numpy

            return propagate_degenerate_numpy(m, P, n_steps, r_star=p["r_star"], L=p["L"], lam=p.get("lam", 0.0), **kw)
        if K > 1:
            return propagate_refresh_numpy(m, P, n_steps, K=K, n_last=n_last, **kw)
        return propagate_numpy(m, P, n_steps, **kw)

    def stop(self, p: dict, *, n_steps: int, fraction: float, K: int):
        """Stop step per draw (steps from the start, censored at ``n_steps``) and the settled flag.

        The gain is in normalised units (one unit = the run's reward scale): a gain below ``1 -
        fraction`` of the scale has settled at the start (:mod:`bayesgrpo.physics.stopping`)."""
        from bayesgrpo.physics.stopping import settling_index, stop_steps

        gain = p["r_star"] - p["r0"]
        if self.degeneracy:
            from bayesgrpo.models.degeneracy_law import degenerate_deviation_paths

            x = degenerate_deviation_paths(p["a"], p["mu"], n_steps, r0=p["r0"], r_star=p["r_star"], L=p["L"],
                                           lam=p.get("lam", 0.0))  # fmt: skip
            idx, reached = settling_index(x, fraction=fraction, gain=gain)
            return np.minimum(idx, n_steps), reached
        return stop_steps(p["a"], p["mu"], n_steps=n_steps, fraction=fraction, refresh_interval=K, gain=gain)


#: the registry: kind name -> :class:`ModelKind`
MODEL_KINDS: dict[str, ModelKind] = {
    k.name: k
    for k in (
        ModelKind("oscillator", "damped oscillator of recursion (1): inertia from momentum, plateau, timescale"),
        ModelKind(
            "stationary",
            "the oscillator at its fixed point: a level the reward wanders around (AR(1)), nothing left to gain; "
            "closed-form posterior",
            free_momentum=False,
            closed_form=True,
        ),
        ModelKind(
            "degeneracy",
            "oscillator whose stiffness vanishes at the reward floor (zero-advantage groups): slow starts, S-curves",
            degeneracy=True,
        ),
        ModelKind(
            "logistic",
            "degeneracy kind with heterogeneous prompt difficulty (generalised logistic): slow "
            "starts, fast rises that turn into slow climbs",
            degeneracy=True,
            heterogeneity=True,
        ),
        ModelKind(
            "saturation", "overdamped limit (mu = 0): paper B's single-exponential saturation law", free_momentum=False
        ),
        ModelKind("scaling", "oscillator whose timescale scales with model size, tau ~ N^alpha", size_scaling=True),
    )
}


def get_kind(name: str) -> ModelKind:
    """The registered kind ``name``; ``ValueError`` naming the choices otherwise."""
    try:
        return MODEL_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown model kind {name!r}; choose one of {', '.join(MODEL_KINDS)}") from None


def build_model(arr: ModelArrays, *, kind: str = "oscillator", prior=None, hierarchical: bool = False,
                spread: bool = False):  # fmt: skip
    """Build the PyMC model of kind ``kind`` for a batch of runs (see :class:`ModelKind`).

    Parameters
    ----------
    arr : ModelArrays
        Prepared arrays (see :func:`bayesgrpo.models.arrays.prepare_arrays`).
    kind : str
        A key of :data:`MODEL_KINDS`.
    prior : bayesgrpo.models.prior.PopulationPrior, optional
        Fixed population hyperparameters (default: the kind's packaged prior, :func:`default_prior`).
    hierarchical : bool
        Learn the population means/sds across the runs given (partial pooling by family), with the
        prior as hyperprior.
    spread : bool
        With the spread channels (``reward_std``, ``frac_reward_zero_std``; degeneracy kinds only).

    Returns
    -------
    pymc.Model
    """
    return get_kind(kind).build(arr, prior=prior or default_prior(kind), hierarchical=hierarchical, spread=spread)


def prior_kind(kind: str, has) -> str:
    """The kind whose population prior ``kind`` uses: its own if ``has(kind)``, else (a degeneracy kind
    without its own fit, e.g. ``logistic``) the degeneracy kind's if ``has("degeneracy")``, else the
    oscillator's (the linear kinds share it). ``has`` says whether a kind's fit exists (a packaged
    file, or per-run fits in a benchmark's table)."""
    if has(kind):
        return kind
    spec = MODEL_KINDS.get(kind)
    if spec is not None and spec.degeneracy and has("degeneracy"):
        return "degeneracy"
    return "oscillator"


def default_prior_path(kind: str = "oscillator"):
    """``$BAYESGRPO_PRIOR`` if set, else the packaged prior :func:`prior_kind` picks for ``kind``
    (a :class:`pathlib.Path` or an :mod:`importlib.resources` traversable)."""
    env = os.environ.get("BAYESGRPO_PRIOR")
    if env:
        return Path(env)
    return prior_resource(prior_kind(kind, lambda k: prior_resource(k).is_file()))


def default_prior(kind: str = "oscillator") -> PopulationPrior:
    """The packaged population prior of a model kind (or ``$BAYESGRPO_PRIOR``).

    Kinds with their own fitted prior ship ``population_prior_<kind>.json``; a degeneracy kind without
    one (``logistic``) uses the degeneracy kind's (its ``lam`` keeps the default prior); the linear
    kinds share ``population_prior.json``. There is no silent fallback: a missing or invalid file
    raises :class:`~bayesgrpo.errors.PriorError` naming it.
    """
    return PopulationPrior.load(default_prior_path(kind))


#: what every front end says when the old option ``--model`` names the kind
MODEL_ALIAS_WARNING = "--model is deprecated: the model kind is --kind (the word 'model' is the LLM of the metadata)"


def kind_option(kind: str, model: str | None = None) -> tuple[str, str | None]:
    """``(kind, warning or None)`` of the ``--kind`` option (``--model``, its old name, wins with
    :data:`MODEL_ALIAS_WARNING`); a name not in :data:`MODEL_KINDS` is an
    :class:`~bayesgrpo.errors.OptionError` naming the option used."""
    from bayesgrpo.errors import OptionError

    option, warning = "--kind", None
    if model is not None:
        kind, option, warning = model, "--model", MODEL_ALIAS_WARNING
    if kind not in MODEL_KINDS and kind != AUTO_KIND:
        raise OptionError(
            f"{option} {kind!r} is not a model kind; choose {AUTO_KIND} or one of {', '.join(MODEL_KINDS)}"
        )
    return kind, warning
