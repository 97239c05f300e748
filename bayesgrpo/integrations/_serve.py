"""The worker process of the live integrations (``python -m bayesgrpo.integrations._serve``): it answers
forecast requests from its stdin until EOF, each through the one forecasting core of every CLI verb
(:func:`bayesgrpo.forecast.batch.forecast_batch`: the run plan's horizon, never moved), and reports the
numbers the callback and ``watch`` log (:func:`summarize_fit`; a run logged up to its horizon is
``complete``: :func:`summarize_complete`)."""

from __future__ import annotations

import logging
import math
import os
import sys
import time
import traceback
import warnings

from bayesgrpo.conventions import DEFAULT_KIND
from bayesgrpo.integrations._requests import REPORT_REFRESH, _light, _recv, _send, request_runs
from bayesgrpo.series import best_window_mean

__all__ = ["summarize_fit", "summarize_complete", "main"]

log = logging.getLogger("bayesgrpo")


def _lib():
    """Everything this package uses from bayesgrpo, imported in ONE place.

    ``Forecaster``, ``SamplerConfig``, ``forecast_batch`` (the one forecasting core), ``diagnose_runs``,
    ``recommend_stop``, ``Costs``, ``write_report`` and the error types, plus everything of :func:`_light`. Imported lazily (the
    training process only needs the light names; PyMC is imported in the worker only).
    """
    import types

    from bayesgrpo.decisions import recommend_stop
    from bayesgrpo.decisions.alerts import alert_rates_for, decline_alarm_for
    from bayesgrpo.decisions.budget import Costs
    from bayesgrpo.diagnose import diagnose_runs
    from bayesgrpo.errors import BayesGRPOError, ForecastError, LogFormatError
    from bayesgrpo.forecast import Forecaster, SamplerConfig
    from bayesgrpo.forecast.batch import forecast_batch
    from bayesgrpo.report import write_report

    return types.SimpleNamespace(
        **vars(_light()), Forecaster=Forecaster, SamplerConfig=SamplerConfig, forecast_batch=forecast_batch,
        recommend_stop=recommend_stop, Costs=Costs, write_report=write_report, alert_rates_for=alert_rates_for,
        decline_alarm_for=decline_alarm_for,
        diagnose_runs=diagnose_runs, BayesGRPOError=BayesGRPOError, ForecastError=ForecastError,
        LogFormatError=LogFormatError,
    )  # fmt: skip


def _improve_delta(improve: dict, scale: float) -> float:
    """The improvement a stop rule asks for, in reward units (``delta x scale`` when relative)."""
    d = float(improve.get("delta", 0.0))
    return d * float(scale) if improve.get("relative") else d


