"""Does advantage degeneracy explain the slow start? Checked on the testbed, where p per prompt is exact.

    .venv/bin/python bench/degeneracy_validation.py     # ~1 min; writes bench/results/degeneracy_validation.md (+ .json, figure)

The testbed's softmax bandit with all prompts alike is the mean-field case of physics.md section 9:
one success probability p, 0/1 rewards, G completions per prompt. Its exact expected reward
(``reward_expected``) is fitted by least squares with the deterministic mean trajectory of

* the linear oscillator (recursion (1): inertia is its only slow start), and
* the degeneracy-aware recursion (:mod:`bayesgrpo.models.degeneracy`: stiffness ``a u^kappa`` with
  ``u`` the share of the way from the floor 0 to the plateau), for kappa = 1, 1.5, 2 and kappa free,

with the momentum fixed at the optimizer's and the start at the first expected reward (free: ``a``,
the plateau, and kappa where free). Reported: R^2 over the whole run, the error of the step at which
10% of the gain is reached (the length of the slow start), and the fitted kappa, for std-normalised
GRPO and Dr.GRPO advantages, heavy-ball SGD and Adam, and several initial accuracies.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scipy import optimize  # noqa: E402

from bayesgrpo.models.degeneracy import degenerate_deviation_paths  # noqa: E402
from bayesgrpo.testbed import TrainerConfig, run  # noqa: E402
from bench.physics_reference import deviation_paths  # noqa: E402

RES = ROOT / "bench" / "results"
CMD = ".venv/bin/python bench/degeneracy_validation.py"
CASES = [
    dict(advantage="grpo", optimizer="sgd", learning_rate=2.0, init_accuracy=0.02),
    dict(advantage="grpo", optimizer="sgd", learning_rate=2.0, init_accuracy=0.05),
    dict(advantage="grpo", optimizer="sgd", learning_rate=2.0, init_accuracy=0.2),
    dict(advantage="drgrpo", optimizer="sgd", learning_rate=4.0, init_accuracy=0.02),
    dict(advantage="drgrpo", optimizer="sgd", learning_rate=4.0, init_accuracy=0.05),
    dict(advantage="grpo", optimizer="adam", learning_rate=0.02, init_accuracy=0.02),
    dict(advantage="drgrpo", optimizer="adam", learning_rate=0.02, init_accuracy=0.05),
]


def mean_path(kind, n, *, r0, r_star, a, mu, kappa=1.5):
    if kind == "linear":
        x = deviation_paths(a, mu, n - 1)
    else:
        x = degenerate_deviation_paths(a, mu, n - 1, r0=r0, r_star=r_star, L=0.0, kappa=kappa)
    return r_star + (r0 - r_star) * x


def fit(kind, e, mu, kappa=None):
    n = e.size
    r0 = float(e[0])

    def resid(th):
        a, rs = np.exp(th[0]), th[1]
        k = np.exp(th[2]) if kappa is None and kind != "linear" else (kappa or 1.5)
        return mean_path(kind, n, r0=r0, r_star=rs, a=a, mu=mu, kappa=k) - e

    best = None
    for la in np.log([1e-3, 3e-3, 1e-2, 3e-2, 1e-1]):
        th0 = [la, float(e[-20:].mean())] + ([np.log(1.5)] if kappa is None and kind != "linear" else [])
        try:
            r = optimize.least_squares(resid, th0, max_nfev=2000)
        except (ValueError, FloatingPointError):
            continue
        if best is None or r.cost < best.cost:
            best = r
    res = resid(best.x)
    r2 = 1 - np.sum(res**2) / np.sum((e - e.mean()) ** 2)
    k = float(np.exp(best.x[2])) if kappa is None and kind != "linear" else kappa
    return best.x, float(r2), k, res + e


def t10(curve):
    g = (curve - curve[0]) / (curve[-20:].mean() - curve[0])
    return int(np.argmax(g >= 0.1))


def main():
    t0 = time.time()
    rows, figs = [], []
    for c in CASES:
        cfg = TrainerConfig(task="bandit", momentum=0.9, max_steps=400, group_size=8, batch_size=16, seed=0, **c)
        df, _ = run(cfg)
        e = df["reward_expected"].to_numpy()
        row = {**c, "mu": cfg.momentum, "t10_data": t10(e)}
        fits = {"linear": fit("linear", e, cfg.momentum)}
        for k in (1.0, 1.5, 2.0):
            fits[f"degeneracy k={k:g}"] = fit("degeneracy", e, cfg.momentum, kappa=k)
        fits["degeneracy k free"] = fit("degeneracy", e, cfg.momentum, kappa=None)
        for name, (_, r2, _k, curve) in fits.items():
            row[f"R2 {name}"] = round(r2, 4)
            row[f"t10 err {name}"] = t10(curve) - row["t10_data"]
        row["kappa_free"] = round(fits["degeneracy k free"][2], 2)
        rows.append(row)
        figs.append((c, e, {k: v[3] for k, v in fits.items()}))
    # figure
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(figs) // 2 + 4, 6.5), layout="constrained")
    axes = fig.subplots(2, (len(figs) + 1) // 2).ravel()
    for ax, (c, e, curves) in zip(axes, figs, strict=False):  # a spare axis stays empty
        ax.plot(e, color="k", lw=2.5, label="testbed exact E[reward]")
        ax.plot(curves["linear"], "--", color="C3", label="linear oscillator fit")
        ax.plot(curves["degeneracy k free"], color="C0", label="degeneracy fit (kappa free)")
        ax.set_title(f"{c['advantage']}, {c['optimizer']}, p0={c['init_accuracy']}", fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(figs) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.suptitle("Slow start of a 0/1-reward GRPO run (softmax bandit, mean field exact): degeneracy vs inertia")
    (RES / "figures").mkdir(parents=True, exist_ok=True)
    fig.savefig(RES / "figures" / "degeneracy_validation.png", dpi=100)
    # report
    keys = ["linear", "degeneracy k=1", "degeneracy k=1.5", "degeneracy k=2", "degeneracy k free"]
    md = ["# Advantage degeneracy vs inertia: the slow start on the testbed", "", f"Regenerate: `{CMD}` ({time.time() - t0:.0f} s).",
          "", __doc__.split("\n\n", 2)[2].strip(), "",
          "| advantage | optimizer | p0 | t10 (data) | " + " | ".join(f"R2 {k}" for k in keys) + " | " + " | ".join(f"t10 err {k}" for k in ("linear", "degeneracy k free")) + " | kappa (free) |",
          "|---|---|---|---|" + "---|" * (len(keys) + 3)]  # fmt: skip
    for r in rows:
        md.append(f"| {r['advantage']} | {r['optimizer']} | {r['init_accuracy']} | {r['t10_data']} | "
                  + " | ".join(f"{r['R2 ' + k]:.4f}" for k in keys) + " | "
                  + " | ".join(f"{r['t10 err ' + k]:+d}" for k in ("linear", "degeneracy k free")) + f" | {r['kappa_free']} |")  # fmt: skip
    r2_lin = np.mean([r["R2 linear"] for r in rows])
    r2_deg = np.mean([r["R2 degeneracy k free"] for r in rows])
    md += ["", f"Mean R^2: linear {r2_lin:.4f}, degeneracy (kappa free) {r2_deg:.4f}; mean |t10 error|: linear "
           f"{np.mean([abs(r['t10 err linear']) for r in rows]):.1f} steps, degeneracy "
           f"{np.mean([abs(r['t10 err degeneracy k free']) for r in rows]):.1f} steps; fitted kappa "
           f"{', '.join(str(r['kappa_free']) for r in rows)}.", "",
           "![fits](figures/degeneracy_validation.png)"]  # fmt: skip
    (RES / "degeneracy_validation.md").write_text("\n".join(md) + "\n")
    (RES / "degeneracy_validation.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(md))


if __name__ == "__main__":
    main()
