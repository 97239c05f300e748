"""Advantage degeneracy: recursion (1) with a state-dependent stiffness, filtered by an extended Kalman filter.

Physics (physics.md section 9)
------------------------------
A group whose G rewards are all equal carries zero advantage. For one prompt with success
probability p the expected update of the policy logit is ~ eta (G-1)/G p(1-p) (Dr.GRPO) or
~ eta sqrt(p(1-p)) (1 - p^G - (1-p)^G) (std-normalised GRPO), so dp/dt ~ [p(1-p)]^kappa with
kappa ~ 2 or ~ 1.5: near the reward floor the drift vanishes and the start is slow for a time that
grows like 1/p0 -- not the ~10 steps of inertia. Averaged over prompts the population reward follows
a generalised logistic between the floor ``L`` and the plateau ``R*``; near the plateau it linearises
to recursion (1). In state-space form (``x = R - R*``, ``D = R* - L``, ``u = 1 + x / D`` = share of
the way from the floor to the plateau)::

    x_{n+1} = (1 + mu) x_n - mu x_{n-1} - a g(x_n) + eps_n,     g(x) = h(x) x,
    h(x) = clip(u, H_MIN, 1)^kappa                                   (h = 1 at and above the plateau)

so the stiffness is ``a h``: ``a`` near the plateau (the oscillator's), vanishing at the floor.
``g'(0) = 1``: the Jacobian is continuous at the plateau. A falling run (``x > 0``) is the linear
oscillator.

Heterogeneous difficulty (the ``logistic`` kind): prompts are not equally hard. Averaged over a
distribution of per-prompt success rates the easy prompts are learned first and the stiffness of the
population falls as the reward climbs -- a fast rise followed by a slow climb towards the plateau
(the mixture of exponentials of a Beta distribution of difficulties). With ``v = 1 - u`` the share
of the way still to go::

    h(x) = clip(u, H_MIN, 1)^kappa exp(lam v)          (lam >= 0; h = 1 at and above the plateau)

so the stiffness is ``a`` at the plateau (recursion (1) stays the local law) and up to ``a e^lam``
early in the rise; ``lam = 0`` is the degeneracy law above. ``lam`` is a per-run parameter
(``0 < lam < LAM_MAX``). ``kappa`` is the kind's constant (:data:`KAPPA`, fitted on the testbed by
``bench/degeneracy_validation.py``: there the degeneracy law fits the exact expected reward of 0/1-reward
runs with R^2 0.997 against the linear oscillator's 0.91, and times the end of the slow start within
~9 steps where the oscillator, whose only slow start is inertia, is ~45 steps early).

Filtering: the transition is nonlinear, so the likelihood is an **extended Kalman filter**
(linearised at the predicted mean; the observation stays linear, ``y = R* + x + e``). The compiled
kernel :func:`ekf_loglik_grad` gives the EKF log-likelihood and its exact gradient w.r.t. the eight per-run
parameters ``(r0, r_star, a, mu, q = sigma_p^2, r = sigma_m^2, L, lam)`` by one forward pass with a tape and
one backward sweep, as the linear kernels (:mod:`bayesgrpo.models.kalman_adjoint`). :func:`ekf_filter_numpy` is the
numpy reference (vectorised over draws); :func:`propagate_degenerate_numpy` simulates the
nonlinear recursion forward (no linearisation) for forecasts. Lag-free runs only (``K = 1``).

Spread channels (:mod:`bayesgrpo.models.spread`): :func:`ekf_spread_loglik_grad` / :class:`EKFSpread` add
the within-group reward spread and the zero-std share as further measurements of the same state (per run
``nu`` and the width ``W = U - L``; gradient (R, 10)); a run without them gets the value of
:func:`ekf_loglik_grad` (to rounding: that kernel takes the gradient by one backward sweep, this one carries
forward-mode sensitivities), which the reward-only graphs keep using.
"""

from __future__ import annotations

import math
import os
import zlib
from pathlib import Path

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply

from bayesgrpo.models.degeneracy_law import (  # re-exported: the law's constants and the numpy side
    D_MIN,
    H_MIN,
    KAPPA,
    LAM_MAX,
    degenerate_deviation_paths,
    ekf_filter_numpy,
    h_and_derivs,
    propagate_degenerate_numpy,
)
from bayesgrpo.models.kalman_adjoint import _LOG2PI, _innovation, _n_end, _predict_cov2, _update2
from bayesgrpo.models.kalman_op import KalmanOpBase, reward2, shift2, start2
from bayesgrpo.models.spread import CH_MS, CH_MZ, N_MOM, N_SCRATCH, bb_constants, spread_update

