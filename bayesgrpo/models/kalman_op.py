"""A compiled Kalman-filter likelihood Op for the lag-free recursion (D = 2), with its exact gradient.

Why a hand-written Op rather than ``pytensor.scan``: a scan version of this filter (as
:func:`bayesgrpo.models.kalman.filter_pytensor` for the lagged case) is correct, but its gradient graph costs minutes to
compile with numba and ~2 ms per gradient evaluation for 300 steps in JAX (per-iteration overhead of
the loop); NUTS needs thousands of evaluations per run. This kernel carries the forward-mode
sensitivities of the filter state with respect to the six per-run parameters
``(r0, r_star, a, mu, q = sigma_p^2, r = sigma_m^2)`` through the same recursion, so one pass gives
the log-likelihood and its exact gradient; it is compiled once by numba (``cache=True``) and
registered with PyTensor's numba linker, so nutpie calls it without Python overhead.

The numpy filter in :mod:`bayesgrpo.models.kalman` is the reference; tests check values and gradients
(finite differences) against it.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

__all__ = ["ar2_loglik_grad", "kalman_ar2_loglik", "KalmanAR2"]

_LOG2PI = math.log(2.0 * math.pi)
N_PAR = 6  # r0, r_star, a, mu, q, r


@numba.njit(cache=True, fastmath=False)
def ar2_loglik_grad(y, mask, r0, r_star, a, mu, q, r):  # pragma: no cover - compiled
    """Log-likelihood per run (R,) and its gradient (R, 6) for y, mask of shape (T, R)."""
    T, R = y.shape
    ll = np.zeros(R)
    g = np.zeros((R, N_PAR))
    dm0 = np.zeros(N_PAR)
    dm1 = np.zeros(N_PAR)
    dp00 = np.zeros(N_PAR)
    dp01 = np.zeros(N_PAR)
    dp11 = np.zeros(N_PAR)
    dn0 = np.zeros(N_PAR)
    dfp0 = np.zeros(N_PAR)
    dfp1 = np.zeros(N_PAR)
    for j in range(R):
        f0 = 1.0 + mu[j] - a[j]
        f1 = -mu[j]
        x0 = r0[j] - r_star[j]
        m0 = x0
        m1 = x0
        p00 = 0.0
        p01 = 0.0
        p11 = 0.0
        for k in range(N_PAR):
            dm0[k] = 0.0
            dm1[k] = 0.0
            dp00[k] = 0.0
            dp01[k] = 0.0
            dp11[k] = 0.0
        dm0[0] = 1.0
        dm0[1] = -1.0
        dm1[0] = 1.0
        dm1[1] = -1.0
        llj = 0.0
        gj = g[j]
        for n in range(T):
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
                n00 = fp0 * f0 + fp1 * f1 + q[j]
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
                S = p00 + r[j]
                v = y[n, j] - r_star[j] - m0
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
        ll[j] = llj
    return ll, g


class KalmanAR2(Op):
    """Outputs (log-likelihood per run, its gradient w.r.t. (r0, r_star, a, mu, q, r) per run)."""

    __props__ = ()

    def make_node(self, y, mask, r0, r_star, a, mu, q, r):
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (y, mask, r0, r_star, a, mu, q, r)]
        outs = [pt.dvector(), pt.dmatrix()]
        return Apply(self, ins, outs)

    def perform(self, node, inputs, output_storage):
        y, mask, *pars = inputs
        ll, g = ar2_loglik_grad(np.ascontiguousarray(y), np.ascontiguousarray(mask), *(np.ascontiguousarray(p) for p in pars))
        output_storage[0][0] = ll
        output_storage[1][0] = g

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
            grad_not_implemented(self, 0, inputs[0], "the Kalman Op is not differentiable w.r.t. the data"),
            grad_not_implemented(self, 1, inputs[1], "the Kalman Op is not differentiable w.r.t. the mask"),
            *[gll * g[:, k] for k in range(N_PAR)],
        ]

    def connection_pattern(self, node):
        return [[True, False]] * 2 + [[True, False]] * N_PAR


def _register_numba():
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    @register_funcify_default_op_cache_key(KalmanAR2)
    def _funcify(op, node=None, **kwargs):
        @numba.njit
        def kalman_ar2(y, mask, r0, r_star, a, mu, q, r):
            return ar2_loglik_grad(y, mask, r0, r_star, a, mu, q, r)

        return kalman_ar2


_register_numba()
_OP = KalmanAR2()


def kalman_ar2_loglik(y, mask, *, r0, r_star, a, mu, sigma_p, sigma_m):
    """Log-likelihood per run of the lag-free recursion (PyTensor expression with exact gradient)."""
    ll, _ = _OP(y, mask, r0, r_star, a, mu, sigma_p**2, sigma_m**2)
    return ll
