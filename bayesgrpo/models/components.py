"""Shared building blocks of every PyMC graph of the package (forecasting and comparison models).

Each function adds named variables to the model on the context stack and returns the tensor. All
per-run variables have ``dims="run"``; every per-run effect is non-centred (``mean + sd * z``).

* :func:`run_effect` -- a non-centred per-run effect;
* :func:`start_level` -- ``r0`` around the observed start level;
* :func:`momentum` -- ``mu``: Beta around the logged ``beta1`` (tight) or Adam's default (broad), or 0;
* :func:`measurement_noise` -- ``sigma_m`` around the robust noise estimate;
* :func:`process_noise` -- ``sigma_p`` from the latent's stationary sd (physics.md section 5);
* :func:`plateau` -- ``r_star``, kept inside the reward's known bounds;
* :func:`reward_likelihood` -- the exact Kalman likelihood of recursion (1) as the ``reward`` term;
* :func:`spread_parameters` -- ``nu`` and the width ``W`` of the spread channel (:mod:`bayesgrpo.models.spread`);
* :func:`degenerate_likelihood` -- the EKF likelihood of the degeneracy kinds (with the spread channels).
"""

from __future__ import annotations

__all__ = ["run_effect", "start_level", "momentum", "measurement_noise", "process_noise", "stiffness",
           "reward_likelihood", "reward_floor", "heterogeneity", "degenerate_likelihood", "plateau",
           "BOUND_SOFTNESS", "spread_parameters"]  # fmt: skip

#: width (normalised units) over which a known reward bound bends the plateau: a plateau well inside the
#: bounds is unchanged (by less than 1e-6 at 0.3 units), one at the bound sits 0.014 inside it
BOUND_SOFTNESS = 0.02


def run_effect(name: str, mean, sd, *, dims: str = "run"):
    """Non-centred per-run effect ``mean + sd * z_<name>``, ``z ~ N(0, 1)`` (returns the tensor)."""
    import pymc as pm

    z = pm.Normal(f"z_{name}", 0.0, 1.0, dims=dims)
    return mean + sd * z


def start_level(r0_obs, sd, *, dims: str = "run"):
    """``r0 = r0_obs + sd * z_r0`` (Deterministic ``r0``)."""
    import pymc as pm

    return pm.Deterministic("r0", run_effect("r0", r0_obs, sd, dims=dims), dims=dims)


def momentum(mu_mean, mu_known, *, conc_unknown, conc_known, free: bool = True, like=None, dims: str = "run"):
    """Momentum ``mu``: Beta(mean, concentration) per run, or exactly 0 (``free=False``).

    The concentration is ``conc_known`` where ``beta1`` was logged (``mu_known > 0``), else
    ``conc_unknown`` (Adam's default 0.9 is only a prior guess).
    """
    import pymc as pm
    import pytensor.tensor as pt

    if not free:
        return pm.Deterministic("mu", pt.zeros_like(like if like is not None else mu_mean), dims=dims)
    conc = pt.switch(pt.gt(mu_known, 0), conc_known, conc_unknown)
    return pm.Beta("mu", alpha=mu_mean * conc, beta=(1.0 - mu_mean) * conc, dims=dims)


def stiffness(mu, tau, *, dims: str = "run"):
    """``a = (1 - mu) / tau`` (the overdamped-limit timescale tau = c / k, physics.md section 3)."""
    import pymc as pm

    return pm.Deterministic("a", (1.0 - mu) / tau, dims=dims)


def measurement_noise(noise, log_sd, *, dims: str = "run"):
    """``sigma_m = sqrt(SIGMA_M_FLOOR^2 + (noise * exp(log_sd * z_noise))^2)`` around the robust estimate ``noise``.

    The floor (normalised units, :data:`bayesgrpo.models.arrays.SIGMA_M_FLOOR`) is the resolution of a
    logged reward: a batch mean is never known better than that. Without it a prefix that is exactly
    constant (a 0/1 reward logged as 0.0 or 0.01 at every step before the rise) has a likelihood
    that grows without bound as ``sigma_m -> 0``: the sampler sticks there (r_hat > 2) and the
    forecast has zero width.
    """
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.models.arrays import SIGMA_M_FLOOR

    free = noise * pt.exp(run_effect("noise", 0.0, log_sd, dims=dims))
    return pm.Deterministic("sigma_m", pt.sqrt(SIGMA_M_FLOOR**2 + free**2), dims=dims)


def process_noise(wander, a, mu, *, dims: str = "run"):
    """``sigma_p`` such that the latent's stationary sd around the plateau is ``wander``.

    Inverts the exact AR(2) stationary variance (physics.md section 5, lag 0)
    ``(1 + mu) sigma_p^2 / ((1 - mu) a (2 (1 + mu) - a))``.
    """
    import pymc as pm
    import pytensor.tensor as pt

    factor = (1.0 + mu) / ((1.0 - mu) * a * (2.0 * (1.0 + mu) - a))
    return pm.Deterministic("sigma_p", wander / pt.sqrt(factor), dims=dims)


