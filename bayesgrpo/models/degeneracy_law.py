"""The degeneracy law (:mod:`bayesgrpo.models.degeneracy` explains the physics): its constants, the state-dependent
stiffness ``h`` with its partials (numba, inlined by the compiled filters), and the numpy side -- the EKF
(:func:`ekf_filter_numpy`, the kernels' reference, vectorised over posterior draws), the forward simulation
of the nonlinear recursion for forecasts (:func:`propagate_degenerate_numpy`) and its deterministic mean
path (:func:`degenerate_deviation_paths`).

No PyTensor here: a forecast from a fitted posterior imports this module, not the compiled Ops.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bayesgrpo.models.channels import CH_MS, CH_MZ, N_CH
from bayesgrpo.models.kalman import LOG2PI as _LOG2PI
from bayesgrpo.models.kalman import PathStore, measure

__all__ = ["KAPPA", "H_MIN", "D_MIN", "LAM_MAX", "h_and_derivs", "ekf_filter_numpy", "propagate_degenerate_numpy",
           "degenerate_deviation_paths"]  # fmt: skip

#: exponent of the degeneracy law near the floor. The per-prompt argument of physics.md section 9 gives
#: 1.5 (std GRPO) to 2 (Dr.GRPO); fitted to the exact expected reward of the testbed's softmax bandit
#: (bench/results/degeneracy_validation.md) it is 0.75-1.03 with heavy-ball SGD and 1.21-1.35 with Adam,
#: the optimizer of LLM runs: 1.25.
KAPPA = 1.25
#: floor of u in h (a state below the reward floor keeps a tiny stiffness, so the filter stays regular)
H_MIN = 1e-3
#: smallest floor-to-plateau distance D (normalised units)
D_MIN = 1e-3
#: largest heterogeneity exponent: the stiffness early in a rise is at most e^LAM_MAX (~55) x the plateau's
LAM_MAX = 4.0


@numba.njit(cache=True)
def h_and_derivs(x, D, kappa, lam):  # pragma: no cover - compiled
    """g = h x and its partials (g_x, g_D, g_lam, g_xx, g_xD, g_xlam) at state x for floor distance D.

    Written for the kernels' inner loop: ``u^kappa e^{lam v}`` as one ``exp``, one division by ``D`` and one
    by ``u`` (measured against ``u**kappa * exp(lam v)`` with a division per term: the adjoint EKF kernel 15.3 -> 13.0 µs at 200 steps, ``bench/results/kernel.md``)."""
    iD = 1.0 / D
    u = 1.0 + x * iD
    if u >= 1.0:
        return x, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0
    if u <= H_MIN:
        vm = 1.0 - H_MIN
        h = math.exp(kappa * math.log(H_MIN) + lam * vm)
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
