"""PROTOTYPE (issue 20): the reverse-mode (adjoint) kernel of the extended filter (degeneracy / logistic kinds).

The extended filter of ``bayesgrpo/models/degeneracy.py`` carries forward-mode sensitivities (every state
moment's derivative w.r.t. each of the 8 parameters through every step). The adjoint method (shipped for
the linear filter: ``bayesgrpo/models/kalman_adjoint.py``) runs the filter forward once, keeping a small
tape per step, then one backward sweep accumulates the gradient w.r.t. every parameter. Measured in
``bench/kernel_profile.py``; not shipped: the degeneracy kinds with the spread channel
(``bayesgrpo/models/spread.py``) have no adjoint yet, and the default kind is the oscillator.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bayesgrpo.models.kalman_adjoint import _LOG2PI, _n_end

# ---------------------------------------------------------------------------- EKF (degeneracy kinds)
N_PAR_EKF = 8  # r0, r_star, a, mu, q, r, L, lam
H_MIN = 1e-3
D_MIN = 1e-3
# tape: m0, m1, p00, p01, p11 (posterior of step n - 1), invS, v, k0, k1, obs, g, gx, gD, gl, gxx, gxD, gxl
_NTAPE_EKF = 17


@numba.njit(cache=True, inline="always")
def _h_all(x, iD, kappa, lam, lh):  # pragma: no cover - compiled
    """As ``degeneracy.h_and_derivs`` (g = h x and its partials) at ``iD = 1 / D``; u^kappa e^{lam v} as one
    exp, one division (``lh = kappa log H_MIN``)."""
    u = 1.0 + x * iD
    if u >= 1.0:
        return x, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0
    if u <= H_MIN:
        vm = 1.0 - H_MIN
        h = math.exp(lh + lam * vm)
        return h * x, h, 0.0, h * vm * x, 0.0, 0.0, h * vm
    v = 1.0 - u
    H = math.exp(kappa * math.log(u) + lam * v)
    iu = 1.0 / u
    A = kappa * iu - lam
    hx = H * A * iD
    hD = -hx * x * iD
    hl = H * v
    c = H * kappa * iu * iu * iD * iD
    hxx = hx * A * iD - c
    hxD = hD * A * iD + c * x * iD - hx * iD
    hxl = H * (v * A - 1.0) * iD
    return H * x, H + x * hx, x * hD, x * hl, 2.0 * hx + x * hxx, hD + x * hxD, hl + x * hxl


@numba.njit(cache=True, fastmath=False)
def _ekf_adjoint_run(y, mask, j, n_end, kappa, r0, r_star, a, mu, q, r, L, lam, tape, gj):  # pragma: no cover
    D = r_star - L
    clipped = D < D_MIN
    if clipped:
        D = D_MIN
    iD = 1.0 / D
    lh = kappa * math.log(H_MIN)
    m0 = m1 = r0 - r_star
    p00 = p01 = p11 = 0.0
    quad = logs = 0.0
    prod = 1.0
    nobs = 0
    f1 = -mu
    for n in range(n_end):
        t = tape[n]
        t[0], t[1], t[2], t[3], t[4] = m0, m1, p00, p01, p11
        if n > 0:
            g, gx, gD, gl, gxx, gxD, gxl = _h_all(m0, iD, kappa, lam, lh)
            t[10], t[11], t[12], t[13], t[14], t[15], t[16] = g, gx, gD, gl, gxx, gxD, gxl
            f0 = 1.0 + mu - a * gx
            n0 = (1.0 + mu) * m0 - mu * m1 - a * g
            fp0 = f0 * p00 + f1 * p01
            fp1 = f0 * p01 + f1 * p11
            n00 = fp0 * f0 + fp1 * f1 + q
            p11 = p00
            m1 = m0
            m0 = n0
            p01 = fp0
            p00 = n00
        if mask[n, j] > 0.0:
            S = p00 + r
            v = y[n, j] - r_star - m0
            invS = 1.0 / S
            quad += v * v * invS
            nobs += 1
            prod *= S  # one log per block of steps: log(prod S) = sum log S (to rounding)
            if prod > 1e100 or prod < 1e-100:
                logs += math.log(prod)
                prod = 1.0
            k0 = p00 * invS
            k1 = p01 * invS
            t[5], t[6], t[7], t[8], t[9] = invS, v, k0, k1, 1.0
            m0 = m0 + k0 * v
            m1 = m1 + k1 * v
            p11 = p11 - p01 * p01 * invS
            p01 = p01 - p00 * p01 * invS
            p00 = p00 - p00 * p00 * invS
        else:
            t[9] = 0.0
    llj = -0.5 * (nobs * _LOG2PI + logs + math.log(prod) + quad)
    bm0 = bm1 = bp00 = bp01 = bp11 = 0.0
    g_rs = g_a = g_mu = g_q = g_r = g_D = g_lam = 0.0
    for n in range(n_end - 1, -1, -1):
        t = tape[n]
        if t[9] > 0.0:
            invS, v, k0, k1 = t[5], t[6], t[7], t[8]
            bk = bm0 * k0 + bm1 * k1
            bv = -v * invS + bk
            bS = -0.5 * invS * (1.0 - v * v * invS) - v * invS * bk + bp00 * k0 * k0 + bp01 * k0 * k1 + bp11 * k1 * k1
            vi = v * invS
            bp00, bp01 = (
                bp00 + bm0 * vi - 2.0 * bp00 * k0 - bp01 * k1 + bS,
                bp01 + bm1 * vi - bp01 * k0 - 2.0 * bp11 * k1,
            )
            bm0 -= bv
            g_rs -= bv
            g_r += bS
        if n > 0:
            pm0, pm1, q00, q01, q11 = t[0], t[1], t[2], t[3], t[4]
            g, gx, gD, gl, gxx, gxD, gxl = t[10], t[11], t[12], t[13], t[14], t[15], t[16]
            f0 = 1.0 + mu - a * gx
            fp0 = f0 * q00 + f1 * q01
            fp1 = f0 * q01 + f1 * q11
            bu0 = f0 * bp00 + bp01
            bu1 = f1 * bp00
            bf0 = bp00 * fp0 + bu0 * q00 + bu1 * q01
            bf1 = bp00 * fp1 + bu0 * q01 + bu1 * q11
            # mean: n0 = (1 + mu) m0 - mu m1 - a g(m0); Jacobian f0 = 1 + mu - a gx(m0)
            bg = -a * bm0
            bgx = -a * bf0
            g_mu += bm0 * (pm0 - pm1) + bf0 - bf1
            g_a -= bm0 * g + bf0 * gx
            g_q += bp00
            g_D += bg * gD + bgx * gxD
            g_lam += bg * gl + bgx * gxl
            nm0 = bm1 + bm0 * (1.0 + mu) + bg * gx + bgx * gxx
            bm1 = -mu * bm0
            bm0 = nm0
            bp00, bp01, bp11 = f0 * bu0 + bp11, f1 * bu0 + f0 * bu1, f1 * bu1
    x0 = bm0 + bm1
    gj[0] += x0
    gj[1] += g_rs - x0 + (0.0 if clipped else g_D)
    gj[2] += g_a
    gj[3] += g_mu
    gj[4] += g_q
    gj[5] += g_r
    gj[6] += 0.0 if clipped else -g_D
    gj[7] += g_lam
    return llj


@numba.njit(cache=True)
def ekf_adjoint_loglik_grad(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):  # pragma: no cover - compiled
    """As ``degeneracy.ekf_loglik_grad``: EKF log-likelihood per run (R,) and its gradient (R, 8)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR_EKF))
    tape = np.empty((T, _NTAPE_EKF))
    for j in range(R):
        ll[j] = _ekf_adjoint_run(y, mask, j, _n_end(mask, j), kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j],
                                 L[j], lam[j], tape, g[j])  # fmt: skip
    return ll, g
