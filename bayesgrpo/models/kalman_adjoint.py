"""Reverse-mode (adjoint) Kalman likelihood kernels of recursion (1): the log-likelihood and its exact gradient.

The oscillator's likelihood is a linear Kalman filter over each run's grid. NUTS needs its gradient with
respect to the six per-run parameters ``(r0, r_star, a, mu, q = sigma_p^2, r = sigma_m^2)`` thousands of
times per run, so its cost is the sampler's cost. These kernels run the filter forward once, keeping a
small tape per step (the predict's input moments and the update's ``1/S``, innovation and gain), then one
backward sweep accumulates the adjoints of the state moments and, from them, the gradient: about
35 + 70 flops per step whatever the number of parameters. Carrying forward-mode sensitivities through
every step (the technique the spread-channel filter of :mod:`bayesgrpo.models.degeneracy` keeps) costs about
410 flops per step for the same 2-state filter; measured 3x slower per call at 200 steps
(``bench/results/kernel.md``, ``bench/kernel_profile.py``; that kernel is kept in ``bench/proto/forward_mode.py``).

* :func:`ar2_adjoint_loglik_grad` -- the lag-free recursion (d = 0), state ``(x_n, x_{n-1})``.
* :func:`refresh_adjoint_loglik_grad` -- the refresh-interval lag pattern ``d_n = n mod K_j``, state
  ``(x_n, x_{n-1}, c_n)`` (:mod:`bayesgrpo.models.kalman_op` explains the anchor ``c_n``); runs with
  ``K = 1`` take the 2-state kernel, ``three_state=True`` forces the 3-state one (tests: the two agree).

The log-likelihood sums ``log S`` as the log of running products (one ``log`` per block of steps, to
rounding the sum of logs). Compiled by numba (``cache=True``); plain numpy arrays in and out, no
PyTensor here: :mod:`bayesgrpo.models.kalman_op` wraps them as Ops. Tests check values against the numpy
filter (:mod:`bayesgrpo.models.kalman`, itself checked against the brute-force Gaussian marginal) and
gradients against central finite differences.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["ar2_adjoint_loglik_grad", "refresh_adjoint_loglik_grad", "N_PAR"]

_LOG2PI = math.log(2.0 * math.pi)
N_PAR = 6  # r0, r_star, a, mu, q, r


@numba.njit(cache=True)
def _n_end(mask, j):  # pragma: no cover - compiled
    """1 + the last grid index of run j with an observation (0 if none): later steps add nothing."""
    for n in range(mask.shape[0] - 1, -1, -1):
        if mask[n, j] > 0.0:
            return n + 1
    return 0


@numba.njit(cache=True, inline="always")
def _innovation(z, m0, p00, r, quad, prod, logs):  # pragma: no cover - compiled
    """The reward's innovation ``v = z - m0`` and ``1/S`` (``S = p00 + r``) of every forward filter here and of
    the extended one, with the log-likelihood's running terms: ``quad + v^2 / S``, and ``log S`` summed as the
    log of running products (one ``log`` per block of steps: ``log(prod S) = sum log S`` to rounding).
    Returns ``(v, 1/S, quad, prod, logs)``."""
    S = p00 + r
    v = z - m0
    invS = 1.0 / S
    prod *= S
    if prod > 1e100 or prod < 1e-100:
        logs += math.log(prod)
        prod = 1.0
    return v, invS, quad + v * v * invS, prod, logs


@numba.njit(cache=True, inline="always")
def _predict_cov2(f0, f1, q, p00, p01, p11):  # pragma: no cover - compiled
    """The predicted covariance of a 2-state ``(x_n, x_{n-1})`` whose transition's first row (its Jacobian's, for
    the extended filter) is ``(f0, f1)``: ``(p00, p01, p11)`` of ``F P F' + q e0 e0'``."""
    fp0 = f0 * p00 + f1 * p01
    fp1 = f0 * p01 + f1 * p11
    return fp0 * f0 + fp1 * f1 + q, fp0, p00


@numba.njit(cache=True, inline="always")
def _update2(v, invS, m0, m1, p00, p01, p11):  # pragma: no cover - compiled
    """The reward's measurement update of a 2-state filter (observation ``x_n + noise``): the gains and the
    posterior moments, ``(k0, k1, m0, m1, p00, p01, p11)``."""
    k0 = p00 * invS
    k1 = p01 * invS
    return k0, k1, m0 + k0 * v, m1 + k1 * v, p00 - p00 * p00 * invS, p01 - p00 * p01 * invS, p11 - p01 * p01 * invS


@numba.njit(cache=True, inline="always")
def _add_gradient(gj, x0, g_rs, g_a, g_mu, g_q, g_r):  # pragma: no cover - compiled
    """Add the adjoints of (r0, r_star, a, mu, q, r) to ``gj``; ``x0`` the start's (``x_0 = r0 - r_star``)."""
    gj[0] += x0
    gj[1] += g_rs - x0
    gj[2] += g_a
    gj[3] += g_mu
    gj[4] += g_q
    gj[5] += g_r


