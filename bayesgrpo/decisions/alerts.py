"""The measured error rates of the live alerts' signals (issue 32).

The live integrations (``BayesGRPOCallback``, ``watch``, the verl backend) send an alert to the user's
tracker when a signal changes (:mod:`bayesgrpo.integrations.alerts`), and its text quotes how often that
signal was wrong when it was measured:

* the stop advice: the stop policy's own measured share of bad stops (:attr:`bayesgrpo.decisions.stop.StopPolicy.error_rate`,
  leave-one-source-out, ``resources/decision_<kind>.json``);
* P(decline) at or above its alarm level (the level itself chosen there, leave-one-source-out: the level of
  largest F1 on the other sources), and the failure flags at ``warning`` or ``critical``: the share of
  their alarms the event did not follow on the development runs cut at 20 / 30 / 50% of their steps
  (``bench/monitors.py``, beside the run monitors ``rlwatch`` and ``rldoctor``), shipped as
  ``resources/alerts_<kind>.json`` with its provenance. A signal that was never measured (no such file, or
  a flag whose mode no logged run can confirm) is quoted as unmeasured, never given a number.
"""

from __future__ import annotations

import functools
import json
from importlib.resources import files

__all__ = ["alert_rates_for", "decline_alarm_for"]


@functools.lru_cache(maxsize=8)
def _load(kind: str) -> dict:
    res = files("bayesgrpo.resources").joinpath(f"alerts_{kind}.json")
    return json.loads(res.read_text()) if res.is_file() else {}


def alert_rates_for(kind: str = "oscillator") -> dict:
    """Signal -> ``{"false_share", "cases", "sources"}`` of the measured signals of ``kind`` (what a live
    forecast result carries for the alert text; empty when nothing was measured)."""
    sig = _load(kind).get("signals", {})
    return {k: {f: v.get(f) for f in ("false_share", "cases", "sources")} for k, v in sig.items()
            if v.get("false_share") is not None}  # fmt: skip


def decline_alarm_for(kind: str = "oscillator") -> float | None:
    """The P(decline) alarm level chosen by the measurement of ``kind`` (None when nothing ships)."""
    v = _load(kind).get("signals", {}).get("decline", {}).get("alarm_level")
    return float(v) if isinstance(v, (int, float)) else None