def summarize_fit(fit, run_id: str, *, target=None, improve=None, utility=None, ceiling=None, diagnose=True,
                  policy=None) -> dict:  # fmt: skip
    """The numbers the callback and ``watch`` report, from a fitted forecast of one run.

    Returns a dict of plain floats: ``observed_until, n_obs, horizon, final_mean, final_q10,
    final_q50, final_q90, stop_step_q50, p_stop_before_horizon, p_plateaued, plateau_q50,
    p_underdamped, r_hat_max, divergences``, ``level`` (the current level) and ``p_decline`` (P(final <
    level - 0.1 x scale): :func:`bayesgrpo.forecast.decision.decision_probabilities`), ``alert_rates`` and
    ``decline_alarm`` (the measured error rates the alerts quote and the measured P(decline) alarm level:
    :mod:`bayesgrpo.decisions.alerts`), ``status`` (``ok`` or ``warning``: poor sampler health,
    the reason in ``status_reason``) plus ``p_target`` (with ``target``), ``best``/``p_improve`` (with
    ``improve``), ``recommended_stop``/``stop_now``/``expected_reward_at_stop`` (with ``utility``) and
    ``flags`` (mode -> severity name) and ``flag_evidence`` (with ``diagnose``) and the stop policy's answer (with ``policy``:
    :func:`policy_answer`). ``p_plateaued`` is the posterior probability
    that the latent reward has already realised ``stop_fraction`` (95%) of its gain from R0 to the
    plateau. ``stop_step_q50`` is censored at the horizon when ``p_stop_before_horizon < 0.5`` (shown
    as ``>H``; the callback then logs no stop step).
    """
    import numpy as np

    lib = _lib()
    tab = fit.table()
    row = tab.loc[tab["run_id"] == run_id].iloc[0]
    fin = np.asarray(fit.final_draws(run_id), dtype=float)
    pdr = fit.paths(run_id)
    out = {
        "run_id": run_id,
        "observed_until": int(row["observed_until"]), "n_obs": int(row["n_obs"]), "horizon": int(row["horizon"]),
        "final_mean": float(row["final_mean"]), "final_q10": float(row["final_q10"]),
        "final_q50": float(row["final_q50"]), "final_q90": float(row["final_q90"]),
        "stop_step_q50": float(row["stop_q50"]), "p_stop_before_horizon": float(row["p_stop_before_horizon"]),
        "plateau_q50": float(row["plateau_q50"]), "p_underdamped": float(row["p_underdamped"]),
        "r_hat_max": float(row["r_hat_max"]), "divergences": float(row["divergences"]),
    }  # fmt: skip
    out["status"], out["status_reason"] = fit.health_status(run_id)
    nums = fit.decision_numbers(run_id, delta=fit.config.delta)
    out["p_decline"], out["level"] = float(nums["p_decline"]), float(nums["level"])
    out["alert_rates"], out["decline_alarm"] = (
        lib.alert_rates_for(fit.config.kind),
        lib.decline_alarm_for(fit.config.kind),
    )
    sf = float(fit.config.stop_fraction)
    if pdr.latent_now is not None:
        gain = pdr.r_star - pdr.r0
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(np.abs(gain) > 1e-12, (pdr.latent_now - pdr.r0) / gain, 1.0)
        out["p_plateaued"] = float(np.mean(frac >= sf))
    else:
        out["p_plateaued"] = math.nan
    if target is not None:
        out["p_target"] = float(np.mean(fin >= float(target)))
    if improve is not None:
        obs = fit.runs.run(run_id)["reward"].to_numpy(dtype=float)
        best = best_window_mean(obs, int(improve.get("window", 5)))
        out["best"] = best
        out["p_improve"] = float(np.mean(fin >= best + _improve_delta(improve, fit.infos[run_id].scale)))
    if utility:
        kw = dict(utility)
        kw.setdefault("max_steps", out["horizon"])
        rec = lib.recommend_stop(pdr, **kw)
        out["recommended_stop"] = float(rec.step)
        out["stop_now"] = bool(rec.step <= out["observed_until"])
        out["expected_reward_at_stop"] = float(rec.expected_reward)
        out["stop_rule"] = rec.rule
    if policy:
        out.update(policy_answer(fit, run_id, policy))
    if diagnose:
        out.update(_flags(lib.diagnose_runs(fit.runs.select([run_id]), posteriors={run_id: pdr}, ceiling=ceiling)))
    out["table"] = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.to_dict().items()}
    return out


def _flags(res) -> dict:
    """``flags`` (mode -> severity) and ``flag_evidence`` (mode -> its evidence, for a warning or worse: what
    an alert says) of one run's diagnosis."""
    rows = list(zip(res["mode"], res["severity"], res["evidence"], strict=True))
    return {"flags": {str(m): str(s) for m, s, _ in rows},
            "flag_evidence": {str(m): str(e) for m, s, e in rows if str(s) in ("warning", "critical")}}  # fmt: skip


