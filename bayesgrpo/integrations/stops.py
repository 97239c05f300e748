"""The stop rules of the live callback (:class:`~bayesgrpo.integrations.trl.BayesGRPOCallback`'s
``stop``): each says what to ask the worker for (``request``) and, from a forecast, whether to stop
(``check``). Light: no PyMC, no transformers."""

from __future__ import annotations

import math

from bayesgrpo.conventions import DEFAULT_RISK

__all__ = ["ImprovementStop", "UtilityStop", "PolicyStop"]


class ImprovementStop:
    """Stop when ``P(final reward >= best so far + delta) < epsilon`` for ``patience`` consecutive fits.

    "Best so far" is the largest mean of ``window`` consecutive logged rewards (a single noisy
    logged value would make the rule too eager).

    The defaults are measured (``bench/results/improvement_stop.md``: the rule run through forecasts
    at every 5% of 43 development runs of 15 sources): ``delta`` 0.02 of the run's reward scale,
    ``epsilon`` 0.1 and ``patience`` 3 stop 74% of the runs, save 22% of their steps and stop badly
    (losing more than 0.1 of the run's range) in 9%; the earlier example (``delta`` 0.01 reward units,
    ``epsilon`` 0.05) stopped 58%, saving 13% with 5% bad stops. Fewer forecasts per run (the
    callback fits every ~50 steps) make ``patience`` cost more of the run.

    Parameters
    ----------
    delta : float
        Improvement over the best so far that would make continuing worthwhile: in units of the run's
        reward scale (the forecast's normalising scale) when ``relative`` (default), else reward units.
    epsilon : float
        Probability below which the improvement is judged out of reach.
    patience : int
        Consecutive forecasts the condition must hold for.
    window : int
        Logged rows averaged for "best so far".
    min_step : int
        Never stop before this optimizer step.
    relative : bool
        ``delta`` is a share of the run's reward scale (the same rule for a 0-1 pass rate and a summed
        reward of 0-3); False: reward units.

    Examples
    --------
    >>> rule = ImprovementStop(delta=0.02, epsilon=0.05, patience=3, relative=False)
    >>> rule.check({"p_improve": 0.01, "best": 0.61, "observed_until": 400})
    'P(final reward >= best so far 0.61 + 0.02) = 0.010 < 0.05'
    """

    kind = "improvement"

    def __init__(self, *, delta: float = 0.02, epsilon: float = 0.1, patience: int = 3, window: int = 5,
                 min_step: int = 0, relative: bool = True):  # fmt: skip
        if not 0 < epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1); got {epsilon}")
        if patience < 1 or window < 1:
            raise ValueError(f"patience and window must be >= 1; got {patience}, {window}")
        self.delta, self.epsilon, self.patience, self.window, self.min_step = (
            float(delta),
            float(epsilon),
            int(patience),
            int(window),
            int(min_step),
        )
        self.relative = bool(relative)

    def request(self) -> dict:
        return {"improve": {"delta": self.delta, "window": self.window, "relative": self.relative}}

    def check(self, result: dict) -> str | None:
        p = result.get("p_improve")
        if p is None or not math.isfinite(p) or result.get("observed_until", 0) < self.min_step:
            return None
        if p < self.epsilon:
            d = f"{self.delta:g}" + (" x scale" if self.relative and self.delta else "")
            return f"P(final reward >= best so far {result.get('best', float('nan')):.4g} + {d}) = {p:.3f} < {self.epsilon:g}"
        return None

    def to_dict(self) -> dict:
        return {"rule": self.kind, "delta": self.delta, "epsilon": self.epsilon, "patience": self.patience,
                "window": self.window, "min_step": self.min_step, "relative": self.relative}  # fmt: skip


