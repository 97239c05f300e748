"""The shape of each run chosen by evidence: per-run weights of the model kinds, and their mixture.

A run does not get the oscillator because it is the default. Its kinds (:data:`ShapeConfig.kinds`:
the oscillator, the degeneracy kind and the logistic kind) are weighed by what each predicted of the
prefix, under a prior over kinds that depends on what the prefix shows::

    w_k  propto  pi_k(x) exp(e_k)

* ``e_k`` -- the **block evidence** of kind ``k``: ``log p(y_later | y_first)``, the exact
  one-step-ahead (leave-future-out) predictive densities of the prefix's later part, each under the
  posterior of the steps before it, summed (:func:`bayesgrpo.inference.evidence.block_evidence`; a
  Laplace approximation on the kind's compiled model, each run with its own data -- no weight is
  learned across runs, the weights that were did not transfer).
* ``pi(x)`` -- the prior over kinds (:class:`ShapePrior`): where the level sits at the reward's floor
  (:mod:`bayesgrpo.forecast.features` ``at_floor``: a 0-1 score flat near 0, a summed reward at its
  minimum while rare batches score high) every group of G completions is degenerate and the
  degeneracy law, not the oscillator, is the physics (physics.md section 9): the kinds that carry it
  are a priori as plausible as the oscillator -- so such a prefix is forecast as a possible S-curve
  even when no spread is logged. Elsewhere the kinds make the same local prediction near a plateau
  and the prior leans on the oscillator, the one the population prior was fitted for first.

A flat prefix carries no evidence either way (``e_k`` equal): its weights are the prior's. Kinds
below :attr:`ShapeConfig.min_weight` are dropped (their weight goes to the others) and never fitted,
so a run the evidence and the prior give to one kind costs one posterior fit. The degeneracy kinds
model lag-free runs only: a run with a refresh interval > 1 gets the linear kinds.

:func:`mix_posteriors` joins the kinds' posterior draws of one run into one set of draws (each kind
``round(w_k N)`` of them, evenly spaced, ``kind_code`` naming the kind of each draw), so a forecast is
the mixture ``sum_k w_k p_k(future | prefix)``.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.io.jsonfile import JsonFile

__all__ = ["ShapePrior", "ShapeConfig", "kind_weights", "mix_posteriors", "weights_label", "KIND_CODE"]

#: the posterior variable naming the kind of each draw of a mixture (index into ShapeConfig.kinds)
KIND_CODE = "kind_code"


class ShapePrior(BaseModel):
    """The prior over kinds given the prefix (module docstring): one weight per kind of
    :attr:`ShapeConfig.kinds`, at the floor and elsewhere."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at_floor: tuple[float, ...] = (0.34, 0.33, 0.33)
    elsewhere: tuple[float, ...] = (0.8, 0.1, 0.1)

    @model_validator(mode="after")
    def _positive(self):
        for name in ("at_floor", "elsewhere"):
            w = getattr(self, name)
            if any(v < 0 for v in w) or sum(w) <= 0:
                raise ValueError(f"shape prior {name}: weights must be >= 0 and not all 0")
        if len(self.at_floor) != len(self.elsewhere):
            raise ValueError("shape prior: at_floor and elsewhere need one weight per kind each")
        return self

    def weights(self, feats: dict) -> np.ndarray:
        w = np.asarray(self.at_floor if feats.get("at_floor") else self.elsewhere, dtype=float)
        return w / w.sum()