def reward_likelihood(y, mask, *, refresh, r0, r_star, a, mu, sigma_p, sigma_m):
    """Add the exact Kalman log-likelihood of the logged rewards as ``Potential("reward")``.

    The compiled Op :func:`~bayesgrpo.models.kalman_op.kalman_refresh_loglik` (refresh interval K per
    run; K = 1 is the lag-free recursion). Returns the per-run log-likelihood tensor.
    """
    import pymc as pm

    from bayesgrpo.models.kalman_op import kalman_refresh_loglik

    ll = kalman_refresh_loglik(y, mask, refresh, r0=r0, r_star=r_star, a=a, mu=mu, sigma_p=sigma_p, sigma_m=sigma_m)
    pm.Potential("reward", ll.sum())
    return ll


def plateau(raw, *, floor, floor_known, ceil, ceil_known, dims: str = "run"):
    """The plateau ``r_star`` (Deterministic): ``raw`` (start level + gain) bent smoothly inside the
    reward's known bounds ``[floor, ceil]`` (normalised; ``*_known`` = 1 where declared or inferred).

    A 0/1 pass rate cannot plateau above 1: ``ceil - s softplus((ceil - raw) / s)`` (and the mirror
    image at the floor), ``s`` = :data:`BOUND_SOFTNESS`. The prior on the gain is unchanged; only its
    push-forward is kept inside the bounds, so the latent paths (which move around the plateau) and the
    stop step (the settling to it) are too. Unknown bounds leave ``raw`` as it is.
    """
    import pymc as pm
    import pytensor.tensor as pt

    s = BOUND_SOFTNESS
    below = ceil - s * pt.softplus((ceil - raw) / s)
    r = pt.switch(pt.gt(ceil_known, 0), below, raw)
    above = floor + s * pt.softplus((r - floor) / s)
    return pm.Deterministic("r_star", pt.switch(pt.gt(floor_known, 0), above, r), dims=dims)


def reward_floor(floor, floor_known, r0, log_delta_mu, log_delta_sd, *, dims: str = "run"):
    """The reward's floor ``L`` (normalised): the known lower bound, else ``r0 - delta`` with
    ``log delta ~ N(log_delta_mu, log_delta_sd)`` (how far below its start the floor lies, where every
    group is all-zero)."""
    import pymc as pm
    import pytensor.tensor as pt

    delta = pt.exp(run_effect("delta", log_delta_mu, log_delta_sd, dims=dims))
    return pm.Deterministic("L", pt.switch(pt.gt(floor_known, 0), floor, r0 - delta), dims=dims)


def heterogeneity(logit_mu, logit_sd, *, dims: str = "run"):
    """``lam = LAM_MAX * sigmoid(logit_mu + logit_sd * z_lam)``: how much faster than at its plateau a
    run's stiffness is early in the rise (``e^lam``; heterogeneous prompt difficulty,
    :mod:`bayesgrpo.models.degeneracy`)."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.models.degeneracy import LAM_MAX

    return pm.Deterministic("lam", LAM_MAX * pt.sigmoid(run_effect("lam", logit_mu, logit_sd, dims=dims)), dims=dims)


def spread_parameters(hp, *, r_star, L, width, width_known, dims: str = "run"):
    """Per-run parameters of the spread channel: ``nu = exp(log_nu_mu + log_nu_sd z_nu)`` (effective Beta
    concentration of pass rates) and the width ``W = U - L`` (normalised): the known bounds' where
    ``width_known``, else ``(r_star - L)(1 + w)`` with the headroom ``w = exp(log_headroom_mu + sd z_headroom)``
    above the plateau (:mod:`bayesgrpo.models.spread`). Returns ``(nu, W)``."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.models.degeneracy import D_MIN

    nu = pm.Deterministic("nu", pt.exp(run_effect("nu", hp["log_nu_mu"], hp["log_nu_sd"], dims=dims)), dims=dims)
    w = pm.Deterministic("headroom", pt.exp(run_effect("headroom", hp["log_headroom_mu"], hp["log_headroom_sd"],
                                                       dims=dims)), dims=dims)  # fmt: skip
    W = pt.switch(pt.gt(width_known, 0), width, pt.maximum(r_star - L, D_MIN) * (1.0 + w))
    return nu, pm.Deterministic("W", W, dims=dims)


def degenerate_likelihood(y, mask, *, r0, r_star, a, mu, sigma_p, sigma_m, L, lam=None, spread=None):
    """The EKF log-likelihood of the degeneracy-aware recursion as ``Potential("reward")`` (``spread``: the
    spread channels, a dict for :func:`bayesgrpo.models.degeneracy.kalman_ekf_loglik`)."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.models.degeneracy import KAPPA, kalman_ekf_loglik

    kappa = pt.ones_like(r0) * KAPPA
    ll = kalman_ekf_loglik(y, mask, kappa=kappa, r0=r0, r_star=r_star, a=a, mu=mu, sigma_p=sigma_p, sigma_m=sigma_m,
                           L=L, lam=lam, spread=spread)  # fmt: skip
    pm.Potential("reward", ll.sum())
    return ll