def policy_answer(fit, run_id: str, policy: dict) -> dict:
    """The stop policy's answer to one forecast (:class:`bayesgrpo.decisions.stop.StopPolicy` of the request's
    ``policy`` fields, the fit's kind): ``p_gain``, ``advice``, its measured ``advice_error_rate``, the
    policy's ``patience`` and its description -- what the callback's and ``watch``'s stop rule read."""
    from bayesgrpo.decisions.stop import StopPolicy
    from bayesgrpo.forecast.decision import decision_probabilities

    pol = StopPolicy(kind=fit.config.kind, **policy)
    nums = decision_probabilities(fit, run_id, delta=pol.delta)
    advice = pol.advise(nums, status=fit.health_status(run_id)[0])
    return {"p_gain": float(nums["p_gain"]), "advice": advice, "advice_error_rate": float(pol.error_rate),
            "policy_patience": int(pol.patience or 1), "policy": pol.describe()}  # fmt: skip


def summarize_complete(runs, run_id: str, row, *, target=None, improve=None, utility=None, ceiling=None,
                       diagnose=True, policy=None) -> dict:  # fmt: skip
    """The result for a run logged up to its horizon (status ``complete``): the observed final reward
    as a zero-width interval, no stop step; ``p_target`` / ``p_improve`` are 0 or 1 and a stop rule's
    ``stop_now`` is True (there is nothing left to train); a stop policy has nothing to advise."""
    import numpy as np

    v = float(row["final_q50"])
    out = {
        "run_id": run_id, "observed_until": int(row["observed_until"]), "n_obs": int(row["n_obs"]),
        "horizon": int(row["horizon"]), "final_mean": v, "final_q10": v, "final_q50": v, "final_q90": v,
        "stop_step_q50": math.nan, "p_stop_before_horizon": math.nan, "p_plateaued": math.nan,
        "plateau_q50": math.nan, "status": "complete", "status_reason": "",
    }  # fmt: skip
    if target is not None:
        out["p_target"] = float(v >= float(target))
    if improve is not None:
        y = runs.run(run_id)["reward"].to_numpy(dtype=float)
        best = best_window_mean(y, int(improve.get("window", 5)))
        out["best"], out["p_improve"] = best, float(v >= best + _improve_delta(improve, float(np.ptp(y))))
    if utility:
        out.update(recommended_stop=float(int(row["horizon"])), stop_now=True, expected_reward_at_stop=v,
                   stop_rule="complete")  # fmt: skip
    if diagnose:
        out.update(_flags(_lib().diagnose_runs(runs.select([run_id]), ceiling=ceiling)))
    out["table"] = {k: (v_.item() if hasattr(v_, "item") else v_) for k, v_ in row.to_dict().items()}
    return out


def _kind(req: dict) -> str:
    """The model kind a request asks for (``model_kind``; requests of bayesgrpo 0.1 said ``model``)."""
    return req.get("model_kind") or req.get("model") or DEFAULT_KIND


def _handle(req: dict) -> dict:
    lib = _lib()
    if req.get("kind") == "warmup":
        return _warmup(req)
    rid = req["run_id"]
    fid = rid
    kw = dict(target=req.get("target"), improve=req.get("improve"), utility=req.get("utility"),
              ceiling=req.get("ceiling"), diagnose=req.get("diagnose", True), policy=req.get("policy"))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = request_runs(req)
        fc = lib.Forecaster(_kind(req), sampler=lib.SamplerConfig(**req.get("sampler", {})))
        # the same core as every CLI verb: the run's plan (the horizon the user or the trainer set, never
        # moved: a run logged up to it is complete), then the fit
        res = lib.forecast_batch(runs, forecaster=fc, horizon=req.get("horizon") or None, strict=True)
        row = res.table.set_index("run_id").loc[fid].copy()
        row["run_id"] = fid
        if fid in res.complete:
            out = summarize_complete(runs, fid, row, **kw)
        else:
            out = summarize_fit(res.fit, fid, **kw)
            if req.get("plot"):
                _plot(res.fit, fid, req["plot"])
                out["plot"] = str(req["plot"])
        if req.get("report"):  # after every answer, a complete run's too: the page shows what the terminal shows
            out["report"] = _report(res, out, req, title=f"bayesgrpo live: {rid}")
        out["run_id"] = rid
    caught_msgs = [f"{w.category.__name__}: {w.message}" for w in caught]
    out["warnings"] = caught_msgs[:10]
    return out


