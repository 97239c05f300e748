"""The physics of recursion (1) that no command of the package uses (``/work/shared/design/physics.md``
sections 2-5): the reference the physics benchmarks (``bench/physics_validation.py``, ``bench/physics_trl.py``,
``bench/degeneracy_validation.py``) and the tests check the testbed and the package against. It left
``bayesgrpo.physics`` in issue 30; what the forecasts use stays there (the companion matrix
:func:`bayesgrpo.physics.dynamics.transition_matrix`, exact stability :mod:`bayesgrpo.physics.stability`,
the stop step :mod:`bayesgrpo.physics.stopping`).

* Section 2 -- :func:`simulate` (recursion (1) with noise; the history before step 0 equals the initial
  state) and its lag pattern (:func:`lag_pattern`); :func:`deviation_paths`, the deterministic paths
  from ``x_0 = x_{-1} = 1``;
* Section 3 -- continuum coefficients (:func:`coefficients`: mass, damping, stiffness, ``zeta``,
  timescales), the regimes (:func:`classify_regime`), the closed-form mean trajectories
  (:func:`mean_trajectory`, :func:`exponential_trajectory`) and :func:`time_to_fraction`;
* Section 4 -- thresholds: :func:`first_unstable_lag`, :func:`refresh_threshold`, :func:`critical_stiffness`;
* Section 5 -- the stationary variance (:func:`stationary_covariance`, :func:`stationary_variance`).

All functions take their first argument positionally and everything else by keyword.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bayesgrpo.physics.dynamics import _check_a, _check_int, _check_momentum, transition_matrix
from bayesgrpo.physics.stability import spectral_radius
from bayesgrpo.physics.stopping import _recursion

__all__ = [
    "SimResult",
    "Coefficients",
    "lag_pattern",
    "simulate",
    "deviation_paths",
    "coefficients",
    "classify_regime",
    "mean_trajectory",
    "exponential_trajectory",
    "time_to_fraction",
    "first_unstable_lag",
    "refresh_threshold",
    "critical_stiffness",
    "stationary_covariance",
    "stationary_variance",
]


def _scalar(x):
    """Return a Python float for 0-d input, the array otherwise."""
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


# ----------------------------------------------------------------------------- sections 2-3
#: regime labels returned by :func:`coefficients` and :func:`classify_regime`.
REGIMES = ("overdamped", "critical", "underdamped", "unstable")


#: relative tolerance on ``|zeta - 1|`` below which a regime is called "critical".
CRITICAL_RTOL = 1e-9


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


def deviation_paths(a, mu, n_steps: int, *, refresh_interval: int | None = None) -> np.ndarray:
    """Deterministic recursion (1) from ``x_0 = x_{-1} = 1`` (zero initial velocity), batched.

    ``x_{n+1} = (1 + mu) x_n - mu x_{n-1} - a x_{n - d_n}``, ``d_n = n mod K`` for a refresh interval
    ``K`` (else 0). Returns ``x`` of shape ``(*batch, n_steps + 1)`` (index 0 is the start).
    """
    shape, steps = _recursion(a, mu, n_steps, refresh_interval)
    out = np.empty(shape + (n_steps + 1,))
    out[..., 0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        for n, x in steps:
            out[..., n + 1] = x
    return out


# ----------------------------------------------------------------------------- sections 4-5
def _crossing_lag(a: float, mu: float) -> float:
    """Real lag at which a root pair of (1) reaches the unit circle (0 < a < 2(1+mu)).

    For ``d >= 1`` the characteristic equation is ``z^{d-1}(z-1)(z-mu) = -a``. On
    ``|z| = 1``, ``|e^{i theta}-1| |e^{i theta}-mu| = a`` fixes a unique ``theta* in (0, pi)``
    (the left side increases on [0, pi]); the phase condition
    ``(d-1) theta* + (pi + theta*)/2 + arg(e^{i theta*} - mu) = pi`` then gives the lag.
    """

    def gap(th):
        z = complex(math.cos(th), math.sin(th))
        return abs(z - 1.0) * abs(z - mu) - a

    import scipy.optimize

    th = scipy.optimize.brentq(gap, 0.0, math.pi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    z = complex(math.cos(th), math.sin(th))
    return 1.0 + (math.pi / 2.0 - th / 2.0 - math.atan2((z - mu).imag, (z - mu).real)) / th


def _char_on_circle(theta: np.ndarray, a: float, mu: float, d: int) -> np.ndarray:
    """Characteristic polynomial of (1) with constant lag ``d`` at ``z = e^{i theta}``."""
    z = np.exp(1j * theta)
    if d == 0:
        return z * z - (1.0 + mu - a) * z + mu
    return np.exp(1j * (d - 1) * theta) * (z - 1.0) * (z - mu) + a


def _is_stable_certified(a: float, mu: float, d: int) -> bool:
    """Stability of constant lag ``d`` (all roots strictly inside the unit circle).

    Counts the roots inside the unit circle by the argument principle: the winding number
    of ``p(e^{i theta})`` (``p`` the characteristic polynomial, degree ``D+1``), evaluated in
    closed form (``e^{i (d-1) theta}``; no polynomial arithmetic) on a grid of
    ``64 (D+2)`` points refined wherever a phase increment exceeds ``pi/8`` (a root close
    to the circle). If refinement does not resolve the phase, or ``p`` vanishes on the
    grid, the exact companion eigenvalues decide.
    """
    dim = max(d, 1) + 1  # polynomial degree
    theta = np.linspace(0.0, 2.0 * np.pi, 64 * (dim + 1) + 1)
    p = _char_on_circle(theta, a, mu, d)
    for _ in range(12):
        if not np.all(np.abs(p) > 0):
            break
        inc = np.angle(p[1:] / p[:-1])
        big = np.flatnonzero(np.abs(inc) > np.pi / 8)
        if big.size == 0:
            inside = int(round(np.sum(inc) / (2.0 * np.pi)))
            return inside == dim
        if theta.size > 5_000_000:
            break
        frac = np.arange(1, 16) / 16.0
        extra = (theta[big, None] + (theta[big + 1] - theta[big])[:, None] * frac).ravel()
        theta = np.concatenate([theta, extra])
        order = np.argsort(theta, kind="stable")
        theta = theta[order]
        p = np.concatenate([p, _char_on_circle(extra, a, mu, d)])[order]
    return spectral_radius(a=a, momentum=mu, lag=d) < 1.0


def first_unstable_lag(*, a, momentum, max_lag: int = 100_000, method: str = "crossing") -> int:
    """Smallest integer constant lag ``d`` with spectral radius >= 1 (section 4).

    Parameters
    ----------
    a, momentum : float
    max_lag : int
        Give up (raise ``ValueError``) past this lag.
    method : {"crossing", "scan"}
        ``"scan"``: test ``d = 0, 1, 2, ...`` with the exact companion-matrix spectral
        radius (cost ~ ``d^4``: about 15 s for ``d* ~ 300``). ``"crossing"`` (default):
        the unit-circle crossing of :func:`_crossing_lag` gives a candidate
        ``d = max(1, ceil(d_c))`` (``0`` if ``a >= 2(1+mu)``); it is returned only if a
        root count certifies it (all roots inside the unit circle at ``d-1``, not all at
        ``d``; argument principle with adaptive refinement near the circle, falling back
        to companion eigenvalues if unresolved), otherwise the scan is run. Rationale: for
        fixed ``d`` the smallest stiffness putting a root on the circle is
        ``|e^{i theta_1}-1||e^{i theta_1}-mu|`` with ``theta_1(d)`` the first phase solution,
        which decreases with ``d``; so (crossings being destabilising) the stable lags are
        exactly ``0 .. d*-1``. Not a proof; the test suite checks crossing == scan on
        random parameters.

    Returns
    -------
    int
    """
    a_f = float(_check_a(a))
    mu = float(_check_momentum(momentum))
    if a_f >= 2.0 * (1.0 + mu):  # d = 0 (AR(2)) already unstable: root z <= -1
        return 0
    if method == "crossing":
        d = max(1, math.ceil(_crossing_lag(a_f, mu)))
        if (
            d <= max_lag
            and _is_stable_certified(a_f, mu, d - 1) is True
            and (_is_stable_certified(a_f, mu, d) is False)
        ):
            return d
    elif method != "scan":
        raise ValueError(f"method must be 'crossing' or 'scan'; got {method!r}")
    for d in range(max_lag + 1):
        if spectral_radius(a=a_f, momentum=mu, lag=d) >= 1.0:
            return d
    raise ValueError(f"no unstable lag up to max_lag={max_lag} for a={a}, momentum={momentum}")


def refresh_threshold(*, a, momentum, exact: bool = True, max_interval: int = 1_000_000):
    """Refresh-interval stability threshold ``K*`` (physics.md section 4).

    Parameters
    ----------
    a, momentum : float
    exact : bool, default True
        ``True``: smallest integer ``K`` whose one-period monodromy spectral radius is
        >= 1 (an int). ``False``: the first-order value ``(1 - mu) / a`` (a float; the
        form quoted from paper A, stability for ``a K < 1 - mu``).
    max_interval : int
        Scan limit for the exact threshold (``ValueError`` past it).

    Returns
    -------
    int or float
    """
    a_f = float(_check_a(a))
    mu = float(_check_momentum(momentum))
    if not exact:
        return (1.0 - mu) / a_f
    # One pass: the K-step response from the period start gives every K's reduced map.
    cur = np.array([1.0, 0.0])
    prev = np.array([0.0, 1.0])
    anchor = cur.copy()
    for k in range(1, max_interval + 1):
        cur, prev = (1.0 + mu) * cur - mu * prev - a_f * anchor, cur
        if np.max(np.abs(np.linalg.eigvals(np.vstack([cur, prev])))) >= 1.0:
            return k
    raise ValueError(f"no unstable refresh interval up to {max_interval} for a={a}, momentum={momentum}")


def critical_stiffness(momentum, *, exact: bool = True):
    """Stiffness ``a_c`` of critical damping without lag (physics.md section 4).

    Parameters
    ----------
    momentum : float or array_like
    exact : bool, default True
        ``True``: the discrete heavy ball, ``(1 - sqrt mu)^2`` (double real root of the
        AR(2)); ``False``: the continuum ``zeta = 1``, ``(1 - mu)^2 / (2 (1 + mu))``.

    Returns
    -------
    float or numpy.ndarray
    """
    mu = _check_momentum(momentum)
    out = (1.0 - np.sqrt(mu)) ** 2 if exact else (1.0 - mu) ** 2 / (2.0 * (1.0 + mu))
    return _scalar(out)


def stationary_covariance(*, a, momentum, sigma_p, lag: int = 0) -> np.ndarray:
    """Stationary covariance of the state of :func:`transition_matrix` (section 5).

    Solves ``P = F P F^T + Q``, ``Q = sigma_p^2 e_0 e_0^T``, with
    :func:`scipy.linalg.solve_discrete_lyapunov`. For ``lag = 0`` the state is
    ``[x_n, x_{n-1}]`` (the Kalman filter's stationary prior).

    Raises
    ------
    ValueError
        If the recursion is not stable (spectral radius >= 1).
    """
    f = transition_matrix(a=a, momentum=momentum, lag=lag)
    rho = np.max(np.abs(np.linalg.eigvals(f)))
    if rho >= 1.0:
        raise ValueError(f"no stationary covariance: spectral radius {rho:.6g} >= 1")
    q = np.zeros_like(f)
    q[0, 0] = float(sigma_p) ** 2
    import scipy.linalg

    p = scipy.linalg.solve_discrete_lyapunov(f, q)
    return 0.5 * (p + p.T)


def stationary_variance(*, sigma_p, a, momentum, lag: int = 0, kind: Literal["exact", "continuum"] = "exact"):
    """Stationary variance of ``x_n`` around the plateau (physics.md section 5).

    Parameters
    ----------
    sigma_p : float or array_like
        Process-noise s.d.
    a, momentum : float or array_like
    lag : int, default 0
        Constant lag. ``kind="exact"`` with ``lag > 0`` uses :func:`stationary_covariance`
        (scalar input only).
    kind : {"exact", "continuum"}
        ``"exact"``: AR(2) (``lag = 0``)
        ``(1+mu) sigma_p^2 / ((1-mu) a (2(1+mu) - a))``; ``"continuum"``:
        ``sigma_p^2 / (2 c k)`` with ``c = 1 - mu - a d``, ``k = a``. Both diverge as the
        recursion approaches instability; ``inf`` is returned where it is not stable.

    Returns
    -------
    float or numpy.ndarray
    """
    s2 = np.asarray(sigma_p, dtype=float) ** 2
    a_arr = _check_a(a)
    mu = _check_momentum(momentum)
    if kind == "continuum":
        c = (1.0 - mu) - a_arr * float(lag)
        with np.errstate(divide="ignore"):
            out = np.where(c > 0, s2 / (2.0 * c * a_arr), np.inf)
        return _scalar(out)
    if kind != "exact":
        raise ValueError(f"kind must be 'exact' or 'continuum'; got {kind!r}")
    if lag == 0:
        denom = (1.0 - mu) * a_arr * (2.0 * (1.0 + mu) - a_arr)
        with np.errstate(divide="ignore"):
            out = np.where(denom > 0, (1.0 + mu) * s2 / denom, np.inf)
        return _scalar(out)
    if spectral_radius(a=a, momentum=momentum, lag=lag) >= 1.0:
        return math.inf
    return float(stationary_covariance(a=a, momentum=momentum, sigma_p=sigma_p, lag=lag)[0, 0])
