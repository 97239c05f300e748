"""Stability of recursion (1) (physics.md section 4; pure numpy): exact stability (companion matrix for a
constant lag, one-period monodromy for the refresh pattern) and its vectorised per-draw checks.

The companion matrix is :mod:`bayesgrpo.physics.dynamics`. The thresholds (first unstable lag, refresh
threshold, critical stiffness) and the stationary variance (section 5) serve the research and the tests
only: ``bench/physics_reference.py``.
"""

from __future__ import annotations

import numpy as np

from bayesgrpo.physics.dynamics import _check_a, _check_int, _check_momentum, transition_matrix

__all__ = ["monodromy_matrix", "spectral_radius", "is_stable", "is_underdamped", "spectral_radii"]


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
