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


@numba.njit(cache=True, fastmath=False)
def _ar2_run(y, mask, j, n_end, r0, r_star, a, mu, q, r, gj):  # pragma: no cover - compiled
    """Lag-free filter of run j over grid steps [0, n_end): returns the log-likelihood, adds the gradient to gj."""
    dm0 = np.zeros(N_PAR)
    dm1 = np.zeros(N_PAR)
    dp00 = np.zeros(N_PAR)
    dp01 = np.zeros(N_PAR)
    dp11 = np.zeros(N_PAR)
    dn0 = np.zeros(N_PAR)
    dfp0 = np.zeros(N_PAR)
    dfp1 = np.zeros(N_PAR)
    f0 = 1.0 + mu - a
    f1 = -mu
    x0 = r0 - r_star
    m0 = x0
    m1 = x0
    p00 = 0.0
    p01 = 0.0
    p11 = 0.0
    dm0[0] = 1.0
    dm0[1] = -1.0
    dm1[0] = 1.0
    dm1[1] = -1.0
    llj = 0.0
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
                dp11[k] = dp00[k]
                dm1[k] = dm0[k]
                dm0[k] = dn0[k]
                dp00_new = dfp0[k] * f0 + dfp1[k] * f1
                dp01[k] = dfp0[k]
                dp00[k] = dp00_new
            dp00[2] += -fp0
            dp00[3] += fp0 - fp1
            dp00[4] += 1.0
            p11 = p00
            m1 = m0
            m0 = n0
            p01 = fp0
            p00 = n00
        if mask[n, j] > 0.0:
            S = p00 + r
            v = y[n, j] - r_star - m0
            invS = 1.0 / S
            llj += -0.5 * (_LOG2PI + math.log(S) + v * v * invS)
            k0 = p00 * invS
            k1 = p01 * invS
            for k in range(N_PAR):
                dS = dp00[k] + (1.0 if k == 5 else 0.0)
                dv = -dm0[k] - (1.0 if k == 1 else 0.0)
                gj[k] += -0.5 * (dS * invS + 2.0 * v * dv * invS - v * v * dS * invS * invS)
                dk0 = (dp00[k] - k0 * dS) * invS
                dk1 = (dp01[k] - k1 * dS) * invS
                dm0[k] = dm0[k] + dk0 * v + k0 * dv
                dm1[k] = dm1[k] + dk1 * v + k1 * dv
                # p00' = p00 - p00^2/S ; p01' = p01 - p00 p01/S ; p11' = p11 - p01^2/S
                d00 = dp00[k] - (2.0 * p00 * dp00[k] - p00 * p00 * dS * invS) * invS
                d01 = dp01[k] - (dp00[k] * p01 + p00 * dp01[k] - p00 * p01 * dS * invS) * invS
                d11 = dp11[k] - (2.0 * p01 * dp01[k] - p01 * p01 * dS * invS) * invS
                dp00[k] = d00
                dp01[k] = d01
                dp11[k] = d11
            m0 = m0 + k0 * v
            m1 = m1 + k1 * v
            p11 = p11 - p01 * p01 * invS
            p01 = p01 - p00 * p01 * invS
            p00 = p00 - p00 * p00 * invS
    return llj


@numba.njit(cache=True, fastmath=False)
def _refresh_run(y, mask, j, n_end, K, r0, r_star, a, mu, q, r, gj):  # pragma: no cover - compiled
    """Refresh-pattern filter (d_n = n mod K) of run j with the 3-state (x_n, x_{n-1}, c_n).

    Returns the log-likelihood over grid steps [0, n_end) and adds its gradient to gj. State mean
    (m0, m1, m2), covariance p00..p22 (symmetric), and their derivatives dm*, dp* (N_PAR,) each.
    """
    dm0 = np.zeros(N_PAR)
    dm1 = np.zeros(N_PAR)
    dm2 = np.zeros(N_PAR)
    dp00 = np.zeros(N_PAR)
    dp01 = np.zeros(N_PAR)
    dp02 = np.zeros(N_PAR)
    dp11 = np.zeros(N_PAR)
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
    for i in (dm0, dm1, dm2):
        i[0] = 1.0
        i[1] = -1.0
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
            if reset:
                for k in range(N_PAR):
                    dp11[k] = dp00[k]
                    dm1[k] = dm0[k]
                    dm0[k] = dfm_[k]
                    dp00[k] = dpff_[k]
                    dp01[k] = du0_[k]
                    dm2[k] = dfm_[k]
                    dp02[k] = dpff_[k]
                    dp12[k] = du0_[k]
                    dp22[k] = dpff_[k]
            else:
                for k in range(N_PAR):
                    dp11[k] = dp00[k]
                    dm1[k] = dm0[k]
                    dm0[k] = dfm_[k]
                    dp00[k] = dpff_[k]
                    dp01[k] = du0_[k]
                    dp12[k] = dp02[k]
                    dp02[k] = du2_[k]
                    # dm2, dp22 unchanged
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
            S = p00 + r
            v = y[n, j] - r_star - m0
            invS = 1.0 / S
            llj += -0.5 * (_LOG2PI + math.log(S) + v * v * invS)
            k0 = p00 * invS
            k1 = p01 * invS
            k2 = p02 * invS
            for k in range(N_PAR):
                dS = dp00[k] + (1.0 if k == 5 else 0.0)
                dv = -dm0[k] - (1.0 if k == 1 else 0.0)
                gj[k] += -0.5 * (dS * invS + 2.0 * v * dv * invS - v * v * dS * invS * invS)
                # gain k_i = p_i0 / S; m_i' = m_i + k_i v
                dk0 = (dp00[k] - k0 * dS) * invS
                dk1 = (dp01[k] - k1 * dS) * invS
                dk2 = (dp02[k] - k2 * dS) * invS
                dm0[k] += dk0 * v + k0 * dv
                dm1[k] += dk1 * v + k1 * dv
                dm2[k] += dk2 * v + k2 * dv
                # p_ij' = p_ij - p_i0 p_j0 / S = p_ij - k_i p_j0:  d = dp_ij - dk_i p_j0 - k_i dp_j0
                d00 = dp00[k] - dk0 * p00 - k0 * dp00[k]
                d01 = dp01[k] - dk0 * p01 - k0 * dp01[k]
                d02 = dp02[k] - dk0 * p02 - k0 * dp02[k]
                d11 = dp11[k] - dk1 * p01 - k1 * dp01[k]
                d12 = dp12[k] - dk1 * p02 - k1 * dp02[k]
                d22 = dp22[k] - dk2 * p02 - k2 * dp02[k]
                dp00[k] = d00
                dp01[k] = d01
                dp02[k] = d02
                dp11[k] = d11
                dp12[k] = d12
                dp22[k] = d22
            m0 += k0 * v
            m1 += k1 * v
            m2 += k2 * v
            p11 -= k1 * p01
            p12 -= k1 * p02
            p22 -= k2 * p02
            p01 -= k0 * p01
            p02 -= k0 * p02
            p00 -= k0 * p00
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


