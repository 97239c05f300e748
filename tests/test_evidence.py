"""The evidence of a model (inference.evidence): Laplace log marginal likelihood and the block evidence,
against closed forms; and the compiled model's log density (sampling.log_density) on a real graph."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bayesgrpo.inference.evidence import EIG_MIN, block_evidence, laplace, mask_after


def gaussian_logp(m, S, c=0.0):
    P = np.linalg.inv(S)

    def f(x):
        d = np.asarray(x) - m
        return c - 0.5 * d @ P @ d, -(P @ d)

    return f


def test_laplace_is_exact_for_a_gaussian_density():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4))
    S = A @ A.T + 0.5 * np.eye(4)
    m = rng.standard_normal(4)
    res = laplace(gaussian_logp(m, S, c=-7.25), np.zeros(4))
    exact = -7.25 + 2 * math.log(2 * math.pi) + 0.5 * np.linalg.slogdet(S)[1]
    assert res.converged
    assert res.log_z == pytest.approx(exact, abs=1e-6)
    np.testing.assert_allclose(res.mode, m, atol=1e-3)


def _normal_model(y, prior_sd=2.0, sd=0.5):
    """theta ~ N(0, prior_sd^2), y_i ~ N(theta, sd^2): log p(y, theta) and its gradient in theta."""

    def f(x):
        t = float(x[0])
        lp = stats.norm.logpdf(t, 0, prior_sd) + stats.norm.logpdf(y, t, sd).sum()
        g = -t / prior_sd**2 + ((y - t) / sd**2).sum()
        return float(lp), np.array([g])

    return f


def test_block_evidence_is_the_exact_predictive_density_of_the_later_observations():
    rng = np.random.default_rng(0)
    y = 1.3 + 0.5 * rng.standard_normal(12)
    m = 8
    got, full, _first = block_evidence(_normal_model(y), _normal_model(y[:m]), np.zeros(1))
    # closed form: the marginal of y is N(0, sd^2 I + prior_sd^2 11'), the block conditional follows
    cov = 0.25 * np.eye(12) + 4.0 * np.ones((12, 12))
    exact_full = stats.multivariate_normal(np.zeros(12), cov).logpdf(y)
    exact_first = stats.multivariate_normal(np.zeros(m), cov[:m, :m]).logpdf(y[:m])
    assert full.log_z == pytest.approx(exact_full, abs=1e-6)
    assert got == pytest.approx(exact_full - exact_first, abs=1e-6)
    # and it is the posterior predictive of the later block given the first part
    C11, C12, C22 = cov[:m, :m], cov[:m, m:], cov[m:, m:]
    mean = C12.T @ np.linalg.solve(C11, y[:m])
    cond = C22 - C12.T @ np.linalg.solve(C11, C12)
    assert got == pytest.approx(stats.multivariate_normal(mean, cond).logpdf(y[m:]), abs=1e-6)


def test_laplace_of_a_skewed_density_is_close_and_a_flat_direction_is_regularised():
    # log-gamma(shape 30) on the log scale: nearly Gaussian, integral known (Gamma function)
    a = 30.0

    def f(x):
        u = float(x[0])
        return a * u - math.exp(u), np.array([a - math.exp(u)])

    res = laplace(f, np.zeros(1))
    assert res.log_z == pytest.approx(math.lgamma(a), abs=0.01)
    # a density constant in one direction: counted with curvature EIG_MIN, not a division by zero
    flat = laplace(lambda x: (-0.5 * x[0] ** 2, np.array([-x[0], 0.0])), np.zeros(2))
    assert flat.log_det == pytest.approx(math.log(EIG_MIN), abs=1e-6)


def test_laplace_outside_the_support_is_minus_infinity():
    res = laplace(lambda x: (-math.inf, np.zeros(1)), np.zeros(1))
    assert res.log_z == -math.inf and not res.converged


def test_mask_after_keeps_the_first_share_of_each_runs_observed_steps():
    mask = np.array([[1, 0], [1, 1], [0, 1], [1, 1], [1, 1], [1, 0]], dtype=float)
    out = mask_after(mask, 0.5)
    np.testing.assert_array_equal(out[:, 0], [1, 1, 0, 0, 0, 0])  # 4 observed -> first 2 kept
    np.testing.assert_array_equal(out[:, 1], [0, 1, 1, 0, 0, 0])
    assert mask[5, 0] == 1  # the input is not modified


TINY = """
import numpy as np
import pymc as pm

def build():
    with pm.Model() as m:
        y = pm.Data("y", np.zeros(6))
        mu = pm.Normal("mu", 0.0, 2.0)
        sd = pm.LogNormal("sd", 0.0, 0.3)
        pm.Normal("obs", mu, sd, observed=y)
    return m
"""


@pytest.mark.slow
def test_log_density_of_a_compiled_model_carries_every_constant_and_jacobian():
    """The Laplace evidence on the compiled C callback equals a quadrature of the model's own density:
    the log density includes the normalising constants and the log-transform's Jacobian."""
    from scipy import integrate

    from bayesgrpo.inference import sampling

    ns: dict = {}
    exec(TINY, ns)
    compiled = sampling.compile_model(None, ns["build"])
    y = np.array([0.3, 1.1, 0.7, 1.6, 0.9, 1.2])
    lp = sampling.log_density(compiled, {"y": y}, required=("y",))
    x0 = lp.initial_point(0)
    res = laplace(lp, x0)

    def joint(log_sd, mu):
        sd = math.exp(log_sd)
        return math.exp(stats.norm.logpdf(mu, 0, 2) + stats.lognorm.logpdf(sd, 0.3) + log_sd
                        + stats.norm.logpdf(y, mu, sd).sum())  # fmt: skip

    z, _ = integrate.dblquad(joint, -4, 4, -2.0, 1.5)
    assert res.converged and lp.n_calls > 0
    assert res.log_z == pytest.approx(math.log(z), abs=0.1)  # Laplace on a 2-d posterior of 6 points
    # the callback's value at a point is the joint density there (x = (mu, log sd) in nutpie's order)
    names = compiled.shape_info[0]
    x = np.zeros(2)
    x[names.index("mu")] = 0.8
    x[next(i for i, n in enumerate(names) if n.startswith("sd"))] = -0.4
    assert lp(x)[0] == pytest.approx(math.log(joint(-0.4, 0.8)), abs=1e-7)  # fastmath rounding
