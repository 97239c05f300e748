"""The forward-mode Kalman kernels the oscillator shipped before the adjoint kernels (issue 20): every state
moment's derivative w.r.t. each of the 6 parameters carried through every step. Kept here only as the
"before" of ``bench/kernel_profile.py``; the package's kernels are
``bayesgrpo/models/kalman_adjoint.py`` (the same log-likelihood to rounding, the same gradient to rounding).
:func:`ekf_forward_loglik_grad` is the extended filter's former reward-only kernel: the package's forward-mode
EKF (which the spread channels still use) without channels.
"""

from __future__ import annotations

import numba
import numpy as np

from bayesgrpo.models.degeneracy import N_PAR as N_PAR_EKF
from bayesgrpo.models.degeneracy import _ekf_run
from bayesgrpo.models.kalman_adjoint import N_PAR, _n_end
from bayesgrpo.models.kalman_op import reward2, shift2, start2, update2


@numba.njit(cache=True, fastmath=False, inline="always")
def update_third(
    v, H, R, dv, dH, dR, m2, p00, p01, p02, p12, p22, dp00, dp01, dp02, dp12, dp22, dm2
):  # pragma: no cover
    """The third state's part of :func:`update2` for a 3-state filter whose observation reads state 0 only.

    Updates the mean ``m2`` and the covariances ``p02, p12, p22`` (and their derivatives, in place) from the
    values before the update; call it before :func:`update2` updates states 0 and 1. Returns
    ``(m2, p02, p12, p22)``.
    """
    a0 = H * p00
    a1 = H * p01
    a2 = H * p02
    invS = 1.0 / (H * H * p00 + R)
    k2 = a2 * invS
    for k in range(dm2.shape[0]):
        dS = 2.0 * H * dH[k] * p00 + H * H * dp00[k] + dR[k]
        da0 = dH[k] * p00 + H * dp00[k]
        da1 = dH[k] * p01 + H * dp01[k]
        da2 = dH[k] * p02 + H * dp02[k]
        dm2[k] += (da2 - k2 * dS) * invS * v + k2 * dv[k]
        dp02[k] -= (da0 * a2 + a0 * da2 - a0 * a2 * dS * invS) * invS
        dp12[k] -= (da1 * a2 + a1 * da2 - a1 * a2 * dS * invS) * invS
        dp22[k] -= (2.0 * a2 * da2 - a2 * a2 * dS * invS) * invS
    return m2 + k2 * v, p02 - a0 * a2 * invS, p12 - a1 * a2 * invS, p22 - a2 * a2 * invS


@numba.njit(cache=True, fastmath=False)
def _ar2_run(y, mask, j, n_end, r0, r_star, a, mu, q, r, gj):  # pragma: no cover - compiled
    """Lag-free filter of run j over grid steps [0, n_end): returns the log-likelihood, adds the gradient to gj."""
    dm0, dm1, dp00, dp01, dp11, dv, dH, dR = start2(N_PAR)
    dn0 = np.zeros(N_PAR)
    dn00 = np.zeros(N_PAR)
    dfp0 = np.zeros(N_PAR)
    dfp1 = np.zeros(N_PAR)
    f0 = 1.0 + mu - a
    f1 = -mu
    m0 = m1 = r0 - r_star
    p00 = p01 = p11 = llj = 0.0
    for n in range(n_end):
        if n > 0:
            # predict: F = [[f0, f1], [1, 0]]; df0/da = -1, df0/dmu = +1, df1/dmu = -1
            n0 = f0 * m0 + f1 * m1
            fp0 = f0 * p00 + f1 * p01
            fp1 = f0 * p01 + f1 * p11
            for k in range(N_PAR):
                dn0[k] = f0 * dm0[k] + f1 * dm1[k]
                dfp0[k] = f0 * dp00[k] + f1 * dp01[k]
                dfp1[k] = f0 * dp01[k] + f1 * dp11[k]
            dn0[2] += -m0
            dn0[3] += m0 - m1
            dfp0[2] += -p00
            dfp0[3] += p00 - p01
            dfp1[2] += -p01
            dfp1[3] += p01 - p11
            n00 = fp0 * f0 + fp1 * f1 + q
            # d(n00) = dfp0 f0 + fp0 df0 + dfp1 f1 + fp1 df1 + dq
            for k in range(N_PAR):
                dn00[k] = dfp0[k] * f0 + dfp1[k] * f1
            dn00[2] += -fp0
            dn00[3] += fp0 - fp1
            dn00[4] += 1.0
            m0, m1, p00, p01, p11 = shift2(n0, n00, fp0, m0, p00, dn0, dn00, dfp0, dm0, dm1, dp00, dp01, dp11)
        if mask[n, j] > 0.0:
            ll, m0, m1, p00, p01, p11 = reward2(y[n, j] - r_star, r, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01, dp11,
                                                dv, dH, dR, gj)  # fmt: skip
            llj += ll
    return llj


