"""Write the walkthrough notebooks (source of truth for their cells); execute with nbclient.

.venv/bin/python notebooks/build_notebooks.py            # write + execute all
BAYESGRPO_NB_DRAWS=200 ...                               # smaller sampling (CI uses this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = """import os, warnings
from pathlib import Path
import numpy as np, pandas as pd
import matplotlib.pyplot as plt
from bayesgrpo import Forecaster, SamplerConfig, read_runs
from bayesgrpo.resources import example_meta, example_run

ROOT = Path.cwd() if (Path.cwd() / "data").exists() else Path.cwd().parent
DRAWS = int(os.environ.get("BAYESGRPO_NB_DRAWS", "1000"))
sampler = SamplerConfig(draws=DRAWS, tune=max(200, int(0.8 * DRAWS)), seed=0)
SHARED = ROOT.parent / "shared" / "data" / "grpo-public"   # development data, read by path (may be absent)


def show(fig):
    \"\"\"Display a Figure built without pyplot (the library keeps no global figure state).\"\"\"
    import io
    from IPython.display import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return Image(buf.getvalue())"""

NB = {
    "00_testbed.ipynb": [
        new_markdown_cell(
            "# The GRPO testbed: real RL dynamics to test the physics\n\n"
            "`bayesgrpo.testbed` is a genuine GRPO trainer in numpy (G completions per prompt from the sampling policy,\n"
            "group-normalised advantages, PPO-clipped ratio, optional KL, Adam or heavy-ball SGD, refresh interval K)\n"
            "on two tasks: a softmax bandit (mean field exact) and an MLP policy answering multi-token prompts. Runs take\n"
            "seconds and are reproducible bit for bit; `bayesgrpo testbed sweep models/testbed_sweep.json` regenerates\n"
            "`data/testbed`. `bench/physics_validation.py` compares the runs with the predictions of `physics.md`."
        ),
        new_code_cell(
            SETUP + "\nfrom bayesgrpo.testbed import TrainerConfig, run\nfrom IPython.display import Image, Markdown"
        ),
        new_code_cell(
            "runs = {}\n"
            "for G in (2, 16):\n"
            '    cfg = TrainerConfig(task="contextual", hidden=64, max_steps=300, group_size=G, batch_size=16, learning_rate=0.001,\n'
            "                        init_accuracy=0.1, unlearnable_fraction=0.2, seed=1)\n"
            "    runs[G], meta = run(cfg)\n"
            "fig, ax = plt.subplots(figsize=(8, 4))\n"
            "for G, df in runs.items():\n"
            '    ax.plot(df.step, df.reward, lw=0.5, alpha=0.6, label=f"G={G}: logged batch reward")\n'
            '    ax.plot(df.step, df.reward_expected, lw=2, label=f"G={G}: exact expected reward")\n'
            'ax.set_xlabel("optimizer step"); ax.set_ylabel("reward"); ax.legend(fontsize=8);'
        ),
        new_markdown_cell(
            "Logged columns follow the package schema (reward, reward_std, frac_reward_zero_std, entropy, kl,\n"
            "eval/accuracy) plus the noise-free `reward_expected`, so the forecasts can be scored against a known truth."
        ),
        new_code_cell("runs[16].head()"),
        new_markdown_cell("## What the physics validation found (`bench/results/physics_validation.md`)"),
        new_code_cell(
            'text = (ROOT / "bench/results/physics_validation.md").read_text()\n'
            'Markdown(text[text.index("## Verdict"):text.index("## 1.")])'
        ),
        new_code_cell('Image(filename=str(ROOT / "bench/results/figures/physics_refresh_threshold.png"))'),
        new_code_cell('Image(filename=str(ROOT / "bench/results/figures/physics_momentum.png"))'),
    ],
    "01_forecast.ipynb": [
        new_markdown_cell(
            "# Forecasting a GRPO run from its first steps\n\n"
            "A GRPO reward curve is noisy; the question is where it is going. bayesgrpo models the run as the\n"
            "mean-field damped oscillator of `physics.md` (recursion (1): momentum gives inertia, the learning rate\n"
            "times a curvature scale gives stiffness), observed through white measurement noise, and forecasts with the\n"
            "exact Kalman likelihood and NUTS. This notebook forecasts the shipped example run (a TRL\n"
            "`trainer_state.json`) from its first 150 of 500 steps and compares with what the run then did."
        ),
        new_code_cell(SETUP),
        new_code_cell("runs = read_runs(example_run(), meta=example_meta())\nruns.summary()"),
        new_markdown_cell(
            "Keep only what had been logged at step 150, and forecast to step 500 (the run's `max_steps`)."
        ),
        new_code_cell(
            "early = runs.truncate(until_step=150)\n"
            'fit = Forecaster("oscillator", sampler=sampler).fit(early, horizon=500)\n'
            "table = fit.table()\n"
            'table[["run_id", "observed_until", "horizon", "final_q10", "final_q50", "final_q90", "stop_q50", "plateau_q50", "r_hat_max", "ess_min", "divergences"]]'
        ),
        new_markdown_cell(
            "The **final reward** is the mean logged reward over the last 10% of the run; the **stop step** is the first\n"
            "step at which the mean trajectory has realised 95% of its gain. The fan chart shows the logged-reward\n"
            "predictive bands; grey points are what the run logged after step 150 (not seen by the model)."
        ),
        new_code_cell(
            "rid = runs.run_ids[0]\n"
            "from bayesgrpo.plots.fan import fan_chart\n"
            "show(fan_chart(fit, rid, truth=runs.run(rid)))"
        ),
        new_code_cell(
            "full = runs.run(rid)\n"
            "truth = full.loc[full.step > 0 + 0.9 * (500 - 0), 'reward'].mean()\n"
            "q10, q90 = table.loc[0, ['final_q10', 'final_q90']]\n"
            'print(f"true final reward {truth:.3f}; 80% interval [{q10:.3f}, {q90:.3f}] -> covered: {q10 <= truth <= q90}")'
        ),
        new_markdown_cell("Posterior of the physical parameters (in the run's units and in steps):"),
        new_code_cell(
            "p = fit.paths(rid)\n"
            'pd.DataFrame({"plateau R*": p.r_star, "timescale tau (steps)": p.tau, "stiffness a": p.a, "momentum mu": p.mu}).describe(percentiles=[0.05, 0.5, 0.95]).T'
        ),
        new_markdown_cell(
            "Forecast quantiles per future step, and a save/load round trip (one self-describing netCDF file)."
        ),
        new_code_cell("fit.path_quantiles(rid).iloc[::50]"),
        new_code_cell(
            "from bayesgrpo import FittedForecast\n"
            'fit.save("/tmp/example_fit.nc")\n'
            'again = FittedForecast.load("/tmp/example_fit.nc")\n'
            "pd.testing.assert_frame_equal(again.table(), table)\n"
            '"identical after reload"'
        ),
        new_markdown_cell(
            "## A real run\nThe same on a real run of the development set (skipped when the data are absent)."
        ),
        new_code_cell(
            "if SHARED.exists():\n"
            '    real = read_runs(SHARED / "runs.csv", meta=SHARED / "meta.csv")\n'
            '    rid2 = "Qwen3-4B-GRPO-math__Qwen3__4B__GRPO__85579e5"\n'
            "    one = real.select([rid2])\n"
            "    fit2 = Forecaster(sampler=sampler).fit(one.truncate(fraction=0.3), horizon=int(one.run(rid2).step.iloc[-1]))\n"
            "    display(show(fan_chart(fit2, rid2, truth=one.run(rid2))))\n"
            "    display(fit2.table()[['final_q10', 'final_q50', 'final_q90', 'r_hat_max']])"
        ),
    ],
    "02_compare_families.ipynb": [
        new_markdown_cell(
            "# Comparing model sizes and group sizes\n\n"
            "`compare_runs` fits one hierarchical model to complete runs: per-run plateau R*, timescale tau and noise,\n"
            "family-level means, group-size effects on R* and log tau (physics predicts none: the deterministic\n"
            "trajectory is G-invariant), process-noise temperature sigma_p^2 = T_family * G^-b (b = 1 predicted) and the\n"
            "curvature-scaling exponent alpha of tau over model size. Models are compared by PSIS-LOO over runs.\n"
            "Here: testbed runs of three MLP widths and four group sizes (small sampling settings)."
        ),
        new_code_cell(SETUP + "\nfrom bayesgrpo.compare.model import compare_runs"),
        new_code_cell(
            'tb = read_runs(ROOT / "data/testbed/runs.csv.gz", meta=ROOT / "data/testbed/meta.csv.gz")\n'
            'ids = [r for r in tb.run_ids if r.startswith("g_ctx-") and r.endswith("-s0")]\n'
            "runs = tb.select(ids)\n"
            'runs.meta[["family", "model", "params_b", "group_size", "learning_rate"]]'
        ),
        new_code_cell(
            'res = compare_runs(runs, by=("model", "group_size"), kinds=("oscillator", "saturation"),\n'
            "                   sampler=SamplerConfig(draws=max(100, DRAWS // 4), tune=max(150, DRAWS // 4), seed=0), max_steps=400)\n"
            "res.contrasts.round(3)"
        ),
        new_markdown_cell("Posterior contrasts with 90% intervals; the physics predictions are marked."),
        new_code_cell("from bayesgrpo.plots.forest import forest_plot\n\nshow(forest_plot(res))"),
        new_markdown_cell(
            "Leave-one-run-out comparison (PSIS-LOO; high Pareto k means the ranking is indicative only):"
        ),
        new_code_cell("res.loo"),
        new_markdown_cell(
            "Sampler health. CI executes this notebook with very few draws (`BAYESGRPO_NB_DRAWS=150`), where r_hat and\n"
            "ESS are poor; `bayesgrpo compare` defaults to 500 draws and `bench/compare_benchmark.py` records a full run."
        ),
        new_code_cell("res.health"),
    ],
    "03_budget_and_diagnose.ipynb": [
        new_markdown_cell(
            "# Deciding from the posterior: budgets, stopping, failure diagnostics\n\n"
            "Forecasts exist to decide: stop or continue, and whether a run is broken."
        ),
        new_code_cell(
            SETUP
            + "\nfrom bayesgrpo.decisions import budget_table, recommend_stop\nfrom bayesgrpo.diagnose import diagnose_runs\nfrom bayesgrpo.plots.budget import plot_budget\nfrom bayesgrpo.plots.diagnosis import plot_diagnosis"
        ),
        new_code_cell(
            "runs = read_runs(example_run(), meta=example_meta())\n"
            "rid = runs.run_ids[0]\n"
            "fit = Forecaster(sampler=sampler).fit(runs.truncate(until_step=150), horizon=500)\n"
            "draws = fit.paths(rid)"
        ),
        new_markdown_cell(
            "Probability of reaching a target reward by each budget, expected reward, and the expected-value-maximising\n"
            "stop step for a cost per step and a value per reward unit; compared with paper B's ~0.8-epoch rule\n"
            "(here one epoch = the 500 planned steps)."
        ),
        new_code_cell(
            "kw = dict(target=0.7, cost_per_step=0.0002, value_per_reward=1.0, max_steps=500, epoch_steps=500)\n"
            "tab = budget_table(draws, **kw)\n"
            'tab[["step", "expected_reward", "reward_q05", "reward_q95", "p_target", "expected_utility", "p_best"]].iloc[::35]'
        ),
        new_code_cell(
            "print(recommend_stop(draws, **kw).summary())\nshow(plot_budget(draws, tab, history=runs.run(rid), **kw))"
        ),
        new_markdown_cell(
            "## Failure diagnostics\nThe four failure modes of physics.md section 7 on the testbed runs built to show each\n"
            "(and on a healthy run). Each finding has evidence, a severity, the onset step and the metrics that were missing."
        ),
        new_code_cell(
            'fail = read_runs(ROOT / "data/testbed/failures/runs.csv.gz", meta=ROOT / "data/testbed/failures/meta.csv.gz")\n'
            "diag = diagnose_runs(fail)\n"
            'labels = fail.meta["failure_mode"]\n'
            'top = diag.sort_values("score", ascending=False).groupby("run_id").head(1).set_index("run_id")\n'
            'pd.DataFrame({"label": labels, "top finding": top["mode"], "severity": top["severity"], "onset": top["onset_step"]})'
        ),
        new_code_cell(
            'example = [r for r in fail.run_ids if labels[r] == "reward_hacking"][0]\n'
            "show(plot_diagnosis(fail, example, diag))"
        ),
    ],
}


def write(names=None):
    for name, cells in NB.items():
        if names and name not in names:
            continue
        nb = new_notebook(
            cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
        )
        nbformat.write(nb, HERE / name)


def execute(name, timeout=900):
    from nbclient import NotebookClient

    nb = nbformat.read(HERE / name, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    return nb


if __name__ == "__main__":
    names = sys.argv[1:] or None
    write(names)
    for name in NB:
        if names and name not in names:
            continue
        nb = execute(name)
        nbformat.write(nb, HERE / name)
        print("executed", name, flush=True)
