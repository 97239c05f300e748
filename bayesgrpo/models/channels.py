"""The spread channels' array on a run's model grid: its layout and its assembly (numpy only).

Kept apart from :mod:`bayesgrpo.models.spread` (the Beta-binomial moments and the filter's channel update,
numba and the PyTensor Op module) so that preparing a forecast's arrays -- every forecast, with or without
channels -- imports neither PyTensor nor the numba kernels: a warm process loads its compiled model from the
disk cache without importing PyMC or PyTensor (``tests/test_fleet.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_GROUP_SIZE", "CHANNEL_POINTS", "CH_ROWS", "N_CH", "channel_array", "CH_YS", "CH_MS", "CH_YZ",
           "CH_MZ", "CH_NS", "CH_NZ", "CH_YR", "CH_BR", "CH_CRS", "CH_CRZ", "CH_CSZ"]  # fmt: skip

#: G when the metadata do not give it: TRL's default ``num_generations``
DEFAULT_GROUP_SIZE = 8
#: at most this many channel points per run: the logged values are averaged over consecutive logged steps
#: (bins) so that a run keeps at most this many (the cost of a channel update is ~3 reward steps'; the
#: state moves little within a bin, and a bin's mean is closer to Gaussian than one step's)
CHANNEL_POINTS = 24
#: rows of the channel array (C, T, R) on the model's grid. A bin of consecutive logged points is placed at
#: the grid step of its middle point: the mean normalised spread and its mask, the mean zero-std share and
#: its mask, the groups behind each (N x points), the mean normalised reward of the bin's points that carry a
#: channel and their number (the channels are conditioned on its noise: they come from the same groups), and
#: the correlation scales of the pairs (shared points: b_rs / sqrt(b_r b_s), b_rz / sqrt(b_r b_z),
#: b_sz / sqrt(b_s b_z)). Unbinned (one point per bin): the step's own reward, scales 1.
CH_ROWS = ("spread", "spread_mask", "zero_std", "zero_std_mask", "spread_groups", "zero_std_groups", "reward",
           "reward_points", "corr_reward_spread", "corr_reward_zero_std", "corr_spread_zero_std")  # fmt: skip
CH_YS, CH_MS, CH_YZ, CH_MZ, CH_NS, CH_NZ, CH_YR, CH_BR, CH_CRS, CH_CRZ, CH_CSZ = range(11)
N_CH = len(CH_ROWS)


def channel_array(steps, reward, spread, zero_std, *, s0: int, T: int, groups: float, loc: float, scale: float,
                  points: int | None = CHANNEL_POINTS) -> np.ndarray:  # fmt: skip
    """The channel array (:data:`CH_ROWS`, T) of one run on its model grid (grid index = step - s0).

    ``steps``, ``reward`` (the run's units), ``spread`` (``reward_std``, its units) and ``zero_std``
    (``frac_reward_zero_std``) per logged point, NaN where a channel is not logged; ``groups`` the groups
    behind one logged point. The logged points that carry a channel are split into consecutive bins of
    ``b = ceil(K / points)`` points (``points=None``: one point per bin); a bin sits at its middle point's
    step with the means of its channels (the spread normalised by ``scale``) and of the rewards of its points
    (normalised by ``loc``, ``scale``), the groups behind each mean, and the correlation scales of the pairs.
    """
    steps = np.asarray(steps, dtype=np.int64)
    rew, sp, fz = (np.asarray(v, dtype=float) for v in (reward, spread, zero_std))
    out = np.zeros((N_CH, T))
    has_s, has_z = np.isfinite(sp), np.isfinite(fz)
    idx = np.flatnonzero(has_s | has_z)
    if idx.size == 0:
        return out
    b = 1 if points is None else max(1, -(-idx.size // int(points)))
    for start in range(0, idx.size, b):
        pts = idx[start : start + b]
        n = int(steps[pts[len(pts) // 2]] - s0)
        if not 0 <= n < T:
            continue
        ps, pz = pts[has_s[pts]], pts[has_z[pts]]
        pr = pts[np.isfinite(rew[pts]) & (has_s[pts] if ps.size else has_z[pts])]
        if ps.size:
            out[CH_YS, n], out[CH_MS, n], out[CH_NS, n] = sp[ps].mean() / scale, 1.0, groups * ps.size
        if pz.size:
            out[CH_YZ, n], out[CH_MZ, n], out[CH_NZ, n] = fz[pz].mean(), 1.0, groups * pz.size
        if pr.size:
            out[CH_YR, n], out[CH_BR, n] = ((rew[pr] - loc) / scale).mean(), float(pr.size)
        both = lambda a, c: np.intersect1d(a, c).size / np.sqrt(a.size * c.size) if a.size and c.size else 0.0  # noqa: E731
        out[CH_CRS, n], out[CH_CRZ, n], out[CH_CSZ, n] = both(pr, ps), both(pr, pz), both(ps, pz)
    return out