@numba.njit(cache=True, fastmath=False)
def _refresh_run(y, mask, j, n_end, K, r0, r_star, a, mu, q, r, gj):  # pragma: no cover - compiled
    """Refresh-pattern filter (d_n = n mod K) of run j with the 3-state (x_n, x_{n-1}, c_n).

    Returns the log-likelihood over grid steps [0, n_end) and adds its gradient to gj. State mean
    (m0, m1, m2), covariance p00..p22 (symmetric), and their derivatives dm*, dp* (N_PAR,) each.
    """
    dm0, dm1, dp00, dp01, dp11, dv, dH, dR = start2(N_PAR)
    dm2 = dm0.copy()  # c_0 = x_0
    dp02 = np.zeros(N_PAR)
    dp12 = np.zeros(N_PAR)
    dp22 = np.zeros(N_PAR)
    dfm_ = np.zeros(N_PAR)  # scratch: derivatives of f m, f P (u0, u1, u2) and f P f' + q
    du0_ = np.zeros(N_PAR)
    du1_ = np.zeros(N_PAR)
    du2_ = np.zeros(N_PAR)
    dpff_ = np.zeros(N_PAR)
    # transition row f = (1 + mu, -mu, -a) on (x_n, x_{n-1}, c_n); df/da = (0, 0, -1), df/dmu = (1, -1, 0)
    f0 = 1.0 + mu
    f1 = -mu
    f2 = -a
    x0 = r0 - r_star
    m0 = x0  # x_0
    m1 = x0  # x_{-1} = x_0
    m2 = x0  # c_0 = x_0
    p00 = 0.0
    p01 = 0.0
    p02 = 0.0
    p11 = 0.0
    p12 = 0.0
    p22 = 0.0
    llj = 0.0
    for n in range(n_end):
        if n > 0:
            # predict from n-1 to n; the anchor restarts at n when n mod K == 0
            reset = n % K == 0
            fm = f0 * m0 + f1 * m1 + f2 * m2
            u0 = f0 * p00 + f1 * p01 + f2 * p02  # (f P)_0
            u1 = f0 * p01 + f1 * p11 + f2 * p12
            u2 = f0 * p02 + f1 * p12 + f2 * p22
            pff = f0 * u0 + f1 * u1 + f2 * u2 + q  # f P f' + q
            # derivatives of (fm, u, pff): the f-weighted sums, then the df terms (a: k = 2, mu: k = 3)
            for k in range(N_PAR):
                dfm_[k] = f0 * dm0[k] + f1 * dm1[k] + f2 * dm2[k]
                du0_[k] = f0 * dp00[k] + f1 * dp01[k] + f2 * dp02[k]
                du1_[k] = f0 * dp01[k] + f1 * dp11[k] + f2 * dp12[k]
                du2_[k] = f0 * dp02[k] + f1 * dp12[k] + f2 * dp22[k]
            dfm_[2] -= m2
            du0_[2] -= p02
            du1_[2] -= p12
            du2_[2] -= p22
            dfm_[3] += m0 - m1
            du0_[3] += p00 - p01
            du1_[3] += p01 - p11
            du2_[3] += p02 - p12
            for k in range(N_PAR):
                dpff_[k] = f0 * du0_[k] + f1 * du1_[k] + f2 * du2_[k]
            dpff_[2] -= u2
            dpff_[3] += u0 - u1
            dpff_[4] += 1.0
            # new state (x_n, x_{n-1}, c_n) from the old (x_{n-1}, x_{n-2}, c_{n-1})
            for k in range(N_PAR):
                dp11[k] = dp00[k]
                dm1[k] = dm0[k]
                dm0[k] = dfm_[k]
                dp00[k] = dpff_[k]
                dp01[k] = du0_[k]
                if reset:
                    dm2[k] = dfm_[k]
                    dp02[k] = dpff_[k]
                    dp12[k] = du0_[k]
                    dp22[k] = dpff_[k]
                else:  # dm2, dp22 unchanged
                    dp12[k] = dp02[k]
                    dp02[k] = du2_[k]
            p11 = p00
            m1 = m0
            m0 = fm
            p00 = pff
            p01 = u0
            if reset:
                m2 = fm
                p02 = pff
                p12 = u0
                p22 = pff
            else:
                p12 = p02
                p02 = u2
        if mask[n, j] > 0.0:
            v = y[n, j] - r_star - m0
            for k in range(N_PAR):
                dv[k] = -dm0[k] - (1.0 if k == 1 else 0.0)
            # the anchor's row first (it reads the covariance before the update), then (x_n, x_{n-1})
            m2, p02, p12, p22 = update_third(v, 1.0, r, dv, dH, dR, m2, p00, p01, p02, p12, p22, dp00, dp01, dp02,
                                             dp12, dp22, dm2)  # fmt: skip
            ll, m0, m1, p00, p01, p11 = update2(v, 1.0, r, dv, dH, dR, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01,
                                                dp11, gj)  # fmt: skip
            llj += ll
    return llj


