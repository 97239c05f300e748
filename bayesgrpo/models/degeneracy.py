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
kernel :func:`ekf_loglik_grad` carries forward-mode sensitivities w.r.t. the eight per-run parameters
``(r0, r_star, a, mu, q = sigma_p^2, r = sigma_m^2, L, lam)`` exactly as the linear kernels do, so NUTS
gets the EKF log-likelihood and its exact gradient in one pass. :func:`ekf_filter_numpy` is the
numpy reference (vectorised over draws); :func:`propagate_degenerate_numpy` simulates the
nonlinear recursion forward (no linearisation) for forecasts. Lag-free runs only (``K = 1``).

Spread channels (:mod:`bayesgrpo.models.spread`): :func:`ekf_spread_loglik_grad` / :class:`EKFSpread` add
the within-group reward spread and the zero-std share as further measurements of the same state (per run
``nu`` and the width ``W = U - L``; gradient (R, 10)); a run without them gets exactly the value of
:func:`ekf_loglik_grad`, which the reward-only graphs keep using.
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

from bayesgrpo.models.kalman import PathStore, measure
from bayesgrpo.models.kalman_adjoint import _n_end
from bayesgrpo.models.kalman_op import KalmanOpBase, reward2, shift2, start2
from bayesgrpo.models.spread import CH_MS, CH_MZ, N_CH, N_MOM, N_SCRATCH, bb_constants, spread_update

__all__ = ["KAPPA", "H_MIN", "D_MIN", "LAM_MAX", "ekf_loglik_grad", "ekf_spread_loglik_grad", "ekf_filter_numpy",
           "propagate_degenerate_numpy", "degenerate_deviation_paths", "kalman_ekf_loglik", "EKFDegenerate",
           "EKFSpread", "h_and_derivs"]  # fmt: skip

#: exponent of the degeneracy law near the floor. The per-prompt argument of physics.md section 9 gives
#: 1.5 (std GRPO) to 2 (Dr.GRPO); fitted to the exact expected reward of the testbed's softmax bandit
#: (bench/results/degeneracy_validation.md) it is 0.75-1.03 with heavy-ball SGD and 1.21-1.35 with Adam,
#: the optimizer of LLM runs: 1.25.
KAPPA = 1.25
#: floor of u in h (a state below the reward floor keeps a tiny stiffness, so the filter stays regular)
H_MIN = 1e-3
#: smallest floor-to-plateau distance D (normalised units)
D_MIN = 1e-3
_LOG2PI = math.log(2.0 * math.pi)
#: largest heterogeneity exponent: the stiffness early in a rise is at most e^LAM_MAX (~55) x the plateau's
LAM_MAX = 4.0
N_PAR = 8  # r0, r_star, a, mu, q, r, L, lam
#: the kernels of this module inline code of these modules (numba's cache=True checks only this file)
_KERNEL_SOURCES = [Path(__file__)] + [
    Path(__file__).with_name(n) for n in ("kalman_op.py", "kalman_adjoint.py", "spread.py")
]
_CACHE_SALT = zlib.crc32(b"".join(p.read_bytes() for p in _KERNEL_SOURCES)) & 0x7FFFFFFF


def _drop_stale_kernels() -> None:
    """Delete numba's cached kernels of this module when a module they inline changed since they were cached.

    numba's ``cache=True`` invalidates a cached function by its own file's timestamp only, so a change in
    ``kalman_op.py`` or ``spread.py`` alone would leave the extended filter running the old code (seen
    during development: a fixed gradient stayed wrong until the cache was cleared). A stamp of the sources'
    checksum sits beside the cache; on a mismatch this module's cache entries go.
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


@numba.njit(cache=True)
def h_and_derivs(x, D, kappa, lam):  # pragma: no cover - compiled
    """g = h x and its partials (g_x, g_D, g_lam, g_xx, g_xD, g_xlam) at state x for floor distance D."""
    u = 1.0 + x / D
    if u >= 1.0:
        return x, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0
    if u <= H_MIN:
        vm = 1.0 - H_MIN
        h = H_MIN**kappa * math.exp(lam * vm)
        return h * x, h, 0.0, h * vm * x, 0.0, 0.0, h * vm
    v = 1.0 - u
    H = u**kappa * math.exp(lam * v)
    A = kappa / u - lam
    hx = H * A / D
    hD = -hx * x / D
    hl = H * v
    hxx = hx * A / D - H * kappa / (u * u * D * D)
    hxD = hD * A / D + H * kappa * x / (u * u * D * D * D) - hx / D
    hxl = H * (v * A - 1.0) / D
    g = H * x
    gx = H + x * hx
    gD = x * hD
    gl = x * hl
    gxx = 2.0 * hx + x * hxx
    gxD = hD + x * hxD
    gxl = hl + x * hxl
    return g, gx, gD, gl, gxx, gxD, gxl


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


@numba.njit(cache=True)
def ekf_loglik_grad(y, mask, kappa, r0, r_star, a, mu, q, r, L, lam):  # pragma: no cover - compiled
    """EKF log-likelihood per run (R,) and its exact gradient (R, 8) w.r.t. (r0, r_star, a, mu, q, r, L, lam)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    for j in range(R):
        ll[j] = _ekf_run(y, mask, j, kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j], L[j], lam[j], g[j], None)
    return ll, g


