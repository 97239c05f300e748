"""Mean-field dynamics of a GRPO reward curve (pure numpy / scipy; no PyMC).

Implements ``/work/shared/design/physics.md`` sections 2-5:

* Section 2 -- the discrete mean-field recursion (1)

  .. math::

      x_{n+1} = (1+\\mu) x_n - \\mu x_{n-1} - a x_{n-d_n} + \\varepsilon_n,
      \\qquad \\varepsilon_n \\sim N(0, \\sigma_p^2),

  with :math:`x_n = R_n - R^*`, :math:`x_0 = R_0 - R^*` and **the whole history before
  the start equal to the initial state**: :math:`x_{-j} = x_0` for every :math:`j \\ge 1`
  (zero initial velocity; a lagged reference before step 0 sees the initial policy).
  With the refresh pattern :math:`d_n = n \\bmod K` the reference ``n - d_n`` is never
  negative, so the convention only matters for a constant lag.
  Its companion matrix (:func:`transition_matrix`) is what the package uses of it here; the
  simulator of the recursion lives with the research (``bench/physics_reference.py``).
* Section 3 -- the continuum coefficients, regimes, closed-form mean trajectories and the time to a
  fraction of the gain: no command uses them, so they are in ``bench/physics_reference.py`` too.
* Sections 4-5 -- exact stability: :mod:`bayesgrpo.physics.stability`.

All functions take their first argument positionally and everything else by keyword.
"""

from __future__ import annotations

import numpy as np

__all__ = ["transition_matrix"]


# ----------------------------------------------------------------------------- helpers
def _check_momentum(momentum) -> np.ndarray:
    mu = np.asarray(momentum, dtype=float)
    if np.any(~np.isfinite(mu)) or np.any(mu < 0) or np.any(mu >= 1):
        raise ValueError(f"momentum must lie in [0, 1); got {momentum!r}")
    return mu


def _check_a(a, *, allow_zero: bool = False) -> np.ndarray:
    arr = np.asarray(a, dtype=float)
    bad = (arr < 0) if allow_zero else (arr <= 0)
    if np.any(~np.isfinite(arr)) or np.any(bad):
        cond = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"a (= learning_rate * curvature) must be finite and {cond}; got {a!r}")
    return arr


def _check_int(name: str, value, *, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return value


# ----------------------------------------------------------------------------- the companion matrix
def transition_matrix(*, a, momentum, lag: int = 0) -> np.ndarray:
    """Companion (state-transition) matrix of recursion (1) with a constant lag.

    State ``s_n = [x_n, x_{n-1}, ..., x_{n-D}]`` with ``D = max(lag, 1)``, so that
    ``s_{n+1} = F s_n + [eps_n, 0, ..., 0]``. For ``lag = 0`` (the Kalman-filter case,
    physics.md section 2)::

        F = [[1 + mu - a, -mu],
             [1,           0 ]]

    The process-noise covariance is ``Q = sigma_p^2 e_0 e_0^T`` and the initial state is
    ``[x_0, x_0, ...]`` (history = initial state); the observation is
    ``y_n = R* + [1, 0, ...] s_n + e_n``.

    Parameters
    ----------
    a : float
        Stiffness (>= 0).
    momentum : float
        ``mu`` in [0, 1).
    lag : int, default 0
        Constant lag ``d``.

    Returns
    -------
    numpy.ndarray, shape (D+1, D+1)
    """
    a = float(_check_a(a, allow_zero=True))
    mu = float(_check_momentum(momentum))
    d = _check_int("lag", lag, minimum=0)
    dim = max(d, 1) + 1
    f = np.zeros((dim, dim))
    f[0, 0] += 1.0 + mu
    f[0, 1] += -mu
    f[0, d] += -a
    f[np.arange(1, dim), np.arange(dim - 1)] = 1.0
    return f
