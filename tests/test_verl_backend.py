"""verl, live (issue 32): the ``bayesgrpo`` tracking backend ``trainer.logger`` accepts.

Tested against verl's own ``Tracking`` class when verl imports here (verl 0.9.0 installs without GPU
packages once ``ray`` and ``tensordict`` are present; its plugin entry point registers the backend at
``import verl``), and always against :class:`VerlTracking`, the constructor/dispatch of verl 0.9.0's
``verl/utils/tracking.py`` (read from its source: ``supported_backend``, the assert on unknown names, one
backend per name in ``self.logger``, ``log(data, step, backend=None)`` calling each ``log(data=, step=)``,
``finish()``). A forecast runs from verl-shaped log streams (the shipped verl example, in verl's
``{"step", "data"}`` records): in process with mocked sampling, and once with the real worker.
"""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace
from typing import ClassVar

import pytest
from inprocess_worker import InProcessWorker

from bayesgrpo.conventions import DEFAULT_RISK
from bayesgrpo.integrations.verl import BACKEND, BayesGRPOTracking, register
from bayesgrpo.io.verl import verl_config_meta
from bayesgrpo.resources import resource_path


class Recorder:
    """A backend that keeps what it was given (verl's console/file backends, as far as the test cares)."""

    def __init__(self):
        self.logged: list[tuple[int, dict]] = []
        self.finished = False

    def log(self, data, step):
        self.logged.append((step, dict(data)))

    def finish(self):
        self.finished = True


class VerlTracking:
    """verl 0.9.0's ``Tracking`` as its source has it, with a recording backend for every name it knows."""

    supported_backend: ClassVar[list[str]] = ["wandb", "tensorboard", "console", "file", "trackio"]

    def __init__(self, project_name, experiment_name, default_backend="console", config=None):
        if isinstance(default_backend, str):
            default_backend = [default_backend]
        for backend in default_backend:
            assert backend in self.supported_backend, f"{backend} is not supported"
        self.logger = {b: Recorder() for b in default_backend if b in ("console", "file")}
        self._finished = False

    def log(self, data, step, backend=None):
        for name, inst in self.logger.items():
            if backend is None or name in backend:
                inst.log(data=data, step=step)

    def finish(self, exit_code: int = 0):
        if self._finished:
            return
        self._finished = True
        for inst in self.logger.values():
            if hasattr(inst, "finish"):
                inst.finish()


def verl_records(n=None):
    return [
        json.loads(line) for line in resource_path("examples", "verl-slow-start", "grpo.jsonl").read_text().splitlines()
    ][:n]


def config(**opts):
    return {"trainer": {"project_name": "p", "experiment_name": "e", "total_training_steps": 400, BACKEND: opts},
            "actor_rollout_ref": {"rollout": {"n": 8}, "actor": {"optim": {"lr": 1e-6, "betas": [0.9, 0.999]}}},
            "data": {"train_batch_size": 16}, "algorithm": {"adv_estimator": "grpo"}}  # fmt: skip


def test_verl_config_gives_horizon_and_metadata():
    assert verl_config_meta(config()) == {"max_steps": 400, "group_size": 8, "learning_rate": 1e-6, "beta1": 0.9,
                                          "batch_size": 128, "algorithm": "grpo"}  # fmt: skip
    # trainer.total_training_steps left null: the total verl writes into the actor's optimiser config
    cfg = config()
    cfg["trainer"]["total_training_steps"] = None
    cfg["actor_rollout_ref"]["actor"]["optim"]["total_training_steps"] = 250
    assert verl_config_meta(cfg)["max_steps"] == 250
    assert verl_config_meta(None) == {} and verl_config_meta({"trainer": "x"}) == {}


def test_register_makes_tracking_accept_bayesgrpo_first_and_is_idempotent():
    cls = type("T", (VerlTracking,), {"supported_backend": list(VerlTracking.supported_backend)})
    with pytest.raises(AssertionError, match="bayesgrpo is not supported"):
        cls("p", "e", ["console", BACKEND])
    assert register(cls) is cls and register(cls) is cls
    assert cls.supported_backend.count(BACKEND) == 1
    w = InProcessWorker()
    t = cls("p", "e", ["console", "file", BACKEND], config(worker=w, history=False))
    assert list(t.logger) == [BACKEND, "console", "file"] and isinstance(t.logger[BACKEND], BayesGRPOTracking)
    t.finish()
    assert t.logger["console"].finished
    plain = cls("p", "e", ["console"], config())  # not asked for: no backend, no worker
    assert list(plain.logger) == ["console"]


def _stream(tracking, records, *, pause=0.0):
    for rec in records:
        tracking.log(data=dict(rec["data"]), step=rec["step"])
        if pause:
            time.sleep(pause)


def _check_forecasts(logged, *, last_step):
    fc = [(s, d) for s, d in logged if "bayesgrpo/final_q50" in d]
    assert fc, "no forecast reached the other backends"
    for s, d in fc:
        assert d["bayesgrpo/final_q10"] <= d["bayesgrpo/final_q50"] <= d["bayesgrpo/final_q90"]
        assert -0.5 < d["bayesgrpo/final_q50"] < 1.5 and 0 <= d["bayesgrpo/p_decline"] <= 1
        assert d["bayesgrpo/observed_until"] <= s
        assert "critic/score/mean" in d or s == last_step  # next to the reward, or the final one
    assert fc[-1][0] == last_step and fc[-1][1]["bayesgrpo/observed_until"] == last_step
    return fc