@numba.njit(cache=True)
def ekf_spread_loglik_grad(y, mask, ch, G, kappa, r0, r_star, a, mu, q, r, L, lam, nu, W):  # pragma: no cover
    """:func:`ekf_loglik_grad` with the spread channels (:mod:`bayesgrpo.models.spread`): ``ch`` (C, T, R) the
    channel array (:data:`~bayesgrpo.models.spread.CH_ROWS`: binned normalised ``reward_std`` and
    ``frac_reward_zero_std``, masks, groups, the bins' mean rewards, correlation scales), group size ``G``
    (R,) (data), per-run ``nu`` and ``W = U - L`` (normalised). Returns the log-likelihood (R,) and its
    gradient (R, 10) w.r.t. (r0, r_star, a, mu, q, r, L, lam, nu, W). A run whose channel masks are all 0
    gets exactly :func:`ekf_loglik_grad`'s value."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR + 2))
    for j in range(R):
        chan = (ch, max(int(G[j]), 2), nu[j], W[j])
        ll[j] = _ekf_run(y, mask, j, kappa[j], r0[j], r_star[j], a[j], mu[j], q[j], r[j], L[j], lam[j], g[j], chan)
    return ll, g


# ----------------------------------------------------------------------------- numpy side
def _h_np(x, D, kappa, lam=0.0):
    """``h`` and ``dh/dx`` of the module docstring (numpy, broadcasting)."""
    u = 1.0 + x / D
    uc = np.clip(u, H_MIN, 1.0)
    E = np.exp(lam * (1.0 - uc))
    h = np.where(u >= 1.0, 1.0, uc**kappa * E)
    mid = (u < 1.0) & (u > H_MIN)
    hx = np.where(mid, uc**kappa * E * (kappa / uc - lam) / D, 0.0)
    return h, hx


def ekf_filter_numpy(y, mask, *, r0, r_star, a, mu, sigma_p, sigma_m, L, lam=0.0, kappa=KAPPA, channels=None):
    """The EKF of the module docstring in numpy, vectorised over a trailing batch (posterior draws).

    ``channels`` (one run: ``y``, ``mask`` of shape (T,) or (T, 1)): the spread channels as a dict with
    ``ch`` (9, T) (the run's channel array, :data:`bayesgrpo.models.spread.CH_ROWS`), ``G`` and the per-draw
    ``nu``, ``W``; a step with a logged channel is the joint linearised update of its measurements
    (:func:`bayesgrpo.models.spread.joint_measurement_numpy`, the reference of the kernel).
    Returns ``(loglik, m, P)``: the log-likelihood and the filtered mean ``(x_T, x_{T-1})`` and
    covariance at the last grid step (as :func:`bayesgrpo.models.kalman.filter_numpy`).
    """
    y = np.asarray(y, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    r0, r_star, a, mu, sp, sm, L, lam = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (r0, r_star, a, mu, sigma_p, sigma_m, L, lam))
    )
    batch = np.broadcast_shapes(r0.shape, y.shape[1:])
    D = np.maximum(r_star - L, D_MIN)
    m0 = np.broadcast_to(r0 - r_star, batch).copy()
    m1 = m0.copy()
    p00 = np.zeros(batch)
    p01 = np.zeros(batch)
    p11 = np.zeros(batch)
    ll = np.zeros(batch)
    q, r = sp**2, sm**2
    ch = None if channels is None else np.asarray(channels["ch"], dtype=float).reshape(N_CH, -1)
    for n in range(y.shape[0]):
        if n > 0:
            h, hx = _h_np(m0, D, kappa, lam)
            gx = h + m0 * hx
            f0 = 1.0 + mu - a * gx
            f1 = -mu
            n0 = (1.0 + mu) * m0 - mu * m1 - a * h * m0
            fp0 = f0 * p00 + f1 * p01
            fp1 = f0 * p01 + f1 * p11
            p11, p01, p00 = p00, fp0, fp0 * f0 + fp1 * f1 + q
            m1, m0 = m0, n0
        obs = mask[n]
        if ch is not None and (ch[CH_MS, n] > 0 or ch[CH_MZ, n] > 0):
            from bayesgrpo.models.spread import joint_measurement_numpy

            m, P = np.stack([m0, m1], -1), np.stack([np.stack([p00, p01], -1), np.stack([p01, p11], -1)], -2)
            if bool(np.ravel(obs)[0]):
                ll, m, P = measure(ll, m, P, y[n] - r_star, obs, r, batch)
            lln, m, P = joint_measurement_numpy(m, P, m_pred=np.stack([m0, m1], -1), chn=ch[:, n], r_star=r_star,
                                                L=L, r=r, **{k: channels[k] for k in ("W", "nu", "G")})  # fmt: skip
            ll = ll + lln
            m0, m1, p00, p01, p11 = m[..., 0], m[..., 1], P[..., 0, 0], P[..., 0, 1], P[..., 1, 1]
            continue
        if not np.any(obs):
            continue
        S = p00 + r
        v = np.where(obs, y[n] - r_star - m0, 0.0)
        k0, k1 = p00 / S, p01 / S
        ll = ll + np.where(obs, -0.5 * (_LOG2PI + np.log(S) + v**2 / S), 0.0)
        o = np.broadcast_to(obs, batch)
        m0, m1 = np.where(o, m0 + k0 * v, m0), np.where(o, m1 + k1 * v, m1)
        p11, p01, p00 = (np.where(o, p11 - p01 * p01 / S, p11), np.where(o, p01 - p00 * p01 / S, p01),
                         np.where(o, p00 - p00 * p00 / S, p00))  # fmt: skip
    m = np.stack([m0, m1], axis=-1)
    P = np.stack([np.stack([p00, p01], axis=-1), np.stack([p01, p11], axis=-1)], axis=-2)
    return ll, m, P


def propagate_degenerate_numpy(m, P, n_steps, *, a, mu, sigma_p, r_star, L, rng, lam=0.0, kappa=KAPPA, store=None,
                               accumulate=None):  # fmt: skip
    """Simulate the nonlinear recursion forward from the filtered state (sampled from N(m, P)).

    Same return convention as :func:`bayesgrpo.models.kalman.propagate_numpy` (x = R - R*).
    """
    m = np.asarray(m, dtype=float)
    P = np.asarray(P, dtype=float)
    batch = m.shape[:-1]
    w, V = np.linalg.eigh(P)
    z = rng.standard_normal(batch + (2,))
    s = m + np.einsum("...ij,...j->...i", V, np.sqrt(np.clip(w, 0.0, None)) * z)
    x, xp = s[..., 0], s[..., 1]
    a = np.broadcast_to(np.asarray(a, dtype=float), batch)
    mu = np.broadcast_to(np.asarray(mu, dtype=float), batch)
    sp = np.broadcast_to(np.asarray(sigma_p, dtype=float), batch)
    D = np.broadcast_to(np.maximum(np.asarray(r_star, dtype=float) - np.asarray(L, dtype=float), D_MIN), batch)
    lam = np.broadcast_to(np.asarray(lam, dtype=float), batch)
    paths = PathStore(n_steps, batch, store, accumulate)
    for k in range(n_steps):
        h, _ = _h_np(x, D, kappa, lam)
        x_next = (1.0 + mu) * x - mu * xp - a * h * x + sp * rng.standard_normal(batch)
        xp, x = x, x_next
        paths.put(k, x_next)
    return paths.result()


def degenerate_deviation_paths(a, mu, n_steps, *, r0, r_star, L, lam=0.0, kappa=KAPPA):
    """Deterministic recursion from ``x_0 = x_{-1} = r0 - r_star``, normalised by ``x_0`` (batched).

    The mean trajectory whose settling step is the stop step (:mod:`bayesgrpo.physics.stopping`).
    """
    a, mu, r0, r_star, L, lam = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, mu, r0, r_star, L, lam)))
    D = np.maximum(r_star - L, D_MIN)
    x0 = r0 - r_star
    x = x0.copy()
    xp = x0.copy()
    out = np.empty(a.shape + (n_steps + 1,))
    safe = np.where(np.abs(x0) > 0, x0, 1.0)
    out[..., 0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        for n in range(n_steps):
            h, _ = _h_np(x, D, kappa, lam)
            x, xp = (1.0 + mu) * x - mu * xp - a * h * x, x
            out[..., n + 1] = np.where(np.abs(x0) > 0, x / safe, 0.0)
    return out


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
