"""Peer forecasters: the benchmarks bayesgrpo is judged against.

Every peer forecasts, from the first logged points of a run, the *final reward* -- the mean of the
logged reward over the steps of the final window ``(s0 + (1 - fw)(H - s0), H]`` (see
:func:`bayesgrpo.plan.final_window_mask`) -- as draws that include the measurement noise of the
average of the logged points in that window.

Common interface
----------------
``peer.forecast(steps_obs, rewards_obs, *, future_steps, final_window=0.1, n_draws=1000, seed=None)``
returns a :class:`PeerForecast`.

* ``steps_obs``, ``rewards_obs``: the observed prefix (NaN rewards are dropped, steps sorted).
* ``future_steps``: the steps at which the run *will* log after the prefix, up to and including the
  horizon ``H`` (at the run's logging interval). ``s0`` is the first observed step and ``H`` the
  last of ``future_steps`` (or of ``steps_obs`` when nothing is left to forecast). Observed points
  that already fall in the final window enter the window mean as they are; only the future points
  are forecast.

Peers (see :data:`PEERS`, :func:`get_peer`)
------------------------------------------
``last_value``       mean of the last 10% of the observed points; interval from a random-walk
                     variance growth fitted to the observed block-mean changes.
``sat_exp``          bounded LSQ fit of ``R_inf - (R_inf - R0) exp(-u / tau)``.
``scalerl_sigmoid``  bounded LSQ fit of the ScaleRL curve ``R0 + (A - R0) / (1 + (C_mid / u)^B)``.
``pow3``             bounded LSQ fit of ``c - a u^(-alpha)``.
``domhan``           Bayesian combination of 11 parametric learning-curve families (Domhan,
                     Springenberg & Hutter, IJCAI 2015) in PyMC 6, NUTS via nutpie
                     (2 chains x 300 draws after 300 tuning steps).
``domhan_fast``      the same compiled model, 2 chains x 150 draws / 150 tuning, tree depth <= 6.

LC-PFN (Adriaensen et al., NeurIPS 2023) is not among them: its pretrained transformer is downloaded
at run time, and bayesgrpo runs offline (no weights or data may be fetched), so it cannot be run here.

The LSQ peers share :class:`LSQPeer` (several starts, moving-block residual bootstrap with refits,
plus window-mean noise); details in its docstring.

Cost (measured on the 100 public runs cut at 30%, 2 shared cores under load ~5): last_value ~ms;
LSQ peers 2-5 s per forecast (100 bootstrap refits); domhan / domhan_fast ~4-5 s per forecast
(median ~3.8 s) after a one-off nutpie/numba compilation of 3-5 min per process (the first
forecast's ``seconds`` includes it; ``info['compile_seconds']`` reports it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bayesgrpo.evaluation.curve_peers import (
    LastValuePeer,
    LSQPeer,
    _f_pow3,
    _f_sat_exp,
    _f_scalerl,
    _j_pow3,
    _j_sat_exp,
    _j_scalerl,
    _pow3_bounds,
    _pow3_starts,
    _sat_exp_bounds,
    _sat_exp_starts,
    _scalerl_bounds,
    _scalerl_starts,
)
from bayesgrpo.evaluation.domhan import DOMHAN_FAMILIES, DomhanEnsemblePeer
from bayesgrpo.evaluation.peer_base import PATH_LEVELS, Peer, PeerForecast

__all__ = [
    "PeerForecast",
    "Peer",
    "LastValuePeer",
    "LSQPeer",
    "DomhanEnsemblePeer",
    "PEERS",
    "PEER_ALIASES",
    "get_peer",
    "PATH_LEVELS",
    "DOMHAN_FAMILIES",
]


# =====================================================================================  registry
_DOMHAN_SETTINGS = {
    "domhan": dict(chains=2, draws=300, tune=300, maxdepth=8),
    "domhan_fast": dict(chains=2, draws=150, tune=150, maxdepth=6),
}


def _make_peers() -> dict[str, Callable[..., Peer]]:
    return {
        "last_value": LastValuePeer,
        "sat_exp": lambda **kw: LSQPeer(
            "sat_exp", _f_sat_exp, ("R_inf", "R0", "tau"), _sat_exp_bounds, _sat_exp_starts, jac=_j_sat_exp, **kw
        ),
        "scalerl_sigmoid": lambda **kw: LSQPeer(
            "scalerl_sigmoid",
            _f_scalerl,
            ("A", "R0", "C_mid", "B"),
            _scalerl_bounds,
            _scalerl_starts,
            jac=_j_scalerl,
            **kw,
        ),
        "pow3": lambda **kw: LSQPeer(
            "pow3", _f_pow3, ("c", "a", "alpha"), _pow3_bounds, _pow3_starts, jac=_j_pow3, **kw
        ),
        "domhan": lambda **kw: DomhanEnsemblePeer("domhan", **{**_DOMHAN_SETTINGS["domhan"], **kw}),
        "domhan_fast": lambda **kw: DomhanEnsemblePeer("domhan_fast", **{**_DOMHAN_SETTINGS["domhan_fast"], **kw}),
    }


#: name -> factory of a peer with default settings (keyword arguments override them)
PEERS: dict[str, Callable[..., Peer]] = _make_peers()

#: other names accepted for peers -> registry name
PEER_ALIASES = {"exponential": "sat_exp", "exp": "sat_exp", "scalerl": "scalerl_sigmoid"}


def get_peer(name: str, **kwargs: Any) -> Peer:
    """A peer by name or alias (see :data:`PEERS`, :data:`PEER_ALIASES`); keyword arguments override
    its settings (e.g. ``get_peer("sat_exp", n_boot=200)``, ``get_peer("domhan", draws=500)``).

    The peer keeps the name it was asked for (so an alias shows up in backtest tables as given).
    """
    key = PEER_ALIASES.get(name, name)
    if key not in PEERS:
        raise KeyError(
            f"unknown peer {name!r}; available: {', '.join(sorted(PEERS))} (aliases {', '.join(PEER_ALIASES)})"
        )
    peer = PEERS[key](**kwargs)
    peer.name = name
    return peer
