"""Backtest harness: truncation, truth, scoring, resume, skipped-run accounting (no MCMC)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.evaluation.backtest import backtest
from bayesgrpo.evaluation.methods import BAYES, BAYES_CTX, BayesGRPOMethod, resolve_methods
from bayesgrpo.evaluation.scoring import plateau_reached, run_truth, score_draws, summarize_weighted, true_stop_step
from bayesgrpo.schema import RunSet


# ------------------------------------------------------------------ fakes
class FakeFit:
    """Same interface the backtest uses: table(), final_draws(run_id); draws centred on the last value."""

    def __init__(self, runs, horizon, calls):
        self.runs = runs
        self.horizon = horizon
        calls.append({"ids": list(runs.run_ids), "horizon": dict(horizon)})

    def table(self):
        rows = []
        for r in self.runs.run_ids:
            rows.append(
                dict(
                    run_id=r,
                    r_hat_max=1.0,
                    ess_min=400.0,
                    divergences=0,
                    p_stop_before_horizon=0.9,
                    stop_q50=10.0,
                    observed_until=int(self.runs.run(r)["step"].iloc[-1]),
                )
            )
        return pd.DataFrame(rows)

    def final_draws(self, r):
        last = float(self.runs.run(r)["reward"].iloc[-1])
        return last + np.linspace(-1, 1, 201)


class FakeForecaster:
    def __init__(self, calls):
        self.calls = calls

    def fit(self, runs, *, horizon=None, context=None, progress=None):
        return FakeFit(runs, horizon, self.calls)


def _runs(n_points=(50, 50, 4), step0=1):
    rows, meta = [], []
    for k, n in enumerate(n_points):
        rid = f"r{k}"
        for i in range(n):
            rows.append(dict(run_id=rid, step=step0 + i, reward=float(step0 + i)))
        meta.append(dict(run_id=rid, source_repo="A" if k == 0 else "B"))
    return RunSet.from_frames(pd.DataFrame(rows), pd.DataFrame(meta))


def _bt(runs, tmp_path=None, calls=None, **kw):
    calls = [] if calls is None else calls
    kw.setdefault("peers", ())
    fake = BayesGRPOMethod(BAYES, forecaster=lambda hierarchical: FakeForecaster(calls))
    return backtest(runs, cutoffs=kw.pop("cutoffs", (0.1, 0.5)), out_dir=tmp_path, methods={BAYES: fake}, **kw), calls


# ------------------------------------------------------------------ truncation / horizon
def test_truncation_and_horizon():
    rs = _runs((101,))  # steps 1..101: span 100
    res, calls = _bt(rs, cutoffs=(0.1, 0.3))
    # cutoff 0.1 -> steps <= 1 + 10 = 11 (11 points); 0.3 -> steps <= 31
    c = res.cases.set_index("cutoff")
    assert c.loc[0.1, "observed_until"] == 11 and c.loc[0.1, "n_obs"] == 11
    assert c.loc[0.3, "observed_until"] == 31 and c.loc[0.3, "n_obs"] == 31
    assert (res.cases["horizon"] == 101).all()
    # one fit per cutoff, horizon = the run's own last step
    assert len(calls) == 2 and calls[0]["horizon"] == {"r0": 101}
    # fake draws are centred on the last observed value -> median = observed_until
    assert c.loc[0.1, "median"] == pytest.approx(11.0)


# ------------------------------------------------------------------ truth
def test_truth_hand_example():
    # steps 1..100 -> window (1 + 0.9*99, 100] = (90.1, 100] -> steps 91..100; rewards = step
    df = pd.DataFrame({"step": np.arange(1, 101), "reward": np.arange(1, 101, dtype=float)})
    truth, rng, s0, H = run_truth(df)
    assert truth == pytest.approx(np.mean(np.arange(91, 101)))
    assert (s0, H) == (1, 100)
    assert rng == pytest.approx(np.quantile(np.arange(1, 101), 0.95) - np.quantile(np.arange(1, 101), 0.05))
    # logging every 5 from 5 to 200 -> threshold 180.5 -> 185..200
    df = pd.DataFrame({"step": np.arange(5, 201, 5), "reward": np.arange(5, 201, 5, dtype=float)})
    assert run_truth(df)[0] == pytest.approx(np.mean([185, 190, 195, 200]))


# ------------------------------------------------------------------ scoring
def test_score_draws_known():
    draws = np.arange(1, 101, dtype=float)  # uniform 1..100
    s = score_draws(draws, truth=50.5, scale=10.0)
    assert s["median"] == pytest.approx(50.5)
    assert s["abs_err"] == 0 and s["nae"] == 0
    assert s["cover50"] == s["cover80"] == s["cover90"] == 1.0
    assert s["width80"] == pytest.approx(np.quantile(draws, 0.9) - np.quantile(draws, 0.1))
    assert s["nwidth80"] == pytest.approx(s["width80"] / 10)
    # CRPS of the empirical distribution, brute force
    crps = np.mean(np.abs(draws - 50.5)) - 0.5 * np.mean(np.abs(draws[:, None] - draws[None, :]))
    assert s["crps"] == pytest.approx(crps)
    assert s["ncrps"] == pytest.approx(crps / 10)
    assert s["pit"] == pytest.approx(0.5, abs=0.01)
    s = score_draws(draws, truth=95.0, scale=1.0)  # outside the 80% (10.9..90.1), inside 90% (5.95..95.05)
    assert (s["cover50"], s["cover80"], s["cover90"]) == (0.0, 0.0, 1.0)
    s = score_draws(np.full(10, 3.0), truth=5.0, scale=2.0)  # point forecast: CRPS = |x - y|
    assert s["crps"] == pytest.approx(2.0) and s["ncrps"] == pytest.approx(1.0)


def test_stop_and_plateau_truth():
    s = np.arange(0, 200)
    e = 1 - np.exp(-s / 20.0)  # plateau ~1; 95% of gain at ~ -20 ln(0.05) ~ 60
    st = true_stop_step(s, e)
    plateau = e[final_window_steps(s)].mean()
    assert st == s[np.argmax(e >= 0.95 * plateau)]
    assert 55 <= st <= 62
    assert np.isnan(true_stop_step(s, np.full(200, 0.3)))
    rng = np.random.default_rng(0)
    assert plateau_reached(0.5 + 0.01 * rng.standard_normal(100)) is True
    assert plateau_reached(np.linspace(0, 1, 100)) is False


def final_window_steps(s):
    from bayesgrpo.plan import final_window_mask

    return final_window_mask(s, s0=s[0], horizon=s[-1])


# ------------------------------------------------------------------ skipped, resume, peers, ctx
def test_skipped_accounting():
    rs = _runs((50, 30, 4))
    res, _ = _bt(rs, cutoffs=(0.1, 0.5))
    sk = res.skipped
    # r2 has 4 points: 1 and 2 at the cutoffs, skipped at both; r1 (30 points, span 29): cutoff 0.1 -> steps <= 3.9
    # -> 3 points, the fewest a forecast takes (bayesgrpo.plan.MIN_POINTS)
    assert set(map(tuple, sk[["run_id", "cutoff"]].to_numpy())) == {("r2", 0.1), ("r2", 0.5)}
    assert sk["reason"].str.contains("a forecast needs at least 3").all()  # the plan's one message
    assert len(res.cases) == 4  # r0 and r1 at 0.1 and 0.5


def test_resume_skips_done_cases(tmp_path):
    rs = _runs((50, 60))
    res1, calls1 = _bt(rs, tmp_path, peers=("last_value",))
    n1 = len(res1.cases)
    assert n1 == 2 * 2 * 2 and len(calls1) == 2
    assert (tmp_path / "cases.csv").exists() and (tmp_path / "summary.md").exists()
    res2, calls2 = _bt(rs, tmp_path, peers=("last_value",))
    assert calls2 == []  # nothing refitted
    pd.testing.assert_frame_equal(
        res1.cases[["run_id", "cutoff", "method", "median"]], res2.cases[["run_id", "cutoff", "method", "median"]]
    )
    # drop one bayesgrpo case from the ledger: exactly that one is redone
    led = pd.read_csv(tmp_path / "cases.csv")
    led = led[~((led.run_id == "r1") & (led.cutoff == 0.5) & (led.method == BAYES))]
    led.to_csv(tmp_path / "cases.csv", index=False)
    res3, calls3 = _bt(rs, tmp_path, peers=("last_value",))
    assert [c["ids"] for c in calls3] == [["r1"]]
    assert len(res3.cases) == n1


def test_peers_and_failures_recorded():
    rs = _runs((60,))
    res, _ = _bt(rs, peers=("last_value", "exponential"), cutoffs=(0.3,))
    c = res.cases.set_index("method")
    assert bool(c.loc["last_value", "ok"]) and "exponential" in c.index  # an alias keeps its name
    s = res.summary.set_index("method")
    assert s.loc[BAYES, "failure_rate"] == 0.0
    assert (
        resolve_methods("none") == () and "domhan" in resolve_methods("all") and "lc_pfn" not in resolve_methods("all")
    )
    with pytest.raises(ValueError, match=r"unknown peer.*nonexistent_peer"):
        _bt(rs, peers=("last_value", "nonexistent_peer"), cutoffs=(0.3,))


def test_failed_fit_is_an_error_row_and_warnings_are_recorded():
    import warnings as _w

    rs = _runs((60, 60))

    class Boom(FakeForecaster):
        def fit(self, runs, *, horizon=None, context=None, progress=None):
            _w.warn("sampler health is poor", UserWarning, stacklevel=2)
            if "r1" in runs.run_ids:
                raise RuntimeError("sampling exploded")
            return FakeFit(runs, horizon, [])

    fake = BayesGRPOMethod(BAYES, forecaster=lambda h: Boom([]))
    res = backtest(rs, cutoffs=(0.5,), peers=(), methods={BAYES: fake})
    c = res.cases.set_index("run_id")
    assert bool(c.loc["r0", "ok"]) and not bool(c.loc["r1", "ok"])  # the joint call failed; retried one by one
    assert "sampling exploded" in c.loc["r1", "message"]
    assert "sampler health is poor" in c.loc["r0", "warnings"]


def test_context_pool_excludes_self():
    rs = _runs((40, 40, 40))  # r0: source A; r1, r2: source B
    calls = []

    class CtxForecaster(FakeForecaster):
        def fit(self, runs, *, horizon=None, context=None, progress=None):
            self.calls.append({"ids": list(runs.run_ids), "ctx": [] if context is None else list(context.run_ids)})
            return FakeFit(runs, horizon, [])

    fake = BayesGRPOMethod(BAYES_CTX, forecaster=lambda h: CtxForecaster(calls))
    res = backtest(rs, cutoffs=(0.5,), context=rs, peers=(), include_single=False, methods={BAYES_CTX: fake})
    ctx = {c["ids"][0]: c["ctx"] for c in calls}
    assert ctx == {"r0": [], "r1": ["r2"], "r2": ["r1"]}
    assert set(res.cases["method"]) == {BAYES_CTX}


def test_source_weighted():
    cases = pd.DataFrame({
        "run_id": list("abcd"), "source": ["A", "A", "A", "B"], "cutoff": 0.2, "method": "m", "ok": True,
        "nae": [0.1, 0.1, 0.1, 0.5], "ncrps": [1.0, 1.0, 1.0, 3.0], "seconds": 1.0,
        **{f"cover{k}": 1.0 for k in (50, 80, 90)}, **{f"nwidth{k}": 1.0 for k in (50, 80, 90)},
        "stop_nerr": np.nan, "plateau_true": np.nan, "plateau_pred": np.nan,
    })  # fmt: skip
    w = summarize_weighted(cases).iloc[0]
    assert w["mean_ncrps"] == pytest.approx(2.0) and w["median_nae"] == pytest.approx(0.3)


# ------------------------------------------------------------------ the CLI: the slow peer says so
def test_cli_backtest_names_its_slow_peer_and_how_to_skip_it(tmp_path, mock_sampler, monkeypatch):
    """Issue 33, item 17: the default backtest of the README's example run spends most of its time in one peer
    (domhan: ~5 s of MCMC per case against <0.3 s for each other peer); the CLI says so in one status line with
    the --peers that skips it, and that --peers runs the other peers without it (and without the line)."""
    import re
    from pathlib import Path

    from typer.testing import CliRunner

    from bayesgrpo.cli import app
    from bayesgrpo.evaluation.domhan import DomhanEnsemblePeer

    def no_mcmc(self, *a, **k):  # the peer's MCMC is not what this test is about
        raise FloatingPointError("domhan not sampled in this test")

    monkeypatch.setattr(DomhanEnsemblePeer, "_posterior", no_mcmc)
    ex = Path(__file__).parents[1] / "bayesgrpo" / "resources" / "examples"
    base = ["backtest", str(ex / "example-grpo-run"), "--meta", str(ex / "meta.csv"), "--cutoffs", "0.3",
            "--draws", "50", "--tune", "10"]  # fmt: skip
    runner = CliRunner()
    res = runner.invoke(app, [*base, "--out-dir", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # the status line may wrap on a narrow terminal
    lines = re.findall(r"backtest: peer (\S+) takes most of the time.*?skip it with --peers (\S+)", text)
    assert lines == [("domhan", "last_value,exponential,scalerl,pow3")], res.output
    res = runner.invoke(app, [*base, "--peers", lines[0][1], "--out-dir", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "takes most of the time" not in res.output
    cases = pd.read_csv(tmp_path / "b" / "cases.csv")
    assert set(cases["method"]) == {"bayesgrpo", "last_value", "exponential", "scalerl", "pow3"}
