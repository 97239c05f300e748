"""Compiled Kalman-filter likelihood Ops for recursion (1), with their exact gradients.

Two kernels (:mod:`bayesgrpo.models.kalman_adjoint`: one forward filter and one backward sweep give the
log-likelihood and its exact gradient with respect to the six per-run parameters ``(r0, r_star, a, mu,
q = sigma_p^2, r = sigma_m^2)``), wrapped here as PyTensor Ops. They are compiled once by numba
(``cache=True``) and registered with PyTensor's numba linker, so nutpie calls them without Python
overhead. The forward-mode building blocks below (:func:`start2`, :func:`shift2`, :func:`update2`,
:func:`reward2`) serve the extended filters of :mod:`bayesgrpo.models.degeneracy` and :mod:`bayesgrpo.models.spread`.

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

from bayesgrpo.models.kalman_adjoint import (
    _LOG2PI,
    N_PAR,
    ar2_adjoint_loglik_grad,
    refresh_adjoint_loglik_grad,
)

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
    "start2",
    "reward2",
    "shift2",
]

# salt for PyTensor's numba cache key: a change to this module must not reuse a stale compiled kernel
_KERNEL_SOURCES = (Path(__file__), Path(__file__).with_name("kalman_adjoint.py"))
_CACHE_SALT = zlib.crc32(b"".join(p.read_bytes() for p in _KERNEL_SOURCES)) & 0x7FFFFFFF


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


#: lag-free log-likelihood per run (R,) and its gradient (R, 6) for y, mask of shape (T, R) (the adjoint kernel)
ar2_loglik_grad = ar2_adjoint_loglik_grad
#: log-likelihood per run and its gradient with d_n = n mod K_j: runs with K = 1 use the 2-state lag-free
#: filter (5 instead of 9 state moments, the same likelihood to rounding: :func:`refresh3_loglik_grad`). K = 1
#: is the common case (most runs log no refresh interval); the dispatch is per run, so one Op (and one compiled
#: model) serves every K. Aliases, not wrappers: numba's cache of a wrapper would not see a change of the kernel.
refresh_loglik_grad = refresh_adjoint_loglik_grad


def refresh3_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r):
    """As :func:`refresh_loglik_grad`, but the 3-state filter for every run, K = 1 included (tests, benchmark)."""
    return refresh_adjoint_loglik_grad(y, mask, K, r0, r_star, a, mu, q, r, True)


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
        Log-likelihood per run; its gradient w.r.t. the parameters is exact (one backward sweep in the
        kernel, :mod:`bayesgrpo.models.kalman_adjoint`).
    """
    ll, _ = _REFRESH_OP(y, mask, K, r0, r_star, a, mu, sigma_p**2, sigma_m**2)
    return ll