@numba.njit(cache=True)
def ar2_loglik_grad(y, mask, r0, r_star, a, mu, q, r):  # pragma: no cover - compiled
    """Lag-free log-likelihood per run (R,) and its gradient (R, 6) for y, mask of shape (T, R)."""
    R = y.shape[1]
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    for j in range(R):
        ll[j] = _ar2_run(y, mask, j, _n_end(mask, j), r0[j], r_star[j], a[j], mu[j], q[j], r[j], g[j])
    return ll, g


@numba.njit(cache=True)
def _refresh_batch(y, mask, K, r0, r_star, a, mu, q, r, two_state_k1):  # pragma: no cover - compiled
    R = y.shape[1]
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    for j in range(R):
        n_end = _n_end(mask, j)
        Kj = max(K[j], 1)
        if Kj == 1 and two_state_k1:
            ll[j] = _ar2_run(y, mask, j, n_end, r0[j], r_star[j], a[j], mu[j], q[j], r[j], g[j])
        else:
            ll[j] = _refresh_run(y, mask, j, n_end, Kj, r0[j], r_star[j], a[j], mu[j], q[j], r[j], g[j])
    return ll, g


@numba.njit(cache=True)
def refresh_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r):  # pragma: no cover - compiled
    """Log-likelihood per run (R,) and its gradient (R, 6) of recursion (1) with d_n = n mod K_j.

    Parameters
    ----------
    y, mask : ndarray, shape (T, R)
        Observations on the unit-step grid from each run's first logged step, and a 0/1 mask of
        observed steps (padding after a run's end has mask 0).
    K : ndarray of int64, shape (R,)
        Refresh interval per run (K <= 1: no lag).
    r0, r_star, a, mu, q, r : ndarray, shape (R,)
        Initial reward, plateau, stiffness, momentum, process variance sigma_p^2, measurement
        variance sigma_m^2.

    Returns
    -------
    loglik : ndarray, shape (R,)
    grad : ndarray, shape (R, 6)
        d loglik / d (r0, r_star, a, mu, q, r).

    Notes
    -----
    Runs with K > 1 use the 3-state filter ``(x_n, x_{n-1}, c_n)`` (module docstring); runs with
    K = 1 use the 2-state lag-free filter: the same likelihood (to rounding; see
    :func:`refresh3_loglik_grad`) with 5 instead of 9 state moments to carry sensitivities for, measured
    about 1.5x faster per evaluation than the 3-state filter at K = 1 (``bench/results/lag_op.md``).
    K = 1 is the common case (most runs log no refresh interval), so it keeps the faster kernel; the
    dispatch is per run, so one Op (and one compiled model) still serves every K.
    """
    return _refresh_batch(y, mask, K, r0, r_star, a, mu, q, r, True)


@numba.njit(cache=True)
def refresh3_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r):  # pragma: no cover - compiled
    """As :func:`refresh_loglik_grad`, but the 3-state filter for every run, K = 1 included (tests, benchmark)."""
    return _refresh_batch(y, mask, K, r0, r_star, a, mu, q, r, False)


@numba.njit(cache=True)
def ekf_forward_loglik_grad(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):  # pragma: no cover - compiled
    """The degeneracy kinds' reward-only EKF with forward-mode sensitivities (as shipped before the adjoint)."""
    R = y.shape[1]
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR_EKF))
    for j in range(R):
        ll[j] = _ekf_run(y, mask, j, kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j], L[j], lam[j], g[j], None)
    return ll, g
