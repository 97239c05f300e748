"""The within-group reward spread as a second observation channel of the degeneracy state.

What the logs measure (physics.md section 10)
---------------------------------------------
TRL logs per optimizer step ``reward_std``, the mean over the batch's groups of each group's sample
standard deviation (``torch.std``, ddof = 1), and ``frac_reward_zero_std``, the share of groups whose G
rewards are all equal. Both are functions of the same latent state as the reward.

**0/1 rewards.** A prompt of pass rate ``p`` sampled ``G`` times has ``k ~ Binomial(G, p)`` successes; the
group's sample sd is ``s_k = sqrt(k (G - k) / (G (G - 1)))`` and the group is degenerate iff ``k`` is 0
or ``G``. Over the prompts, at mean reward (pass rate) ``m``, the pass rates follow ``Beta(m nu, (1 - m)
nu)`` (``nu``: concentration, one constant per run; small ``nu`` = very unequal difficulty), so ``k`` is
Beta-binomial(G, m nu, (1 - m) nu)::

    P(k) = C(G, k) prod_{i<k} (m nu + i) prod_{i<G-k} ((1 - m) nu + i) / prod_{i<G} (nu + i)
    E[reward_std | m, nu, G]      = sum_k P(k) s_k
    E[s^2 | m, nu]                = m (1 - m) nu / (nu + 1)          (G-free: s^2 is unbiased)
    E[frac_zero_std | m, nu, G]   = P(0) + P(G)

exact, a finite sum (no special functions), differentiable in ``m`` and ``nu``: :func:`bb_moments` gives
them with their first and second derivatives. Checked on the testbed, which knows every prompt's rate
(``bench/results/spread_validation.md``): the Beta-binomial algebra is right (a Beta fitted to a step's
rates gives the logged channels to 0.1-0.2 of their sampling sd), but the nu of a run's prompts is not
constant -- it moves by a factor ~10 over a run while the prompts' logit spread moves by ~1.4 (a
logit-normal family would be the better one-constant model) -- so one nu per run errs by ~0.8 sampling sd
of one logged step; that error is part of the channel's noise below. **Noise.** A logged value is the
mean over the ``N`` groups behind it (metadata ``prompts_per_step``, else ``batch_size / group_size``, per
step, times the logging interval: TRL averages what it logs over the steps since the last log),
independent given the state, so its variance is
``Var(s_k) / N`` resp. ``E(1 - E) / N`` (plus the logging resolution :data:`SPREAD_FLOOR` and the
model's own error :data:`MODEL_SD_SPREAD`, :data:`MODEL_SD_ZERO`, measured on the testbed): from G and N
and a measured constant, not a free parameter. The reward, the spread and the zero-std share of a step
are computed from the SAME groups, so their noises are correlated -- strongly: near the floor a success makes ``k = 1``,
raising the reward and the spread and lowering the zero-std share together (Beta-binomial correlations
0.5-0.9 between reward and spread at ``m < 0.1``, -0.9 to -1 between spread and zero-std share). The
joint measurement of a step therefore uses the Beta-binomial correlation matrix (shrunk by
:data:`SHRINK` toward independence, for rounding and misspecification; with the scale of the reward's
noise from the model's ``sigma_m``): treating the three as independent would count the same groups
two or three times.

**Rewards in [L, U] that are sums of terms** (format + correctness, scores in [0, 10], ...). Write
``m = (R - L) / (U - L)``. For any reward in [L, U] the within-group variance obeys the Bhatia-Davis
bound ``Var(r | q) <= (U - R_q)(R_q - L)``, with equality iff each completion scores L or U; averaged
over prompts, ``E[s^2] = phi (U - L)^2 m (1 - m)`` with ``0 <= phi <= 1`` the share of the bound the
run realises. For 0/1 rewards ``phi = nu / (nu + 1)`` (the prompts' spread of difficulty); a sum of
terms realises less of it (a completion rarely gets all terms or none), which the same per-run constant
absorbs. What survives is what the forecast needs: the spread vanishes where every group is degenerate,
at the floor (and at the ceiling), linearly in ``R - L`` just above the floor (``E[s]`` and ``E[s^2]``
both) -- so its level against the reward's locates the floor, i.e. the degeneracy state
``u = (R - L) / (R* - L)`` that sets the slow start. The channel
keeps the Beta-binomial form with the *effective* ``nu = phi / (1 - phi)`` per run (its mean and noise
are those of a 0/1 reward with the same mean and the same realised share; for a sum of terms the
Beta-binomial noise is an upper bound), and:

* **known bounds** (metadata ``reward_min``/``reward_max``, or a 0-1 rate): ``L``, ``U`` are the bounds;
* **unknown bounds**: ``L`` is the model's floor (the degeneracy kinds' ``L``: the level where every
  group is degenerate) and ``U = R* + w (R* - L)``, a per-run headroom ``w > 0`` above the plateau, so
  ``m = u / (1 + w)``. ``nu`` and ``w`` are per-run parameters under the population prior
  (``bench/fit_population_prior.py``): the proportionality of the spread to its bound is measured on
  the population of runs, and the spread's level relative to the reward's then tells how far above its
  floor a run is.

The zero-std share of a sum of terms is not Beta-binomial (more ways to differ); it keeps the same
form with the run's effective ``nu`` -- unchecked: the development runs that log it (4 sources of
grpo-more) have summed rewards of unknown bounds, so their pass rate is not observed; the benchmark
measures what it adds (``bench/results/forecast_spread.md``, the ``degeneracy_fz`` ablation).

Where the channel enters
------------------------
:func:`bayesgrpo.models.degeneracy.ekf_spread_loglik_grad`: after the reward's update at step n, one
scalar EKF update per logged channel, each conditioned on the noise of the ones before (the reward,
then the spread), linearised at the predicted state -- exactly the joint Gaussian update of the step's
measurements, with the exact gradient w.r.t. every parameter (``nu`` and the width ``W = U - L``
included). :func:`spread_update` is that kernel, :func:`joint_measurement_numpy` its numpy reference
(the joint update with the full covariance, no sequential conditioning). Absent or sparse channels
are masked: one compiled model serves every run.

**Binning.** A channel update costs about three reward steps, so :func:`channel_array` averages the
logged channels over consecutive logged points to at most :data:`CHANNEL_POINTS` bins per run (the groups
behind a bin add up; its mean is also closer to Gaussian than one step's, which for G = 2 and two groups
is one of three values). A bin shares its groups with the rewards of all its points, so it is conditioned
on their mean (``ybar``, noise ``sigma_m / sqrt(b)``), with the bin's states taken equal to its middle
step's: innovation ``(s - h(x)) - B (ybar - R* - x)``, slope ``H - B``, ``B = rho sd_s / sd_ybar``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bayesgrpo.models.channels import (  # the layout, re-exported here
    CH_BR,
    CH_CRS,
    CH_CRZ,
    CH_CSZ,
    CH_MS,
    CH_MZ,
    CH_NS,
    CH_NZ,
    CH_ROWS,
    CH_YR,
    CH_YS,
    CH_YZ,
    CHANNEL_POINTS,
    DEFAULT_GROUP_SIZE,
    N_CH,
    channel_array,
)
from bayesgrpo.models.kalman_op import update2

__all__ = ["bb_moments", "bb_constants", "bb_moments_numpy", "spread_expectations", "spread_update", "group_sds",
           "joint_measurement_numpy", "EPS_M", "SHRINK", "SPREAD_FLOOR", "DEFAULT_GROUP_SIZE", "N_MOM", "N_SCRATCH",
           "I_NU", "I_W", "MODEL_SD_SPREAD", "MODEL_SD_ZERO", "CH_ROWS", "CHANNEL_POINTS", "N_CH",
           "channel_array"]  # fmt: skip

#: the mean pass rate is clipped to [EPS_M, 1 - EPS_M] (the channel's mean is extended linearly beyond)
EPS_M = 1e-4
#: the Beta-binomial correlations between the reward, the spread and the zero-std share of a step are
#: shrunk by this share toward independence (rounding of logged values; a model that is not exact)
SHRINK = 0.05
#: resolution of a logged spread (share of the reward's range) and of a logged zero-std share
SPREAD_FLOOR = 0.01
#: the channels' model error: the one-nu Beta-binomial's RMS error against the exact expectation on the
#: testbed, where every prompt's pass rate is known (bench/results/spread_validation.md: median over 20 runs
#: 0.041 of the range for reward_std, 0.078 for the zero-std share; the nu of a step's pass rates is not
#: constant over a run). Added to the sampling noise, independent of the reward's noise: a binned channel's
#: sampling noise falls like 1 / sqrt(b), the model's error does not.
MODEL_SD_SPREAD = 0.04
MODEL_SD_ZERO = 0.08
#: parameter indices of the extended filter with channels: ... L = 6, lam = 7, nu = 8, W = 9
I_NU, I_W = 8, 9
# rows of the moment vector (bb_moments)
_MS, _MS_M, _MS_N, _MS_MM, _MS_MN = 0, 1, 2, 3, 4  # E[s]
_Q, _Q_M, _Q_N = 5, 6, 7  # E[s^2]
_MZ, _MZ_M, _MZ_N, _MZ_MM, _MZ_MN = 8, 9, 10, 11, 12  # E[zero-std]
_K2, _K2_M, _K2_N = 13, 14, 15  # E[(k/G)^2]
_KS, _KS_M, _KS_N = 16, 17, 18  # E[(k/G) s]
_PG, _PG_M, _PG_N = 19, 20, 21  # P(k = G)
N_MOM = 22


def group_sds(G: int) -> np.ndarray:
    """``s_k = sqrt(k (G - k) / (G (G - 1)))``, k = 0..G: the sample sd (ddof 1) of a 0/1 group with k successes."""
    k = np.arange(G + 1, dtype=float)
    return np.sqrt(k * (G - k) / (G * (G - 1.0)))


@numba.njit(cache=True, fastmath=False)
def bb_constants(nu, G, sk):  # pragma: no cover - compiled
    """Per-run constants of :func:`bb_moments`: ``(consts, work)`` with ``consts = [C(G, k) for k] +
    [1 / prod_{i<G} ((nu + i) / c), sum_{i<G} 1 / (nu + i), c]`` (``c = nu + G`` scales every product into
    [0, 1]: no overflow for any G) and the scratch ``work`` (6, G + 1); ``sk`` = :func:`group_sds` (G)."""
    consts = np.empty(G + 4)
    c = nu + G
    for k in range(G + 1):
        consts[k] = math.exp(math.lgamma(G + 1.0) - math.lgamma(k + 1.0) - math.lgamma(G - k + 1.0))
    pn = 1.0
    n1 = 0.0
    for i in range(G):
        pn *= (nu + i) / c
        n1 += 1.0 / (nu + i)
    consts[G + 1] = 1.0 / pn
    consts[G + 2] = n1
    consts[G + 3] = c
    return consts, np.zeros((6, G + 1))


@numba.njit(cache=True, fastmath=False)
def bb_moments(m, nu, G, sk, consts, work, out):  # pragma: no cover - compiled
    """Beta-binomial(G, m nu, (1 - m) nu) moments of a group's statistics and their derivatives.

    Fills ``out`` (:data:`N_MOM`) with ``E[s]`` and its m, nu, mm, m-nu derivatives, ``E[s^2]`` (m, nu),
    ``E[zero-std]`` (m, nu, mm, m-nu), ``E[(k/G)^2]``, ``E[(k/G) s]`` and ``P(k = G)`` (each with m, nu).
    ``consts``, ``work`` from :func:`bb_constants` (nu, G), ``sk`` = :func:`group_sds` (G). Needs
    ``0 < m < 1``. ``d log P(k) / d alpha = sum_{i<k} 1/(alpha + i) - sum_{i<G} 1/(nu + i)`` (beta alike):
    every derivative is a finite sum, and P(k) a product of G + G ratios.
    """
    a = m * nu
    b = (1.0 - m) * nu
    A1, A2, B1, B2, PA, PB = work[0], work[1], work[2], work[3], work[4], work[5]
    A1[0] = A2[0] = B1[0] = B2[0] = 0.0
    PA[0] = PB[0] = 1.0
    ic = 1.0 / consts[G + 3]
    for i in range(G):
        ia = 1.0 / (a + i)
        ib = 1.0 / (b + i)
        A1[i + 1] = A1[i] + ia
        A2[i + 1] = A2[i] + ia * ia
        B1[i + 1] = B1[i] + ib
        B2[i + 1] = B2[i] + ib * ib
        PA[i + 1] = PA[i] * ((a + i) * ic)
        PB[i + 1] = PB[i] * ((b + i) * ic)
    ipn = consts[G + 1]
    N1 = consts[G + 2]
    for i in range(N_MOM):
        out[i] = 0.0
    for k in range(G + 1):
        j = G - k
        P = consts[k] * PA[k] * PB[j] * ipn
        lm = nu * (A1[k] - B1[j])
        ln = m * A1[k] + (1.0 - m) * B1[j] - N1
        lmm = -nu * nu * (A2[k] + B2[j])
        lmn = (A1[k] - B1[j]) + nu * ((1.0 - m) * B2[j] - m * A2[k])
        Pm = P * lm
        Pn = P * ln
        s = sk[k]
        kg = k / G
        if k == 0 or k == G:  # s = 0 in degenerate groups
            Pmm = P * (lm * lm + lmm)
            Pmn = P * (lm * ln + lmn)
            out[_MZ] += P
            out[_MZ_M] += Pm
            out[_MZ_N] += Pn
            out[_MZ_MM] += Pmm
            out[_MZ_MN] += Pmn
            if k == G:
                out[_PG] += P
                out[_PG_M] += Pm
                out[_PG_N] += Pn
                out[_K2] += P
                out[_K2_M] += Pm
                out[_K2_N] += Pn
            continue
        Ps, Pms, Pns = P * s, Pm * s, Pn * s
        out[_MS] += Ps
        out[_MS_M] += Pms
        out[_MS_N] += Pns
        out[_MS_MM] += Pms * lm + P * s * lmm
        out[_MS_MN] += Pms * ln + P * s * lmn
        out[_Q] += Ps * s
        out[_Q_M] += Pms * s
        out[_Q_N] += Pns * s
        out[_K2] += P * kg * kg
        out[_K2_M] += Pm * kg * kg
        out[_K2_N] += Pn * kg * kg
        out[_KS] += Ps * kg
        out[_KS_M] += Pms * kg
        out[_KS_N] += Pns * kg


def bb_moments_numpy(m, nu, G: int) -> dict:
    """Values (and m-derivatives) of :func:`bb_moments`, vectorised over ``m`` and ``nu`` (numpy)."""
    m, nu = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(nu, dtype=float))
    i = np.arange(G, dtype=float)
    a, b = (m * nu)[..., None], ((1.0 - m) * nu)[..., None]
    zero = np.zeros(m.shape + (1,))
    cum = lambda x: np.concatenate([zero, np.cumsum(x, axis=-1)], axis=-1)  # noqa: E731
    LA, LB, A1, B1 = cum(np.log(a + i)), cum(np.log(b + i)), cum(1.0 / (a + i)), cum(1.0 / (b + i))
    LN = np.log(nu[..., None] + i).sum(-1, keepdims=True)
    k = np.arange(G + 1)
    from scipy.special import gammaln

    lc = gammaln(G + 1.0) - gammaln(k + 1.0) - gammaln(G - k + 1.0)
    P = np.exp(lc + LA + LB[..., ::-1] - LN)
    Pm = P * nu[..., None] * (A1 - B1[..., ::-1])
    s, kg, z = group_sds(G), k / G, ((k == 0) | (k == G)).astype(float)
    out = {}
    for name, f in (("Ms", s), ("Q", s * s), ("Mz", z), ("K2", kg * kg), ("KS", kg * s), ("PG", (k == G) * 1.0)):
        out[name] = (P * f).sum(-1)
        out[name + "_m"] = (Pm * f).sum(-1)
    return out


def spread_expectations(m, nu, G: int) -> dict:
    """Expected logged channels of 0/1 rewards at mean pass rate ``m`` with concentration ``nu`` and G per group.

    Returns ``reward_std`` (E of one group's sample sd), ``reward_std_sd`` (its sd over groups),
    ``frac_reward_zero_std`` (E of the degenerate share) and ``variance`` (E[s^2] = m (1 - m) nu / (nu + 1)).
    A logged value over N groups has sd ``reward_std_sd / sqrt(N)``. The analysis function of
    ``bench/spread_validation.py`` (reusable on any run: testbed, TRL trainer, real logs).
    """
    mm = np.clip(np.asarray(m, dtype=float), EPS_M, 1.0 - EPS_M)
    b = bb_moments_numpy(mm, nu, G)
    return {
        "reward_std": b["Ms"],
        "reward_std_sd": np.sqrt(np.maximum(b["Q"] - b["Ms"] ** 2, 0.0)),
        "frac_reward_zero_std": b["Mz"],
        "variance": b["Q"],
    }


# ----------------------------------------------------------------------------- the kernel's update
# Every quantity of a step's channel update depends on the parameters through five primitives: the
# predicted pass rate mh, nu, W, s_r = sqrt(r) and the reward's innovation vr0 (columns of the scratch
# rows below); only mh and vr0 carry the predicted state's dense sensitivities (mh = (r_star + m0p - L) / W,
# vr0 = y - r_star - m0p). Each quantity's 5 partials are chained by hand (scalars), and the three
# inputs (v, H, R) of a channel's scalar update are expanded to the n_par parameters once (_expand).
_PM, _PN, _PW, _PS, _PV = 0, 1, 2, 3, 4
# scratch rows (each a 5-vector of partials)
(_HS, _HS_, _HZ, _HZ_, _VK, _VS, _VZ, _CRS, _CRZ, _CSZ, _RS, _RZ, _SS, _SZ, _RHO_RS, _RHO_RZ, _RHO_SZ, _B1, _B2,
 _WV, _HT, _RT, _AR, _AZ, _QS, _QZ) = range(26)  # fmt: skip
N_SCRATCH = 26


@numba.njit(cache=True, fastmath=False, inline="always")
def _corr(c, vx, vy, sc, rc, rx, ry, out, scale):  # pragma: no cover - compiled
    """Shrunk correlation ``scale (1 - SHRINK) c / sqrt(vx vy)``; its partials (from rows rc, rx, ry) into row
    out (``scale``: the share of the groups two binned measurements have in common, see :data:`CH_ROWS`)."""
    vv = vx * vy
    if vv <= 1e-300:
        for i in range(5):
            sc[out, i] = 0.0
        return 0.0
    sq = math.sqrt(vv)
    f = (1.0 - SHRINK) * scale
    for i in range(5):
        sc[out, i] = f * (sc[rc, i] / sq - c * (sc[rx, i] * vy + vx * sc[ry, i]) / (2.0 * vv * sq))
    return f * c / sq


@numba.njit(cache=True, fastmath=False, inline="always")
def _expand(sc, row, mh, iW, isr2, dm0p, out):  # pragma: no cover - compiled
    """Parameter derivatives of the quantity whose primitive partials are in ``sc[row]`` (parameters:
    r_star = 1, r = 5, L = 6, nu = I_NU, W = I_W; the rest only through the predicted state ``dm0p``)."""
    dM, dV = sc[row, _PM] * iW, sc[row, _PV]
    dense = dM - dV
    for k in range(out.shape[0]):
        out[k] = dense * dm0p[k]
    out[1] += dense
    out[5] += sc[row, _PS] * isr2
    out[6] -= dM
    out[I_NU] += sc[row, _PN]
    out[I_W] += sc[row, _PW] - dM * mh


@numba.njit(cache=True, fastmath=False, inline="always")
def _sensitivities(sc, mh, iW, isr2, dm0p, dm0, Ht, dx, dv, dH, dR):  # pragma: no cover - compiled
    """The parameter derivatives of a channel update's innovation ``dv``, observation slope ``dH`` and
    variance ``dR`` (:func:`_expand` of their rows); the innovation's also through the state's shift ``dx``."""
    _expand(sc, _WV, mh, iW, isr2, dm0p, dv)
    _expand(sc, _HT, mh, iW, isr2, dm0p, dH)
    _expand(sc, _RT, mh, iW, isr2, dm0p, dR)
    for k in range(dv.shape[0]):
        dv[k] -= dH[k] * dx + Ht * (dm0[k] - dm0p[k])


@numba.njit(cache=True, fastmath=False)
def spread_update(ch, n, j, r_star, L, W, nu, r, G, m0p, dm0p, sk, consts, work, mom, sc, dv, dH, dR, m0, m1, p00, p01,
                  p11, dm0, dm1, dp00, dp01, dp11, gj):  # fmt: skip  # pragma: no cover
    """The spread channels' measurement updates of one grid step (after the reward's, if it was logged).

    ``ch[:, n, j]``: the channels of grid step n of run j (:data:`CH_ROWS`), at the predicted state ``m0p``
    (derivatives ``dm0p``); ``m0``, ``dm0`` ... the state after this step's reward update. The channels are
    linearised at the predicted state; each is conditioned on the noise of the measurements before it (the
    bin's mean reward, then the spread) through the shrunk Beta-binomial correlations: the returned
    log-density is that of the channels given the rewards of their groups (with the bin's states taken equal
    to the step's), so the filter counts every group once. Parameters 0..9 = (r0, r_star, a, mu, q, r,
    L, lam, nu, W). ``sc`` scratch (:data:`N_SCRATCH`, 5); ``dv``, ``dH``, ``dR`` scratch (n_par,).
    Returns ``(log-density, m0, m1, p00, p01, p11)``; derivative arrays updated in place.
    """
    ys, yz, Ns, Nz = ch[CH_YS, n, j], ch[CH_YZ, n, j], ch[CH_NS, n, j], ch[CH_NZ, n, j]
    obs_s, obs_z, obs_r = ch[CH_MS, n, j] > 0.0, ch[CH_MZ, n, j] > 0.0, ch[CH_BR, n, j] > 0.0
    vr0 = ch[CH_YR, n, j] - r_star - m0p  # the bin's mean reward: its noise sd sqrt(r / b_r)
    br = max(ch[CH_BR, n, j], 1.0)
    mh = (r_star + m0p - L) / W
    mc = min(max(mh, EPS_M), 1.0 - EPS_M)
    io = 1.0 if mc == mh else 0.0  # beyond the clip the means are extended linearly, the moments constant
    bb_moments(mc, nu, G, sk, consts, work, mom)
    dlt = mh - mc
    iW = 1.0 / W
    sr = math.sqrt(r / br)
    isr2 = 0.5 / (sr * br)  # d sr / d r
    Ms, Q, Mz = mom[_MS], mom[_Q], mom[_MZ]
    Msm, Msn, Mzm, Mzn = mom[_MS_M] * io, mom[_MS_N], mom[_MZ_M] * io, mom[_MZ_N]
    for row in range(_RS):  # rows set entry by entry below (the others are whole-row assignments)
        for i in range(5):
            sc[row, i] = 0.0
    hs = W * (Ms + mom[_MS_M] * dlt)
    sc[_HS, _PM], sc[_HS, _PN], sc[_HS, _PW] = W * mom[_MS_M], W * (Msn + mom[_MS_MN] * dlt), Ms + mom[_MS_M] * dlt
    Hs = mom[_MS_M]
    sc[_HS_, _PM], sc[_HS_, _PN] = mom[_MS_MM] * io, mom[_MS_MN]
    hz = Mz + mom[_MZ_M] * dlt
    sc[_HZ, _PM], sc[_HZ, _PN] = mom[_MZ_M], Mzn + mom[_MZ_MN] * dlt
    Hz = mom[_MZ_M] * iW
    sc[_HZ_, _PM], sc[_HZ_, _PN], sc[_HZ_, _PW] = mom[_MZ_MM] * io * iW, mom[_MZ_MN] * iW, -Hz * iW
    vk = mom[_K2] - mc * mc
    sc[_VK, _PM], sc[_VK, _PN] = mom[_K2_M] * io - 2.0 * mc * io, mom[_K2_N]
    vs = Q - Ms * Ms
    sc[_VS, _PM], sc[_VS, _PN] = mom[_Q_M] * io - 2.0 * Ms * Msm, mom[_Q_N] - 2.0 * Ms * Msn
    vz = Mz * (1.0 - Mz)
    sc[_VZ, _PM], sc[_VZ, _PN] = (1.0 - 2.0 * Mz) * Mzm, (1.0 - 2.0 * Mz) * Mzn
    sc[_CRS, _PM], sc[_CRS, _PN] = mom[_KS_M] * io - Ms * io - mc * Msm, mom[_KS_N] - mc * Msn
    sc[_CRZ, _PM], sc[_CRZ, _PN] = mom[_PG_M] * io - Mz * io - mc * Mzm, mom[_PG_N] - mc * Mzn
    sc[_CSZ, _PM], sc[_CSZ, _PN] = -(Msm * Mz + Ms * Mzm), -(Msn * Mz + Ms * Mzn)
    fl = SPREAD_FLOOR * SPREAD_FLOOR
    iNs, iNz = 1.0 / max(Ns, 1.0), 1.0 / max(Nz, 1.0)
    es, ez = fl + MODEL_SD_SPREAD * MODEL_SD_SPREAD, fl + MODEL_SD_ZERO * MODEL_SD_ZERO  # not from the groups
    Rs = W * W * (vs * iNs + es)
    Rz = vz * iNz + ez
    ss, sz = math.sqrt(Rs), math.sqrt(Rz)
    iss, isz = 0.5 / ss, 0.5 / sz
    # the sampling share of each channel's variance: only it is correlated with the other measurements
    qs, qz = math.sqrt(vs * iNs / (vs * iNs + es)), math.sqrt(vz * iNz / (vz * iNz + ez))
    for i in range(5):
        sc[_RS, i] = W * W * sc[_VS, i] * iNs
        sc[_RZ, i] = sc[_VZ, i] * iNz
        sc[_QS, i] = 0.5 * qs * (es / (vs * iNs + es)) * sc[_VS, i] * iNs / max(vs * iNs, 1e-300)
        sc[_QZ, i] = 0.5 * qz * (ez / (vz * iNz + ez)) * sc[_VZ, i] * iNz / max(vz * iNz, 1e-300)
    sc[_RS, _PW] += 2.0 * W * (vs * iNs + es)
    for i in range(5):
        sc[_SS, i] = sc[_RS, i] * iss
        sc[_SZ, i] = sc[_RZ, i] * isz
    rrs = _corr(mom[_KS] - mc * Ms, vk, vs, sc, _CRS, _VK, _VS, _RHO_RS, ch[CH_CRS, n, j]) if obs_r and obs_s else 0.0
    rrz = _corr(mom[_PG] - mc * Mz, vk, vz, sc, _CRZ, _VK, _VZ, _RHO_RZ, ch[CH_CRZ, n, j]) if obs_r and obs_z else 0.0
    rsz = _corr(-Ms * Mz, vs, vz, sc, _CSZ, _VS, _VZ, _RHO_SZ, ch[CH_CSZ, n, j]) if obs_s and obs_z else 0.0
    for row, on in ((_RHO_RS, obs_r and obs_s), (_RHO_RZ, obs_r and obs_z), (_RHO_SZ, obs_s and obs_z)):
        if not on:  # an unobserved pair: no correlation
            for i in range(5):
                sc[row, i] = 0.0
    for i in range(5):  # the correlations of the measurements' whole noise: the sampling shares qs, qz of them
        sc[_RHO_RS, i] = qs * sc[_RHO_RS, i] + rrs * sc[_QS, i]
        sc[_RHO_RZ, i] = qz * sc[_RHO_RZ, i] + rrz * sc[_QZ, i]
        sc[_RHO_SZ, i] = qs * qz * sc[_RHO_SZ, i] + rsz * (qz * sc[_QS, i] + qs * sc[_QZ, i])
    rrs, rrz, rsz = qs * rrs, qz * rrz, qs * qz * rsz
    ll = 0.0
    vs0 = ys - hs
    if obs_s:
        beta = rrs * ss / sr
        for i in range(5):  # beta = rho ss / sr (sr: primitive S)
            sc[_B1, i] = sc[_RHO_RS, i] * ss / sr + rrs * sc[_SS, i] / sr
        sc[_B1, _PS] -= beta / sr
        Ht = Hs - beta
        Rt = Rs * (1.0 - rrs * rrs)
        for i in range(5):
            sc[_HT, i] = sc[_HS_, i] - sc[_B1, i]
            sc[_RT, i] = sc[_RS, i] * (1.0 - rrs * rrs) - 2.0 * Rs * rrs * sc[_RHO_RS, i]
            sc[_WV, i] = -sc[_HS, i] - sc[_B1, i] * vr0
        sc[_WV, _PV] -= beta
        dx = m0 - m0p
        _sensitivities(sc, mh, iW, isr2, dm0p, dm0, Ht, dx, dv, dH, dR)
        lls, m0, m1, p00, p01, p11 = update2(vs0 - beta * vr0 - Ht * dx, Ht, Rt, dv, dH, dR, m0, m1, p00, p01, p11,
                                             dm0, dm1, dp00, dp01, dp11, gj)  # fmt: skip
        ll += lls
    if obs_z:
        den = 1.0 - rrs * rrs
        ar = (rrz - rrs * rsz) / den
        az = (rsz - rrs * rrz) / den
        for i in range(5):
            d1, d2, d3 = sc[_RHO_RS, i], sc[_RHO_RZ, i], sc[_RHO_SZ, i]
            sc[_AR, i] = ((d2 - d1 * rsz - rrs * d3) * den + (rrz - rrs * rsz) * 2.0 * rrs * d1) / (den * den)
            sc[_AZ, i] = ((d3 - d1 * rrz - rrs * d2) * den + (rsz - rrs * rrz) * 2.0 * rrs * d1) / (den * den)
        bzr = sz * ar / sr  # 0 unless the reward is observed (ar = 0 then)
        bzs = sz * az / ss  # 0 unless the spread is observed
        for i in range(5):
            sc[_B1, i] = (sc[_SZ, i] * ar + sz * sc[_AR, i]) / sr
            sc[_B2, i] = (sc[_SZ, i] * az + sz * sc[_AZ, i]) / ss - bzs * sc[_SS, i] / ss
        sc[_B1, _PS] -= bzr / sr
        Ht = Hz - bzr - bzs * Hs
        q_ = 1.0 - ar * rrz - az * rsz
        Rt = Rz * q_
        for i in range(5):
            sc[_HT, i] = sc[_HZ_, i] - sc[_B1, i] - sc[_B2, i] * Hs - bzs * sc[_HS_, i]
            sc[_RT, i] = sc[_RZ, i] * q_ - Rz * (sc[_AR, i] * rrz + ar * sc[_RHO_RZ, i] + sc[_AZ, i] * rsz
                                                 + az * sc[_RHO_SZ, i])  # fmt: skip
            sc[_WV, i] = -sc[_HZ, i] - sc[_B1, i] * vr0 - sc[_B2, i] * vs0 + bzs * sc[_HS, i]
        sc[_WV, _PV] -= bzr
        dx = m0 - m0p
        _sensitivities(sc, mh, iW, isr2, dm0p, dm0, Ht, dx, dv, dH, dR)
        v = (yz - hz) - bzr * vr0 - bzs * vs0 - Ht * dx
        llz, m0, m1, p00, p01, p11 = update2(v, Ht, Rt, dv, dH, dR, m0, m1, p00, p01, p11, dm0, dm1, dp00, dp01,
                                             dp11, gj)  # fmt: skip
        ll += llz
    return ll, m0, m1, p00, p01, p11


# ----------------------------------------------------------------------------- numpy reference
def joint_measurement_numpy(m, P, *, m_pred, chn, r_star, L, W, nu, r, G: int):
    """The reference of :func:`spread_update`: the channels of one step, conditioned on the noise of their bin's
    mean reward by Gaussian conditioning of the full covariance, then ONE joint (vector) update -- no
    sequential scalar conditioning. ``m`` (..., 2), ``P`` (..., 2, 2) the state after the step's reward
    update, ``m_pred`` the predicted one (the linearisation point), ``chn`` the step's column of the channel
    array (:data:`CH_ROWS`); the parameters broadcast over a batch of draws. Returns ``(log-density, m, P)``."""
    x = m_pred[..., 0]
    mh = (r_star + x - L) / W
    mc = np.clip(mh, EPS_M, 1.0 - EPS_M)
    b = bb_moments_numpy(mc, nu, G)
    dlt = mh - mc
    var = {0: b["K2"] - mc**2, 1: b["Q"] - b["Ms"] ** 2, 2: b["Mz"] * (1.0 - b["Mz"])}
    cov = {(0, 1): b["KS"] - mc * b["Ms"], (0, 2): b["PG"] - mc * b["Mz"], (1, 2): -b["Ms"] * b["Mz"]}
    share = {(0, 1): chn[CH_CRS], (0, 2): chn[CH_CRZ], (1, 2): chn[CH_CSZ]}
    samp = {
        0: np.sqrt(r / max(chn[CH_BR], 1.0)) * np.ones_like(x),
        1: W * np.sqrt(var[1] / max(chn[CH_NS], 1.0)),
        2: np.sqrt(var[2] / max(chn[CH_NZ], 1.0)),
    }  # the sampling sds (correlated); the rest independent
    sd = {0: samp[0], 1: np.sqrt(samp[1] ** 2 + W**2 * (SPREAD_FLOOR**2 + MODEL_SD_SPREAD**2)),
          2: np.sqrt(samp[2] ** 2 + SPREAD_FLOOR**2 + MODEL_SD_ZERO**2)}  # fmt: skip
    pred = {1: W * (b["Ms"] + b["Ms_m"] * dlt), 2: b["Mz"] + b["Mz_m"] * dlt}
    slope = {1: b["Ms_m"] * np.ones_like(x), 2: b["Mz_m"] / W}
    obsv = {1: chn[CH_YS], 2: chn[CH_YZ]}
    chans = [c for c, row in ((1, CH_MS), (2, CH_MZ)) if chn[row] > 0]
    if not chans:
        return np.zeros(x.shape), m, P

    def sig(i, j):
        if i == j:
            return sd[i] ** 2
        key = (min(i, j), max(i, j))
        return share[key] * (1.0 - SHRINK) * cov[key] / np.sqrt(var[i] * var[j]) * samp[i] * samp[j]

    n = len(chans)
    batch = x.shape
    Sc = np.stack([np.stack([sig(i, j) for j in chans], -1) for i in chans], -2)  # (..., n, n)
    H = np.zeros(batch + (n, 2))
    d = np.stack([obsv[c] - pred[c] for c in chans], -1)
    for a, c in enumerate(chans):
        H[..., a, 0] = slope[c]
    if chn[CH_BR] > 0:  # condition on the bin's mean reward: (y_c | ybar) has mean + K (ybar - R* - x)
        Kr = np.stack([sig(c, 0) / sd[0] ** 2 for c in chans], -1)
        Sc = Sc - Kr[..., :, None] * Kr[..., None, :] * (sd[0] ** 2)[..., None, None]
        d = d - Kr * (chn[CH_YR] - r_star - x)[..., None]
        H[..., :, 0] -= Kr
    d = d - H[..., :, 0] * (m[..., 0] - x)[..., None]  # linearised at the predicted state
    S = H @ P @ np.swapaxes(H, -1, -2) + Sc
    _, logdet = np.linalg.slogdet(S)
    Si = np.linalg.inv(S)
    ll = -0.5 * (n * np.log(2.0 * np.pi) + logdet + np.einsum("...i,...ij,...j->...", d, Si, d))
    K = P @ np.swapaxes(H, -1, -2) @ Si
    return ll, m + np.einsum("...ij,...j->...i", K, d), P - K @ S @ np.swapaxes(K, -1, -2)


# ----------------------------------------------------------------------------- data
