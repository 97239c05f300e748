"""Compiled Kalman-filter likelihood Ops for recursion (1), with their exact gradients.

Two kernels, one technique. Each carries the forward-mode sensitivities of the filter state with
respect to the six per-run parameters ``(r0, r_star, a, mu, q = sigma_p^2, r = sigma_m^2)`` through
the filter recursion, so one pass gives the log-likelihood and its exact gradient. They are compiled
once by numba (``cache=True``) and registered with PyTensor's numba linker, so nutpie calls them
without Python overhead.

* :func:`ar2_loglik_grad` / :class:`KalmanAR2` — the lag-free recursion (d = 0), state
  ``(x_n, x_{n-1})``.
* :func:`refresh_loglik_grad` / :class:`KalmanRefresh` — the refresh-interval lag pattern
  ``d_n = n mod K_j`` (a per-run K, ``n`` = grid index from the run's first logged step; K = 1 is
  the lag-free case), state ``(x_n, x_{n-1}, c_n)`` of dimension 3 whatever K. ``c_n =
  x_{n - (n mod K)}`` is the anchor of the current refresh period (the policy that sampled the
  batch): ``x_{n+1} = (1 + mu) x_n - mu x_{n-1} - a c_n + eps_n`` and ``c_{n+1} = c_n``, except at a
  period start ((n + 1) mod K = 0), where ``c_{n+1} = x_{n+1}`` (the same row of the transition,
  so the process noise enters the anchor too). Both maps are linear, so the filter stays exact; a
  state of dimension ``max(2, K)`` (:func:`bayesgrpo.models.kalman.filter_numpy`) gives the same
  likelihood at a cost that grows with K.

Why hand-written Ops rather than ``pytensor.scan``: a scan version of the filter is correct, but its
gradient graph cost minutes to compile with numba and ~2 ms per gradient evaluation for 300 steps
under JAX (per-iteration overhead of the loop; the lagged scan needed a K-dimensional state on top);
NUTS needs thousands of evaluations per run.

The numpy filter in :mod:`bayesgrpo.models.kalman` is the reference; tests check values (also against the
brute-force Gaussian marginal of (1)) and gradients (central finite differences) against it.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.tensor.type import integer_dtypes

__all__ = [
    "ar2_loglik_grad",
    "refresh_loglik_grad",
    "refresh3_loglik_grad",
    "kalman_ar2_loglik",
    "kalman_refresh_loglik",
    "KalmanAR2",
    "KalmanRefresh",
    "KalmanOpBase",
    "update2",
    "update_third",
    "start2",
    "reward2",
    "shift2",
]

_LOG2PI = math.log(2.0 * math.pi)
N_PAR = 6  # r0, r_star, a, mu, q, r
# salt for PyTensor's numba cache key: a change to this module must not reuse a stale compiled kernel
_CACHE_SALT = zlib.crc32(Path(__file__).read_bytes()) & 0x7FFFFFFF


@numba.njit(cache=True)
def _n_end(mask, j):  # pragma: no cover - compiled
    """1 + the last grid index of run j with an observation (0 if none): later steps add nothing."""
    for n in range(mask.shape[0] - 1, -1, -1):
        if mask[n, j] > 0.0:
            return n + 1
    return 0


@numba.njit(cache=True, inline="always")
def start2(n_par):  # pragma: no cover - compiled
    """Derivative arrays of a 2-state filter at its start ``x_0 = x_{-1} = r0 - r_star`` (no uncertainty):
    ``(dm0, dm1, dp00, dp01, dp11)`` with ``d x_0 / d(r0, r_star) = (1, -1)`` (parameters 0 and 1), and the
    reward observation's scratch ``(dv, dH, dR)`` (slope 1, noise variance ``r`` = parameter 5)."""
    dm0, dm1 = np.zeros(n_par), np.zeros(n_par)
    for d in (dm0, dm1):
        d[0] = 1.0
        d[1] = -1.0
    dR = np.zeros(n_par)
    dR[5] = 1.0
    return dm0, dm1, np.zeros(n_par), np.zeros(n_par), np.zeros(n_par), np.zeros(n_par), np.zeros(n_par), dR


