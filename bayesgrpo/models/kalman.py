"""Exact Kalman filter for the mean-field GRPO recursion (physics.md section 2).

The latent distance to the plateau follows recursion (1)::

    x_{n+1} = (1 + mu) x_n - mu x_{n-1} - a x_{n-d_n} + eps_n,   eps_n ~ N(0, sigma_p^2)

and a logged reward is ``y_n = R* + x_n + e_n``, ``e_n ~ N(0, sigma_m^2)``. With the state
``s_n = (x_n, x_{n-1}, ..., x_{n-D+1})`` (``D = max(2, max lag + 1)``) this is a linear-Gaussian
state-space model, so the Kalman filter gives the exact marginal likelihood in every regime
(over-, under-damped, with lag), and the filtered state at the last observation is all a forecast
needs (the future is independent of the past given it).

:func:`filter_numpy` is numpy, vectorised over a trailing batch axis (posterior draws or runs); it
is the general reference (any lag sequence) in tests and the forecast filter of lag-free runs.
For the refresh pattern ``d_n = n mod K`` the same filter with the 3-dimensional state
``(x_n, x_{n-1}, c_n)``, ``c_n = x_{n - (n mod K)}`` the anchor of the current refresh period, is
exact too and its cost does not grow with K (:func:`filter_refresh_numpy`,
:func:`propagate_refresh_numpy`; forecasting of runs with K > 1). The likelihood inside PyMC models
is this filter as compiled Ops with exact gradients (:mod:`bayesgrpo.models.kalman_op`).

The time grid is every optimizer step from the run's first logged step ``s0`` to its last;
``mask`` marks the steps that carry an observation (runs that log every k steps only update on
those). History before ``s0`` equals the initial state (``x_{-1} = x_0``: zero initial velocity).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "filter_numpy",
    "filter_refresh_numpy",
    "propagate_numpy",
    "propagate_refresh_numpy",
    "row_vector",
    "measure",
    "PathStore",
]

LOG2PI = float(np.log(2.0 * np.pi))


def row_vector(mu, a, d, D: int):
    """First row of the transition matrix: (1+mu) e_0 - mu e_1 - a e_d (numpy, batched)."""
    mu = np.asarray(mu, dtype=float)
    a = np.asarray(a, dtype=float)
    shape = np.broadcast_shapes(mu.shape, a.shape, np.shape(d))
    f = np.zeros(shape + (D,))
    f[..., 0] += 1.0 + mu
    f[..., 1] += -mu
    dd = np.broadcast_to(np.asarray(d, dtype=int), shape)
    np.put_along_axis(f, dd[..., None], np.take_along_axis(f, dd[..., None], -1) - a[..., None], -1)
    return f


def _predict(m, P, f, q):
    """One predict step: m' = F m, P' = F P F' + q e0 e0' with F = [f; shift]."""
    m_new = np.empty_like(m)
    m_new[..., 0] = np.einsum("...i,...i->...", f, m)
    m_new[..., 1:] = m[..., :-1]
    fP = np.einsum("...i,...ij->...j", f, P)  # row 0 of F P
    P_new = np.empty_like(P)
    P_new[..., 0, 0] = np.einsum("...j,...j->...", fP, f) + q
    P_new[..., 0, 1:] = fP[..., :-1]
    P_new[..., 1:, 0] = fP[..., :-1]
    P_new[..., 1:, 1:] = P[..., :-1, :-1]
    return m_new, P_new


def measure(ll, m, P, z, obs, r, batch):
    """The measurement update of the reward (observation ``x_n + noise(r)``, state 0) where ``obs``.

    ``z = y_n - R*`` (the observation relative to the plateau); returns the updated ``(loglik, m, P)``.
    One update for every numpy filter of recursion (1) (any state dimension).
    """
    S = P[..., 0, 0] + r
    v = np.where(obs, z - m[..., 0], 0.0)
    K = P[..., :, 0] / S[..., None]
    ll = ll + np.where(obs, -0.5 * (LOG2PI + np.log(S) + v**2 / S), 0.0)
    o = np.broadcast_to(obs, batch)[..., None]
    m = m + np.where(o, K * v[..., None], 0.0)
    P = P - np.where(o[..., None], K[..., :, None] * K[..., None, :] * S[..., None, None], 0.0)
    return ll, m, P


class PathStore:
    """Where propagated paths go: every future step, or (memory-bounded) only the ``store`` steps and
    the sum over the ``accumulate`` steps (see :func:`propagate_numpy`). One bookkeeping for every
    propagator (linear, refresh, degeneracy)."""

    def __init__(self, n_steps: int, batch, store=None, accumulate=None):
        self.streaming = store is not None or accumulate is not None
        if self.streaming:
            store = np.asarray([] if store is None else store, dtype=int)
            self.slot = np.full(n_steps, -1)
            self.slot[store] = np.arange(store.size)
            self.acc = np.zeros(n_steps, dtype=bool) if accumulate is None else np.asarray(accumulate, dtype=bool)
            self.out = np.empty((store.size,) + tuple(batch))
            self.sums = np.zeros(batch)
        else:
            self.out = np.empty((n_steps,) + tuple(batch))

    def put(self, k: int, x) -> None:
        """Record the state after future step ``k``."""
        if not self.streaming:
            self.out[k] = x
            return
        if self.slot[k] >= 0:
            self.out[self.slot[k]] = x
        if self.acc[k]:
            self.sums += x

    def result(self):
        return (self.out, self.sums) if self.streaming else self.out


def filter_numpy(y, mask, *, r0, r_star, a, mu, sigma_p, sigma_m, lag=None, D: int = 2):
    """Run the Kalman filter; return the log-likelihood and the filtered state at the last step.

    Parameters
    ----------
    y, mask : array_like, shape (T,) or (T, ...)
        Observations on the unit-step grid and a 0/1 mask of observed steps. Leading axis is time;
        trailing axes broadcast against the parameters (e.g. posterior draws).
    r0, r_star, a, mu, sigma_p, sigma_m : array_like
        Initial reward, plateau, stiffness, momentum, process and measurement noise sd.
    lag : array_like of int, shape (T,), optional
        Lag d_n applied in the transition out of step n (default 0); must be < D.
    D : int
        State dimension (>= 2, > max lag).

    Returns
    -------
    loglik : ndarray
        Exact log marginal likelihood of the observed entries.
    m, P : ndarray
        Filtered mean and covariance of the state ``(x_T, x_{T-1}, ...)`` at the last grid step.
    """
    y = np.asarray(y, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    T = y.shape[0]
    lag = np.zeros(T, dtype=int) if lag is None else np.asarray(lag, dtype=int)
    if lag.max(initial=0) >= D:
        raise ValueError(f"lag {lag.max()} needs a state dimension D > lag, got D={D}")
    r0, r_star, a, mu, sp, sm = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (r0, r_star, a, mu, sigma_p, sigma_m))
    )
    batch = np.broadcast_shapes(r0.shape, y.shape[1:])
    m = np.broadcast_to((r0 - r_star)[..., None], batch + (D,)).copy()
    P = np.zeros(batch + (D, D))
    ll = np.zeros(batch)
    q = sp**2
    r = sm**2
    rows = {int(d): row_vector(mu, a, int(d), D) for d in np.unique(lag[: max(T - 1, 0)])}  # one per lag value
    for n in range(T):
        if n > 0:
            m, P = _predict(m, P, rows[int(lag[n - 1])], q)
        if np.any(mask[n]):
            ll, m, P = measure(ll, m, P, y[n] - r_star, mask[n], r, batch)
    return ll, m, P


def propagate_numpy(m, P, n_steps, *, a, mu, sigma_p, lag=None, rng, D: int = 2, store=None, accumulate=None):
    """Draw latent paths forward from a filtered state (one path per batch element).

    Without ``store``/``accumulate``: returns an array ``(n_steps, *batch)`` of x after each of the
    next ``n_steps`` steps. ``lag`` (length ``n_steps``) gives d for each transition.

    Memory-bounded form (long horizons): ``store`` (sorted indices into the ``n_steps`` future steps)
    keeps only those steps, and ``accumulate`` (boolean mask of length ``n_steps``) sums x over the
    masked steps while propagating; returns ``(stored (len(store), *batch), sums (*batch))``. The
    random stream is the same in both forms.
    """
    m = np.asarray(m, dtype=float)
    P = np.asarray(P, dtype=float)
    batch = m.shape[:-1]
    # sample the current state from N(m, P) (P may be singular: use eigh)
    w, V = np.linalg.eigh(P)
    w = np.clip(w, 0.0, None)
    z = rng.standard_normal(batch + (D,))
    s = m + np.einsum("...ij,...j->...i", V, np.sqrt(w) * z)
    lag = np.zeros(n_steps, dtype=int) if lag is None else np.asarray(lag, dtype=int)
    sp = np.broadcast_to(np.asarray(sigma_p, dtype=float), batch)
    paths = PathStore(n_steps, batch, store, accumulate)
    rows = {int(d): row_vector(mu, a, int(d), D) for d in np.unique(lag)}  # one per lag value, not per step
    for k in range(n_steps):
        x_next = np.einsum("...i,...i->...", rows[int(lag[k])], s) + sp * rng.standard_normal(batch)
        s = np.concatenate([x_next[..., None], s[..., :-1]], axis=-1)
        paths.put(k, x_next)
    return paths.result()


def _refresh_rows(mu, a, shape):
    """Transition matrices of the 3-state (x_n, x_{n-1}, c_n): within a period, and into a period start.

    Within a period the anchor is kept; into a period start (the next grid index is a multiple of K)
    it becomes the new state, so its row repeats the first and the process noise enters it too.
    Returns F_keep, F_reset (shape + (3, 3)) and the noise loadings g_keep, g_reset (3,).
    """
    F = np.zeros(shape + (3, 3))
    F[..., 0, 0] = 1.0 + mu
    F[..., 0, 1] = -mu
    F[..., 0, 2] = -a
    F[..., 1, 0] = 1.0
    F_keep = F.copy()
    F_keep[..., 2, 2] = 1.0
    F_reset = F.copy()
    F_reset[..., 2, :] = F[..., 0, :]
    return F_keep, F_reset, np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0])


def filter_refresh_numpy(y, mask, *, K: int, r0, r_star, a, mu, sigma_p, sigma_m):
    """Kalman filter of recursion (1) with the refresh pattern d_n = n mod K, 3-dimensional state.

    Same likelihood as :func:`filter_numpy` with ``lag = n mod K`` and ``D = max(2, K)`` (exact), at
    a cost independent of K.

    Parameters
    ----------
    y, mask : array_like, shape (T,) or (T, ...)
        As in :func:`filter_numpy` (grid index n = 0 is the run's first logged step).
    K : int
        Refresh interval (>= 1; 1 is the lag-free recursion).
    r0, r_star, a, mu, sigma_p, sigma_m : array_like

    Returns
    -------
    loglik : ndarray
    m, P : ndarray
        Filtered mean (..., 3) and covariance (..., 3, 3) of ``(x_{T-1}, x_{T-2}, c_{T-1})`` at the
        last grid step.
    """
    if int(K) < 1:
        raise ValueError(f"refresh interval K must be >= 1, got {K}")
    K = int(K)
    y = np.asarray(y, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    T = y.shape[0]
    r0, r_star, a, mu, sp, sm = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (r0, r_star, a, mu, sigma_p, sigma_m))
    )
    batch = np.broadcast_shapes(r0.shape, y.shape[1:])
    F_keep, F_reset, g_keep, g_reset = _refresh_rows(np.broadcast_to(mu, batch), np.broadcast_to(a, batch), batch)
    Q_keep = np.outer(g_keep, g_keep)
    Q_reset = np.outer(g_reset, g_reset)
    q = np.broadcast_to(sp**2, batch)[..., None, None]
    r = sm**2
    m = np.broadcast_to((r0 - r_star)[..., None], batch + (3,)).copy()
    P = np.zeros(batch + (3, 3))
    ll = np.zeros(batch)
    for n in range(T):
        if n > 0:
            reset = n % K == 0
            F = F_reset if reset else F_keep
            m = np.einsum("...ij,...j->...i", F, m)
            P = np.einsum("...ij,...jk,...lk->...il", F, P, F) + q * (Q_reset if reset else Q_keep)
        if np.any(mask[n]):
            ll, m, P = measure(ll, m, P, y[n] - r_star, mask[n], r, batch)
    return ll, m, P


def propagate_refresh_numpy(m, P, n_steps, *, K: int, n_last: int, a, mu, sigma_p, rng, store=None, accumulate=None):
    """Draw latent paths forward from a filtered 3-state (:func:`filter_refresh_numpy`).

    ``n_last`` is the grid index of the filtered state (the phase of the refresh pattern). Returns an
    array ``(n_steps, *batch)`` of x at grid steps ``n_last + 1, ..., n_last + n_steps``, or with
    ``store``/``accumulate`` the memory-bounded form of :func:`propagate_numpy`.
    """
    K = int(K)
    m = np.asarray(m, dtype=float)
    P = np.asarray(P, dtype=float)
    batch = m.shape[:-1]
    w, V = np.linalg.eigh(P)
    w = np.clip(w, 0.0, None)
    z = rng.standard_normal(batch + (3,))
    s = m + np.einsum("...ij,...j->...i", V, np.sqrt(w) * z)
    f0 = np.broadcast_to(1.0 + np.asarray(mu, dtype=float), batch)
    f1 = np.broadcast_to(-np.asarray(mu, dtype=float), batch)
    f2 = np.broadcast_to(-np.asarray(a, dtype=float), batch)
    sp = np.broadcast_to(np.asarray(sigma_p, dtype=float), batch)
    paths = PathStore(n_steps, batch, store, accumulate)
    x, xp, c = s[..., 0], s[..., 1], s[..., 2]
    for k in range(n_steps):
        x_next = f0 * x + f1 * xp + f2 * c + sp * rng.standard_normal(batch)
        if (n_last + k + 1) % K == 0:
            c = x_next
        x, xp = x_next, x
        paths.put(k, x_next)
    return paths.result()