# tape columns of the 2-state filter (one row per grid step)
_M0, _M1, _P00, _P01, _P11, _S, _V, _OBS, _K0, _K1 = range(10)
_NTAPE2 = 10


@numba.njit(cache=True, fastmath=False)
def _ar2_adjoint_run(y, mask, j, n_end, r0, r_star, a, mu, q, r, tape, gj):  # pragma: no cover - compiled
    """Lag-free filter of run j over grid steps [0, n_end): log-likelihood; its gradient added to gj.

    Forward: the 2-state filter, keeping per step the posterior moments of the previous step (the
    predict's input), ``1/S``, the innovation and the gain. Backward:
    adjoints of the posterior moments ``(bm0, bm1, bp00, bp01, bp11)`` from the last step to the first.
    """
    f0 = 1.0 + mu - a
    f1 = -mu
    m0 = m1 = r0 - r_star
    p00 = p01 = p11 = 0.0
    quad = logs = 0.0
    prod = 1.0
    nobs = 0
    for n in range(n_end):
        t = tape[n]
        t[_M0] = m0  # the predict's input (posterior of step n - 1)
        t[_M1] = m1
        t[_P00] = p00
        t[_P01] = p01
        t[_P11] = p11
        if n > 0:
            m0, m1 = f0 * m0 + f1 * m1, m0
            p00, p01, p11 = _predict_cov2(f0, f1, q, p00, p01, p11)
        if mask[n, j] > 0.0:
            v, invS, quad, prod, logs = _innovation(y[n, j] - r_star, m0, p00, r, quad, prod, logs)
            nobs += 1
            k0, k1, m0, m1, p00, p01, p11 = _update2(v, invS, m0, m1, p00, p01, p11)
            t[_K0] = k0
            t[_K1] = k1
            t[_S] = invS
            t[_V] = v
            t[_OBS] = 1.0
        else:
            t[_OBS] = 0.0
    llj = -0.5 * (nobs * _LOG2PI + logs + math.log(prod) + quad)
    # backward sweep: adjoints of the posterior moments after step n
    bm0 = bm1 = bp00 = bp01 = bp11 = 0.0
    g_rs = g_a = g_mu = g_q = g_r = 0.0
    for n in range(n_end - 1, -1, -1):
        t = tape[n]
        if t[_OBS] > 0.0:
            invS = t[_S]
            v = t[_V]
            k0 = t[_K0]
            k1 = t[_K1]
            # update backward: posterior (m0', m1', p00', p01', p11') <- predicted (M0, M1, P00, P01, P11), v, S
            bv = -v * invS + bm0 * k0 + bm1 * k1
            bS = (-0.5 * invS * (1.0 - v * v * invS) - v * invS * (bm0 * k0 + bm1 * k1) + bp00 * k0 * k0
                  + bp01 * k0 * k1 + bp11 * k1 * k1)  # fmt: skip
            bP00 = bm0 * v * invS + bp00 * (1.0 - 2.0 * k0) - bp01 * k1 + bS
            bP01 = bm1 * v * invS + bp01 * (1.0 - k0) - 2.0 * bp11 * k1
            bP11 = bp11
            bM0 = bm0 - bv  # v = y - r_star - M0
            bM1 = bm1
            g_rs -= bv
            g_r += bS  # S = P00 + r
        else:
            bM0, bM1, bP00, bP01, bP11 = bm0, bm1, bp00, bp01, bp11
        if n > 0:
            pm0, pm1, pp00, pp01, pp11 = t[_M0], t[_M1], t[_P00], t[_P01], t[_P11]
            # predict backward: M0 = f0 m0 + f1 m1, M1 = m0, P00 = f0 u0 + f1 u1 + q, P01 = u0, P11 = p00
            u0 = f0 * pp00 + f1 * pp01
            u1 = f0 * pp01 + f1 * pp11
            bu0 = f0 * bP00 + bP01
            bu1 = f1 * bP00
            bf0 = bM0 * pm0 + bP00 * u0 + bu0 * pp00 + bu1 * pp01
            bf1 = bM0 * pm1 + bP00 * u1 + bu0 * pp01 + bu1 * pp11
            g_q += bP00
            g_mu += bf0 - bf1  # f0 = 1 + mu - a, f1 = -mu
            g_a -= bf0
            bm0 = f0 * bM0 + bM1
            bm1 = f1 * bM0
            bp00 = f0 * bu0 + bP11
            bp01 = f1 * bu0 + f0 * bu1
            bp11 = f1 * bu1
        else:
            bm0, bm1 = bM0, bM1  # the start: m0 = m1 = r0 - r_star, P = 0
    x0 = bm0 + bm1
    _add_gradient(gj, x0, g_rs, g_a, g_mu, g_q, g_r)
    return llj