class UtilityStop:
    """Stop when the expected-utility rule of ``bayesgrpo budget`` says "stop now" for ``patience`` fits.

    Utility of stopping at step ``s``: ``value_per_reward * R(s) - cost_per_step * (s - now)``
    (:func:`bayesgrpo.decisions.recommend_stop`); the rule fires when its recommended step is the
    current one.

    Parameters
    ----------
    cost_per_step : float, optional
        Cost of one more optimizer step (or give ``cost_per_hour`` and ``steps_per_hour``).
    value_per_reward : float
        Value of one unit of final reward.
    patience : int
        Consecutive forecasts the condition must hold for.
    min_step : int
        Never stop before this optimizer step.

    Examples
    --------
    >>> UtilityStop(cost_per_step=0.001).check({"stop_now": True, "recommended_stop": 300, "observed_until": 300})
    'expected utility is highest now: recommended stop step 300 <= current step 300 (cost 0.001/step, value 1/reward)'
    """

    kind = "utility"

    def __init__(self, *, cost_per_step: float | None = None, cost_per_hour: float | None = None,
                 steps_per_hour: float | None = None, value_per_reward: float = 1.0, patience: int = 2, min_step: int = 0):  # fmt: skip
        if cost_per_step is None and cost_per_hour is None:
            raise ValueError("UtilityStop needs cost_per_step (or cost_per_hour with steps_per_hour)")
        self.cost_per_step, self.cost_per_hour, self.steps_per_hour = cost_per_step, cost_per_hour, steps_per_hour
        self.value_per_reward, self.patience, self.min_step = float(value_per_reward), int(patience), int(min_step)

    def request(self) -> dict:
        u = {"value_per_reward": self.value_per_reward}
        for k in ("cost_per_step", "cost_per_hour", "steps_per_hour"):
            if getattr(self, k) is not None:
                u[k] = float(getattr(self, k))
        return {"utility": u}

    def check(self, result: dict) -> str | None:
        if not result.get("stop_now") or result.get("observed_until", 0) < self.min_step:
            return None
        cost = (f"{self.cost_per_step:g}/step" if self.cost_per_step is not None
                else f"{self.cost_per_hour:g}/h at {self.steps_per_hour:g} steps/h")  # fmt: skip
        return (
            f"expected utility is highest now: recommended stop step {result['recommended_stop']:.0f} <= current "
            f"step {result['observed_until']} (cost {cost}, value {self.value_per_reward:g}/reward)"
        )

    def to_dict(self) -> dict:
        return {"rule": self.kind, "cost_per_step": self.cost_per_step, "cost_per_hour": self.cost_per_hour,
                "steps_per_hour": self.steps_per_hour, "value_per_reward": self.value_per_reward,
                "patience": self.patience, "min_step": self.min_step}  # fmt: skip


class PolicyStop:
    """Stop when the stop policy (:class:`bayesgrpo.decisions.stop.StopPolicy`: the advice of ``forecast``,
    ``budget`` and ``backtest``) says ``stop`` for its ``patience`` consecutive forecasts.

    The policy runs in the forecasting worker (the training process stays light): each forecast carries
    its ``p_gain``, ``advice`` and the policy's measured bad-stop share. ``risk`` is the share of its stops
    allowed to lose more than 0.1 of the run's range (thresholds chosen on the yardstick's selection sources, the
    error rate measured on its locked test: ``bench/results/yardstick.md``); ``patience`` defaults to the measured
    one.

    Examples
    --------
    >>> rule = PolicyStop(risk=0.15)
    >>> rule.check({"advice": "stop", "p_gain": 0.12, "advice_error_rate": 0.062, "policy_patience": 1,
    ...             "observed_until": 400})
    'stop policy (risk 0.15): P(gain) 0.12 says stop (measured: 6% of its stops were bad)'
    """

    kind = "policy"

    def __init__(
        self, *, risk: float = DEFAULT_RISK, delta: float = 0.05, patience: int | None = None, min_step: int = 0
    ):
        if not 0 < risk < 1:
            raise ValueError(f"risk must be in (0, 1); got {risk}")
        if not delta > 0:
            raise ValueError(f"delta must be > 0; got {delta}")
        if patience is not None and patience < 1:
            raise ValueError(f"patience must be >= 1; got {patience}")
        self.risk, self.delta, self.min_step = float(risk), float(delta), int(min_step)
        self._patience = patience
        self.patience = patience or 1  # the shipped one once the first forecast names it

    def request(self) -> dict:
        pol = {"risk": self.risk, "delta": self.delta}
        if self._patience is not None:
            pol["patience"] = self._patience
        return {"policy": pol}

    def check(self, result: dict) -> str | None:
        if result.get("policy_patience"):
            self.patience = int(result["policy_patience"])
        if result.get("advice") != "stop" or result.get("observed_until", 0) < self.min_step:
            return None
        err = result.get("advice_error_rate", math.nan)
        measured = f"measured: {err:.0%} of its stops were bad" if math.isfinite(err) else "error rate unmeasured"
        return f"stop policy (risk {self.risk:g}): P(gain) {result.get('p_gain', math.nan):.2f} says stop ({measured})"

    def to_dict(self) -> dict:
        return {"rule": self.kind, "risk": self.risk, "delta": self.delta, "patience": self._patience,
                "min_step": self.min_step}  # fmt: skip


def _stop_rule(spec):
    if spec is None or isinstance(spec, (ImprovementStop, UtilityStop, PolicyStop)):
        return spec
    if type(spec).__name__ == "StopPolicy":  # bayesgrpo.decisions.stop.StopPolicy (not imported: keep this light)
        return PolicyStop(risk=spec.risk, delta=spec.delta, patience=spec.patience, min_step=0)
    if isinstance(spec, dict):
        kw = dict(spec)
        kind = kw.pop("rule", "improvement")
        if kind == "improvement":
            return ImprovementStop(**kw)
        if kind == "utility":
            return UtilityStop(**kw)
        if kind == "policy":
            return PolicyStop(**kw)
        raise ValueError(f"unknown stop rule {kind!r}; use 'improvement', 'utility' or 'policy'")
    if hasattr(spec, "check") and hasattr(spec, "request"):
        return spec  # a user rule with the same two methods
    raise TypeError(
        f"stop must be StopPolicy, PolicyStop, ImprovementStop, UtilityStop, a dict spec or None; got {type(spec).__name__}"
    )
