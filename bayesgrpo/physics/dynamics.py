"""Mean-field dynamics of a GRPO reward curve (pure numpy / scipy; no PyMC).

Implements ``/work/shared/design/physics.md`` sections 2-5:

* Section 2 -- the discrete mean-field recursion (1)

  .. math::

      x_{n+1} = (1+\\mu) x_n - \\mu x_{n-1} - a x_{n-d_n} + \\varepsilon_n,
      \\qquad \\varepsilon_n \\sim N(0, \\sigma_p^2),

  with :math:`x_n = R_n - R^*`, :math:`x_0 = R_0 - R^*` and **the whole history before
  the start equal to the initial state**: :math:`x_{-j} = x_0` for every :math:`j \\ge 1`
  (zero initial velocity; a lagged reference before step 0 sees the initial policy).
  With the refresh pattern :math:`d_n = n \\bmod K` the reference ``n - d_n`` is never
  negative, so the convention only matters for a constant lag.
* Section 3 -- continuum coefficients (mass, damping, stiffness, ``zeta``, timescales)
  and the closed-form mean trajectories.
* Sections 4-5 -- exact stability, thresholds, critical damping and the stationary variance:
  :mod:`bayesgrpo.physics.stability`.

All functions take their first argument positionally and everything else by keyword.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "SimResult",
    "Coefficients",
    "lag_pattern",
    "simulate",
    "coefficients",
    "classify_regime",
    "mean_trajectory",
    "exponential_trajectory",
    "transition_matrix",
    "time_to_fraction",
]

#: regime labels returned by :func:`coefficients` and :func:`classify_regime`.
REGIMES = ("overdamped", "critical", "underdamped", "unstable")

#: relative tolerance on ``|zeta - 1|`` below which a regime is called "critical".
CRITICAL_RTOL = 1e-9


# ----------------------------------------------------------------------------- helpers
def _check_momentum(momentum) -> np.ndarray:
    mu = np.asarray(momentum, dtype=float)
    if np.any(~np.isfinite(mu)) or np.any(mu < 0) or np.any(mu >= 1):
        raise ValueError(f"momentum must lie in [0, 1); got {momentum!r}")
    return mu


def _check_a(a, *, allow_zero: bool = False) -> np.ndarray:
    arr = np.asarray(a, dtype=float)
    bad = (arr < 0) if allow_zero else (arr <= 0)
    if np.any(~np.isfinite(arr)) or np.any(bad):
        cond = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"a (= learning_rate * curvature) must be finite and {cond}; got {a!r}")
    return arr


def _check_int(name: str, value, *, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return value


def _scalar(x):
    """Return a Python float for 0-d input, the array otherwise."""
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


# ----------------------------------------------------------------------------- section 2
def lag_pattern(n_steps: int, *, lag: int = 0, refresh_interval: int | None = None) -> np.ndarray:
    """Lag ``d_n`` used at each update ``n = 0 .. n_steps-1`` (physics.md section 2).

    Parameters
    ----------
    n_steps : int
        Number of updates (length of the returned array).
    lag : int, default 0
        Constant lag ``d`` (steps between the sampling policy and the updated one).
    refresh_interval : int, optional
        If given, the "refresh every K steps" pattern ``d_n = n mod K`` (cycles
        ``0, 1, ..., K-1``); ``K = 1`` is the on-policy case ``d_n = 0``. Mutually
        exclusive with a non-zero ``lag``.

    Returns
    -------
    numpy.ndarray of int64, shape (n_steps,)
    """
    n_steps = _check_int("n_steps", n_steps, minimum=0)
    lag = _check_int("lag", lag, minimum=0)
    if refresh_interval is not None:
        if lag != 0:
            raise ValueError("give either a constant lag or a refresh_interval, not both")
        k = _check_int("refresh_interval", refresh_interval, minimum=1)
        return np.arange(n_steps, dtype=np.int64) % k
    return np.full(n_steps, lag, dtype=np.int64)


@dataclass(frozen=True)
class SimResult:
    """Output of :func:`simulate`.

    Attributes
    ----------
    latent : numpy.ndarray, shape (*batch, n_steps)
        ``R_n = R* + x_n``; ``latent[..., 0] == r0``.
    observed : numpy.ndarray, shape (*batch, n_steps)
        ``latent + e_n`` with white measurement noise ``e_n ~ N(0, sigma_m^2)``.
    lag : numpy.ndarray of int, shape (n_steps,)
        The lag pattern ``d_n`` used for the update ``n -> n+1`` (the last entry is unused).
    """

    latent: np.ndarray
    observed: np.ndarray
    lag: np.ndarray


def _lag_polynomial(a: float, mu: float, d: int) -> np.ndarray:
    """Denominator ``A(q^-1) = 1 - (1+mu) q^-1 + mu q^-2 + a q^-(1+d)`` of recursion (1)."""
    den = np.zeros(max(d, 1) + 2)
    den[0] = 1.0
    den[1] -= 1.0 + mu
    den[2] += mu
    den[1 + d] += a
    return den


def _simulate_constant_lag_1d(x0, mu, a, d, eps):
    """Recursion (1) with constant lag for one run via ``scipy.signal.lfilter``.

    ``eps`` has length ``n_steps - 1`` (innovations of the updates 0 .. n_steps-2).
    The filter's past outputs are all ``x0`` (history = initial state).
    """
    n_steps = eps.shape[-1] + 1
    out = np.empty(n_steps)
    out[0] = x0
    if n_steps == 1:
        return out
    den = _lag_polynomial(a, mu, d)
    import scipy.signal  # imported when used: scipy.signal alone costs ~1.5 s of every process's start

    zi = scipy.signal.lfiltic([1.0], den, y=np.full(len(den) - 1, x0))
    out[1:], _ = scipy.signal.lfilter([1.0], den, eps, zi=zi)
    return out


def _simulate_loop(x0, mu, a, lags, eps):
    """Generic (time-varying lag) recursion (1), vectorised over a leading batch."""
    n_steps = eps.shape[-1] + 1
    x = np.empty(x0.shape + (n_steps,))
    x[..., 0] = x0
    for n in range(n_steps - 1):
        x_prev = x[..., n - 1] if n >= 1 else x0
        j = n - int(lags[n])
        x_lag = x[..., j] if j >= 0 else x0
        x[..., n + 1] = (1.0 + mu) * x[..., n] - mu * x_prev - a * x_lag + eps[..., n]
    return x


def simulate(
    n_steps: int,
    *,
    r0,
    r_star,
    a,
    momentum,
    lag: int = 0,
    refresh_interval: int | None = None,
    sigma_p=0.0,
    sigma_m=0.0,
    seed=None,
) -> SimResult:
    """Simulate the mean-field recursion (1) of physics.md section 2.

    ``x_{n+1} = (1+mu) x_n - mu x_{n-1} - a x_{n-d_n} + eps_n``, ``x_n = R_n - R*``,
    ``x_0 = r0 - r_star``; every value before step 0 (``x_{-1}`` and any lagged reference
    ``x_{n-d}`` with ``n-d < 0``) equals ``x_0`` -- the history before the start is the
    initial state (zero initial velocity, an initial policy that has not moved yet).
    Observation: ``y_n = R_n + e_n``, ``e_n ~ N(0, sigma_m^2)`` white.

    Parameters
    ----------
    n_steps : int
        Number of reward values returned (``R_0 .. R_{n_steps-1}``).
    r0, r_star, a, momentum, sigma_p, sigma_m : float or array_like
        Initial reward, plateau ``R*``, per-step stiffness ``a = eta * kappa`` (>= 0),
        momentum ``mu`` in [0, 1), process and measurement noise s.d. Arrays broadcast to
        a common batch shape which leads the output.
    lag : int, default 0
        Constant lag ``d`` (shared by the batch).
    refresh_interval : int, optional
        Refresh-every-K lag pattern ``d_n = n mod K`` (see :func:`lag_pattern`).
    seed : int, numpy.random.Generator or None
        Seed for :func:`numpy.random.default_rng`. Draw order: the process innovations
        (shape ``(*batch, n_steps-1)``), then the measurement noise (``(*batch, n_steps)``),
        each drawn in full even when its s.d. is zero, so a seed gives the same process path
        whatever ``sigma_m``.

    Returns
    -------
    SimResult
    """
    n_steps = _check_int("n_steps", n_steps, minimum=1)
    lags = lag_pattern(n_steps, lag=lag, refresh_interval=refresh_interval)
    mu = _check_momentum(momentum)
    a_arr = _check_a(a, allow_zero=True)
    r0 = np.asarray(r0, dtype=float)
    r_star = np.asarray(r_star, dtype=float)
    sigma_p = np.asarray(sigma_p, dtype=float)
    sigma_m = np.asarray(sigma_m, dtype=float)
    if np.any(sigma_p < 0) or np.any(sigma_m < 0):
        raise ValueError("sigma_p and sigma_m must be >= 0")
    batch = np.broadcast_shapes(r0.shape, r_star.shape, a_arr.shape, mu.shape, sigma_p.shape, sigma_m.shape)
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal(batch + (n_steps - 1,)) * sigma_p[..., None]
    meas = rng.standard_normal(batch + (n_steps,)) * sigma_m[..., None]

    x0 = np.broadcast_to(r0 - r_star, batch)
    mu_b = np.broadcast_to(mu, batch)
    a_b = np.broadcast_to(a_arr, batch)
    if refresh_interval is None or int(refresh_interval) == 1:
        d = int(lags[0]) if n_steps else 0
        x = np.empty(batch + (n_steps,))
        for idx in np.ndindex(*batch):
            x[idx] = _simulate_constant_lag_1d(float(x0[idx]), float(mu_b[idx]), float(a_b[idx]), d, eps[idx])
    else:
        x = _simulate_loop(x0, mu_b, a_b, lags, eps)
    latent = x + np.broadcast_to(r_star, batch)[..., None]
    return SimResult(latent=latent, observed=latent + meas, lag=lags)


# ----------------------------------------------------------------------------- section 3
@dataclass(frozen=True)
class Coefficients:
    """Continuum coefficients of ``m R'' + c R' + k (R - R*) = noise`` (physics.md section 3).

    Attributes
    ----------
    mass : float
        ``m = (1 + mu) / 2``.
    damping : float
        ``c = (1 - mu) - a d``.
    stiffness : float
        ``k = a``.
    omega0 : float
        ``sqrt(k / m)``.
    zeta : float
        ``c / (2 sqrt(m k))``.
    tau_s, tau_f : float
        Slow and fast timescales ``-1/l+`` and ``-1/l-`` (steps); NaN unless overdamped.
    tau : float
        ``c / k``, the timescale of the overdamped-limit single exponential.
    regime : str
        ``'overdamped' | 'critical' | 'underdamped' | 'unstable'`` (``c <= 0``).
    """

    mass: float
    damping: float
    stiffness: float
    omega0: float
    zeta: float
    tau_s: float
    tau_f: float
    tau: float
    regime: str


def _regime_from(zeta, damping, rtol=CRITICAL_RTOL):
    zeta = np.asarray(zeta, dtype=float)
    damping = np.asarray(damping, dtype=float)
    out = np.where(np.abs(zeta - 1.0) <= rtol, "critical", np.where(zeta > 1.0, "overdamped", "underdamped"))
    out = np.where(damping <= 0, "unstable", out)
    return out.item() if out.ndim == 0 else out


def coefficients(
    *,
    momentum,
    a=None,
    learning_rate=None,
    curvature=None,
    lag=0.0,
) -> Coefficients:
    """Continuum coefficients and timescales of physics.md section 3.

    Parameters
    ----------
    momentum : float or array_like
        ``mu`` (heavy ball, or Adam's beta1), in [0, 1).
    a : float or array_like, optional
        Per-step stiffness ``a = eta * kappa`` (> 0). If omitted,
        ``a = learning_rate * curvature``.
    learning_rate, curvature : float or array_like, optional
        ``eta`` and ``kappa``; used only when ``a`` is None.
    lag : float, default 0
        (Mean) lag ``d``; erodes the damping ``c = 1 - mu - a d``.

    Returns
    -------
    Coefficients
        Scalars for scalar input, arrays (``regime`` an array of str) otherwise.
    """
    if a is None:
        if learning_rate is None or curvature is None:
            raise ValueError("give a, or both learning_rate and curvature")
        a = np.asarray(learning_rate, dtype=float) * np.asarray(curvature, dtype=float)
    elif learning_rate is not None or curvature is not None:
        raise ValueError("give a, or learning_rate and curvature, not both")
    mu = _check_momentum(momentum)
    k = _check_a(a)
    lag = np.asarray(lag, dtype=float)
    if np.any(lag < 0):
        raise ValueError(f"lag must be >= 0; got {lag!r}")
    m = (1.0 + mu) / 2.0
    c = (1.0 - mu) - k * lag
    omega0 = np.sqrt(k / m)
    zeta = c / (2.0 * np.sqrt(m * k))
    regime = _regime_from(zeta, c)
    disc = c * c - 4.0 * m * k
    over = np.asarray(regime) == "overdamped"
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(np.where(over, disc, np.nan))
        tau_s = np.where(over, (c + root) / (2.0 * k), np.nan)  # -1/l+  (stable form)
        tau_f = np.where(over, 2.0 * m / (c + root), np.nan)  # -1/l-
    tau = c / k
    return Coefficients(
        mass=_scalar(m),
        damping=_scalar(c),
        stiffness=_scalar(k),
        omega0=_scalar(omega0),
        zeta=_scalar(zeta),
        tau_s=_scalar(tau_s),
        tau_f=_scalar(tau_f),
        tau=_scalar(tau),
        regime=regime,
    )


def classify_regime(
    *,
    a,
    momentum,
    lag: float = 0.0,
    kind: Literal["continuum", "discrete"] = "continuum",
) -> str:
    """Dynamical regime (physics.md sections 3-4).

    Parameters
    ----------
    a, momentum, lag
        As in :func:`coefficients`. For ``kind="discrete"`` the lag must be an integer.
    kind : {"continuum", "discrete"}
        ``"continuum"``: from ``zeta`` and ``c`` of section 3 (``'unstable'`` when
        ``c <= 0``). ``"discrete"``: from the exact recursion (1) with constant lag:
        ``'unstable'`` if the spectral radius is >= 1, otherwise ``'overdamped'`` when the
        dominant root(s) are real and positive (``'critical'`` for a double one) and
        ``'underdamped'`` when the dominant root is complex or negative (the path oscillates).
        For ``lag = 0`` this is ``a < (1 - sqrt mu)^2`` <=> overdamped.

    Returns
    -------
    str
    """
    if kind == "continuum":
        return coefficients(a=a, momentum=momentum, lag=lag).regime
    if kind != "discrete":
        raise ValueError(f"kind must be 'continuum' or 'discrete'; got {kind!r}")
    a_f = float(_check_a(a))
    mu = float(_check_momentum(momentum))
    d = _check_int("lag", lag, minimum=0)
    roots = np.linalg.eigvals(transition_matrix(a=a_f, momentum=mu, lag=d))
    mod = np.abs(roots)
    rho = mod.max()
    if rho >= 1.0:
        return "unstable"
    dom = roots[mod >= rho * (1.0 - 1e-7)]
    if np.all(np.abs(dom.imag) <= 1e-7 * rho) and np.all(dom.real > 0):
        return "critical" if len(dom) > 1 else "overdamped"
    if d == 0 and math.isclose(a_f, (1.0 - math.sqrt(mu)) ** 2, rel_tol=CRITICAL_RTOL):
        return "critical"  # exact double-root test for the AR(2) (eigvals splits a double root)
    return "underdamped"


def mean_trajectory(t, *, r0, r_star, a, momentum, lag=0.0) -> np.ndarray:
    """Closed-form continuum mean trajectory, ``R(0) = r0``, ``R'(0) = 0`` (section 3).

    Solves ``m R'' + c R' + k (R - R*) = 0`` with the coefficients of
    :func:`coefficients`; the regime is chosen automatically. Mathematically
    ``R(t) = R* - Delta * e^{-g t} [cosh(b t) + g sinh(b t) / b]``, ``g = c/(2m)``,
    ``b = sqrt(g^2 - omega0^2)``, ``Delta = R* - R0``, which equals the section-3 forms:

    * overdamped: ``R* - Delta (tau_s e^{-t/tau_s} - tau_f e^{-t/tau_f}) / (tau_s - tau_f)``
    * critical: ``R* - Delta (1 + omega0 t) e^{-omega0 t}``
    * underdamped: ``R* - Delta e^{-zeta omega0 t}(cos wd t + zeta/sqrt(1-zeta^2) sin wd t)``

    It is evaluated in a form free of cancellation near critical damping and of overflow
    at large ``t``. With ``c <= 0`` (``lag`` large) the same formula gives the growing
    solution. With any real lag the continuum drifts from recursion (1) (section 3):
    forecast with :func:`simulate` then.

    Parameters
    ----------
    t : array_like
        Times in optimizer steps (>= 0).
    r0, r_star, a, momentum, lag : float
        As in :func:`simulate` / :func:`coefficients` (``a > 0``).

    Returns
    -------
    numpy.ndarray, the shape of ``t``.
    """
    t = np.asarray(t, dtype=float)
    mu = float(_check_momentum(momentum))
    k = float(_check_a(a))
    m = (1.0 + mu) / 2.0
    c = (1.0 - mu) - k * float(lag)
    g = c / (2.0 * m)
    w0sq = k / m
    s = g * g - w0sq
    delta = float(r_star) - float(r0)
    if abs(s) <= CRITICAL_RTOL * w0sq:  # critical
        shape = np.exp(-g * t) * (1.0 + g * t)
    elif s > 0:  # overdamped (or monotone divergence when c < 0)
        b = math.sqrt(s)
        lam_plus = (-w0sq / (g + b)) if g > 0 else (b - g)  # = -1/tau_s, stable form
        e2 = np.exp(-2.0 * b * t)
        sinh_term = -np.expm1(-2.0 * b * t) / (2.0 * b)  # e^{-bt} sinh(bt) / b
        shape = np.exp(lam_plus * t) * (0.5 * (1.0 + e2) + g * sinh_term)
    else:  # underdamped
        w = math.sqrt(-s)
        shape = np.exp(-g * t) * (np.cos(w * t) + g * t * np.sinc(w * t / np.pi))
    return float(r_star) - delta * shape


def exponential_trajectory(t, *, r0, r_star, tau) -> np.ndarray:
    """Overdamped-limit single exponential ``R(t) = R* - (R* - R0) e^{-t/tau}`` (section 3).

    This is paper B's saturation law with ``tau = c / k`` (:attr:`Coefficients.tau`).

    Parameters
    ----------
    t : array_like
        Times (steps).
    r0, r_star, tau : float or array_like
        Initial reward, plateau, timescale (> 0).

    Returns
    -------
    numpy.ndarray
    """
    t = np.asarray(t, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if np.any(tau <= 0):
        raise ValueError(f"tau must be > 0; got {tau!r}")
    r_star = np.asarray(r_star, dtype=float)
    return r_star - (r_star - np.asarray(r0, dtype=float)) * np.exp(-t / tau)


# ----------------------------------------------------------------------------- the companion matrix
def transition_matrix(*, a, momentum, lag: int = 0) -> np.ndarray:
    """Companion (state-transition) matrix of recursion (1) with a constant lag.

    State ``s_n = [x_n, x_{n-1}, ..., x_{n-D}]`` with ``D = max(lag, 1)``, so that
    ``s_{n+1} = F s_n + [eps_n, 0, ..., 0]``. For ``lag = 0`` (the Kalman-filter case,
    physics.md section 2)::

        F = [[1 + mu - a, -mu],
             [1,           0 ]]

    The process-noise covariance is ``Q = sigma_p^2 e_0 e_0^T`` and the initial state is
    ``[x_0, x_0, ...]`` (history = initial state); the observation is
    ``y_n = R* + [1, 0, ...] s_n + e_n``.

    Parameters
    ----------
    a : float
        Stiffness (>= 0).
    momentum : float
        ``mu`` in [0, 1).
    lag : int, default 0
        Constant lag ``d``.

    Returns
    -------
    numpy.ndarray, shape (D+1, D+1)
    """
    a = float(_check_a(a, allow_zero=True))
    mu = float(_check_momentum(momentum))
    d = _check_int("lag", lag, minimum=0)
    dim = max(d, 1) + 1
    f = np.zeros((dim, dim))
    f[0, 0] += 1.0 + mu
    f[0, 1] += -mu
    f[0, d] += -a
    f[np.arange(1, dim), np.arange(dim - 1)] = 1.0
    return f


# ----------------------------------------------------------------------------- stop step
def time_to_fraction(
    frac,
    *,
    r0,
    r_star,
    a,
    momentum,
    lag: int = 0,
    refresh_interval: int | None = None,
    max_steps: int = 10_000_000,
) -> float:
    """Stop step of the deterministic recursion (1): the first step after which it stays within
    ``1 - frac`` of its gain from the plateau (:mod:`bayesgrpo.physics.stopping`, the one definition).

    For over- and critically damped dynamics this is the first step with a realised fraction
    ``(R_n - R0) / (R* - R0) >= frac``; for underdamped dynamics it is the settling time (the
    trajectory may cross ``frac`` earlier on its way to an overshoot). ``inf`` if it does not
    settle within ``max_steps`` (unstable dynamics, or ``frac = 1`` without exact arrival).
    ``r0 == r_star`` or ``frac <= 0`` give 0.

    Parameters
    ----------
    frac : float
        Share of the gain, e.g. 0.95, in (0, 1].
    r0, r_star, a, momentum, lag, refresh_interval
        As in :func:`simulate` (noise-free).
    max_steps : int
        Search horizon.

    Returns
    -------
    float
        The step as a float (``inf`` when never settled).
    """
    from bayesgrpo.physics.stopping import settling_index

    frac = float(frac)
    if r0 == r_star or frac <= 0.0:
        return 0.0
    n = 1024
    while True:
        n = min(n, max_steps + 1)
        lat = simulate(
            n, r0=r0, r_star=r_star, a=a, momentum=momentum, lag=lag, refresh_interval=refresh_interval
        ).latent
        x = (lat - float(r_star)) / (float(r0) - float(r_star))
        idx, reached = settling_index(x, fraction=min(frac, 1.0))
        # trust a settling index only with a long tail inside the band after it
        if bool(reached) and int(idx) <= n // 2:
            return float(idx)
        if n > max_steps or not np.all(np.isfinite(x)) or np.max(np.abs(x)) > 1e12:
            return float(idx) if bool(reached) else math.inf
        n *= 4