class ShapeConfig(JsonFile):
    """Which kinds a run's shape is chosen among, and how.

    Parameters
    ----------
    kinds : tuple of str
        Kinds of :data:`bayesgrpo.models.kinds.MODEL_KINDS`.
    prior : ShapePrior
        One weight per kind.
    evidence : bool
        Weigh by the block evidence (off: the prior alone).
    split : float
        The first part of the prefix the block evidence conditions on (its share of the observed steps).
    min_weight : float
        Kinds below this weight are dropped and not fitted.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kinds: tuple[str, ...] = ("oscillator", "degeneracy", "logistic")
    prior: ShapePrior = Field(default_factory=ShapePrior)
    evidence: bool = True
    split: float = Field(0.5, gt=0.0, lt=1.0)
    min_weight: float = Field(0.1, ge=0.0, lt=1.0)
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kinds(self):
        from bayesgrpo.models.kinds import get_kind

        for k in self.kinds:
            get_kind(k)
        if len(set(self.kinds)) != len(self.kinds) or not self.kinds:
            raise ValueError("shape: kinds must be distinct and at least one")
        if len(self.prior.at_floor) != len(self.kinds):
            raise ValueError(f"shape: the prior has {len(self.prior.at_floor)} weights for {len(self.kinds)} kinds")
        return self

    @classmethod
    def default(cls) -> ShapeConfig:
        """The packaged shape configuration (``resources/shape.json``, chosen by ``bench/quality_study.py``),
        else the class defaults."""
        return cls.packaged("shape.json") or cls()


def kind_weights(feats: dict, evidence: dict, config: ShapeConfig, *, allowed=None) -> dict[str, float]:
    """Per-run weights of the kinds: ``pi_k(feats) exp(e_k)`` normalised, kinds below ``min_weight``
    (and kinds not ``allowed``, and kinds whose evidence is not finite) dropped.

    Parameters
    ----------
    feats : dict
        :func:`bayesgrpo.forecast.features.prefix_features` of the run.
    evidence : dict
        Block evidence per kind (missing or ignored when ``config.evidence`` is off).
    config : ShapeConfig
    allowed : iterable of str, optional
        The kinds that can model this run (default: all).
    """
    kinds = config.kinds
    ok = set(kinds if allowed is None else allowed)
    logw = np.log(np.maximum(config.prior.weights(feats), 1e-300))
    for j, k in enumerate(kinds):
        e = evidence.get(k, 0.0) if config.evidence else 0.0
        logw[j] = logw[j] + e if (k in ok and math.isfinite(e)) else -math.inf
    if not np.isfinite(logw).any():
        logw = np.where([k in ok for k in kinds], 0.0, -math.inf)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    keep = w >= config.min_weight
    if not keep.any():
        keep = w == w.max()
    w = np.where(keep, w, 0.0)
    return {k: float(v / w.sum()) for k, v in zip(kinds, w, strict=True) if v > 0}


def draw_counts(weights: dict, n: int) -> dict[str, int]:
    """Draws per kind out of ``n`` (largest remainders: the counts sum to ``n``)."""
    kinds = list(weights)
    raw = np.array([weights[k] * n for k in kinds])
    base = np.floor(raw).astype(int)
    for j in np.argsort(-(raw - base))[: n - int(base.sum())]:
        base[j] += 1
    return {k: int(c) for k, c in zip(kinds, base, strict=True) if c > 0}


def mix_posteriors(posts: dict, weights: dict, kinds, *, params) -> object:
    """One run's posterior draws of several kinds joined into one mixture (``xarray.Dataset``).

    Parameters
    ----------
    posts : dict
        Kind -> the run's posterior (``chain``, ``draw`` dims; a ``run`` dim of length 1 allowed).
    weights : dict
        Kind -> weight (:func:`kind_weights`).
    kinds : sequence of str
        The order that ``kind_code`` indexes.
    params : sequence of str
        The variables to keep; a kind that lacks one gets its neutral value (``lam`` 0: the degeneracy
        law; ``L`` NaN: no floor in a linear kind).

    Returns
    -------
    xarray.Dataset
        ``(chain, draw[, run])`` of the first kind's shape, with :data:`KIND_CODE` per draw.
    """
    import xarray as xr

    first = posts[next(iter(weights))]
    C, D = first.sizes["chain"], first.sizes["draw"]
    counts = draw_counts(weights, C * D)
    cols: dict = {v: [] for v in params}
    codes = []
    for k, m in counts.items():
        p = posts[k]
        n_k = p.sizes["chain"] * p.sizes["draw"]
        take = np.round(np.linspace(0, n_k - 1, m)).astype(int)
        for v in params:
            if v in p:
                a = p[v].to_numpy().reshape(n_k, *p[v].shape[2:])[take]
            else:
                a = np.full((m, *first[params[0]].shape[2:]), 0.0 if v == "lam" else np.nan)
            cols[v].append(a)
        codes.append(np.full(m, list(kinds).index(k)))
    extra = first[params[0]].dims[2:]
    out = {
        v: (("chain", "draw", *extra), np.concatenate(cols[v]).reshape(C, D, *np.concatenate(cols[v]).shape[1:]))
        for v in params
    }
    code = np.concatenate(codes).reshape(C, D)
    if extra:
        code = np.broadcast_to(code[..., None], (C, D, *[first.sizes[d] for d in extra])).copy()
    out[KIND_CODE] = (("chain", "draw", *extra), code.astype(np.int64))
    coords = {d: first[d] for d in ("chain", "draw", *extra) if d in first.coords}
    return xr.Dataset(out, coords=coords)


def weights_label(weights: dict) -> str:
    """``"oscillator"`` for one kind, else ``"oscillator:0.62+degeneracy:0.38"`` (the table's kind column)."""
    if len(weights) == 1:
        return next(iter(weights))
    return "+".join(f"{k}:{w:.2f}" for k, w in weights.items())


def compiled_kind(kind, arrays, prior, *, hierarchical: bool = False, backend: str = "numba", spread: bool = False):
    """The compiled model of ``kind`` for a batch of runs (compiled once per graph and machine).

    The graph is built with the population's default momentum centre, so a compiled model (and the
    support point its chains start from) never depends on the run it was first built for. ``spread``:
    the graph with the spread channels (:mod:`bayesgrpo.models.spread`; kinds with a degeneracy state).
    """
    import dataclasses
    import functools

    from bayesgrpo.inference import sampling

    template = dataclasses.replace(arrays, mu_mean=np.full(len(arrays.run_ids), prior.mu_default))
    return sampling.compile_model(
        kind.graph_key(arrays, prior, hierarchical, spread=spread),
        functools.partial(kind.build, template, prior=prior, hierarchical=hierarchical, spread=spread),
        backend=backend,
    )


def run_evidence(kind, arrays, prior, *, split: float = 0.5, seed: int = 0, backend: str = "numba") -> float:
    """The block evidence of ``kind`` for one run (``arrays`` of one run; ``prior`` at its fraction):
    ``log p(y_later | y_first)`` by two Laplace approximations on the kind's compiled model
    (:func:`bayesgrpo.inference.evidence.block_evidence`); ``-inf`` when the model cannot be evaluated.
    Always the reward-only graph, also when spread channels are configured: every kind's evidence is then
    of the same data (the reward), the channels inform the fit of a degeneracy kind, not its weight."""
    if kind.closed_form:
        from bayesgrpo.models import stationary

        e = stationary.block_evidence(arrays.y[:, 0], arrays.mask[:, 0], split=split)
        return float(e) if math.isfinite(e) else -math.inf
    from bayesgrpo.inference import sampling
    from bayesgrpo.inference.evidence import block_evidence, mask_after

    compiled = compiled_kind(kind, arrays, prior, backend=backend)
    data = arrays.data(prior)
    full = sampling.log_density(compiled, data, required=kind.required_data)
    first = sampling.log_density(
        compiled, {**data, "mask": mask_after(arrays.mask, split)}, required=kind.required_data
    )
    e, _, _ = block_evidence(full, first, full.initial_point(seed))
    return float(e) if math.isfinite(e) else -math.inf