__all__ = ["KAPPA", "H_MIN", "D_MIN", "LAM_MAX", "ekf_loglik_grad", "ekf_spread_loglik_grad", "ekf_filter_numpy",
           "propagate_degenerate_numpy", "degenerate_deviation_paths", "kalman_ekf_loglik", "EKFDegenerate",
           "EKFSpread", "h_and_derivs"]  # fmt: skip

N_PAR = 8  # r0, r_star, a, mu, q, r, L, lam
#: the kernels of this module inline code of these modules (numba's cache=True checks only this file)
_KERNEL_SOURCES = [Path(__file__)] + [
    Path(__file__).with_name(n) for n in ("degeneracy_law.py", "kalman_op.py", "kalman_adjoint.py", "spread.py")
]
_CACHE_SALT = zlib.crc32(b"".join(p.read_bytes() for p in _KERNEL_SOURCES)) & 0x7FFFFFFF


def _drop_stale_kernels() -> None:
    """Delete numba's cached kernels of this module when a module they inline changed since they were cached.

    numba's ``cache=True`` invalidates a cached function by its own file's timestamp only, so a change in
    ``kalman_op.py`` or ``spread.py`` alone would leave the extended filter running the old code (seen
    during development: a fixed gradient stayed wrong until the cache was cleared). A stamp of the sources'
    checksum sits beside the cache; on a mismatch this module's cache entries go. Why not a ``NUMBA_CACHE_DIR``
    per version of the sources instead: numba reads it once per process, for every cached function of the
    process, so setting it here would move PyTensor's and the user's own numba caches too.
    """
    try:  # numba's in-tree cache folder, or NUMBA_CACHE_DIR's mirror of it (a user-wide fallback is not handled)
        folder = Path(os.environ.get("NUMBA_CACHE_DIR") or Path(__file__).parent / "__pycache__")
        if os.environ.get("NUMBA_CACHE_DIR"):
            folder = folder / Path(__file__).parent.as_posix().lstrip("/")
        stamp = folder / "degeneracy.sources"
        if stamp.is_file() and stamp.read_text() == str(_CACHE_SALT):
            return
        for f in folder.glob("degeneracy.*.nb[ic]"):
            f.unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        stamp.write_text(str(_CACHE_SALT))
    except OSError:  # a read-only install keeps whatever cache it has
        pass


_drop_stale_kernels()


