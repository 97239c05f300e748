"""What the four failure modes share: severities, thresholds (documented module constants, not fitted to
any one data set), the :class:`Finding` of one run x mode, and the robust statistics they are judged
on (block means, rolling medians, Kendall / Theil-Sen trends). The modes: :mod:`bayesgrpo.diagnose.failure_modes`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.stats

from bayesgrpo.plan import is_unit_interval

__all__ = ["MODES", "SEVERITIES", "Finding", "degenerate_share", "expected_group_std", "MIN_POINTS"]

MODES = ("reward_hacking", "advantage_degeneracy", "policy_concentration", "dynamical_instability")
SEVERITIES = ("none", "watch", "warning", "critical")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

#: collapse: the rolling median falls by more than this share of the run's range and stays there.
COLLAPSE_DROP = 0.5
#: collapse is "toward the floor" (critical) when the post-collapse level keeps <= this share of the
#: pre-collapse height above the floor.
COLLAPSE_FLOOR_SHARE = 0.25
#: collapse significance: drop / (noise sd * sqrt(1/n_pre + 1/n_post)) must reach this.
COLLAPSE_Z = 5.0
#: oscillation: a reversal needs a swing of at least this share of the rolling mean's range.
SWING_SHARE = 0.5
#: sustained oscillation: autocorrelation trough / peak magnitude.
ACF_OSC = 0.3
#: runs with fewer finite reward points are not assessed: the trend tests work on block means, so a
#: diagnosis needs more points than a forecast (:data:`bayesgrpo.plan.MIN_POINTS`)
MIN_POINTS = 8
#: trend tests: one-sided significance level on block means.
ALPHA = 0.01
#: degeneracy thresholds on the late share of zero-variance groups.
DEGEN_WARN, DEGEN_CRIT = 0.5, 0.8
#: coupling: C_w / C_ref below these -> watch / warning (critical if eval falls while train rises).
COUPLING_WATCH, COUPLING_WARN = 0.5, 0.25


@dataclass
class Finding:
    """One run x failure mode verdict."""

    run_id: str
    mode: str
    severity: str = "none"
    onset_step: int | None = None
    evidence: str = ""
    missing: tuple[str, ...] = ()
    assessed: bool = True
    score: float = float("nan")
    details: dict = field(default_factory=dict)

    def raise_to(self, severity: str, onset=None, score=None):
        if _RANK[severity] > _RANK[self.severity]:
            self.severity = severity
            if onset is not None:
                self.onset_step = int(onset)
        elif onset is not None and self.onset_step is None and severity != "none":
            self.onset_step = int(onset)
        if score is not None and (np.isnan(self.score) or score > self.score):
            self.score = float(score)

    def to_row(self) -> dict:
        return {
            "run_id": self.run_id,
            "mode": self.mode,
            "severity": self.severity,
            "onset_step": self.onset_step,
            "evidence": self.evidence,
            "missing": ", ".join(self.missing),
            "assessed": self.assessed,
            "score": self.score,
        }


# ----------------------------------------------------------------------------- helpers
def degenerate_share(p, group_size):
    """Predicted share of groups whose ``G`` 0/1 rewards are all equal: ``p^G + (1-p)^G``.

    ``p`` (array) is the per-prompt success probability; passing the batch-mean reward gives a lower
    bound on ``E_q[p_q^G + (1-p_q)^G]`` (the function is convex in ``p``).
    """
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    g = np.asarray(group_size, dtype=float)
    return p**g + (1.0 - p) ** g


def expected_group_std(p, group_size, *, given_nondegenerate: bool = False) -> float:
    """Expected within-group s.d. (unbiased, as ``torch.std``) of ``G`` Bernoulli(p) rewards.

    ``sum_k Binom(k; G, p) sqrt(k (G - k) / (G (G - 1)))``; with ``given_nondegenerate`` the
    expectation over groups that are not all-equal (divides by ``1 - p^G - (1-p)^G``).
    """
    g = int(round(float(group_size)))
    p = float(np.clip(p, 0.0, 1.0))
    k = np.arange(g + 1)
    w = scipy.stats.binom.pmf(k, g, p)
    e = float(np.sum(w * np.sqrt(k * (g - k) / (g * (g - 1.0)))))
    if given_nondegenerate:
        nd = 1.0 - float(degenerate_share(p, g))
        if nd <= 1e-12:
            # limit p -> 0 or 1: a non-degenerate group has exactly one odd reward
            return float(np.sqrt((g - 1.0) / (g * (g - 1.0))))
        return e / nd
    return e


def _sustained_onset(mask) -> int | None:
    """Start of the final run of True that lasts to the end (else the first True; None if none)."""
    mask = np.asarray(mask, bool)
    if not mask.any():
        return None
    if mask[-1]:
        f = np.flatnonzero(~mask)
        return int(f[-1] + 1) if f.size else 0
    return int(np.flatnonzero(mask)[0])


def _rolling_median(y, w):
    return pd.Series(y).rolling(w, center=True, min_periods=1).median().to_numpy()


def _window(n, frac=0.08, lo=3):
    w = max(lo, int(round(frac * n)))
    return w + (1 - w % 2)  # odd


def _blocks(x, y, n_blocks):
    """Block means of (x, y) over ``n_blocks`` consecutive chunks of the finite points."""
    m = np.isfinite(y)
    x, y = np.asarray(x, float)[m], np.asarray(y, float)[m]
    if y.size == 0:
        return x, y
    k = int(max(2, min(n_blocks, y.size)))
    xs = [c.mean() for c in np.array_split(x, k)]
    ys = [c.mean() for c in np.array_split(y, k)]
    return np.array(xs), np.array(ys)


def _trend(x, y, n_blocks=10):
    """(Kendall tau, one-sided p for increase, one-sided p for decrease, Theil-Sen slope) on block means."""
    bx, by = _blocks(x, y, n_blocks)
    if by.size < 4 or np.ptp(by) == 0:
        return 0.0, 1.0, 1.0, 0.0
    tau, p = scipy.stats.kendalltau(bx, by)
    slope = scipy.stats.theilslopes(by, bx)[0]
    if not np.isfinite(tau):
        return 0.0, 1.0, 1.0, 0.0
    p_up = p / 2 if tau > 0 else 1 - p / 2
    p_dn = p / 2 if tau < 0 else 1 - p / 2
    return float(tau), float(p_up), float(p_dn), float(slope)


def _present(df, col):
    return col in df.columns and df[col].notna().sum() >= 3


def _head_tail(y, frac=0.2):
    y = y[np.isfinite(y)]
    k = max(2, int(round(frac * y.size)))
    return float(np.mean(y[:k])), float(np.mean(y[-k:]))


def _is_unit(y, ceiling):
    """A 0-1 reward: declared by a ceiling of 1 on a non-negative reward, or every value in [0, 1]."""
    y = y[np.isfinite(y)]
    declared = ceiling is not None and float(ceiling) == 1.0 and is_unit_interval(np.clip(y, None, 1.0))
    return declared or is_unit_interval(y)