@numba.njit(cache=True)
def ar2_adjoint_loglik_grad(y, mask, r0, r_star, a, mu, q, r):  # pragma: no cover - compiled
    """As ``kalman_op.ar2_loglik_grad``: log-likelihood per run (R,) and its gradient (R, 6)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    tape = np.empty((T, _NTAPE2))
    for j in range(R):
        ll[j] = _ar2_adjoint_run(y, mask, j, _n_end(mask, j), r0[j], r_star[j], a[j], mu[j], q[j], r[j], tape, g[j])
    return ll, g


# ------------------------------------------------------------------ 3-state refresh filter (K > 1)
# tape: posterior moments of step n - 1 (m0, m1, m2, p00, p01, p02, p11, p12, p22), then invS, v, k0, k1, k2, obs
_NTAPE3 = 15


@numba.njit(cache=True, fastmath=False)
def _refresh_adjoint_run(y, mask, j, n_end, K, r0, r_star, a, mu, q, r, tape, gj):  # pragma: no cover - compiled
    """Refresh-pattern filter (d_n = n mod K) of run j, state (x_n, x_{n-1}, c_n): the forward filter and
    one backward sweep (module docstring); log-likelihood over [0, n_end), its gradient added to gj."""
    f0 = 1.0 + mu
    f1 = -mu
    f2 = -a
    m0 = m1 = m2 = r0 - r_star
    p00 = p01 = p02 = p11 = p12 = p22 = 0.0
    quad = logs = 0.0
    prod = 1.0
    nobs = 0
    for n in range(n_end):
        t = tape[n]
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8] = m0, m1, m2, p00, p01, p02, p11, p12, p22
        if n > 0:
            reset = n % K == 0
            fm = f0 * m0 + f1 * m1 + f2 * m2
            u0 = f0 * p00 + f1 * p01 + f2 * p02
            u1 = f0 * p01 + f1 * p11 + f2 * p12
            u2 = f0 * p02 + f1 * p12 + f2 * p22
            pff = f0 * u0 + f1 * u1 + f2 * u2 + q
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
            v, invS, quad, prod, logs = _innovation(y[n, j] - r_star, m0, p00, r, quad, prod, logs)
            nobs += 1
            k0 = p00 * invS
            k1 = p01 * invS
            k2 = p02 * invS
            t[9], t[10], t[11], t[12], t[13], t[14] = invS, v, k0, k1, k2, 1.0
            m0 += k0 * v
            m1 += k1 * v
            m2 += k2 * v
            p11 -= k1 * p01
            p12 -= k1 * p02
            p22 -= k2 * p02
            p01 -= k0 * p01
            p02 -= k0 * p02
            p00 -= k0 * p00
        else:
            t[14] = 0.0
    llj = -0.5 * (nobs * _LOG2PI + logs + math.log(prod) + quad)
    bm0 = bm1 = bm2 = bp00 = bp01 = bp02 = bp11 = bp12 = bp22 = 0.0
    g_rs = g_a = g_mu = g_q = g_r = 0.0
    for n in range(n_end - 1, -1, -1):
        t = tape[n]
        if t[14] > 0.0:
            invS, v, k0, k1, k2 = t[9], t[10], t[11], t[12], t[13]
            # p_ij' = p_ij - c_i c_j / S with c = (p00, p01, p02) the predicted column 0, m_i' = m_i + c_i v / S
            bk = bm0 * k0 + bm1 * k1 + bm2 * k2
            bv = -v * invS + bk
            bS = (-0.5 * invS * (1.0 - v * v * invS) - v * invS * bk + bp00 * k0 * k0 + bp01 * k0 * k1
                  + bp02 * k0 * k2 + bp11 * k1 * k1 + bp12 * k1 * k2 + bp22 * k2 * k2)  # fmt: skip
            vi = v * invS
            bc0 = bm0 * vi - 2.0 * bp00 * k0 - bp01 * k1 - bp02 * k2
            bc1 = bm1 * vi - bp01 * k0 - 2.0 * bp11 * k1 - bp12 * k2
            bc2 = bm2 * vi - bp02 * k0 - bp12 * k1 - 2.0 * bp22 * k2
            bp00 += bc0 + bS
            bp01 += bc1
            bp02 += bc2
            bm0 -= bv
            g_rs -= bv
            g_r += bS
        if n > 0:
            pm0, pm1, pm2, q00, q01, q02, q11, q12, q22 = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]
            reset = n % K == 0
            u0 = f0 * q00 + f1 * q01 + f2 * q02
            u1 = f0 * q01 + f1 * q11 + f2 * q12
            u2 = f0 * q02 + f1 * q12 + f2 * q22
            # bars of the predicted moments are (bm*, bp*): map them onto fm, pff, u and the shifted moments
            if reset:
                bfm = bm0 + bm2
                bpff = bp00 + bp02 + bp22
                bu0 = bp01 + bp12
                bu2 = 0.0
                nm2 = 0.0
                np02 = 0.0
                np22 = 0.0
            else:
                bfm = bm0
                bpff = bp00
                bu0 = bp01
                bu2 = bp02
                nm2 = bm2
                np02 = bp12
                np22 = bp22
            nm0 = bm1
            np00 = bp11
            bu0 += f0 * bpff
            bu1 = f1 * bpff
            bu2 += f2 * bpff
            bf0 = u0 * bpff + pm0 * bfm + q00 * bu0 + q01 * bu1 + q02 * bu2
            bf1 = u1 * bpff + pm1 * bfm + q01 * bu0 + q11 * bu1 + q12 * bu2
            bf2 = u2 * bpff + pm2 * bfm + q02 * bu0 + q12 * bu1 + q22 * bu2
            g_q += bpff
            g_mu += bf0 - bf1
            g_a -= bf2
            bm0 = nm0 + f0 * bfm
            bm1 = f1 * bfm
            bm2 = nm2 + f2 * bfm
            bp00 = np00 + f0 * bu0
            bp01 = f1 * bu0 + f0 * bu1
            bp02 = np02 + f2 * bu0 + f0 * bu2
            bp11 = f1 * bu1
            bp12 = f2 * bu1 + f1 * bu2
            bp22 = np22 + f2 * bu2
    x0 = bm0 + bm1 + bm2
    _add_gradient(gj, x0, g_rs, g_a, g_mu, g_q, g_r)
    return llj


@numba.njit(cache=True)
def refresh_adjoint_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r, three_state=False):  # pragma: no cover
    """Log-likelihood per run (R,) and its gradient (R, 6) of recursion (1) with d_n = n mod K_j.

    Parameters
    ----------
    y, mask : ndarray, shape (T, R)
        Observations on the unit-step grid from each run's first logged step, and a 0/1 mask of
        observed steps (padding after a run's end has mask 0).
    K : ndarray of int64, shape (R,)
        Refresh interval per run (K <= 1: no lag).
    r0, r_star, a, mu, q, r : ndarray, shape (R,)
        Initial reward, plateau, stiffness, momentum, process variance sigma_p^2, measurement variance sigma_m^2.
    three_state : bool
        Use the 3-state filter for K = 1 runs too (the same likelihood to rounding; tests).

    Returns
    -------
    loglik : ndarray, shape (R,)
    grad : ndarray, shape (R, 6)
        d loglik / d (r0, r_star, a, mu, q, r).
    """
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    tape = np.empty((T, _NTAPE3))  # one tape for every run (the 2-state kernel uses its first columns)
    for j in range(R):
        n_end = _n_end(mask, j)
        Kj = max(K[j], 1)
        if Kj == 1 and not three_state:
            ll[j] = _ar2_adjoint_run(y, mask, j, n_end, r0[j], r_star[j], a[j], mu[j], q[j], r[j], tape, g[j])
        else:
            ll[j] = _refresh_adjoint_run(y, mask, j, n_end, Kj, r0[j], r_star[j], a[j], mu[j], q[j], r[j], tape, g[j])
    return ll, g