@numba.njit(cache=True, fastmath=False)
def _ekf_run(y, mask, j, kappa, r0, r_star, a, mu, q, r, L, lam, gj, chan):  # pragma: no cover - compiled
    """EKF of run j; ``chan`` is None (the reward only) or the spread channels ``(ch, G, nu, W)`` (``ch`` the
    (9, T, R) channel array of :mod:`bayesgrpo.models.spread`; then ``gj`` has N_PAR + 2 entries, the last two
    d/d(nu, W))."""
    n_par = gj.shape[0]
    n_end = _n_end(mask, j)
    dm0, dm1, dp00, dp01, dp11, dv, dH, dR = start2(n_par)
    dn0 = np.zeros(n_par)
    dn00 = np.zeros(n_par)
    dfp0 = np.zeros(n_par)
    dfp1 = np.zeros(n_par)
    df0 = np.zeros(n_par)
    dD = np.zeros(n_par)
    obs_c = False
    m0p = 0.0
    if chan is not None:
        ch, G, nu, W = chan
        n_end = max(n_end, _n_end(ch[CH_MS], j), _n_end(ch[CH_MZ], j))
        sk = np.empty(G + 1)
        for i in range(G + 1):
            sk[i] = math.sqrt(i * (G - i) / (G * (G - 1.0)))
        consts, work = bb_constants(nu, G, sk)
        mom, sc = np.zeros(N_MOM), np.zeros((N_SCRATCH, 5))
        dm0p, cv, cH, cR = np.zeros(n_par), np.zeros(n_par), np.zeros(n_par), np.zeros(n_par)
    D = r_star - L
    if D < D_MIN:
        D = D_MIN
    else:
        dD[1] = 1.0
        dD[6] = -1.0
    m0 = m1 = r0 - r_star
    p00 = p01 = p11 = llj = 0.0
    for n in range(n_end):
        if n > 0:
            g, gx, gD, gl, gxx, gxD, gxl = h_and_derivs(m0, D, kappa, lam)
            f0 = 1.0 + mu - a * gx
            f1 = -mu
            n0 = (1.0 + mu) * m0 - mu * m1 - a * g
            for k in range(n_par):
                dg = gx * dm0[k] + gD * dD[k]
                dgx = gxx * dm0[k] + gxD * dD[k]
                dn0[k] = (1.0 + mu) * dm0[k] - mu * dm1[k] - a * dg
                df0[k] = -a * dgx
            dn0[7] += -a * gl
            df0[7] += -a * gxl
            dn0[3] += m0 - m1
            dn0[2] += -g
            df0[3] += 1.0
            df0[2] += -gx
            # df1 = -1 for mu only
            fp0 = f0 * p00 + f1 * p01
            fp1 = f0 * p01 + f1 * p11
            for k in range(n_par):
                df1k = -1.0 if k == 3 else 0.0
                dfp0[k] = df0[k] * p00 + f0 * dp00[k] + df1k * p01 + f1 * dp01[k]
                dfp1[k] = df0[k] * p01 + f0 * dp01[k] + df1k * p11 + f1 * dp11[k]
            n00 = fp0 * f0 + fp1 * f1 + q
            for k in range(n_par):
                df1k = -1.0 if k == 3 else 0.0
                dn00[k] = dfp0[k] * f0 + fp0 * df0[k] + dfp1[k] * f1 + fp1 * df1k + (1.0 if k == 4 else 0.0)
            m0, m1, p00, p01, p11 = shift2(n0, n00, fp0, m0, p00, dn0, dn00, dfp0, dm0, dm1, dp00, dp01, dp11)
        obs_r = mask[n, j] > 0.0
        if chan is not None:
            obs_c = ch[CH_MS, n, j] > 0.0 or ch[CH_MZ, n, j] > 0.0
            if obs_c:  # the channels are linearised at the predicted state
                m0p = m0
                for k in range(n_par):
                    dm0p[k] = dm0[k]
        if obs_r:
            ll, m0, m1, p00, p01, p11 = reward2(y[n, j] - r_star, r, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01, dp11,
                                                dv, dH, dR, gj)  # fmt: skip
            llj += ll
        if chan is not None and obs_c:
            ll, m0, m1, p00, p01, p11 = spread_update(ch, n, j, r_star, L, W, nu, r, G, m0p, dm0p, sk, consts,
                                                      work, mom, sc, cv, cH, cR, m0, m1, p00, p01, p11, dm0, dm1,
                                                      dp00, dp01, dp11, gj)  # fmt: skip
            llj += ll
    return llj


#: tape of the adjoint EKF per grid step: the posterior moments of step n - 1 (m0, m1, p00, p01, p11), the
#: update's 1/S, innovation, gains and observed flag, and g = h x with its partials at the predict's input
_NTAPE_EKF = 17


@numba.njit(cache=True, fastmath=False)
def _ekf_adjoint_run(y, mask, j, n_end, kappa, r0, r_star, a, mu, q, r, L, lam, tape, gj):  # pragma: no cover
    """The reward-only EKF of run j over grid steps [0, n_end): forward with a tape, then one backward sweep
    (:func:`ekf_loglik_grad`); returns the log-likelihood and adds its gradient (8) to ``gj``."""
    D = r_star - L
    clipped = D < D_MIN
    if clipped:
        D = D_MIN
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
            g, gx, gD, gl, gxx, gxD, gxl = h_and_derivs(m0, D, kappa, lam)
            t[10], t[11], t[12], t[13], t[14], t[15], t[16] = g, gx, gD, gl, gxx, gxD, gxl
            f0 = 1.0 + mu - a * gx
            m0, m1 = (1.0 + mu) * m0 - mu * m1 - a * g, m0
            p00, p01, p11 = _predict_cov2(f0, f1, q, p00, p01, p11)
        if mask[n, j] > 0.0:
            v, invS, quad, prod, logs = _innovation(y[n, j] - r_star, m0, p00, r, quad, prod, logs)
            nobs += 1
            k0, k1, m0, m1, p00, p01, p11 = _update2(v, invS, m0, m1, p00, p01, p11)
            t[5], t[6], t[7], t[8], t[9] = invS, v, k0, k1, 1.0
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
def ekf_loglik_grad(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):  # pragma: no cover - compiled
    """EKF log-likelihood per run (R,) and its exact gradient (R, 8) w.r.t. (r0, r_star, a, mu, q, r, L, lam):
    one forward pass with a tape and one backward (adjoint) sweep per run, as the linear kernels of
    :mod:`bayesgrpo.models.kalman_adjoint` (measured 2x faster per call than carrying forward-mode
    sensitivities, ``bench/results/kernel.md``). The spread kernel keeps the forward-mode filter
    (:func:`ekf_spread_loglik_grad`; with every channel absent it gives this value to rounding)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    tape = np.empty((T, _NTAPE_EKF))
    for j in range(R):
        ll[j] = _ekf_adjoint_run(y, mask, j, _n_end(mask, j), kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j],
                                 L[j], lam[j], tape, g[j])  # fmt: skip
    return ll, g


@numba.njit(cache=True)
def ekf_spread_loglik_grad(y, mask, ch, G, kappa, r0, r_star, a, mu, q, r, L, lam, nu, W):  # pragma: no cover
    """:func:`ekf_loglik_grad` with the spread channels (:mod:`bayesgrpo.models.spread`): ``ch`` (C, T, R) the
    channel array (:data:`~bayesgrpo.models.spread.CH_ROWS`: binned normalised ``reward_std`` and
    ``frac_reward_zero_std``, masks, groups, the bins' mean rewards, correlation scales), group size ``G``
    (R,) (data), per-run ``nu`` and ``W = U - L`` (normalised). Returns the log-likelihood (R,) and its
    gradient (R, 10) w.r.t. (r0, r_star, a, mu, q, r, L, lam, nu, W). A run whose channel masks are all 0
    gets :func:`ekf_loglik_grad`'s value (to rounding)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR + 2))
    for j in range(R):
        chan = (ch, max(int(G[j]), 2), nu[j], W[j])
        ll[j] = _ekf_run(y, mask, j, kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j], L[j], lam[j], g[j], chan)
    return ll, g