def test_a_verl_stream_gets_forecasts_next_to_the_reward_and_a_final_one(mock_sampler, tmp_path):
    cls = register(type("T", (VerlTracking,), {"supported_backend": list(VerlTracking.supported_backend)}))
    w = InProcessWorker()
    t = cls("p", "e", ["console", BACKEND], config(worker=w, every=20, history=str(tmp_path / "hist")))
    recs = verl_records(150)
    _stream(t, recs)
    ours = t.logger[BACKEND]
    t.finish()
    fc = _check_forecasts(t.logger["console"].logged, last_step=150)
    assert len(fc) >= 5  # mid-run forecasts (every 20 rewards after the 6th) and the final one
    req = [r for r in w.requests if r.get("kind") == "forecast"]
    assert req[0]["horizon"] == 400 and req[0]["meta"]["group_size"] == 8 and req[-1]["policy"]["risk"] == DEFAULT_RISK
    # the forecast read verl's own key for the reward
    assert req[0]["rows"][0]["critic/score/mean"] == recs[0]["data"]["critic/score/mean"]
    assert ours.latest["observed_until"] == 150 and ours.max_log_seconds < 0.5
    hist = (tmp_path / "hist" / "forecasts.csv").read_text().splitlines()
    assert len(hist) == 1 + ours._n_fits


def test_backend_never_raises_into_the_trainer(caplog):
    class Broken(InProcessWorker):
        def poll(self):
            raise RuntimeError("pipe exploded")

    be = BayesGRPOTracking("p", "e", config(), worker=Broken(), history=False)
    data = {"critic/score/mean": 0.1}
    be.log(data, 1)  # logged a warning, raised nothing, left the metrics alone
    assert data == {"critic/score/mean": 0.1} and "pipe exploded" in caplog.text
    be.finish()


def _real_tracking():
    pytest.importorskip("ray")
    pytest.importorskip("tensordict")
    try:
        import verl  # noqa: F401 - loads the plugin entry point (verl >= 0.9)
        from verl.utils.tracking import Tracking
    except ImportError as e:
        pytest.skip(f"verl does not import here ({e})")
    return Tracking


def test_verl_imports_register_the_backend_and_its_own_tracking_runs_it(mock_sampler, tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    Tracking = _real_tracking()
    assert BACKEND in Tracking.supported_backend  # registered by `import verl` (entry point verl.plugins)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    w = InProcessWorker()
    t = Tracking(project_name="p", experiment_name="e", default_backend=["console", "file", "tensorboard", BACKEND],
                 config=config(worker=w, every=20, history=False))  # fmt: skip
    assert next(iter(t.logger)) == BACKEND
    _stream(t, verl_records(120))
    t.finish()
    logged = [json.loads(x) for x in (tmp_path / "p" / "e.jsonl").read_text().splitlines()]  # verl's file backend
    _check_forecasts([(r["step"], r["data"]) for r in logged], last_step=120)
    from test_alerts import tensorboard_layout_and_tags

    layouts, tags = tensorboard_layout_and_tags(tmp_path / "tb")
    (series,) = layouts[0].category[0].chart[0].margin.series
    assert (series.value, series.lower, series.upper) == ("bayesgrpo/final_q50", "bayesgrpo/final_q10",
                                                          "bayesgrpo/final_q90")  # fmt: skip
    assert {"bayesgrpo/final_q50", "bayesgrpo/final_q10", "bayesgrpo/final_q90", "critic/score/mean"} <= tags


@pytest.mark.slow  # the real worker process (its compile, ~20-30 s) forecasting while verl-shaped steps are logged
def test_real_worker_forecasts_a_verl_log_stream_without_blocking_a_step(tmp_path, monkeypatch):
    try:
        Tracking = _real_tracking()
        where = "verl's Tracking"
    except pytest.skip.Exception:
        Tracking, where = register(type("T", (VerlTracking,), {"supported_backend": ["console", "file"]})), "stand-in"
    monkeypatch.chdir(tmp_path)
    small = {"draws": 100, "tune": 100, "chains": 2}
    t = Tracking(project_name="p", experiment_name="e", default_backend=["file", BACKEND],
                 config=config(every=25, sampler=small, history=str(tmp_path / "hist"), final_wait=60, max_wait=240))  # fmt: skip
    ours = t.logger[BACKEND]
    ours.worker.wait_for(1, timeout=240)  # the warm-up compile, as a real run's first minutes would cover it
    _stream(t, verl_records(200), pause=0.03)
    t.finish()
    if where == "stand-in":
        logged = t.logger["file"].logged
    else:
        logged = [
            (r["step"], r["data"]) for r in map(json.loads, (tmp_path / "p" / "e.jsonl").read_text().splitlines())
        ]
    fc = _check_forecasts(logged, last_step=200)
    assert ours._n_fits >= 2 and len(fc) >= 2, (where, ours._n_fits)
    assert ours.max_log_seconds < 0.05  # a fit never runs inside a step
    assert all(math.isfinite(d["bayesgrpo/fit_seconds"]) for _, d in fc)
    assert SimpleNamespace(**ours.latest).status in ("ok", "warning")