@numba.njit(cache=True, inline="always")
def shift2(n0, n00, fp0, m0, p00, dn0, dn00, dfp0, dm0, dm1, dp00, dp01, dp11):  # pragma: no cover - compiled
    """The predicted 2-state ``(x_n, x_{n-1})`` from the old ``x_{n-1}``: new mean ``n0``, variance ``n00``,
    covariance ``fp0`` (derivatives ``dn0``, ``dn00``, ``dfp0``); derivative arrays updated in place.
    Returns ``(m0, m1, p00, p01, p11)``."""
    for k in range(dm0.shape[0]):
        dp11[k] = dp00[k]
        dm1[k] = dm0[k]
        dm0[k] = dn0[k]
        dp01[k] = dfp0[k]
        dp00[k] = dn00[k]
    return n0, m0, n00, fp0, p00


@numba.njit(cache=True, fastmath=False, inline="always")
def update2(v, H, R, dv, dH, dR, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01, dp11, gj):  # pragma: no cover
    """One scalar measurement update of a 2-state filter ``(x_n, x_{n-1})``: observation ``H x_n + noise(R)``.

    ``v`` is the innovation, ``dv``, ``dH``, ``dR`` (N_PAR,) the parameter derivatives of ``v``, ``H`` and
    ``R``; the state derivatives ``dm*``, ``dp*`` are updated in place and the log-density's gradient is
    added to ``gj``. Returns ``(log-density, m0, m1, p00, p01, p11)``. The one measurement update of every
    2-state kernel (the reward, ``H = 1``, of the lag-free and extended filters, and the spread channels of
    :mod:`bayesgrpo.models.spread`); with ``H = 1``, ``dH = 0`` its arithmetic is the linear filter's own.
    """
    n_par = gj.shape[0]
    a0 = H * p00  # P H', the covariance of the state with the observation
    a1 = H * p01
    S = H * H * p00 + R
    invS = 1.0 / S
    ll = -0.5 * (_LOG2PI + math.log(S) + v * v * invS)
    k0 = a0 * invS
    k1 = a1 * invS
    for k in range(n_par):
        da0 = dH[k] * p00 + H * dp00[k]
        da1 = dH[k] * p01 + H * dp01[k]
        dS = 2.0 * H * dH[k] * p00 + H * H * dp00[k] + dR[k]
        gj[k] += -0.5 * (dS * invS + 2.0 * v * dv[k] * invS - v * v * dS * invS * invS)
        dk0 = (da0 - k0 * dS) * invS
        dk1 = (da1 - k1 * dS) * invS
        dm0[k] = dm0[k] + dk0 * v + k0 * dv[k]
        dm1[k] = dm1[k] + dk1 * v + k1 * dv[k]
        # p_ij' = p_ij - a_i a_j / S
        d00 = dp00[k] - (2.0 * a0 * da0 - a0 * a0 * dS * invS) * invS
        d01 = dp01[k] - (da0 * a1 + a0 * da1 - a0 * a1 * dS * invS) * invS
        d11 = dp11[k] - (2.0 * a1 * da1 - a1 * a1 * dS * invS) * invS
        dp00[k] = d00
        dp01[k] = d01
        dp11[k] = d11
    return ll, m0 + k0 * v, m1 + k1 * v, p00 - a0 * a0 * invS, p01 - a0 * a1 * invS, p11 - a1 * a1 * invS


@numba.njit(cache=True, fastmath=False, inline="always")
def reward2(z, r, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01, dp11, dv, dH, dR, gj):  # pragma: no cover
    """:func:`update2` for the logged reward, ``z = y_n - r_star`` (parameter 1), noise variance ``r``;
    ``dH``, ``dR`` from :func:`start2`, ``dv`` scratch."""
    for k in range(dv.shape[0]):
        dv[k] = -dm0[k] - (1.0 if k == 1 else 0.0)
    return update2(z - m0, 1.0, r, dv, dH, dR, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01, dp11, gj)


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