def _report(res, answer: dict, req: dict, *, title: str) -> str:
    """Rewrite the live HTML report of the forecast ``res`` (a BatchResult: its table's status, or the run's
    completion) with the stop policy's ``advice`` of the ``answer`` the terminal shows, when it carries one (the
    forecast table's columns: ``p_gain``, ``advice``, ``advice_error_rate`` -- the measured rate of a ``stop``);
    atomically, and the page reloads itself."""
    lib = _lib()
    if answer.get("advice"):  # the request's one run
        err = answer.get("advice_error_rate") if answer["advice"] == "stop" else None
        res.table = res.table.assign(p_gain=answer.get("p_gain", math.nan), advice=answer["advice"],
                                     advice_error_rate=math.nan if err is None else err)  # fmt: skip
    u = req.get("utility") or {}
    cost = lib.Costs(**{k: u.get(k) for k in ("cost_per_step", "cost_per_hour", "steps_per_hour")}).per_step
    p = lib.write_report(res, req["report"], target=req.get("target"), ceiling=req.get("ceiling"),
                         cost_per_step=cost, value_per_reward=u.get("value_per_reward"), title=title,
                         refresh=req.get("report_refresh", REPORT_REFRESH))  # fmt: skip
    return str(p)


def _plot(fit, run_id: str, path: str) -> None:
    """The fan chart of the live forecast, written atomically (readers never see a half-written chart)."""
    from bayesgrpo.io.output import save_figure
    from bayesgrpo.plots.fan import fan_chart

    save_figure(fan_chart(fit, run_id), path, dpi=100)  # a Figure without pyplot: no backend to switch


def _warmup(req: dict) -> dict:
    """Compile the model on a synthetic curve so the first real forecast takes seconds."""
    import numpy as np
    import pandas as pd

    lib = _lib()
    n = 12
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(0)
    y = 0.6 - 0.4 * np.exp(-steps / 8.0) + 0.02 * rng.standard_normal(n)
    df = pd.DataFrame({"run_id": "warmup", "step": steps, "reward": y})
    meta = {k: v for k, v in req.get("meta", {}).items() if k in ("beta1", "refresh_interval")}
    runs = lib.RunSet.from_frames(df, pd.DataFrame([{"run_id": "warmup", **meta}]))
    smp = {**req.get("sampler", {}), "draws": 10, "tune": 10}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.Forecaster(_kind(req), sampler=lib.SamplerConfig(**smp)).fit(runs, horizon=3 * n)
    return {"run_id": "warmup"}


# ----------------------------------------------------------------------------- worker side
def main() -> None:  # pragma: no cover - runs in the child process (exercised by the tests)
    """Entry point of the worker process: answer requests from stdin until EOF or shutdown."""
    proto_in = sys.stdin.buffer
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by libraries goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    try:
        os.nice(int(os.environ.get("BAYESGRPO_WORKER_NICE", "19")))
    except (OSError, ValueError, AttributeError) as e:
        print(f"bayesgrpo worker: could not lower priority ({e})", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    while True:
        req = _recv(proto_in)
        if req is None or req.get("kind") == "shutdown":
            break
        t0 = time.perf_counter()
        try:
            res = _handle(req)
            res["ok"] = True
        except Exception as e:  # noqa: BLE001 - every failure is reported back, the worker lives on
            res = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)}
            print(f"bayesgrpo worker: request {req.get('id')} failed\n{res['traceback']}", file=sys.stderr)
        res["id"] = req.get("id")
        res["kind"] = req.get("kind", "forecast")
        res["seconds"] = time.perf_counter() - t0
        try:
            _send(proto_out, res)
        except (OSError, ValueError) as e:
            print(f"bayesgrpo worker: parent gone ({e}); exiting", file=sys.stderr)
            break


if __name__ == "__main__":  # pragma: no cover
    main()