# ----------------------------------------------------------------------------- PyTensor Op
class EKFDegenerate(KalmanOpBase):
    """Inputs (y, mask, kappa, r0, r_star, a, mu, q, r, L, lam); outputs (log-likelihood per run, (R, 8) gradient)."""

    kernel = staticmethod(ekf_loglik_grad)
    n_par = N_PAR
    data_inputs = ("the data", "the mask", "kappa (a constant of the model kind)")

    def make_node(self, y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask, kappa, r0, r_star, a, mu, q, r, L, lam)]
        return Apply(self, ins, [pt.dvector(), pt.dmatrix()])


class EKFSpread(KalmanOpBase):
    """Inputs (y, mask, channels, G, kappa, r0, r_star, a, mu, q, r, L, lam, nu, W); outputs (log-likelihood per
    run, (R, 10) gradient): :func:`ekf_spread_loglik_grad`."""

    kernel = staticmethod(ekf_spread_loglik_grad)
    n_par = N_PAR + 2
    data_inputs = ("the data", "the mask", "the channels", "the group size", "kappa (a constant of the model kind)")

    def make_node(self, y, mask, ch, G, kappa, *pars):
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask, ch, G, kappa, *pars)]
        return Apply(self, ins, [pt.dvector(), pt.dmatrix()])


def _register_numba():
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    @register_funcify_default_op_cache_key(EKFDegenerate)
    def _funcify(op, node=None, **kwargs):
        @numba.njit
        def ekf(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):
            return ekf_loglik_grad(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam)

        return ekf, _CACHE_SALT

    @register_funcify_default_op_cache_key(EKFSpread)
    def _funcify_spread(op, node=None, **kwargs):
        @numba.njit
        def ekf_spread(y, mask, ch, G, kappa, r0, r_star, a, mu, q, r, L, lam, nu, W):
            return ekf_spread_loglik_grad(y, mask, ch, G, kappa, r0, r_star, a, mu, q, r, L, lam, nu, W)

        return ekf_spread, _CACHE_SALT


_register_numba()
_OP = EKFDegenerate()
_SPREAD_OP = EKFSpread()


def kalman_ekf_loglik(y, mask, *, kappa, r0, r_star, a, mu, sigma_p, sigma_m, L, lam=None, spread=None):
    """EKF log-likelihood per run of the degeneracy-aware recursion (PyTensor, exact gradient);
    ``lam`` (default 0: no heterogeneity) per run. ``spread``: the spread channels as a dict of ``channels``
    (C, T, R), ``group_size`` (R,) (data) and the per-run ``nu``, ``W`` (:func:`ekf_spread_loglik_grad`)."""
    if lam is None:
        lam = pt.zeros_like(r0)
    pars = (r0, r_star, a, mu, sigma_p**2, sigma_m**2, L, lam)
    if spread is None:
        ll, _ = _OP(y, mask, kappa, *pars)
    else:
        ll, _ = _SPREAD_OP(y, mask, spread["channels"], spread["group_size"], kappa, *pars, spread["nu"], spread["W"])
    return ll
