"""A real (small) GRPO trainer in numpy: softmax policies, verifiable 0/1 rewards, group-normalised
advantages, PPO clipping against the sampling policy, k3 KL penalty, Adam / heavy-ball SGD, and a
sampling policy refreshed every K optimizer steps.

All gradients are analytic. Everything is deterministic given ``TrainerConfig`` (two seeds:
``task_seed`` for the task and the initial policy, ``seed`` for the GRPO sampling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.testbed.config import TrainerConfig

__all__ = [
    "group_advantages",
    "grpo_logit_grad",
    "Adam",
    "HeavyBall",
    "TabularPolicy",
    "MLPPolicy",
    "Task",
    "build",
    "run",
    "softmax",
]


# ---------------------------------------------------------------------------------- math
def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def group_advantages(rewards: np.ndarray, *, scale: bool = True, eps: float = 1e-4, ddof: int = 1) -> np.ndarray:
    """GRPO advantages of rewards ``[B, G]``: ``(r - mean_g) / (std_g + eps)`` (or ``r - mean_g``).

    A group whose rewards are all equal gets exactly zero advantage.
    """
    r = np.asarray(rewards, dtype=float)
    centred = r - r.mean(axis=-1, keepdims=True)
    same = np.all(r == r[..., :1], axis=-1, keepdims=True)
    centred = np.where(same, 0.0, centred)
    if not scale:
        return centred
    den = np.broadcast_to(r.std(axis=-1, ddof=ddof, keepdims=True) + eps, r.shape)
    return np.divide(centred, den, out=np.zeros_like(centred), where=~np.broadcast_to(same, r.shape))


def _gather(p: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``p [B, L, V]``, ``actions [B, G, L]`` -> probabilities of the taken tokens ``[B, G, L]``."""
    B, _G, L = actions.shape
    bi = np.arange(B)[:, None, None]
    li = np.arange(L)[None, None, :]
    return p[bi, li, actions]


def grpo_logit_grad(probs, old_probs, ref_probs, actions, adv, *, clip_eps: float = 0.2, kl_beta: float = 0.0):
    """Analytic gradient of the GRPO loss (to minimise) ``-mean_tokens min(rho A, clip(rho) A) + beta *
    mean_tokens k3`` with respect to the logits ``[B, L, V]`` (``probs``/``old_probs``/``ref_probs``
    ``[B, L, V]``, ``actions [B, G, L]``, ``adv [B, G]``; checked against finite differences of the loss in
    ``tests/test_testbed.py``).

    Per token, d rho / d z = rho (onehot(a) - p); the clipped branch (rho > 1+eps with A > 0, or
    rho < 1-eps with A < 0) contributes nothing. The k3 term d/dz [r/p - log(r/p) - 1] with
    r = p_ref(a) is (1 - r/p)(onehot(a) - p).

    Returns ``(dlogits, clipped_fraction)``.
    """
    B, G, L = actions.shape
    n = B * G * L
    pa, oa = _gather(probs, actions), _gather(old_probs, actions)
    rho = pa / oa
    A = np.broadcast_to(np.asarray(adv, dtype=float)[:, :, None], rho.shape)
    clipped = ((A > 0) & (rho > 1 + clip_eps)) | ((A < 0) & (rho < 1 - clip_eps))
    coef = np.where(clipped, 0.0, -rho * A) / n
    if kl_beta:
        ra = _gather(ref_probs, actions)
        coef = coef + kl_beta * (1.0 - ra / pa) / n
    V = probs.shape[-1]
    onehot_sum = np.zeros((B, L, V))
    bi = np.broadcast_to(np.arange(B)[:, None, None], actions.shape)
    li = np.broadcast_to(np.arange(L)[None, None, :], actions.shape)
    np.add.at(onehot_sum, (bi, li, actions), coef)
    d = onehot_sum - probs * coef.sum(axis=1)[:, :, None]
    frac_clipped = float(clipped[A != 0].mean()) if np.any(A != 0) else 0.0
    return d, frac_clipped