class KalmanOpBase(Op):
    """Common PyTensor plumbing of the compiled filter Ops (this module's and the extended filters of
    :mod:`bayesgrpo.models.degeneracy`): outputs (log-likelihood per run, its ``(R, n_par)`` gradient).

    Subclasses set ``kernel`` (the numba function called with the inputs), ``n_par`` (the differentiable
    trailing inputs) and ``data_inputs`` (names of the leading non-differentiable ones; those in
    ``disconnected`` -- integer data -- have no gradient at all). The gradient w.r.t. parameter ``k`` is
    ``gll * grad[:, k]``.
    """

    __props__ = ()
    kernel: Any = None
    n_par = N_PAR
    data_inputs: tuple[str, ...] = ("the data", "the mask")
    disconnected: tuple[str, ...] = ()

    def perform(self, node, inputs, output_storage):
        ll, g = self.kernel(*(np.ascontiguousarray(v) for v in inputs))
        output_storage[0][0] = ll
        output_storage[1][0] = g

    def infer_shape(self, node, shapes):
        R = shapes[0][1]
        return [(R,), (R, self.n_par)]

    def pullback(self, inputs, outputs, output_grads):
        from pytensor.gradient import DisconnectedType

        _, g = outputs
        gll = output_grads[0]
        if not isinstance(output_grads[1].type, DisconnectedType):
            raise NotImplementedError(f"second derivatives of the {type(self).__name__} likelihood are not implemented")
        if isinstance(gll.type, DisconnectedType):
            gll = pt.zeros_like(outputs[0])
        op = type(self).__name__
        data = [
            DisconnectedType()()
            if name in self.disconnected
            else grad_not_implemented(self, i, inputs[i], f"the {op} Op is not differentiable w.r.t. {name}")
            for i, name in enumerate(self.data_inputs)
        ]
        return [*data, *[gll * g[:, k] for k in range(self.n_par)]]

    def connection_pattern(self, node):
        data = [[name not in self.disconnected, False] for name in self.data_inputs]
        return data + [[True, False]] * self.n_par


class KalmanAR2(KalmanOpBase):
    """Lag-free recursion: inputs (y, mask, r0, r_star, a, mu, q, r); outputs (log-likelihood, gradient)."""

    kernel = staticmethod(ar2_loglik_grad)

    def make_node(self, y, mask, r0, r_star, a, mu, q, r):
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask, r0, r_star, a, mu, q, r)]
        return Apply(self, ins, [pt.dvector(), pt.dmatrix()])


class KalmanRefresh(KalmanOpBase):
    """Refresh-interval lag pattern: inputs (y, mask, K, r0, r_star, a, mu, q, r); outputs (log-likelihood, gradient).

    ``K`` (int64, per run) is data: one compiled graph serves runs of any refresh interval.
    """

    kernel = staticmethod(refresh_loglik_grad)
    data_inputs = ("the data", "the mask", "K")
    disconnected = ("K",)

    def make_node(self, y, mask, K, r0, r_star, a, mu, q, r):
        data = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask)]
        K = pt.as_tensor_variable(K)
        if K.type.dtype not in integer_dtypes or K.type.ndim != 1:
            raise TypeError(f"K must be an integer vector (one refresh interval per run), got {K.type}")
        pars = [pt.as_tensor_variable(v).astype("float64") for v in (r0, r_star, a, mu, q, r)]
        return Apply(self, [*data, K.astype("int64"), *pars], [pt.dvector(), pt.dmatrix()])


def _register_numba():
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    @register_funcify_default_op_cache_key(KalmanAR2)
    def _funcify_ar2(op, node=None, **kwargs):
        @numba.njit
        def kalman_ar2(y, mask, r0, r_star, a, mu, q, r):
            return ar2_loglik_grad(y, mask, r0, r_star, a, mu, q, r)

        return kalman_ar2, _CACHE_SALT

    @register_funcify_default_op_cache_key(KalmanRefresh)
    def _funcify_refresh(op, node=None, **kwargs):
        @numba.njit
        def kalman_refresh(y, mask, K, r0, r_star, a, mu, q, r):
            return refresh_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r)

        return kalman_refresh, _CACHE_SALT


_register_numba()
_OP = KalmanAR2()
_REFRESH_OP = KalmanRefresh()


def kalman_ar2_loglik(y, mask, *, r0, r_star, a, mu, sigma_p, sigma_m):
    """Log-likelihood per run of the lag-free recursion (PyTensor expression with exact gradient)."""
    ll, _ = _OP(y, mask, r0, r_star, a, mu, sigma_p**2, sigma_m**2)
    return ll


def kalman_refresh_loglik(y, mask, K, *, r0, r_star, a, mu, sigma_p, sigma_m):
    """Log-likelihood per run of recursion (1) with the refresh lag pattern d_n = n mod K (PyTensor, exact gradient).

    Parameters
    ----------
    y, mask : TensorVariable or array_like, shape (T, R)
        Observations on the unit-step grid and 0/1 mask (see :func:`refresh_loglik_grad`).
    K : TensorVariable or array_like of int, shape (R,)
        Refresh interval per run (1: no lag).
    r0, r_star, a, mu, sigma_p, sigma_m : TensorVariable or array_like, shape (R,)

    Returns
    -------
    TensorVariable, shape (R,)
        Log-likelihood per run; its gradient w.r.t. the parameters is exact (forward-mode in the kernel).
    """
    ll, _ = _REFRESH_OP(y, mask, K, r0, r_star, a, mu, sigma_p**2, sigma_m**2)
    return ll
