"""Tests of the numpy GRPO testbed (bayesgrpo.testbed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from bayesgrpo.schema import RunSet
from bayesgrpo.testbed import (
    Adam,
    HeavyBall,
    SweepConfig,
    TrainerConfig,
    group_advantages,
    grpo_logit_grad,
    run,
    sweep,
)
from bayesgrpo.testbed.grpo import MLPPolicy, TabularPolicy, _gather, build, softmax

SMALL = dict(task="bandit", n_prompts=8, batch_size=4, vocab_size=4, group_size=4, max_steps=30, learning_rate=0.1)
SMALL_CTX = dict(
    task="contextual",
    n_prompts=64,
    n_eval_prompts=32,
    n_monitor_prompts=32,
    batch_size=8,
    vocab_size=4,
    answer_length=2,
    hidden=8,
    feature_dim=4,
    group_size=4,
    max_steps=25,
    learning_rate=0.01,
    init_accuracy=0.2,
    unlearnable_fraction=0.25,
)


# ------------------------------------------------------------------------------ advantages
def grpo_loss(probs, old_probs, ref_probs, actions, adv, *, clip_eps: float = 0.2, kl_beta: float = 0.0) -> float:
    """The reference of the analytic gradient: the GRPO loss (to minimise): ``-mean_tokens min(rho A, clip(rho) A) + beta * mean_tokens k3``.

    ``probs``/``old_probs``/``ref_probs`` ``[B, L, V]`` (current / sampling / reference policy per
    prompt and answer position), ``actions [B, G, L]``, ``adv [B, G]``. Answers have a fixed
    length, so the token mean equals GRPO's per-sequence-then-per-group mean.
    """
    pa, oa = _gather(probs, actions), _gather(old_probs, actions)
    rho = pa / oa
    A = np.asarray(adv, dtype=float)[:, :, None]
    surr = np.minimum(rho * A, np.clip(rho, 1 - clip_eps, 1 + clip_eps) * A)
    loss = -surr.mean()
    if kl_beta:
        ra = _gather(ref_probs, actions)
        u = ra / pa
        loss += kl_beta * (u - np.log(u) - 1.0).mean()
    return float(loss)


def test_group_advantages_hand_made():
    r = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    a = group_advantages(r, eps=0.0, ddof=1)
    s = np.std([1, 0, 0, 1], ddof=1)  # 0.57735
    np.testing.assert_allclose(a[0], np.array([0.5, -0.5, -0.5, 0.5]) / s)
    np.testing.assert_array_equal(a[1], 0.0)  # all-equal group -> exactly zero
    s3 = np.std([0, 0, 0, 1], ddof=1)  # 0.5
    np.testing.assert_allclose(a[2], np.array([-0.25, -0.25, -0.25, 0.75]) / s3)
    # with eps, population std, Dr.GRPO
    np.testing.assert_allclose(
        group_advantages(r[:1], eps=1e-4, ddof=0)[0], np.array([0.5, -0.5, -0.5, 0.5]) / (0.5 + 1e-4)
    )
    np.testing.assert_allclose(group_advantages(r, scale=False)[2], [-0.25, -0.25, -0.25, 0.75])
    np.testing.assert_array_equal(group_advantages(np.zeros((1, 3)))[0], 0.0)


# ------------------------------------------------------------------------------ clipping
def _one_token(p_cur, p_old, action, adv, **kw):
    probs = np.asarray(p_cur, float)[None, None, :]
    old = np.asarray(p_old, float)[None, None, :]
    acts = np.array([[[action]]])
    return grpo_logit_grad(probs, old, probs, acts, np.array([[adv]]), **kw)


@pytest.mark.parametrize(
    ("ratio", "adv", "zero"),
    [(1.5, 1.0, True), (1.5, -1.0, False), (0.5, -1.0, True), (0.5, 1.0, False), (1.1, 1.0, False), (0.9, -1.0, False)],
)
def test_clipping_zeroes_gradient(ratio, adv, zero):
    p_old = np.array([0.4, 0.3, 0.3])
    p_cur = np.array([0.4 * ratio, 0.3, 0.3])
    p_cur[1:] = (1 - p_cur[0]) / 2
    d, frac = _one_token(p_cur, p_old, 0, adv, clip_eps=0.2)
    if zero:
        np.testing.assert_array_equal(d, 0.0)
        assert frac == 1.0
    else:
        assert np.abs(d).max() > 1e-3 and frac == 0.0
        # unclipped: -A * rho * (onehot - p)
        np.testing.assert_allclose(d[0, 0], -adv * ratio * (np.eye(3)[0] - p_cur))


# ------------------------------------------------------------------------------ gradients
def _fd_check(pol, params, prompts, rng, clip_eps=0.2, kl_beta=0.3, L=1, V=4):
    B, G = len(prompts), 3
    old = params + 0.15 * rng.standard_normal(params.shape)
    ref = params + 0.3 * rng.standard_normal(params.shape)
    p_old = pol.probs(old, prompts)
    actions = rng.integers(0, V, size=(B, G, L))
    adv = rng.standard_normal((B, G))

    def loss(th):
        return grpo_loss(
            pol.probs(th, prompts), p_old, pol.probs(ref, prompts), actions, adv, clip_eps=clip_eps, kl_beta=kl_beta
        )

    d, _ = grpo_logit_grad(
        pol.probs(params, prompts), p_old, pol.probs(ref, prompts), actions, adv, clip_eps=clip_eps, kl_beta=kl_beta
    )
    g = pol.grad(params, prompts, d)
    h = 1e-6
    fd = np.array([(loss(params + h * e) - loss(params - h * e)) / (2 * h) for e in np.eye(len(params))])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


def test_analytic_gradient_vs_finite_differences_tabular():
    rng = np.random.default_rng(0)
    pol = TabularPolicy(3, 4)
    params = rng.standard_normal(pol.n_params)
    _fd_check(pol, params, np.array([0, 2, 2]), rng, clip_eps=10.0)  # no clipping: full surrogate + KL
    _fd_check(pol, params, np.array([0, 1, 2]), rng, clip_eps=0.1)  # some tokens clipped (loss is flat there)


def test_analytic_gradient_vs_finite_differences_mlp():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5, 3))
    pol = MLPPolicy(X, hidden=4, length=2, vocab=3)
    params = pol.init(rng) * 3
    _fd_check(pol, params, np.array([0, 3, 4, 3]), rng, clip_eps=10.0, L=2, V=3)
    _fd_check(pol, params, np.array([1, 2]), rng, clip_eps=0.15, L=2, V=3)


# ------------------------------------------------------------------------------ optimizers
def test_adam_matches_hand_computation():
    g1, g2 = np.array([0.5, -1.0]), np.array([0.1, 2.0])
    th = np.array([1.0, 1.0])
    opt = Adam(2, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    opt.step(th, g1)
    # step 1: mhat = g, vhat = g^2 -> update lr * g / (|g| + eps) ~ lr * sign(g)
    th1 = 1.0 - 0.1 * g1 / (np.abs(g1) + 1e-8)
    np.testing.assert_allclose(th, th1, rtol=1e-12)
    opt.step(th, g2)
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.999 * 0.001 * g1**2 + 0.001 * g2**2
    mhat, vhat = m / (1 - 0.81), v / (1 - 0.999**2)
    np.testing.assert_allclose(th, th1 - 0.1 * mhat / (np.sqrt(vhat) + 1e-8), rtol=1e-12)


def test_heavy_ball_matches_hand_computation():
    th = np.array([0.0])
    opt = HeavyBall(1, lr=0.5, momentum=0.9)
    for g in (1.0, 1.0, -2.0):
        opt.step(th, np.array([g]))
    # v1 = 1, v2 = 1.9, v3 = 1.71 - 2 = -0.29 ; theta = -0.5 (1 + 1.9 - 0.29)
    np.testing.assert_allclose(th, [-0.5 * (1 + 1.9 - 0.29)])


# ------------------------------------------------------------------------------ refresh lag
@pytest.mark.parametrize("kw", [SMALL, SMALL_CTX])
def test_sampling_policy_refreshes_every_K_steps(kw):
    K = 3
    log = []
    run(TrainerConfig(**{**kw, "refresh_interval": K, "max_steps": 11}), callback=lambda n, **v: log.append(v))
    for n in range(1, 11):
        same = np.array_equal(log[n]["sampling_params"], log[n - 1]["sampling_params"])
        assert same == (n % K != 0), n
        if n % K == 0:  # refreshed to the current parameters
            np.testing.assert_array_equal(log[n]["sampling_params"], log[n]["params"])
        assert not np.array_equal(log[n]["params"], log[n - 1]["params"])  # the trained policy moves every step


def test_refresh_lag_logged_reward_expected_is_piecewise_constant():
    df, _ = run(TrainerConfig(**{**SMALL, "refresh_interval": 4, "max_steps": 16}))
    r = df["reward_expected"].to_numpy()
    for n in range(1, 16):
        assert (r[n] == r[n - 1]) == (n % 4 != 0)
    cur = df["reward_current"].to_numpy()
    assert np.all(cur[::4] == r[::4]) and not np.all(cur == r)


# ------------------------------------------------------------------------------ determinism and schema
@pytest.mark.parametrize("kw", [SMALL, SMALL_CTX])
def test_determinism(kw):
    a, ma = run(TrainerConfig(**kw))
    b, mb = run(TrainerConfig(**kw))
    pd.testing.assert_frame_equal(a, b)
    assert ma == mb or all((ma[k] == mb[k]) or (ma[k] != ma[k] and mb[k] != mb[k]) for k in ma)
    c, _ = run(TrainerConfig(**{**kw, "seed": 1}))
    assert not np.array_equal(a["reward"].to_numpy(), c["reward"].to_numpy())
    # task_seed fixes the start: same initial expected reward across GRPO seeds
    assert a["reward_expected"].iloc[0] == c["reward_expected"].iloc[0]


def test_initial_accuracy_and_columns():
    df, meta = run(TrainerConfig(**{**SMALL, "init_accuracy": 0.3}))
    assert abs(df["reward_expected"].iloc[0] - 0.3) < 1e-9
    for col in ("reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "eval/accuracy"):
        assert col in df.columns
    ev = df["eval/accuracy"]
    assert ev.notna().sum() == len(range(0, 30, 10)) + 1 and np.isnan(ev.iloc[1])
    assert meta["params_b"] == 8 * 4 / 1e9 and meta["params"] == 32
    df2, meta2 = run(TrainerConfig(**SMALL_CTX))
    assert meta2["init_accuracy"] >= 0.2 and meta2["family"] == "contextual-mlp"
    assert df2["frac_reward_zero_std"].between(0, 1).all() and (df2["entropy"] > 0).all()


def test_hack_reward_exceeds_true_accuracy():
    task, pol, params, _ = build(TrainerConfig(**{**SMALL_CTX, "hack_token": 0}))
    p = pol.probs(params, task.train)
    assert np.all(task.expected_reward(p, task.train) >= task.expected_accuracy(p, task.train) - 1e-15)
    # Monte Carlo check of the exact expected reward
    rng = np.random.default_rng(0)
    prompts = task.train[:4]
    pp = pol.probs(params, prompts)
    acts = np.stack([np.stack([rng.choice(4, size=20000, p=pp[b, j]) for j in range(2)], -1) for b in range(4)])
    r = task.rewards(prompts, acts, rng).mean(axis=1)
    np.testing.assert_allclose(r, task.expected_reward(pp, prompts), atol=0.015)


def test_sweep_schema_valid(tmp_path):
    cfg = SweepConfig(
        groups=[
            {"name": "a", "base": {**SMALL, "max_steps": 12}, "grid": {"group_size": [2, 4]}, "seeds": [0, 1]},
            {"name": "f", "base": {**SMALL, "max_steps": 12}, "seeds": [0], "labels": {"failure_mode": "none"}},
        ]
    )
    data, meta = sweep(cfg)
    rs = RunSet.from_frames(data, meta)
    assert len(rs) == 5 and set(rs.meta["group_size"]) == {2.0, 4.0}
    assert rs.meta["failure_mode"].iloc[-1] == "none"
    from bayesgrpo.testbed.sweep import write_runs

    p_runs, p_meta = write_runs(data, meta, tmp_path, gzip=True)
    rs2 = RunSet.from_frames(pd.read_csv(p_runs), pd.read_csv(p_meta))
    assert len(rs2) == 5
    np.testing.assert_allclose(rs2.data["reward"], rs.data["reward"], rtol=1e-5)


def test_cli_sweep(tmp_path):
    import json

    from typer.testing import CliRunner

    from bayesgrpo.cli.testbed import testbed_app

    cfg = {"groups": [{"name": "a", "base": {**SMALL, "max_steps": 5}, "seeds": [0, 1]}]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(cfg))
    res = CliRunner().invoke(testbed_app, ["sweep", str(p), "--out-dir", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "a-000-s1" in res.output
    assert (tmp_path / "o" / "runs.csv").exists() and (tmp_path / "o" / "meta.csv").exists()


def test_config_is_frozen_and_strict():
    cfg = TrainerConfig()
    with pytest.raises(ValidationError):
        cfg.learning_rate = 1.0
    with pytest.raises(ValidationError):
        TrainerConfig(lr=0.1)
    with pytest.raises(ValidationError):
        TrainerConfig(batch_size=100, n_prompts=10)


def test_softmax_stable():
    z = np.array([[1000.0, 0.0, -1000.0]])
    np.testing.assert_allclose(softmax(z), [[1.0, 0.0, 0.0]])