class _KalmanBase(Op):
    """Common PyTensor plumbing: outputs (log-likelihood per run, its (R, 6) gradient); gradient gll * grad."""

    __props__ = ()
    n_data = 2  # leading non-differentiable inputs (data, mask, ...)

    def infer_shape(self, node, shapes):
        R = shapes[0][1]
        return [(R,), (R, N_PAR)]

    def pullback(self, inputs, outputs, output_grads):
        from pytensor.gradient import DisconnectedType

        _, g = outputs
        gll = output_grads[0]
        if not isinstance(output_grads[1].type, DisconnectedType):
            raise NotImplementedError("second derivatives of the Kalman likelihood are not implemented")
        if isinstance(gll.type, DisconnectedType):
            gll = pt.zeros_like(outputs[0])
        return [
            *self._data_grads(inputs),
            *[gll * g[:, k] for k in range(N_PAR)],
        ]

    def _data_grads(self, inputs):
        return [
            grad_not_implemented(self, 0, inputs[0], "the Kalman Op is not differentiable w.r.t. the data"),
            grad_not_implemented(self, 1, inputs[1], "the Kalman Op is not differentiable w.r.t. the mask"),
        ]

    def connection_pattern(self, node):
        return [[True, False]] * 2 + [[True, False]] * N_PAR


class KalmanAR2(_KalmanBase):
    """Lag-free recursion: inputs (y, mask, r0, r_star, a, mu, q, r); outputs (log-likelihood, gradient)."""

    def make_node(self, y, mask, r0, r_star, a, mu, q, r):
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask, r0, r_star, a, mu, q, r)]
        return Apply(self, ins, [pt.dvector(), pt.dmatrix()])

    def perform(self, node, inputs, output_storage):
        y, mask, *pars = inputs
        ll, g = ar2_loglik_grad(
            np.ascontiguousarray(y), np.ascontiguousarray(mask), *(np.ascontiguousarray(p) for p in pars)
        )
        output_storage[0][0] = ll
        output_storage[1][0] = g


class KalmanRefresh(_KalmanBase):
    """Refresh-interval lag pattern: inputs (y, mask, K, r0, r_star, a, mu, q, r); outputs (log-likelihood, gradient).

    ``K`` (int64, per run) is data: one compiled graph serves runs of any refresh interval.
    """

    def make_node(self, y, mask, K, r0, r_star, a, mu, q, r):
        data = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask)]
        K = pt.as_tensor_variable(K)
        if K.type.dtype not in integer_dtypes or K.type.ndim != 1:
            raise TypeError(f"K must be an integer vector (one refresh interval per run), got {K.type}")
        pars = [pt.as_tensor_variable(v).astype("float64") for v in (r0, r_star, a, mu, q, r)]
        return Apply(self, [*data, K.astype("int64"), *pars], [pt.dvector(), pt.dmatrix()])

    def perform(self, node, inputs, output_storage):
        y, mask, K, *pars = inputs
        ll, g = refresh_loglik_grad(
            np.ascontiguousarray(y), np.ascontiguousarray(mask), np.ascontiguousarray(K, dtype=np.int64),
            *(np.ascontiguousarray(p) for p in pars),
        )  # fmt: skip
        output_storage[0][0] = ll
        output_storage[1][0] = g

    def _data_grads(self, inputs):
        from pytensor.gradient import DisconnectedType

        return [*super()._data_grads(inputs), DisconnectedType()()]

    def connection_pattern(self, node):
        return [[True, False]] * 2 + [[False, False]] + [[True, False]] * N_PAR


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
