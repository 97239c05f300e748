"""Live forecasts while a run trains.

* :class:`bayesgrpo.integrations.trl.BayesGRPOCallback` — a ``transformers.Trainer`` / TRL
  ``GRPOTrainer`` callback (``pip install bayesgrpo[trl]``) that forecasts in a background process
  and logs ``bayesgrpo/*`` numbers through the trainer's own logging path (W&B, TensorBoard, console).
* :func:`bayesgrpo.integrations.watch.watch` (CLI ``bayesgrpo watch PATH``) — follows a log that is
  being written by any other trainer and re-forecasts every N new steps.

Both share one persistent forecasting process (:class:`bayesgrpo.integrations._worker.ForecastWorker`).
Nothing heavy is imported here: ``import bayesgrpo.integrations`` needs neither torch nor PyMC.
"""

from __future__ import annotations

__all__ = ["BayesGRPOCallback", "ImprovementStop", "UtilityStop", "PolicyStop", "watch"]


def __getattr__(name):
    if name in ("BayesGRPOCallback", "ImprovementStop", "UtilityStop", "PolicyStop"):
        from bayesgrpo.integrations import trl

        return getattr(trl, name)
    if name == "watch":
        from bayesgrpo.integrations.watch import watch

        return watch
    raise AttributeError(f"module 'bayesgrpo.integrations' has no attribute {name!r}")
