"""The stop step: ONE definition, used by forecasts, budgets, backtest truth and the dynamics core.

Definition
----------
For a mean (noise-free) trajectory ``R_0, R_1, ...`` with start ``R_0`` and plateau ``R*``, write
``x_n = (R_n - R*) / (R_0 - R*)`` (``x_0 = 1``; the unrealised share of the gain). The **stop step**
is the first step ``n`` after which the trajectory *stays* within the band of the plateau that holds
the last ``1 - fraction`` of the gain::

    stop = min { n : |x_m| <= 1 - fraction  for every m >= n }      (fraction = 0.95 by default)

Why "stays within the band" and not "first reaches ``fraction`` of the gain": the two agree for
over- and critically damped trajectories (they approach the plateau monotonically), but an
underdamped trajectory first *crosses* 95% of its gain on its way to an overshoot and then rings
through the band; stopping at that first crossing stops at a reward that is not yet the plateau's
(e.g. a = 0.05, mu = 0.9: first crossing of 95% after 8 steps, first inside the band after 21,
settled for good after 57). The settling time is the
control-theory notion of "has arrived", it is right in every regime, and for the overdamped limit
``R* - (R* - R0) e^{-n/tau}`` it is ``ceil(tau ln(1 / (1 - fraction)))`` (3 tau for 95%).

A gain too small to matter has nothing to wait for: with the run's reward scale ``S`` (the unit the
forecast's normalised rewards are measured in) the band is ``(1 - fraction) max(|R_0 - R*|, S)``, in
``x`` units ``|x| <= (1 - fraction) max(1, S / |R_0 - R*|)`` (pass ``gain = (R* - R_0) / S``). For a
gain of at least one scale unit -- every run that rises -- this is the band above; a run whose whole
gain is below ``(1 - fraction) S`` (a constant curve: 0.5 for 200 steps) has settled at its start.

Trajectories that have not settled by the end of the given path are **censored**: the returned
index is the path length and ``reached`` is False.
"""

from __future__ import annotations

import numpy as np

__all__ = ["settling_index", "stop_steps", "band", "DEFAULT_STOP_FRACTION"]

#: share of the gain the stop step has realised (physics.md section 8 item 10: 95%)
DEFAULT_STOP_FRACTION = 0.95


def band(fraction: float, gain=None):
    """Half-width of the settling band in ``x`` units: ``1 - fraction``, widened to
    ``(1 - fraction) / |gain|`` for a gain below one scale unit (module docstring)."""
    thr = 1.0 - float(fraction)
    if gain is None:
        return thr
    g = np.abs(np.asarray(gain, dtype=float))
    with np.errstate(divide="ignore"):
        return thr * np.maximum(1.0, np.where(g > 0, 1.0 / g, np.inf))


def settling_index(x, *, fraction: float = DEFAULT_STOP_FRACTION, gain=None) -> tuple[np.ndarray, np.ndarray]:
    """First index after which ``|x|`` stays within the band (:func:`band`), along the last axis.

    Parameters
    ----------
    x : array_like, shape (..., n)
        Normalised deviations from the plateau, ``x[..., 0] = 1`` (see module docstring). NaN counts
        as outside the band.
    fraction : float in (0, 1]
    gain : array_like, shape (...), optional
        ``(R* - R_0) / S``, the gain in units of the run's reward scale (default: the band is
        ``1 - fraction`` whatever the gain).

    Returns
    -------
    index : ndarray of int, shape (...)
        The stop index; ``n`` (the path length) when the path ends outside the band (censored).
    reached : ndarray of bool, shape (...)
        False where censored.
    """
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    thr = band(fraction, gain)
    outside = ~(np.abs(x) <= np.asarray(thr)[..., None])
    any_out = outside.any(axis=-1)
    last_out = n - 1 - np.argmax(outside[..., ::-1], axis=-1)
    index = np.where(any_out, last_out + 1, 0).astype(np.int64)
    reached = index < n
    return index, reached


def _recursion(a, mu, n_steps: int, refresh_interval: int | None):
    """``(batch shape, iterator of (n, x_{n+1}))`` of recursion (1) from ``x_0 = x_{-1} = 1``, streamed
    (memory O(batch)); the lag ``d_n = n mod K`` of a refresh interval ``K > 1``."""
    a = np.asarray(a, dtype=float)
    mu = np.asarray(mu, dtype=float)
    shape = np.broadcast_shapes(a.shape, mu.shape)
    a = np.broadcast_to(a, shape)
    mu = np.broadcast_to(mu, shape)
    K = int(refresh_interval) if refresh_interval and refresh_interval > 1 else 1

    def steps():
        x_prev = np.ones(shape)
        x = np.ones(shape)
        anchor = x
        for n in range(n_steps):
            if K > 1 and n % K == 0:
                anchor = x
            x_new = (1.0 + mu) * x - mu * x_prev - a * (anchor if K > 1 else x)
            x_prev, x = x, x_new
            yield n, x

    return shape, steps()


def stop_steps(
    a, mu, *, n_steps: int, fraction: float = DEFAULT_STOP_FRACTION, refresh_interval: int | None = None, gain=None
) -> tuple[np.ndarray, np.ndarray]:
    """Stop step (in steps from the start) of recursion (1) per draw, censored at ``n_steps``.

    Streams the recursion (memory O(draws), whatever ``n_steps``) and applies the same rule as
    :func:`settling_index` on the deterministic paths of the recursion (``gain``: see there;
    ``bench/physics_reference.py::deviation_paths`` keeps the whole paths). Returns ``(steps,
    reached)``; ``steps`` equals ``n_steps`` where the mean trajectory has not settled within
    ``n_steps`` steps.
    """
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if gain is not None:  # the band may differ per draw: the recursion runs on the common shape
        shape = np.broadcast_shapes(np.shape(a), np.shape(mu), np.shape(gain))
        a, mu = np.broadcast_to(a, shape), np.broadcast_to(mu, shape)
    shape, steps = _recursion(a, mu, n_steps, refresh_interval)
    thr = np.broadcast_to(band(fraction, gain), shape)
    last_out = np.where(thr < 1.0, 0, -1).astype(np.int64)  # x_0 = 1 lies outside a band narrower than 1
    with np.errstate(over="ignore", invalid="ignore"):
        for n, x in steps:
            last_out[~(np.abs(x) <= thr)] = n + 1
    index = last_out + 1
    reached = index <= n_steps
    return np.minimum(index, n_steps), reached