# ----------------------------------------------------------------------------- optimizers
class Adam:
    """Adam (bias-corrected, no weight decay): beta1 = momentum."""

    def __init__(self, n: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.m = np.zeros(n)
        self.v = np.zeros(n)
        self.t = 0

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad * grad
        mhat = self.m / (1 - self.b1**self.t)
        vhat = self.v / (1 - self.b2**self.t)
        params -= self.lr * mhat / (np.sqrt(vhat) + self.eps)


class HeavyBall:
    """Heavy-ball SGD (PyTorch convention): ``v = mu v + g; theta -= lr v``."""

    def __init__(self, n: int, lr: float, momentum: float = 0.0):
        self.lr, self.mu = lr, momentum
        self.buf = np.zeros(n)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.buf = self.mu * self.buf + grad
        params -= self.lr * self.buf


# ------------------------------------------------------------------------------- policies
class TabularPolicy:
    """Softmax over ``V`` answers per prompt; parameters = the ``P x V`` logits (flat)."""

    def __init__(self, n_prompts: int, vocab: int):
        self.P, self.V = n_prompts, vocab
        self.n_params = n_prompts * vocab

    def probs(self, params: np.ndarray, prompts: np.ndarray) -> np.ndarray:
        return softmax(params.reshape(self.P, self.V)[prompts])[:, None, :]

    def grad(self, params: np.ndarray, prompts: np.ndarray, dlogits: np.ndarray) -> np.ndarray:
        g = np.zeros((self.P, self.V))
        np.add.at(g, prompts, dlogits[:, 0, :])
        return g.ravel()


class MLPPolicy:
    """One hidden tanh layer of width ``H`` on prompt features, ``L`` softmax heads over ``V`` tokens.

    The answer tokens are conditionally independent given the prompt (no autoregression).
    Parameters (flat): ``W1 [H, D]``, ``b1 [H]``, ``W2 [L, V, H]``, ``b2 [L, V]``.
    """

    def __init__(self, features: np.ndarray, hidden: int, length: int, vocab: int):
        self.X = features
        self.D = features.shape[1]
        self.H, self.L, self.V = hidden, length, vocab
        self.shapes = [(hidden, self.D), (hidden,), (length, vocab, hidden), (length, vocab)]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.n_params = sum(self.sizes)

    def unpack(self, params: np.ndarray):
        out, k = [], 0
        for s, n in zip(self.shapes, self.sizes, strict=True):
            out.append(params[k : k + n].reshape(s))
            k += n
        return out

    def init(self, rng: np.random.Generator) -> np.ndarray:
        W1 = rng.normal(0, 1 / math.sqrt(self.D), (self.H, self.D))
        b1 = np.zeros(self.H)
        W2 = rng.normal(0, 0.5 / math.sqrt(self.H), (self.L, self.V, self.H))
        b2 = np.zeros((self.L, self.V))
        return np.concatenate([W1.ravel(), b1, W2.ravel(), b2.ravel()])

    def _forward(self, params, prompts):
        W1, b1, W2, b2 = self.unpack(params)
        x = self.X[prompts]
        h = np.tanh(x @ W1.T + b1)
        z = (h @ W2.reshape(self.L * self.V, self.H).T).reshape(-1, self.L, self.V) + b2
        return x, h, z

    def probs(self, params: np.ndarray, prompts: np.ndarray) -> np.ndarray:
        return softmax(self._forward(params, prompts)[2])

    def grad(self, params: np.ndarray, prompts: np.ndarray, dlogits: np.ndarray) -> np.ndarray:
        _W1, _b1, W2, _b2 = self.unpack(params)
        x, h, _ = self._forward(params, prompts)
        d2 = dlogits.reshape(-1, self.L * self.V)
        dW2 = d2.T @ h
        db2 = dlogits.sum(axis=0)
        dh = d2 @ W2.reshape(self.L * self.V, self.H)
        dpre = dh * (1 - h * h)
        dW1 = dpre.T @ x
        db1 = dpre.sum(axis=0)
        return np.concatenate([dW1.ravel(), db1, dW2.ravel(), db2.ravel()])


# ----------------------------------------------------------------------------------- task
@dataclass
class Task:
    """Prompts ``0..P-1`` are training prompts, ``P..P+E-1`` held out (contextual only).

    ``targets [n, L]`` correct tokens; ``unlearnable [n]`` prompts whose target is redrawn
    uniformly per completion; ``hack_token``: the proxy reward also pays 1 when the first answer
    token equals it (a verifier bug); eval accuracy always uses the true target.
    """

    targets: np.ndarray
    unlearnable: np.ndarray
    train: np.ndarray
    eval: np.ndarray
    vocab: int
    length: int
    hack_token: int | None = None

    def rewards(self, prompts: np.ndarray, actions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        _B, _G, _L = actions.shape
        tgt = np.broadcast_to(self.targets[prompts][:, None, :], actions.shape)
        noisy = self.unlearnable[prompts]
        if noisy.any():
            rand = rng.integers(0, self.vocab, size=actions.shape)
            tgt = np.where(noisy[:, None, None], rand, tgt)
        r = np.all(actions == tgt, axis=-1).astype(float)
        if self.hack_token is not None:
            r = np.maximum(r, np.all(actions == self.hack_token, axis=-1).astype(float))
        return r

    def expected_accuracy(self, probs: np.ndarray, prompts: np.ndarray) -> np.ndarray:
        """Exact probability that the answer is right (true target), per prompt."""
        L = probs.shape[1]
        pc = np.take_along_axis(probs, self.targets[prompts][:, :, None], axis=-1)[..., 0].prod(axis=1)
        return np.where(self.unlearnable[prompts], float(self.vocab) ** -L, pc)

    def expected_reward(self, probs: np.ndarray, prompts: np.ndarray) -> np.ndarray:
        """Exact expected (proxy) reward per prompt."""
        acc = self.expected_accuracy(probs, prompts)
        if self.hack_token is None:
            return acc
        h = self.hack_token
        ph = probs[:, :, h].prod(axis=1)
        L = probs.shape[1]
        # P(answer == (h, ..., h)) + P(correct and answer != (h, ..., h))
        tgt_is_hack = np.all(self.targets[prompts] == h, axis=1)
        rest_learn = np.where(tgt_is_hack, 0.0, acc)
        rest_noisy = (1 - ph) * float(self.vocab) ** -L
        rest = np.where(self.unlearnable[prompts], rest_noisy, rest_learn)
        return ph + rest


def _entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log(np.clip(p, 1e-300, None))).sum(axis=-1)


def build(cfg: TrainerConfig):
    """Task, policy and initial parameters (after the "pretraining" that sets the initial accuracy)."""
    rng = np.random.default_rng([cfg.task_seed, 7])
    V, L = cfg.vocab_size, cfg.length
    if cfg.task == "bandit":
        P = cfg.n_prompts
        targets = rng.integers(0, V, size=(P, 1))
        unl = np.zeros(P, bool)
        n_unl = int(round(cfg.unlearnable_fraction * P))
        unl[rng.permutation(P)[:n_unl]] = True
        task = Task(targets, unl, np.arange(P), np.arange(P), V, 1, cfg.hack_token)
        pol: TabularPolicy | MLPPolicy = TabularPolicy(P, V)
        # logit b on the correct answer, 0 elsewhere: accuracy e^b / (e^b + V - 1); chosen so the
        # expected reward over the learnable prompts (with the unlearnable ones at 1/V) hits the target
        learn_target = (cfg.init_accuracy - cfg.unlearnable_fraction / V) / max(1 - cfg.unlearnable_fraction, 1e-12)
        learn_target = float(np.clip(learn_target, 1e-6, 1 - 1e-6))
        b = math.log(learn_target * (V - 1) / (1 - learn_target))
        logits = np.zeros((P, V))
        off = cfg.init_spread * rng.standard_normal(P)
        logits[np.arange(P), targets[:, 0]] = b + off
        params = logits.ravel().copy()
        return task, pol, params, {"pretrain_steps": 0}
    # contextual
    P, E, D = cfg.n_prompts, cfg.n_eval_prompts, cfg.feature_dim
    n_pre = 512
    n = P + E + n_pre
    X = rng.standard_normal((n, D))
    teacher = rng.standard_normal((L, V, D))
    targets = np.argmax(np.einsum("lvd,nd->nlv", teacher, X), axis=-1)
    unl = rng.random(n) < cfg.unlearnable_fraction
    unl[P + E :] = False  # pretraining prompts are clean
    task = Task(targets, unl, np.arange(P), np.arange(P, P + E), V, L, cfg.hack_token)
    mlp = MLPPolicy(X, cfg.hidden, L, V)
    pol, params = mlp, mlp.init(rng)
    # supervised "pretraining" (cross-entropy on clean pretraining prompts, full batch, Adam) until
    # the expected (true) accuracy on the training prompts reaches init_accuracy
    pre = np.arange(P + E, n)
    monitor = task.train[: min(cfg.n_monitor_prompts, P)]
    opt = Adam(pol.n_params, cfg.pretrain_lr)
    k = 0
    onehot = np.eye(V)[targets[pre]]  # [n_pre, L, V]
    while k < cfg.pretrain_max_steps:
        r0 = task.expected_accuracy(pol.probs(params, monitor), monitor).mean()
        if r0 >= cfg.init_accuracy:
            break
        p = pol.probs(params, pre)
        dlog = (p - onehot) / (len(pre) * L)
        opt.step(params, pol.grad(params, pre, dlog))
        k += 1
    return task, pol, params, {"pretrain_steps": k}


# ------------------------------------------------------------------------------------ run
def run(cfg: TrainerConfig, *, callback=None) -> tuple[pd.DataFrame, dict]:
    """Train one GRPO run; return the per-step frame (schema columns) and the metadata dict.

    Row ``step = n`` describes optimizer step ``n`` (0-based): the batch sampled for it (from the
    sampling policy, last refreshed at step ``K * (n // K)``), metrics of the current policy
    ``theta_n`` before the update, and ``eval/accuracy`` of ``theta_n`` every ``eval_every`` steps
    (and at the last step), NaN otherwise.
    """
    task, pol, params, info = build(cfg)
    ref = params.copy()
    rng = np.random.default_rng([cfg.seed, 11])
    opt = _optimizer(cfg, pol.n_params)
    B, G, L, V = cfg.batch_size, cfg.group_size, cfg.length, cfg.vocab_size
    P = len(task.train)
    T = cfg.max_steps
    cols = _columns(cfg, T)
    old = params.copy()
    # exact expected reward is tracked on all training prompts (bandit) or a fixed subset (contextual)
    all_train = task.train if cfg.task == "bandit" else task.train[: min(cfg.n_monitor_prompts, P)]
    for n in range(T):
        if n % cfg.refresh_interval == 0:
            old = params.copy()
            r_old = task.expected_reward(pol.probs(old, all_train), all_train).mean()
        prompts = task.train[rng.choice(P, size=B, replace=False)]
        p_old = pol.probs(old, prompts)
        u = rng.random((B, G, L, 1))
        cdf = np.cumsum(p_old, axis=-1)[:, None, :, :]
        actions = np.minimum((u > cdf).sum(axis=-1), V - 1)  # [B, G, L]
        r = task.rewards(prompts, actions, rng)
        p_ref = pol.probs(ref, prompts)
        r_adv = r
        if cfg.kl_beta and cfg.kl_mode == "reward":
            r_adv = r - cfg.kl_beta * np.log(_gather(p_old, actions) / _gather(p_ref, actions)).sum(axis=-1)
        adv = group_advantages(r_adv, scale=cfg.advantage == "grpo", eps=cfg.adv_eps, ddof=cfg.std_ddof)
        p_cur = pol.probs(params, prompts)
        p_ratio_ref = p_old if cfg.ratio_reference == "sampling" else p_cur
        dlog, clip_frac = grpo_logit_grad(
            p_cur,
            p_ratio_ref,
            p_ref,
            actions,
            adv,
            clip_eps=cfg.clip_eps,
            kl_beta=cfg.kl_beta if cfg.kl_mode == "loss" else 0.0,
        )
        grad = pol.grad(params, prompts, dlog)
        # logging (theta_n, before the update)
        cols["reward"][n] = r.mean()
        cols["reward_std"][n] = r.std(axis=1, ddof=cfg.std_ddof).mean()
        cols["frac_reward_zero_std"][n] = np.all(r == r[:, :1], axis=1).mean()
        cols["entropy"][n] = _entropy(p_cur).mean()
        pa, ra = _gather(p_cur, actions), _gather(p_ref, actions)
        kr = ra / pa
        cols["kl"][n] = (kr - np.log(kr) - 1).mean()
        cols["clip_frac"][n] = clip_frac
        cols["grad_norm"][n] = float(np.linalg.norm(grad))
        cols["reward_expected"][n] = r_old
        if cfg.refresh_interval == 1:
            cols["reward_current"][n] = cols["reward_expected"][n]
        else:
            cols["reward_current"][n] = task.expected_reward(pol.probs(params, all_train), all_train).mean()
        if n % cfg.eval_every == 0 or n == T - 1:
            cols["eval/accuracy"][n] = task.expected_accuracy(pol.probs(params, task.eval), task.eval).mean()
            if cfg.hack_token is not None:
                cols["eval/true_accuracy_train"][n] = task.expected_accuracy(
                    pol.probs(params, all_train), all_train
                ).mean()
        if callback is not None:
            callback(n, params=params.copy(), sampling_params=old.copy(), grad=grad.copy())
        opt.step(params, grad)
        if not np.all(np.isfinite(params)):
            raise FloatingPointError(f"parameters became non-finite at step {n}")
    df = pd.DataFrame({"step": np.arange(T), **cols})
    init_acc = float(cols["reward_expected"][0])
    return df, _metadata(cfg, task, info, init_acc)


def _optimizer(cfg: TrainerConfig, n_params: int) -> Adam | HeavyBall:
    """The optimizer the config names."""
    if cfg.optimizer == "adam":
        return Adam(n_params, cfg.learning_rate, cfg.momentum, cfg.beta2, cfg.adam_eps)
    return HeavyBall(n_params, cfg.learning_rate, cfg.momentum)


def _columns(cfg: TrainerConfig, T: int) -> dict[str, np.ndarray]:
    """The logged channels of a run of ``T`` steps, all NaN until written."""
    cols = {
        k: np.full(T, np.nan)
        for k in (
            "reward",
            "reward_std",
            "frac_reward_zero_std",
            "entropy",
            "kl",
            "eval/accuracy",
            "reward_expected",
            "reward_current",
            "clip_frac",
            "grad_norm",
        )
    }
    if cfg.hack_token is not None:
        cols["eval/true_accuracy_train"] = np.full(T, np.nan)
    return cols


def _metadata(cfg: TrainerConfig, task: Task, info: dict, init_acc: float) -> dict:
    """The run's metadata row."""
    B, G, T = cfg.batch_size, cfg.group_size, cfg.max_steps
    return {
        "model": cfg.model_name,
        "family": cfg.family,
        "params_b": cfg.n_params / 1e9,
        "params": cfg.n_params,
        "group_size": G,
        "learning_rate": cfg.learning_rate,
        "beta1": cfg.momentum,
        "refresh_interval": cfg.refresh_interval,
        "batch_size": B,
        "max_steps": T,
        "dataset": f"testbed-{cfg.task}-seed{cfg.task_seed}",
        "algorithm": "grpo" if cfg.advantage == "grpo" else "dr_grpo",
        "seed": cfg.seed,
        "task_seed": cfg.task_seed,
        "optimizer": cfg.optimizer,
        "task": cfg.task,
        "hidden": cfg.hidden if cfg.task == "contextual" else np.nan,
        "init_accuracy": init_acc,
        "init_accuracy_target": cfg.init_accuracy,
        "kl_beta": cfg.kl_beta,
        "kl_mode": cfg.kl_mode,
        "clip_eps": cfg.clip_eps,
        "ratio_reference": cfg.ratio_reference,
        "unlearnable_fraction": cfg.unlearnable_fraction,
        "hack_token": cfg.hack_token if cfg.hack_token is not None else np.nan,
        "pretrain_steps": info["pretrain_steps"],
        "reward_ceiling": _ceiling(cfg, task),
    }


def _ceiling(cfg: TrainerConfig, task: Task) -> float:
    """Best achievable expected *true* accuracy on the training prompts."""
    u = task.unlearnable[task.train]
    return float(np.mean(np.where(u, float(cfg.vocab_size) ** -cfg.length, 1.0)))
