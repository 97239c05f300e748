"""Stability and noise of recursion (1) (physics.md sections 4-5; pure numpy / scipy).

* Section 4 -- exact stability (companion matrix for a constant lag, one-period monodromy for the
  refresh pattern), first-order thresholds, critical damping, vectorised per-draw checks;
* Section 5 -- the stationary variance (exact AR(2) / Lyapunov, and continuum).

The recursion, its coefficients and closed forms are :mod:`bayesgrpo.physics.dynamics`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from bayesgrpo.physics.dynamics import _check_a, _check_int, _check_momentum, _scalar, transition_matrix

__all__ = [
    "monodromy_matrix",
    "spectral_radius",
    "first_unstable_lag",
    "refresh_threshold",
    "critical_stiffness",
    "stationary_variance",
    "stationary_covariance",
    "is_stable",
    "is_underdamped",
    "spectral_radii",
]


# ----------------------------------------------------------------------------- section 4
def monodromy_matrix(*, a, momentum, refresh_interval: int, reduced: bool = True) -> np.ndarray:
    """One-period (K-step) map of recursion (1) under the refresh pattern ``d_n = n mod K``.

    Starting a period at a refresh step ``n = pK``, every update in the period references
    ``x_{n - d_n} = x_{pK}``, so ``(x_{pK+K}, x_{pK+K-1})`` is a linear function of
    ``(x_{pK}, x_{pK-1})`` only. ``reduced=True`` returns that 2 x 2 map; ``reduced=False``
    returns the full monodromy on the state ``[x_n, ..., x_{n-K}]`` (dimension
    ``max(2, K+1)``), whose non-zero eigenvalues are those of the reduced map (the rest
    are 0). Section 4 of physics.md.

    Parameters
    ----------
    a, momentum : float
        Stiffness and momentum.
    refresh_interval : int
        ``K >= 1``.
    reduced : bool, default True

    Returns
    -------
    numpy.ndarray, shape (2, 2) or (max(2, K+1), max(2, K+1))
    """
    a = float(_check_a(a, allow_zero=True))
    mu = float(_check_momentum(momentum))
    k = _check_int("refresh_interval", refresh_interval, minimum=1)
    if reduced:
        # columns: response to (x_pK, x_pK-1) = (1, 0) and (0, 1)
        cur = np.array([1.0, 0.0])
        prev = np.array([0.0, 1.0])
        anchor = cur.copy()
        for _ in range(k):
            cur, prev = (1.0 + mu) * cur - mu * prev - a * anchor, cur
        return np.vstack([cur, prev])
    dim = max(2, k + 1)
    m = np.eye(dim)
    for n in range(k):
        step = np.zeros((dim, dim))
        step[0, 0] += 1.0 + mu
        step[0, 1] += -mu
        step[0, n % k] += -a
        step[np.arange(1, dim), np.arange(dim - 1)] = 1.0
        m = step @ m
    return m


def spectral_radius(*, a, momentum, lag: int = 0, refresh_interval: int | None = None) -> float:
    """Spectral radius of recursion (1): stable iff < 1 (physics.md section 4).

    Constant lag ``d``: the largest root modulus of the characteristic polynomial
    ``z^{D+1} - (1+mu) z^D + mu z^{D-1} + a z^{D-d}`` (``D = max(d, 1)``), i.e. of the
    companion matrix :func:`transition_matrix`; the per-step growth factor.
    Refresh pattern (``refresh_interval = K``): the spectral radius of the one-period
    monodromy matrix (:func:`monodromy_matrix`), i.e. the growth factor per K steps.

    Returns
    -------
    float
    """
    if refresh_interval is not None:
        if lag != 0:
            raise ValueError("give either a constant lag or a refresh_interval, not both")
        mono = monodromy_matrix(a=a, momentum=momentum, refresh_interval=refresh_interval)
        return float(np.max(np.abs(np.linalg.eigvals(mono))))
    f = transition_matrix(a=a, momentum=momentum, lag=lag)
    return float(np.max(np.abs(np.linalg.eigvals(f))))


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


def spectral_radii(a, momentum, *, lag: int = 0, refresh_interval: int | None = None) -> np.ndarray:
    """Spectral radius of recursion (1) per draw (vectorised over ``a`` and ``momentum``).

    Without lag: the largest modulus of the roots of ``z^2 - (1 + mu - a) z + mu`` in closed form;
    a constant lag d > 0: :func:`spectral_radius` per draw; with a refresh interval K > 1:
    :func:`spectral_radius` of the one-period monodromy matrix per draw, taken to the power 1/K
    (the growth factor per step, comparable with the lag-free case).
    """
    a, mu = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(momentum, dtype=float))
    if lag:
        out = np.empty(a.shape)
        for idx in np.ndindex(*a.shape):
            out[idx] = spectral_radius(
                a=max(float(a[idx]), 1e-12), momentum=min(max(float(mu[idx]), 0.0), 0.999999), lag=int(lag)
            )
        return out
    if not refresh_interval or int(refresh_interval) <= 1:
        b = 1.0 + mu - a
        disc = np.sqrt((b * b - 4.0 * mu).astype(complex))
        return np.maximum(np.abs((b + disc) / 2.0), np.abs((b - disc) / 2.0))
    # the reduced one-period map of :func:`monodromy_matrix` (same arithmetic) for all draws at once;
    # a per-draw eigenvalue call took ~2 s for 2000 draws at K = 128
    K = int(refresh_interval)
    af = a.reshape(-1)[:, None]
    mf = mu.reshape(-1)[:, None]
    cur = np.zeros((af.shape[0], 2))
    cur[:, 0] = 1.0
    prev = np.zeros_like(cur)
    prev[:, 1] = 1.0
    anchor = cur.copy()
    for _ in range(K):
        cur, prev = (1.0 + mf) * cur - mf * prev - af * anchor, cur
    rho = np.abs(np.linalg.eigvals(np.stack([cur, prev], axis=1))).max(axis=-1)
    return (rho ** (1.0 / K)).reshape(a.shape)


def is_stable(a, momentum, *, refresh_interval: int | None = None) -> np.ndarray:
    """Per draw: is recursion (1) stable, i.e. :func:`spectral_radii` < 1 (and ``a > 0``)?"""
    a = np.asarray(a, dtype=float)
    return (spectral_radii(a, momentum, refresh_interval=refresh_interval) < 1.0) & (a > 0)


def is_underdamped(a, momentum) -> np.ndarray:
    """Per draw: does the lag-free recursion ring (complex roots, ``a > (1 - sqrt mu)^2``)?"""
    a = np.asarray(a, dtype=float)
    mu = np.clip(np.asarray(momentum, dtype=float), 0.0, None)
    return a > (1.0 - np.sqrt(mu)) ** 2


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


# ----------------------------------------------------------------------------- section 5
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
