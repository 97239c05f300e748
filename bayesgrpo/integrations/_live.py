"""What every live integration logs and records, defined once (the TRL callback, the verl backend): the
``bayesgrpo/*`` keys of a forecast result (:func:`logged_values`) and the numeric row of one log call
(:func:`numeric_row`). Light: no PyMC, no trainer package."""

from __future__ import annotations

import logging
import math
from typing import TypeGuard

from bayesgrpo.integrations._requests import SEVERITY_RANK

__all__ = ["PREFIX", "LOGGED_KEYS", "logged_values", "numeric_row", "finite", "answer_kind"]

log = logging.getLogger("bayesgrpo")

PREFIX = "bayesgrpo/"
#: result field -> logged key (always logged when finite; the optional ones only with their option)
LOGGED_KEYS = {
    "final_q10": "bayesgrpo/final_q10",
    "final_q50": "bayesgrpo/final_q50",
    "final_q90": "bayesgrpo/final_q90",
    "stop_step_q50": "bayesgrpo/stop_step_q50",
    "p_stop_before_horizon": "bayesgrpo/p_stop_before_horizon",
    "p_plateaued": "bayesgrpo/p_plateaued",
    "observed_until": "bayesgrpo/observed_until",
    "r_hat_max": "bayesgrpo/r_hat_max",
    "seconds": "bayesgrpo/fit_seconds",
    "p_target": "bayesgrpo/p_target",
    "p_improve": "bayesgrpo/p_improve",
    "recommended_stop": "bayesgrpo/recommended_stop",
    "p_gain": "bayesgrpo/p_gain",
    "p_decline": "bayesgrpo/p_decline",
}


def finite(v) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def numeric_row(logs: dict, step: int) -> dict | None:
    """The numbers of one log call (not our own ``bayesgrpo/*`` keys) with their ``step``; None for a call
    with no number or the end-of-training summary (``train_runtime``)."""
    if "train_runtime" in logs:
        return None
    row = {k: float(v) for k, v in logs.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.startswith(PREFIX) and k != "step"}  # fmt: skip
    if not row:
        return None
    row["step"] = int(step)
    return row


def logged_values(res: dict, *, n_failures: int) -> dict:
    """The ``bayesgrpo/*`` numbers of one worker result (:data:`LOGGED_KEYS` that are finite; no stop step when
    it is censored at the horizon), its status flags, the failure-mode flags as numbers (0 none .. 3 critical)
    and the count of failed fits."""
    out = {}
    censored = finite(res.get("p_stop_before_horizon")) and not res["p_stop_before_horizon"] >= 0.5
    for src, key in LOGGED_KEYS.items():
        v = res.get(src)
        if src == "stop_step_q50" and censored:
            continue  # not settled by the horizon: no step to log (p_stop_before_horizon says so)
        if finite(v):
            out[key] = float(v)
    if res.get("status") in ("ok", "warning", "complete"):
        out[PREFIX + "sampler_warning"] = float(res["status"] == "warning")
        out[PREFIX + "complete"] = float(res["status"] == "complete")
    for mode, sev in (res.get("flags") or {}).items():
        out[f"{PREFIX}flag/{mode}"] = SEVERITY_RANK.get(sev, math.nan)
    out[PREFIX + "fit_failures"] = float(n_failures)
    return out


def answer_kind(res: dict, step: int) -> str:
    """What one worker answer is -- ``"warmup"``, ``"forecast"`` (a fit that succeeded) or ``"failed"`` -- with
    the logging every live integration does for it (a failed warm-up or fit is a warning: training goes on; a
    forecast is logged at INFO, with a warning when its sampler health is poor)."""
    if res.get("kind") == "warmup":
        if not res.get("ok"):
            log.warning("bayesgrpo: model warm-up failed in the worker: %s", res.get("error"))
        return "warmup"
    if not res.get("ok"):
        log.warning("bayesgrpo: forecast failed at step %d (training goes on): %s", step, res.get("error"))
        return "failed"
    log.info("bayesgrpo: forecast from step %s: final reward %.4g [%.4g, %.4g]",
             res.get("observed_until"), res.get("final_q50"), res.get("final_q10"), res.get("final_q90"))  # fmt: skip
    if res.get("status") == "warning":
        log.warning("bayesgrpo: forecast from step %s: %s", res.get("observed_until"), res.get("status_reason"))
    return "forecast"
